//! Reading a [`Config`] from its sources, each error naming where the value came from:
//! the file and the line (toml's spans), the environment variable
//! (`TOOLMEND_<SECTION>__<KEY>`), or the command-line flag (`--upstream`).
//!
//! The file is deserialized on its own first, so an error in it names its line; then
//! every override is applied in order (the environment, then the flags), each checked as
//! it lands, so an error names the override that brought it. What `Config::check` finds
//! afterwards names the key, and the key's source is put in front of it.

use std::collections::BTreeMap;

use serde::Deserialize as _;

use super::{Config, ConfigError, TOOL_TABLES};

/// Where a key's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A line of the configuration file.
    File { file: String, line: usize },
    /// An environment variable (its name only: values may be secrets).
    Env(String),
    /// A command-line flag.
    Flag(String),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::File { file, line } => write!(f, "{file}:{line}"),
            Origin::Env(name) | Origin::Flag(name) => f.write_str(name),
        }
    }
}

/// One value set over the file: an environment variable or a flag.
#[derive(Debug, Clone)]
pub struct Override {
    /// What set it, as the user wrote it (`TOOLMEND_HISTORY__POLICY`, `--upstream`).
    pub source: String,
    /// The key, as sections and a name (`["history", "policy"]`).
    pub key: Vec<String>,
    /// Its value.
    pub value: toml::Value,
}

impl Override {
    /// A flag's value for `key` (dotted: `upstream.base_url`), a string.
    pub fn flag(flag: &str, key: &str, value: impl Into<String>) -> Self {
        Override {
            source: flag.to_owned(),
            key: key.split('.').map(str::to_owned).collect(),
            value: toml::Value::String(value.into()),
        }
    }

    /// The `TOOLMEND_<SECTION>__<KEY>` variables of `env`, in order (values read as TOML:
    /// `true`, `3`, `"text"`, `["a", "b"]`, or bare text as a string). The tools' tables
    /// are not reached from the environment. A variable without `__` is an override only
    /// when it names a top-level key (`TOOLMEND_LISTEN`): `TOOLMEND_SHARED`, `TOOLMEND_BIN`
    /// and the like belong to the scripts and tests, and are skipped.
    pub fn from_env(env: impl IntoIterator<Item = (String, String)>) -> Vec<Override> {
        split_env(env).0
    }
}

/// The top-level keys of [`Config`] (the tools' tables aside): a `TOOLMEND_<NAME>`
/// variable without `__` is an override only when it names one of them.
pub(crate) const TOP_KEYS: [&str; 11] = [
    "listen",
    "upstream",
    "history",
    "calls",
    "limits",
    "correction",
    "guard",
    "round_trip",
    "events",
    "telemetry",
    "access",
];

/// The overrides of `env` ([`Override::from_env`]), and the names of the `TOOLMEND_*`
/// variables skipped because they are no override: no `__`, and no top-level key named.
/// A `TOOLMEND_X__Y` is always an override, so one naming no key stops the load, named.
pub(crate) fn split_env(
    env: impl IntoIterator<Item = (String, String)>,
) -> (Vec<Override>, Vec<String>) {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for (name, raw) in env {
        let Some(path) = name.strip_prefix("TOOLMEND_") else {
            continue;
        };
        let key: Vec<String> = path.split("__").map(str::to_ascii_lowercase).collect();
        if key.iter().any(String::is_empty) || TOOL_TABLES.contains(&key[0].as_str()) {
            continue;
        }
        if key.len() == 1 && !TOP_KEYS.contains(&key[0].as_str()) {
            skipped.push(name);
            continue;
        }
        let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or(toml::Value::String(raw));
        out.push(Override {
            source: name,
            key,
            value,
        });
    }
    (out, skipped)
}

/// The line (1-based) of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Every key of `table` (dotted, sections included) and the line it is on.
fn key_lines(
    text: &str,
    table: &toml::de::DeTable<'_>,
    prefix: &str,
    out: &mut BTreeMap<String, usize>,
) {
    for (k, v) in table {
        let path = if prefix.is_empty() {
            k.get_ref().to_string()
        } else {
            format!("{prefix}.{}", k.get_ref())
        };
        out.insert(path.clone(), line_of(text, k.span().start));
        if let toml::de::DeValue::Table(t) = v.get_ref() {
            key_lines(text, t, &path, out);
        }
    }
}

/// The keys of `[guard]` besides the core's rules (flattened, so serde lets unknown keys
/// through: they are named here).
const GUARD_KEYS: [&str; 17] = [
    "on_flood",
    "session_from",
    "metadata_key",
    "store",
    "redis_url",
    "timeout_ms",
    "fail",
    "max_keys",
    "max_re_asks",
    "session",
    "tools",
    "duplicate",
    "repeat",
    "ping_pong",
    "no_progress",
    "limits",
    "session_ttl_secs",
];

fn unknown_guard_key(doc: &toml::Table) -> Option<String> {
    let guard = doc.get("guard").and_then(toml::Value::as_table)?;
    let k = guard.keys().find(|k| !GUARD_KEYS.contains(&k.as_str()))?;
    Some(format!(
        "unknown key guard.{k}; the keys of [guard] are: {}",
        GUARD_KEYS.join(", ")
    ))
}

/// Where each key came from, for the errors found after loading.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Origins(BTreeMap<String, Origin>);

impl Origins {
    /// The source of the longest key named in `message` (`round_trip.max_rounds is 1 …`).
    pub(crate) fn of_message(&self, message: &str) -> Option<&Origin> {
        self.0
            .iter()
            .filter(|(k, _)| contains_key(message, k))
            .max_by_key(|(k, _)| k.len())
            .map(|(_, o)| o)
    }

    /// The source of `key` (dotted).
    pub(crate) fn of(&self, key: &str) -> Option<&Origin> {
        self.0.get(key)
    }
}

/// `key` in `message` as a whole key (not `limits.max_tools` in `limits.max_tools_x`).
fn contains_key(message: &str, key: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    message.match_indices(key).any(|(at, _)| {
        let before = message[..at].chars().next_back();
        let after = message[at + key.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(|c| ident(c) && c != '.')
    })
}

/// Sets `o` in `doc`.
fn apply(doc: &mut toml::Table, o: &Override) -> Result<(), ConfigError> {
    let mut table = doc;
    for (depth, key) in o.key[..o.key.len() - 1].iter().enumerate() {
        let entry = table
            .entry(key.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        table = entry.as_table_mut().ok_or_else(|| {
            ConfigError::Invalid(format!(
                "{}: {} is not a section",
                o.source,
                o.key[..=depth].join(".")
            ))
        })?;
    }
    table.insert(o.key[o.key.len() - 1].clone(), o.value.clone());
    Ok(())
}

fn origin_of(o: &Override) -> Origin {
    if o.source.starts_with("--") {
        Origin::Flag(o.source.clone())
    } else {
        Origin::Env(o.source.clone())
    }
}

/// The error of a file that fit alone and no longer does with `overrides`: named by the
/// override without which it fits, else by all of them.
fn blame(file_doc: &toml::Table, overrides: &[Override], e: &toml::de::Error) -> ConfigError {
    let fits_without = |skip: usize| {
        let mut doc = file_doc.clone();
        overrides
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != skip)
            .all(|(_, o)| apply(&mut doc, o).is_ok())
            && Config::deserialize(toml::Value::Table(doc)).is_ok()
    };
    let message = e.message().trim_end();
    match (0..overrides.len()).find(|&i| fits_without(i)) {
        Some(i) => {
            let o = &overrides[i];
            located(
                Some(&origin_of(o)),
                format_args!("{message} (for {})", o.key.join(".")),
            )
        }
        None => {
            let names: Vec<&str> = overrides.iter().map(|o| o.source.as_str()).collect();
            ConfigError::Invalid(format!("{}: {message}", names.join(", ")))
        }
    }
}

fn located(origin: Option<&Origin>, message: impl std::fmt::Display) -> ConfigError {
    match origin {
        Some(o) => ConfigError::Invalid(format!("{o}: {message}")),
        None => ConfigError::Invalid(message.to_string()),
    }
}

/// Reads `text` (named `file` in errors), then applies `overrides` in order; see the
/// module docs.
pub(crate) fn load(
    text: &str,
    file: &str,
    overrides: Vec<Override>,
) -> Result<Config, ConfigError> {
    // 1. The file alone, with its spans: a parse error or a value that does not fit names
    //    its line.
    let mut spanned = toml::de::DeTable::parse(text).map_err(|e| {
        let at = e.span().map(|s| format!(":{}", line_of(text, s.start)));
        ConfigError::Invalid(format!(
            "{file}{}: {}",
            at.unwrap_or_default(),
            e.message().trim_end()
        ))
    })?;
    // `[[tools]]` and `[[mcp]]` belong to the tools loader
    // (`toolmend_tools::ToolsFile::parse_section` on the same text, whose errors name the
    // line); `Gateway::with_tools` takes what it read.
    for key in TOOL_TABLES {
        spanned.get_mut().remove(key);
    }
    let mut lines = BTreeMap::new();
    key_lines(text, spanned.get_ref(), "", &mut lines);
    let mut origins = Origins(
        lines
            .into_iter()
            .map(|(k, line)| {
                let o = Origin::File {
                    file: file.to_owned(),
                    line,
                };
                (k, o)
            })
            .collect(),
    );
    let mut doc: toml::Table =
        toml::Table::deserialize(toml::de::Deserializer::from(spanned.clone()))
            .map_err(|e| ConfigError::Invalid(format!("{file}: {}", e.message())))?;
    if let Some(message) = unknown_guard_key(&doc) {
        return Err(located(origins.of_message(&message), message));
    }
    if let Err(e) = Config::deserialize(toml::de::Deserializer::from(spanned)) {
        let at = e.span().map(|s| format!(":{}", line_of(text, s.start)));
        return Err(ConfigError::Invalid(format!(
            "{file}{}: {}",
            at.unwrap_or_default(),
            e.message().trim_end()
        )));
    }
    // 2. The overrides, in order. When the whole does not fit, the override that
    //    breaks it is the one without which it does (some only fit together: a
    //    `[guard.session]` set from two variables).
    let file_doc = doc.clone();
    for o in &overrides {
        apply(&mut doc, o)?;
        let dotted = o.key.join(".");
        // The key and what it replaced (a section set whole replaces the keys under it).
        origins
            .0
            .retain(|k, _| !k.starts_with(&format!("{dotted}.")));
        origins.0.insert(dotted, origin_of(o));
    }
    if let Some(message) = unknown_guard_key(&doc) {
        return Err(located(origins.of_message(&message), message));
    }
    let mut config = match Config::deserialize(toml::Value::Table(doc)) {
        Ok(c) => c,
        Err(e) => return Err(blame(&file_doc, &overrides, &e)),
    };
    // 3. What serde cannot check, each error with the source of the key it names.
    for (key, url) in [
        ("upstream.base_url", &mut config.upstream.base_url),
        ("correction.base_url", &mut config.correction.base_url),
    ] {
        if key == "correction.base_url" && url.is_empty() {
            continue;
        }
        match super::url::normalize(key, url) {
            Ok((normal, note)) => {
                if let Some(note) = note {
                    config.notes.push(note);
                }
                *url = normal;
            }
            Err(message) => return Err(located(origins.of(key), message)),
        }
    }
    if let Err(ConfigError::Invalid(message)) = config.check() {
        return Err(located(origins.of_message(&message), message));
    }
    config.origins = origins;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::{Override, load};

    fn env(pairs: &[(&str, &str)]) -> Vec<Override> {
        Override::from_env(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        )
    }

    const BASE: &str = "upstream.base_url = \"http://127.0.0.1:9/v1\"\n";

    fn err(text: &str, overrides: Vec<Override>) -> String {
        load(text, "gateway.toml", overrides)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn an_error_in_the_file_names_the_file_and_the_line() {
        let e = err(
            &format!("{BASE}\n[history]\npolicy = \"rejct\"\n"),
            Vec::new(),
        );
        assert!(e.contains("gateway.toml:4: "), "{e}");
        assert!(e.contains("rejct"), "{e}");
        let e = err(&format!("{BASE}[calls]\nmax_re_askz = 2\n"), Vec::new());
        assert!(e.contains("gateway.toml:3: "), "{e}");
        assert!(e.contains("max_re_askz"), "{e}");
        // Not TOML at all.
        let e = err(&format!("{BASE}[calls\n"), Vec::new());
        assert!(e.contains("gateway.toml:2"), "{e}");
        // A check serde cannot make: the line of the key it names.
        let e = err(&format!("{BASE}[round_trip]\nmax_rounds = 1\n"), Vec::new());
        assert!(
            e.contains("gateway.toml:3: round_trip.max_rounds is 1"),
            "{e}"
        );
        let e = err(&format!("{BASE}[guard]\nsesion = 1\n"), Vec::new());
        assert!(
            e.contains("gateway.toml:3: unknown key guard.sesion"),
            "{e}"
        );
    }

    #[test]
    fn an_error_in_an_override_names_the_variable_not_the_file() {
        let text = format!("{BASE}[history]\npolicy = \"sanitize\"\n");
        let e = err(&text, env(&[("TOOLMEND_HISTORY__POLICY", "rejct")]));
        assert!(e.contains("TOOLMEND_HISTORY__POLICY: "), "{e}");
        assert!(e.contains("history.policy"), "{e}");
        assert!(!e.contains("gateway.toml"), "{e}");
        let e = err(&text, env(&[("TOOLMEND_ROUND_TRIP__MAX_ROUNDS", "1")]));
        assert!(
            e.contains("TOOLMEND_ROUND_TRIP__MAX_ROUNDS: round_trip.max_rounds is 1"),
            "{e}"
        );
        let e = err(&text, env(&[("TOOLMEND_HISTORY__POLICYY", "reject")]));
        assert!(e.contains("TOOLMEND_HISTORY__POLICYY: "), "{e}");
        let e = err(&text, env(&[("TOOLMEND_GUARD__SESION", "1")]));
        assert!(e.contains("TOOLMEND_GUARD__SESION: unknown key"), "{e}");
        // A key the file set and an override replaced is the override's.
        let e = err(
            &format!("{BASE}[limits]\nmax_tools = 3\n"),
            env(&[("TOOLMEND_LIMITS__MAX_TOOLS", "0")]),
        );
        assert!(
            e.starts_with("configuration: TOOLMEND_LIMITS__MAX_TOOLS: "),
            "{e}"
        );
        // The flags likewise.
        let e = err(
            "",
            vec![Override::flag("--upstream", "upstream.base_url", "ftp://x")],
        );
        assert!(e.contains("--upstream: upstream.base_url"), "{e}");
        // Values that only fit together, from two variables.
        let c = load(
            BASE,
            "gateway.toml",
            env(&[
                ("TOOLMEND_GUARD__SESSION__LIMIT", "1"),
                ("TOOLMEND_GUARD__SESSION__WINDOW_SECS", "60"),
            ]),
        );
        assert!(c.is_ok(), "{c:?}");
        // One of them alone: named.
        let e = err(BASE, env(&[("TOOLMEND_GUARD__SESSION__LIMIT", "1")]));
        assert!(e.contains("TOOLMEND_GUARD__SESSION__LIMIT: "), "{e}");
        // And a good value from the environment loads.
        let c = load(
            &text,
            "gateway.toml",
            env(&[("TOOLMEND_HISTORY__POLICY", "reject")]),
        )
        .unwrap();
        assert_eq!(c.history.policy, crate::config::HistoryPolicy::Reject);
    }

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_variable_without_a_section_that_names_no_key_is_no_override() {
        // The scripts' and the tests' own variables: skipped, and named in a note; the
        // overrides beside them still apply.
        let c = crate::Config::load(
            BASE,
            Some("gateway.toml"),
            vars(&[
                ("TOOLMEND_SHARED", "/srv/shared"),
                ("TOOLMEND_HISTORY__POLICY", "reject"),
                ("TOOLMEND_SKIP_CHROMIUM", "1"),
            ]),
            Vec::new(),
        )
        .unwrap();
        assert_eq!(c.history.policy, crate::config::HistoryPolicy::Reject);
        assert_eq!(
            c.notes(),
            [
                "TOOLMEND_SHARED, TOOLMEND_SKIP_CHROMIUM: not configuration overrides (those \
              are TOOLMEND_<SECTION>__<KEY>, or TOOLMEND_LISTEN), ignored"
            ]
        );
        // None skipped, no note.
        let c = crate::Config::load(BASE, None, Vec::new(), Vec::new()).unwrap();
        assert!(c.notes().is_empty(), "{:?}", c.notes());
        // A top-level key needs no `__`.
        let c = crate::Config::load(
            BASE,
            None,
            vars(&[("TOOLMEND_LISTEN", "127.0.0.1:9999")]),
            Vec::new(),
        )
        .unwrap();
        assert_eq!(c.listen.port(), 9999);
        // With `__`, a section or a key that does not exist still stops the load, named.
        let e = err(BASE, env(&[("TOOLMEND_SHARED__PATH", "/x")]));
        assert!(
            e.contains("TOOLMEND_SHARED__PATH: unknown field `shared`"),
            "{e}"
        );
        let e = err(BASE, env(&[("TOOLMEND_CALLS__MEND_IT", "true")]));
        assert!(
            e.contains("TOOLMEND_CALLS__MEND_IT: unknown field `mend_it`"),
            "{e}"
        );
    }

    #[test]
    fn the_top_level_keys_are_the_config_s_own() {
        let config = serde_json::to_value(crate::Config::default()).unwrap();
        let mut keys: Vec<&str> = config
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut top = super::TOP_KEYS.to_vec();
        keys.sort_unstable();
        top.sort_unstable();
        assert_eq!(keys, top);
    }
}
