//! A base URL (`upstream.base_url`, `correction.base_url`) as the gateway uses it: paths
//! such as `/chat/completions` are appended to it, so it must be `scheme://host[:port]`
//! plus a path, and nothing after.
//!
//! - no path (`http://127.0.0.1:8000`, or just `/`): `/v1` is appended, and a note says
//!   so (the OpenAI-compatible servers people start locally, vLLM, llama.cpp, Ollama,
//!   LiteLLM, serve under `/v1`; without it every request would be a bare 404);
//! - surrounding whitespace and trailing slashes are removed;
//! - refused, with the reason: a scheme other than http(s) or none, no host, a query or a
//!   fragment (they would end up in the middle of every URL), or an endpoint instead of a
//!   base (`…/v1/chat/completions`, `…/v1/models`); an `https` URL in a build without the
//!   `tls` feature (`no_tls`).

use super::redact_url;

/// Endpoints people paste where the base belongs.
const ENDPOINTS: [&str; 3] = ["/chat/completions", "/models", "/completions"];

/// `url` normalised, with a note when it was changed in a way worth saying; or why it
/// is refused. `key` names it in both.
pub(crate) fn normalize(key: &str, url: &str) -> Result<(String, Option<String>), String> {
    let shown = redact_url(url.trim());
    let trimmed = url.trim();
    let Some((scheme, rest)) = trimmed.split_once("://") else {
        let hint = if trimmed.is_empty() {
            " (set it in the TOML, with TOOLMEND_UPSTREAM__BASE_URL, or --upstream)".to_owned()
        } else {
            format!(" (did you mean http://{shown}?)")
        };
        return Err(format!(
            "{key} must be an http(s) URL ending in its API's base path (e.g. \
             https://api.openai.com/v1), got {shown:?}{hint}"
        ));
    };
    if !matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") {
        return Err(format!(
            "{key} must be an http(s) URL, got {shown:?} (scheme {scheme:?})"
        ));
    }
    if trimmed.contains('?') || trimmed.contains('#') {
        return Err(format!(
            "{key} {shown} has a query or a fragment: the gateway appends paths such as \
             /chat/completions to it, so it must end in its path (e.g. …/v1)"
        ));
    }
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let host = authority.rsplit('@').next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') {
        return Err(format!("{key} {shown} names no host"));
    }
    if let Err(e) = reqwest::Url::parse(trimmed) {
        return Err(format!("{key} {shown} is not a valid URL: {e}"));
    }
    let path = path.trim_end_matches('/');
    if let Some(end) = ENDPOINTS.iter().find(|e| path.ends_with(*e)) {
        let base = &path[..path.len() - end.len()];
        return Err(format!(
            "{key} {shown} is an endpoint, not a base URL: the gateway appends {end} \
             itself; use {}",
            redact_url(&format!("{scheme}://{authority}{base}"))
        ));
    }
    // Last: a URL of the wrong shape is told its shape first.
    no_tls(key, trimmed)?;
    let base = format!("{scheme}://{authority}");
    if path.is_empty() {
        let normal = format!("{base}/v1");
        let note = format!(
            "{key} {} has no path: requests go to {} (write the path to use another, \
             e.g. …/api/v1)",
            redact_url(&base),
            redact_url(&normal)
        );
        return Ok((normal, Some(note)));
    }
    Ok((format!("{base}{path}"), None))
}

/// Refuses a URL that needs TLS (`https`, `rediss`, `rediss+cluster`) in a build without
/// the `tls` feature, saying so: otherwise it would fail only when first used, as a
/// connect error that blames the server. `key` names the setting.
pub(crate) fn no_tls(key: &str, url: &str) -> Result<(), String> {
    let scheme = url
        .trim()
        .split_once("://")
        .map(|(s, _)| s.to_ascii_lowercase());
    if cfg!(feature = "tls")
        || !matches!(
            scheme.as_deref(),
            Some("https" | "rediss" | "rediss+cluster")
        )
    {
        return Ok(());
    }
    Err(format!(
        "{key} {} needs TLS, and this build has no TLS: rebuild with the `tls` feature \
         (on by default), or use a plain address",
        redact_url(url.trim())
    ))
}

#[cfg(test)]
mod tests {
    use super::normalize;

    fn ok(url: &str) -> (String, bool) {
        let (u, note) = normalize("upstream.base_url", url).unwrap();
        (u, note.is_some())
    }

    fn refused(url: &str) -> String {
        normalize("upstream.base_url", url).unwrap_err()
    }

    #[test]
    fn a_base_without_a_path_gets_v1_and_a_note() {
        assert_eq!(
            ok("http://127.0.0.1:8000"),
            ("http://127.0.0.1:8000/v1".into(), true)
        );
        assert_eq!(
            ok("http://127.0.0.1:8000/"),
            ("http://127.0.0.1:8000/v1".into(), true)
        );
        // A build without `tls` refuses these (the `no_tls` test below).
        if cfg!(feature = "tls") {
            assert_eq!(
                ok(" https://api.openai.com/v1/ "),
                ("https://api.openai.com/v1".into(), false)
            );
            assert_eq!(
                ok("https://openrouter.ai/api/v1"),
                ("https://openrouter.ai/api/v1".into(), false)
            );
            assert_eq!(
                ok("https://generativelanguage.googleapis.com/v1beta/openai/"),
                (
                    "https://generativelanguage.googleapis.com/v1beta/openai".into(),
                    false
                )
            );
        }
        let (_, note) = normalize("upstream.base_url", "http://u:secret@h:1").unwrap();
        let note = note.unwrap();
        assert!(note.contains("http://h:1/v1"), "{note}");
        assert!(!note.contains("secret"), "{note}");
    }

    #[test]
    fn odd_shapes_are_refused_with_the_reason() {
        assert!(refused("127.0.0.1:8000").contains("did you mean http://127.0.0.1:8000"));
        assert!(refused("ftp://h/v1").contains("scheme \"ftp\""));
        assert!(refused("http:///v1").contains("names no host"));
        assert!(refused("https://x.openai.azure.com/v1?api-version=2024").contains("query"));
        let e = refused("http://127.0.0.1:8000/v1/chat/completions");
        assert!(e.contains("use http://127.0.0.1:8000/v1"), "{e}");
        assert!(refused("").contains("--upstream"));
        assert!(!refused("ftp://u:secret@h/v1").contains("secret"));
    }
}

/// Built without `tls` (`cargo test -p toolmend-gateway --no-default-features --lib`).
#[cfg(all(test, not(feature = "tls")))]
mod no_tls {
    use super::{no_tls, normalize};

    #[test]
    fn tls_addresses_are_refused_with_what_to_do() {
        let e = normalize("upstream.base_url", " HTTPS://u:secret@api.openai.com/v1 ").unwrap_err();
        assert!(
            e.starts_with("upstream.base_url HTTPS://api.openai.com/v1 needs TLS"),
            "{e}"
        );
        assert!(
            e.contains("this build has no TLS: rebuild with the `tls` feature"),
            "{e}"
        );
        assert!(!e.contains("secret"), "{e}");
        let e = no_tls("guard.redis_url", "rediss+cluster://:pw@h1:7000,h2:7001").unwrap_err();
        assert!(
            e.starts_with("guard.redis_url rediss+cluster://h1:7000,h2:7001 needs TLS"),
            "{e}"
        );
        assert!(!e.contains("pw"), "{e}");
        // The shape is told first; plain addresses pass.
        assert!(
            normalize("upstream.base_url", "https://h/v1?k=1")
                .unwrap_err()
                .contains("query")
        );
        assert!(normalize("upstream.base_url", "http://127.0.0.1:8000/v1").is_ok());
        assert!(no_tls("guard.redis_url", "redis://h:6379/0").is_ok());
    }
}
