//! `rename_keys`: an unknown key -> the schema's key when unambiguous (case style, alias,
//! edit distance, words, description, structure), only onto a key not already present and
//! only when the value fits it.

use serde_json::{Map, Value};

use super::{
    super::{
        compile::{Additional, Flat, flatten},
        issues::unknown_key_issue,
        suggest::{Candidate, CandidateData, Key, Via, contenders, key_suggestion, plan_renames},
    },
    Walker, child_path, loosely_fits, quote,
};
use crate::{FixKind, Issue, IssueKind};

impl<'t> Walker<'t> {
    /// The did-you-mean data of `props` (names, descriptions), cached by the schema's
    /// address: `flat` is the flattening of its first part's node, so that node names
    /// these properties. `None` for an object without parts.
    fn property_data(
        &self,
        flat: &Flat<'t>,
        props: &[&'t str],
    ) -> Option<std::sync::Arc<Vec<CandidateData>>> {
        let (node, _) = flat.parts.first()?;
        Some(self.tool.candidate_data(node.schema, true, || {
            props
                .iter()
                .map(|p| {
                    let desc = flat
                        .property(p)
                        .into_iter()
                        .find_map(|n| flatten(self.root(), n).description());
                    CandidateData::new(p, desc)
                })
                .collect()
        }))
    }

    /// Renames unknown keys onto schema keys; returns the keys still unknown.
    pub(super) fn rename_keys(
        &mut self,
        map: &mut Map<String, Value>,
        flat: &Flat<'t>,
        props: &[&'t str],
        unknown: Vec<String>,
        path: &str,
    ) -> Vec<String> {
        let Some(data) = self.property_data(flat, props) else {
            return unknown;
        };
        let cands: Vec<Candidate<'_>> = props
            .iter()
            .zip(data.iter())
            .map(|(p, d)| Candidate::borrowed(p, d))
            .collect();
        let available: Vec<bool> = props.iter().map(|p| !map.contains_key(*p)).collect();
        let keys: Vec<&str> = unknown.iter().map(String::as_str).collect();
        let mut renames = plan_renames(&keys, &cands, &available, |u, c| {
            self.fits(&map[keys[u]], &flat.property(props[c]))
        });
        // The structural reading: one required key missing, one unknown key left beside it
        // (chatter aside), its value fitting: the schema leaves no other home for it.
        let left: Vec<usize> = (0..keys.len())
            .filter(|u| !renames.iter().any(|(r, _, _)| r == u))
            .filter(|&u| !Key::new(keys[u]).is_chatter())
            .collect();
        // A key whose name says it holds no argument (`unknown`, `extra`, `_debug`) is
        // no evidence either: its value is not the missing key's.
        let placeholder = |u: usize| Key::new(keys[u]).is_placeholder();
        // A key too short to name anything (`xyz`, `v`) is no evidence: the agent or the
        // corrector says what it meant.
        let named = |u: usize| keys[u].chars().filter(char::is_ascii_alphabetic).count() >= 4;
        // A key arguments are wrapped in (`properties`, `params` …) holds arguments, never
        // one argument's value: left beside a missing key, it was not unwrapped for a reason.
        let wrapper = |u: usize| {
            super::unwrap_arguments::WRAPPER_KEYS.contains(&keys[u].to_ascii_lowercase().as_str())
        };
        let required = flat.required();
        let missing: Vec<usize> = (0..props.len())
            .filter(|&c| available[c] && required.contains(&props[c]))
            .filter(|c| !renames.iter().any(|(_, r, _)| r == c))
            .collect();
        // The value must fit as sent: a reading this weak takes no coercion on top.
        if let ([u], [c]) = (left.as_slice(), missing.as_slice())
            && named(*u)
            && !wrapper(*u)
            && !placeholder(*u)
            && let nodes = flat.property(props[*c])
            && !nodes.is_empty()
            && nodes
                .iter()
                .all(|n| loosely_fits(self.root(), &map[keys[*u]], n))
        {
            renames.push((*u, *c, Via::Structure));
        }
        if self.opts_open_ambiguity(flat) {
            let taken: Vec<usize> = renames.iter().map(|(_, c, _)| *c).collect();
            for &u in &left {
                if renames.iter().any(|(r, _, _)| *r == u) {
                    continue;
                }
                let tied = contenders(&Key::new(keys[u]), &cands, |c| {
                    available[c] && !taken.contains(&c)
                });
                if tied.len() >= 2 {
                    let names: Vec<Value> = tied
                        .iter()
                        .map(|&c| Value::String(props[c].to_owned()))
                        .collect();
                    let suggestion = key_suggestion(keys[u], &cands).unwrap_or_default();
                    self.issues.push(
                        Issue::new(
                            IssueKind::UnknownKey,
                            child_path(path, keys[u]),
                            format!(
                                "\"{}\" is not a known key, and the schema has more than one \
                                 key it could be",
                                keys[u]
                            ),
                        )
                        .got(map[keys[u]].clone())
                        .allowed(names)
                        .suggestion(suggestion),
                    );
                }
            }
        }
        if renames.is_empty() {
            return unknown;
        }
        let mut new_names: Vec<(&str, &str, Via)> = Vec::new();
        for &(u, c, v) in &renames {
            new_names.push((keys[u], props[c], v));
        }
        let old = std::mem::take(map);
        for (k, v) in old {
            match new_names.iter().find(|(from, _, _)| *from == k) {
                Some((_, to, _)) => {
                    map.insert((*to).to_owned(), v);
                }
                None => {
                    map.insert(k, v);
                }
            }
        }
        for (from, to, via) in &new_names {
            let p = child_path(path, to);
            let kind = match via {
                Via::Case => FixKind::KeyCaseFixed,
                Via::Spelling => FixKind::KeySpellingFixed,
                Via::Alias => FixKind::KeyRenamed,
                Via::Tokens => FixKind::KeyRenamedByTokens,
                Via::Description => FixKind::KeyRenamedByDescription,
                Via::Structure => FixKind::KeyRenamedByStructure,
            };
            self.fix(kind, &p, format!("{} -> {}", quote(from), quote(to)));
        }
        unknown
            .iter()
            .filter(|k| !new_names.iter().any(|(from, _, _)| from == k))
            .cloned()
            .collect()
    }

    /// One `unknown_key` issue per key of `remaining` that no property took, in an object
    /// open only because its schema says nothing about other keys (a key the schema gives
    /// two homes has its issue already; chatter such as `explanation` is left alone).
    pub(super) fn stray_key_issues(
        &mut self,
        map: &Map<String, Value>,
        flat: &Flat<'t>,
        props: &[&'t str],
        remaining: &[String],
        path: &str,
    ) {
        let reported: std::collections::HashSet<String> =
            self.issues.iter().map(|i| i.path.clone()).collect();
        let Some(data) = self.property_data(flat, props) else {
            return;
        };
        let free: Vec<Candidate<'_>> = props
            .iter()
            .zip(data.iter())
            .filter(|(p, _)| !map.contains_key(**p))
            .map(|(p, d)| Candidate::borrowed(p, d))
            .collect();
        let allowed: Vec<Value> = props
            .iter()
            .map(|p| Value::String((*p).to_owned()))
            .collect();
        for key in remaining {
            let at = child_path(path, key);
            if Key::new(key).is_chatter() || reported.contains(&at) {
                continue;
            }
            self.issues.push(unknown_key_issue(
                at,
                format!(
                    "\"{key}\" is not a known key: no argument of the tool takes it, so its \
                     value would be ignored"
                ),
                &allowed,
                map.get(key),
                key_suggestion(key, &free),
            ));
        }
    }

    /// An open object (other keys allowed) reports an unknown key the schema gives two
    /// homes (validation would accept it, and the value would reach no property); a
    /// closed one leaves that to validation's `unknown_key` issue.
    fn opts_open_ambiguity(&self, flat: &Flat<'t>) -> bool {
        !matches!(flat.additional(), Additional::Forbidden)
    }
}
