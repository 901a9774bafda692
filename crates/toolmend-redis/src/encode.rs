//! Keys, the script's arguments and its answers.

use std::{collections::HashMap, fmt::Write as _};

use toolmend::guard::store::{Admission, CallAnswer, CheckResult, Scope};

use crate::KEY_PREFIX;

/// What one script call carries.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Part<'p> {
    /// Every check: one standalone Redis, one atomic call.
    All,
    /// A cluster's session slot: the session's checks (recorded at once, tentatively for
    /// calls that also have global checks) and its ids.
    Session,
    /// A cluster's global slot: the global checks; `eligible[i]`: the session part
    /// admitted call `i` (only those may be recorded).
    Global(&'p [bool]),
    /// A cluster's session slot again: takes back the session checks of the calls marked,
    /// recorded at `at` (the session part's time).
    Refund { at: i64, calls: &'p [bool] },
}

/// One script call's `KEYS` and `ARGV`, and which checks of each call it carries.
#[derive(Debug)]
pub(crate) struct Invocation {
    pub(crate) keys: Vec<String>,
    pub(crate) args: Vec<String>,
    /// Per call: indices into its checks, in the order of the answer.
    pub(crate) picked: Vec<Vec<usize>>,
}

/// The session's hash: its header, ids and scoped windows and budgets.
pub(crate) fn hash_key(session: &str) -> String {
    format!("{KEY_PREFIX}{{{session}}}")
}

/// Scopes kept as fields of the session's hash: few per session (bounded by the
/// configured tools). The others (fingerprints, runs) are many: string keys, each
/// expiring on its own.
pub(crate) fn in_hash(scope: &Scope) -> bool {
    matches!(
        scope,
        Scope::Session | Scope::SessionTool(_) | Scope::Thread | Scope::ThreadTool(_)
    )
}

/// A string key: a session's (its tag) or a global one (the tag `{g}`, one slot for all).
pub(crate) fn string_key(session: Option<&str>, scope: &Scope) -> String {
    if scope.is_global() {
        format!("{KEY_PREFIX}{{g}}:{}", scope.suffix())
    } else {
        format!(
            "{KEY_PREFIX}{{{}}}:{}",
            session.unwrap_or("_"),
            scope.suffix()
        )
    }
}

/// True when some check of the admission is global.
pub(crate) fn has_global(a: &Admission<'_>) -> bool {
    a.calls
        .iter()
        .any(|c| c.checks.iter().any(|k| k.scope.is_global()))
}

/// The script's `KEYS` and `ARGV` for `part` of `a` (see `admit.lua`).
pub(crate) fn encode(a: &Admission<'_>, part: Part<'_>) -> Invocation {
    let hash = match part {
        Part::Global(_) => None,
        _ => a.session,
    };
    let mut keys: Vec<String> = Vec::new();
    if let Some(s) = hash {
        keys.push(hash_key(s));
    }
    let mut key_index: HashMap<String, usize> = HashMap::new();
    let mut fields: Vec<String> = Vec::new();
    let mut field_index: HashMap<String, usize> = HashMap::new();
    // The session's ids, each once (modes A and S): their fields follow the scoped ones
    // in the hash's read; each call names its own by index.
    let ids = hash.is_some() && matches!(part, Part::All | Part::Session);
    let mut id_fields: Vec<String> = Vec::new();
    let mut id_index: HashMap<&str, usize> = HashMap::new();
    let mut calls: Vec<(usize, String, String)> = Vec::with_capacity(a.calls.len());
    let mut picked = Vec::with_capacity(a.calls.len());
    for (ci, call) in a.calls.iter().enumerate() {
        let mut spec = String::with_capacity(24 * call.checks.len());
        let mut mine = Vec::with_capacity(call.checks.len());
        let skip = matches!(part, Part::Refund { calls, .. } if !calls[ci]);
        for (i, c) in call.checks.iter().enumerate() {
            let take = match part {
                Part::All => true,
                Part::Session | Part::Refund { .. } => !c.scope.is_global(),
                Part::Global(_) => c.scope.is_global(),
            };
            if !take || skip {
                continue;
            }
            mine.push(i);
            let r: i64 = if hash.is_some() && in_hash(&c.scope) {
                let f = c.scope.suffix();
                let n = match field_index.get(&f) {
                    Some(&n) => n,
                    None => {
                        fields.push(f.clone());
                        field_index.insert(f, fields.len());
                        fields.len()
                    }
                };
                -(n as i64)
            } else {
                let k = string_key(a.session, &c.scope);
                let n = match key_index.get(&k) {
                    Some(&n) => n,
                    None => {
                        keys.push(k.clone());
                        key_index.insert(k, keys.len());
                        keys.len()
                    }
                };
                n as i64
            };
            let window = c
                .window_ms
                .map_or(-1, |w| i64::try_from(w).unwrap_or(i64::MAX));
            let _ = write!(
                spec,
                "{r},{},{window},{};",
                c.limit,
                if c.shadow { 1 } else { 0 }
            );
        }
        let id = if ids {
            let n = id_fields.len();
            *id_index.entry(call.call_id.as_str()).or_insert_with(|| {
                id_fields.push(format!("i:{}", call.call_id));
                n
            }) + 1
        } else {
            0
        };
        let tag = match part {
            Part::All | Part::Session => call.call_id.clone(),
            Part::Global(eligible) => if eligible[ci] { "1" } else { "0" }.to_owned(),
            Part::Refund { .. } => "-".to_owned(),
        };
        calls.push((id, tag, spec));
        picked.push(mine);
    }
    // The hash's fields to read: `n`, the scoped fields, the ids' fields.
    let nh = if hash.is_some() {
        1 + fields.len() + id_fields.len()
    } else {
        0
    };
    let mut args = Vec::with_capacity(5 + nh + 3 * calls.len());
    args.push(
        match part {
            Part::All => "A",
            Part::Session => "S",
            Part::Global(_) => "G",
            Part::Refund { .. } => "R",
        }
        .to_owned(),
    );
    args.push(match part {
        Part::Refund { at, .. } => at.to_string(),
        _ => a.ttl_ms.to_string(),
    });
    args.push(if hash.is_some() { "1" } else { "0" }.to_owned());
    args.push(nh.to_string());
    args.push(fields.len().to_string());
    if hash.is_some() {
        args.push("n".to_owned());
    }
    let nf = fields.len();
    args.extend(fields);
    args.extend(id_fields);
    for (id, tag, spec) in calls {
        // An id's index among the `nh` fields read (`n` first, then the scoped ones).
        args.push(if id == 0 {
            "0".to_owned()
        } else {
            (1 + nf + id).to_string()
        });
        args.push(tag);
        args.push(spec);
    }
    Invocation { keys, args, picked }
}

/// One call's answer from one part: admitted, id seen, the results of its checks picked.
pub(crate) type PartAnswer = (bool, bool, Vec<CheckResult>);

/// The script's answer, one flat array: its time, then per call `admitted, id_seen,
/// (passed, count, retry)…` for the checks `picked`.
pub(crate) fn decode(
    inv: &Invocation,
    reply: redis::Value,
) -> Result<(i64, Vec<PartAnswer>), String> {
    let redis::Value::Array(items) = reply else {
        return Err("the script's answer is not an array".to_owned());
    };
    let want = 1 + inv.picked.iter().map(|p| 2 + 3 * p.len()).sum::<usize>();
    if items.len() != want {
        return Err(format!(
            "{} values for {} calls, {want} expected",
            items.len(),
            inv.picked.len()
        ));
    }
    let mut vals = items.into_iter().map(|v| match v {
        redis::Value::Int(n) => Ok(n),
        _ => Err("the script's answer holds a non-integer".to_owned()),
    });
    let mut next = || vals.next().unwrap_or(Ok(0));
    let now = next()?;
    let as_u64 = |v: i64| u64::try_from(v).unwrap_or(0);
    let mut out = Vec::with_capacity(inv.picked.len());
    for picked in &inv.picked {
        let admitted = next()? == 1;
        let seen = next()? == 1;
        let mut checks = Vec::with_capacity(picked.len());
        for _ in picked {
            let (p, c, r) = (next()?, next()?, next()?);
            checks.push(CheckResult {
                passed: p == 1,
                count: as_u64(c),
                retry_after_ms: as_u64(r),
            });
        }
        out.push((admitted, seen, checks));
    }
    Ok((now, out))
}

/// Answers with every check passed and nothing seen, to be filled in by the parts.
pub(crate) fn blank(a: &Admission<'_>) -> Vec<CallAnswer> {
    a.calls
        .iter()
        .map(|c| CallAnswer {
            admitted: true,
            id_seen: false,
            checks: vec![
                CheckResult {
                    passed: true,
                    count: 0,
                    retry_after_ms: 0,
                };
                c.checks.len()
            ],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use toolmend::guard::{
        Rule,
        store::{AdmitCall, Check},
    };

    use super::*;

    fn check(scope: Scope, window_ms: Option<u64>) -> Check {
        Check {
            rule: Rule::SessionWindow,
            scope,
            limit: 3,
            window_ms,
            shadow: false,
        }
    }

    #[test]
    fn keys_share_the_session_tag_and_globals_have_their_own() {
        assert_eq!(hash_key("00ab"), "tm:v2:{00ab}");
        assert_eq!(
            string_key(Some("00ab"), &Scope::Call(0xab)),
            "tm:v2:{00ab}:c:00000000000000ab"
        );
        assert_eq!(
            string_key(Some("00ab"), &Scope::Tool("search".into())),
            "tm:v2:{g}:t:search"
        );
        assert!(in_hash(&Scope::SessionTool("x".into())));
        assert!(!in_hash(&Scope::Run(1)));
    }

    #[test]
    fn an_admission_is_one_line_per_call_each_key_and_field_once() {
        let calls = [
            AdmitCall {
                call_id: "a".into(),
                checks: vec![
                    check(Scope::Session, Some(1000)),
                    check(Scope::Thread, None),
                    check(Scope::Tool("t".into()), Some(500)),
                    check(Scope::Run(2), None),
                ],
            },
            AdmitCall {
                call_id: "b".into(),
                checks: vec![check(Scope::Session, Some(1000))],
            },
        ];
        let a = Admission {
            session: Some("s1"),
            ttl_ms: 60_000,
            calls: &calls,
        };
        let all = encode(&a, Part::All);
        assert_eq!(all.keys, ["tm:v2:{s1}", "tm:v2:{g}:t:t", "tm:v2:{s1}:r:2"]);
        assert_eq!(
            all.args,
            [
                "A",
                "60000",
                "1",
                "5",
                "2",
                "n",
                "s",
                "th",
                "i:a",
                "i:b",
                "4",
                "a",
                "-1,3,1000,0;-2,3,-1,0;2,3,500,0;3,3,-1,0;",
                "5",
                "b",
                "-1,3,1000,0;"
            ]
        );
        let s = encode(&a, Part::Session);
        assert_eq!(s.keys, ["tm:v2:{s1}", "tm:v2:{s1}:r:2"]);
        assert_eq!(s.picked, [vec![0, 1, 3], vec![0]]);
        let g = encode(&a, Part::Global(&[true, false]));
        assert_eq!(g.keys, ["tm:v2:{g}:t:t"]);
        assert_eq!(
            g.args,
            [
                "G",
                "60000",
                "0",
                "0",
                "0",
                "0",
                "1",
                "1,3,500,0;",
                "0",
                "0",
                ""
            ]
        );
        assert_eq!(g.picked, [vec![2], vec![]]);
        let r = encode(
            &a,
            Part::Refund {
                at: 7,
                calls: &[true, false],
            },
        );
        assert_eq!(r.args[..8], ["R", "7", "1", "3", "2", "n", "s", "th"]);
        assert_eq!(r.picked, [vec![0, 1, 3], vec![]]);
    }
}
