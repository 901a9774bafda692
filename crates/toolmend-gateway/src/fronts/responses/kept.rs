//! The responses the gateway served, kept for `previous_response_id` toward an upstream
//! that keeps none (a `chat_completions` one): per response id, the conversation it
//! ended (its input and its output, as chat messages, without the `instructions`, which
//! the Responses API does not carry over). In memory, bounded: at most [`MAX_RESPONSES`]
//! responses and [`MAX_BYTES`] in all (the oldest go first), each for [`TTL`]. With the
//! guard's Redis store configured, also there (`tm:blob:resp:<id>`, for [`TTL`], one of at
//! most [`MAX_SHARED_BYTES`]), so that any instance continues any response: this
//! instance's memory is asked first, then Redis, each bounded by the store's timeout.

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use serde_json::Value;
use toolmend_redis::RedisStore;

use crate::server::error::GatewayError;

/// The shared store's key of response `id` (under `toolmend_redis::BLOB_PREFIX`).
fn shared_key(id: &str) -> String {
    format!("resp:{id}")
}

/// At most this many responses are kept.
pub(crate) const MAX_RESPONSES: usize = 10_000;
/// At most this many bytes (the kept messages' JSON) in all.
pub(crate) const MAX_BYTES: usize = 64 << 20;
/// A response is kept this long.
pub(crate) const TTL: Duration = Duration::from_secs(3600);
/// A conversation larger than this is kept in memory only, not in Redis.
pub(crate) const MAX_SHARED_BYTES: usize = 8 << 20;

#[derive(Debug)]
struct Entry {
    /// The conversation as a JSON array of chat messages: written once, read back only
    /// when a later request names it.
    json: Vec<u8>,
    at: Instant,
}

/// The conversation before an answer, as kept: `messages` as one JSON array, serialized
/// from where they stand (no copy of the values).
pub(crate) fn history_json(messages: &[Value]) -> Vec<u8> {
    serde_json::to_vec(messages).unwrap_or_else(|_| b"[]".to_vec())
}

/// `history` (a JSON array, [`history_json`]) with `answer` added at its end.
pub(crate) fn with_answer(mut history: Vec<u8>, answer: &Value) -> Vec<u8> {
    let Some(end) = history.iter().rposition(|&b| b == b']') else {
        return history;
    };
    let empty = history[..end]
        .iter()
        .rev()
        .find(|b| !b.is_ascii_whitespace())
        == Some(&b'[');
    history.truncate(end);
    if !empty {
        history.push(b',');
    }
    if serde_json::to_writer(&mut history, answer).is_err() {
        history.truncate(end);
    }
    history.push(b']');
    history
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<String, Entry>,
    order: VecDeque<String>,
    bytes: usize,
}

/// The kept responses.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    inner: Mutex<Inner>,
    next: AtomicU64,
    /// The guard's Redis store, when configured: shared by every instance.
    shared: Option<RedisStore>,
}

impl Kept {
    /// Kept in memory, and in `shared` when given.
    pub(crate) fn new(shared: Option<RedisStore>) -> Self {
        Kept {
            shared,
            ..Kept::default()
        }
    }

    /// The conversation `id` ended: this instance's memory, else the shared store.
    ///
    /// # Errors
    ///
    /// 503 when the shared store did not answer (it may hold it: never a false 404).
    pub(crate) async fn find(&self, id: &str) -> Result<Option<Vec<Value>>, GatewayError> {
        if let Some(found) = self.get(id) {
            return Ok(Some(found));
        }
        let Some(store) = &self.shared else {
            return Ok(None);
        };
        match store.get_blob(&shared_key(id)).await {
            Ok(None) => Ok(None),
            Ok(Some(json)) => Ok(serde_json::from_slice(&json).ok()),
            Err(e) => Err(GatewayError::StoreUnavailable(format!(
                "the kept responses' store ({}) did not answer: {}; retry, or send the whole \
                 conversation as 'input' instead of 'previous_response_id'",
                store.address(),
                e.message
            ))),
        }
    }

    /// [`keep`](Self::keep) from a stream's last event: in memory at once, in the shared
    /// store in the background (the stream is not held for it).
    pub(crate) fn keep_soon(self: &Arc<Self>, id: String, json: Vec<u8>) {
        if self.shared.is_none() {
            self.put(id, json);
            return;
        }
        let kept = Arc::clone(self);
        // Answers no call, and ends within the store's timeout.
        #[allow(clippy::disallowed_methods)]
        tokio::spawn(async move { kept.keep(id, json).await });
    }

    /// Keeps `json` (a conversation, [`with_answer`]) under `id`, in memory and (within
    /// the store's timeout) in the shared store; a shared store that fails is logged, and
    /// this instance still has it.
    pub(crate) async fn keep(&self, id: String, json: Vec<u8>) {
        let shared = self
            .shared
            .as_ref()
            .filter(|_| json.len() <= MAX_SHARED_BYTES)
            .map(|s| (s, json.clone()));
        self.put(id.clone(), json);
        if let Some((store, json)) = shared
            && let Err(e) = store.set_blob(&shared_key(&id), &json, TTL).await
        {
            tracing::warn!(store = %store.address(), "a response was not kept in the shared \
                store ({}): only this instance can continue it", e.message);
        }
    }

    /// A fresh response id (`resp_` and 32 hex digits: the start time and a counter).
    pub(crate) fn mint(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        format!("resp_{t:016x}{n:016x}")
    }

    /// Keeps `json` under `id` in memory; one larger than the whole budget is not kept.
    fn put(&self, id: String, json: Vec<u8>) {
        let bytes = json.len();
        if bytes > MAX_BYTES {
            return;
        }
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        while inner.order.len() >= MAX_RESPONSES || inner.bytes + bytes > MAX_BYTES {
            let Some(old) = inner.order.pop_front() else {
                break;
            };
            if let Some(e) = inner.map.remove(&old) {
                inner.bytes -= e.json.len();
            }
        }
        inner.bytes += bytes;
        inner.order.push_back(id.clone());
        if let Some(e) = inner.map.insert(
            id,
            Entry {
                json,
                at: Instant::now(),
            },
        ) {
            inner.bytes -= e.json.len();
        }
    }

    /// The conversation `id` ended, if it is kept and not past its time.
    pub(crate) fn get(&self, id: &str) -> Option<Vec<Value>> {
        let inner = self.inner.lock().ok()?;
        let e = inner.map.get(id)?;
        if e.at.elapsed() >= TTL {
            return None;
        }
        serde_json::from_slice(&e.json).ok()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Kept, MAX_RESPONSES, history_json, with_answer};

    #[test]
    fn kept_within_bounds_oldest_first_out() {
        let k = Kept::default();
        let a = k.mint();
        assert_ne!(a, k.mint());
        k.put(
            a.clone(),
            history_json(&[json!({"role": "user", "content": "hi"})]),
        );
        assert_eq!(k.get(&a).unwrap().len(), 1);
        assert!(k.get("resp_unknown").is_none());
        for i in 0..MAX_RESPONSES {
            k.put(format!("r{i}"), history_json(&[json!(i)]));
        }
        assert!(k.get(&a).is_none(), "the oldest went first");
        assert!(k.get(&format!("r{}", MAX_RESPONSES - 1)).is_some());
    }

    #[test]
    fn an_answer_joins_the_kept_conversation() {
        let answer = json!({"role": "assistant", "content": "ok"});
        let one = with_answer(
            history_json(&[json!({"role": "user", "content": "hi"})]),
            &answer,
        );
        let back: Vec<serde_json::Value> = serde_json::from_slice(&one).unwrap();
        assert_eq!(
            back,
            vec![json!({"role": "user", "content": "hi"}), answer.clone()]
        );
        let alone = with_answer(history_json(&[]), &answer);
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&alone).unwrap(),
            json!([answer])
        );
    }
}
