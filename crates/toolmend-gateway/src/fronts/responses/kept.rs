//! The responses the gateway served, kept for `previous_response_id` toward an upstream
//! that keeps none (a `chat_completions` one): per response id, the conversation it
//! ended (its input and its output, as chat messages, without the `instructions`, which
//! the Responses API does not carry over). In memory, bounded: at most [`MAX_RESPONSES`]
//! responses and [`MAX_BYTES`] in all (the oldest go first), each for [`TTL`].

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use serde_json::Value;

/// At most this many responses are kept.
pub(crate) const MAX_RESPONSES: usize = 10_000;
/// At most this many bytes (the kept messages' JSON) in all.
pub(crate) const MAX_BYTES: usize = 64 << 20;
/// A response is kept this long.
pub(crate) const TTL: Duration = Duration::from_secs(3600);

#[derive(Debug)]
struct Entry {
    messages: Vec<Value>,
    bytes: usize,
    at: Instant,
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
}

impl Kept {
    /// A fresh response id (`resp_` and 32 hex digits: the start time and a counter).
    pub(crate) fn mint(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        format!("resp_{t:016x}{n:016x}")
    }

    /// Keeps `messages` under `id`; one larger than the whole budget is not kept.
    pub(crate) fn put(&self, id: String, messages: Vec<Value>) {
        let bytes: usize = messages.iter().map(|m| m.to_string().len()).sum();
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
                inner.bytes -= e.bytes;
            }
        }
        inner.bytes += bytes;
        inner.order.push_back(id.clone());
        if let Some(e) = inner.map.insert(
            id,
            Entry {
                messages,
                bytes,
                at: Instant::now(),
            },
        ) {
            inner.bytes -= e.bytes;
        }
    }

    /// The conversation `id` ended, if it is kept and not past its time.
    pub(crate) fn get(&self, id: &str) -> Option<Vec<Value>> {
        let inner = self.inner.lock().ok()?;
        let e = inner.map.get(id)?;
        (e.at.elapsed() < TTL).then(|| e.messages.clone())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Kept, MAX_RESPONSES};

    #[test]
    fn kept_within_bounds_oldest_first_out() {
        let k = Kept::default();
        let a = k.mint();
        assert_ne!(a, k.mint());
        k.put(a.clone(), vec![json!({"role": "user", "content": "hi"})]);
        assert_eq!(k.get(&a).unwrap().len(), 1);
        assert!(k.get("resp_unknown").is_none());
        for i in 0..MAX_RESPONSES {
            k.put(format!("r{i}"), vec![json!(i)]);
        }
        assert!(k.get(&a).is_none(), "the oldest went first");
        assert!(k.get(&format!("r{}", MAX_RESPONSES - 1)).is_some());
    }
}
