//! Who may call ([`Gate`]): the client keys of `[access]` and the admin key, checked
//! around every route by `server::access` before the route runs.
//!
//! A key is kept as its SHA-256 only. A presented key (`Authorization: Bearer KEY`,
//! `x-api-key: KEY`, `api-key: KEY`, in that order) is hashed once and compared with
//! every configured hash in constant time, all of them whatever matched, so the time
//! taken says nothing of which key matched or how much of it did. What it costs per
//! request: one SHA-256 of a short key and N 32-byte compares (docs/benchmarks.md).

use std::sync::Arc;

use axum::http::{HeaderMap, header};
use sha2::{Digest as _, Sha256};
use subtle::{Choice, ConditionallySelectable as _, ConstantTimeEq as _};

use crate::{config::ClientKey, server::error::GatewayError};

/// A SHA-256.
type Hash = [u8; 32];

/// The SHA-256 of `key` in lowercase hex: what `[access]` stores for it.
pub fn sha256_hex(key: &[u8]) -> String {
    use std::fmt::Write as _;
    hash(key)
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn hash(key: &[u8]) -> Hash {
    let mut out = [0u8; 32];
    out.copy_from_slice(&Sha256::digest(key));
    out
}

/// 64 hex digits as a hash (`Config::check` has made sure they are).
fn parse_hex(s: &str) -> Option<Hash> {
    let s = s.as_bytes();
    if s.len() != 64 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok());
    let mut out = [0u8; 32];
    for (i, pair) in s.chunks_exact(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

/// Why a request was refused: the `reason` label of `toolmend_auth_refused_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No key in any of the three headers.
    Missing,
    /// A key that is none of the configured ones.
    Invalid,
}

impl Refusal {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::Invalid => "invalid",
        }
    }

    /// The 401 for a request to `route` (`admin`: a route behind the admin key).
    pub(crate) fn error(self, admin: bool) -> GatewayError {
        let what = if admin {
            "GET /metrics asks for the admin key (access.admin_key_sha256)"
        } else {
            "this gateway asks each client for its own key ([access] clients)"
        };
        let message = match self {
            Refusal::Missing => format!(
                "no API key was presented: {what}; send it as `Authorization: Bearer KEY` \
                 (OpenAI SDKs: api_key=KEY), `x-api-key: KEY` (Anthropic SDKs) or `api-key: \
                 KEY` (Azure OpenAI SDKs); the gateway's operator gives the keys out"
            ),
            Refusal::Invalid => format!(
                "the API key presented is not valid here: {what}, and the key sent (read from \
                 `Authorization: Bearer KEY`, else `x-api-key`, else `api-key`) is none of \
                 them; check the key the client is configured with (the operator holds their \
                 SHA-256 in the configuration)"
            ),
        };
        GatewayError::Unauthorized { message }
    }
}

/// The keys one listener asks for.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    /// The clients' names and key hashes, in configuration order.
    clients: Vec<(Arc<str>, Hash)>,
    /// The admin key's hash (`access.admin_key_sha256`).
    admin_key: Option<Hash>,
    /// `/metrics` is served on `access.admin_listen`, not on this listener.
    pub(crate) admin_elsewhere: bool,
}

impl Gate {
    /// The gate of the main listener.
    pub(crate) fn new(
        clients: &[ClientKey],
        admin_key: Option<&str>,
        admin_elsewhere: bool,
    ) -> Gate {
        Gate {
            clients: clients
                .iter()
                .filter_map(|c| Some((Arc::from(c.name.as_str()), parse_hex(&c.key_sha256)?)))
                .collect(),
            admin_key: admin_key.and_then(parse_hex),
            admin_elsewhere,
        }
    }

    /// The gate of the admin listener: `/metrics` behind the admin key, if one is set.
    pub(crate) fn admin_listener(admin_key: Option<&str>) -> Gate {
        Gate {
            clients: Vec::new(),
            admin_key: admin_key.and_then(parse_hex),
            admin_elsewhere: false,
        }
    }

    /// The client whose key `headers` present: `Ok(None)` when no client is configured
    /// (anyone may call).
    pub(crate) fn client(&self, headers: &HeaderMap) -> Result<Option<Arc<str>>, Refusal> {
        if self.clients.is_empty() {
            return Ok(None);
        }
        let key = presented(headers).ok_or(Refusal::Missing)?;
        let key = hash(key);
        let mut found = Choice::from(0);
        let mut at = 0u32;
        // Every hash compared, whichever matched: no early exit.
        for (i, (_, h)) in self.clients.iter().enumerate() {
            let same = h[..].ct_eq(&key[..]);
            at.conditional_assign(&u32::try_from(i).unwrap_or(u32::MAX), same);
            found |= same;
        }
        if bool::from(found) {
            let at = usize::try_from(at).unwrap_or(usize::MAX);
            Ok(self.clients.get(at).map(|(name, _)| Arc::clone(name)))
        } else {
            Err(Refusal::Invalid)
        }
    }

    /// `/metrics`: the admin key when one is set, else what the API routes ask.
    pub(crate) fn admin(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        match &self.admin_key {
            Some(want) => {
                let key = presented(headers).ok_or(Refusal::Missing)?;
                if bool::from(want[..].ct_eq(&hash(key)[..])) {
                    Ok(())
                } else {
                    Err(Refusal::Invalid)
                }
            }
            None => self.client(headers).map(|_| ()),
        }
    }
}

/// The key a request presents: `Authorization: Bearer KEY` (any case of `Bearer`), else
/// `x-api-key`, else `api-key`; surrounding spaces trimmed, empty ones skipped.
fn presented(headers: &HeaderMap) -> Option<&[u8]> {
    let bearer = headers.get(header::AUTHORIZATION).and_then(|v| {
        let v = v.as_bytes();
        (v.len() > 7 && v[..7].eq_ignore_ascii_case(b"bearer ")).then(|| &v[7..])
    });
    [
        bearer,
        headers.get("x-api-key").map(|v| v.as_bytes()),
        headers.get("api-key").map(|v| v.as_bytes()),
    ]
    .into_iter()
    .flatten()
    .map(<[u8]>::trim_ascii)
    .find(|k| !k.is_empty())
}

/// The headers a client key comes in: removed once checked, so it never goes upstream.
pub(crate) const KEY_HEADERS: [&str; 3] = ["authorization", "x-api-key", "api-key"];

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, HeaderValue};

    use super::{Gate, Refusal, parse_hex, sha256_hex};
    use crate::config::ClientKey;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn gate() -> Gate {
        let clients = [("ci", "key-ci"), ("web", "key-web")].map(|(name, key)| ClientKey {
            name: name.to_owned(),
            key_sha256: sha256_hex(key.as_bytes()).to_uppercase(),
        });
        Gate::new(&clients, Some(&sha256_hex(b"key-admin")), false)
    }

    #[test]
    fn sha256_is_the_standard_one() {
        // FIPS 180-2's "abc".
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(parse_hex(&sha256_hex(b"abc")).map(|h| h[0]), Some(0xba));
        assert_eq!(parse_hex("zz"), None);
    }

    #[test]
    fn each_header_an_sdk_sends_is_read_and_names_its_client() {
        let g = gate();
        let name = |h: &HeaderMap| g.client(h).map(|c| c.map(|c| c.to_string()));
        for h in [
            headers(&[("authorization", "Bearer key-web")]),
            headers(&[("authorization", "bearer  key-web ")]),
            headers(&[("x-api-key", "key-web")]),
            headers(&[("api-key", "key-web")]),
            // A non-bearer Authorization does not hide the other headers.
            headers(&[("authorization", "Basic eDp5"), ("api-key", "key-web")]),
        ] {
            assert_eq!(name(&h), Ok(Some("web".to_owned())), "{h:?}");
        }
        assert_eq!(
            name(&headers(&[("authorization", "Bearer key-ci")])),
            Ok(Some("ci".to_owned()))
        );
        assert_eq!(name(&HeaderMap::new()), Err(Refusal::Missing));
        assert_eq!(
            name(&headers(&[("authorization", "Bearer ")])),
            Err(Refusal::Missing)
        );
        // The same length as a real key, one letter off.
        assert_eq!(
            name(&headers(&[("authorization", "Bearer key-wex")])),
            Err(Refusal::Invalid)
        );
        // The admin key is no client's key; a client's key does not open /metrics.
        assert_eq!(
            name(&headers(&[("x-api-key", "key-admin")])),
            Err(Refusal::Invalid)
        );
        assert_eq!(g.admin(&headers(&[("x-api-key", "key-admin")])), Ok(()));
        assert_eq!(
            g.admin(&headers(&[("x-api-key", "key-ci")])),
            Err(Refusal::Invalid)
        );
        assert_eq!(g.admin(&HeaderMap::new()), Err(Refusal::Missing));
    }

    #[test]
    fn without_clients_anyone_may_call() {
        let g = Gate::default();
        assert_eq!(g.client(&HeaderMap::new()), Ok(None));
        assert_eq!(g.admin(&HeaderMap::new()), Ok(()));
        let g = Gate::admin_listener(Some(&sha256_hex(b"a")));
        assert_eq!(g.client(&HeaderMap::new()), Ok(None));
        assert_eq!(g.admin(&HeaderMap::new()), Err(Refusal::Missing));
    }
}
