//! Response headers from `(name, value)` pairs (the `x-toolmend-*` reports).

use axum::http::{HeaderMap, HeaderName, HeaderValue};

/// Sets each `(name, value)` whose value is a valid header value.
pub(crate) fn set_headers(
    headers: &mut HeaderMap,
    pairs: impl IntoIterator<Item = (&'static str, String)>,
) {
    for (name, value) in pairs {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), v);
        }
    }
}
