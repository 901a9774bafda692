//! `drop_unknown_keys`: keys the schema forbids (`additionalProperties: false`) are dropped
//! with their values, except a key whose value could be a missing required one or that a
//! free property could be: that stays an `unknown_key` issue.

use serde_json::{Map, Value};

use super::{
    super::{
        compile::{Flat, flatten},
        suggest::{Candidate, Key, contenders},
    },
    Walker, child_path, quote,
};
use crate::FixKind;

impl<'t> Walker<'t> {
    /// Drops the `remaining` unknown keys of `map` that no property could be.
    pub(super) fn drop_unknown_keys(
        &mut self,
        map: &mut Map<String, Value>,
        flat: &Flat<'t>,
        props: &[&'t str],
        required: &[&str],
        remaining: Vec<String>,
        path: &str,
    ) {
        let missing: Vec<&str> = required
            .iter()
            .copied()
            .filter(|r| !map.contains_key(*r))
            .collect();
        let drop: Vec<String> = remaining
            .into_iter()
            .filter(|k| {
                // Keep a key that could have been a missing required value, or that
                // some free property could be (by name or description): the agent
                // gets "unknown key" with the candidates, not a silent loss.
                let v = &map[k.as_str()];
                !missing.iter().any(|r| self.fits(v, &flat.property(r)))
                    && !self.has_home(map, flat, props, k)
            })
            .collect();
        if !drop.is_empty() {
            map.retain(|k, _| !drop.contains(k));
            for k in drop {
                let p = child_path(path, &k);
                self.fix(
                    FixKind::UnknownKeyDropped,
                    &p,
                    format!("{} dropped", quote(&k)),
                );
            }
        }
    }

    /// True when some property not present in `map` could be `key`'s home (a reading of
    /// any strength): the key is not dropped, the agent is told instead.
    fn has_home(
        &self,
        map: &Map<String, Value>,
        flat: &Flat<'t>,
        props: &[&'t str],
        key: &str,
    ) -> bool {
        let k = Key::new(key);
        if k.is_chatter() {
            return false;
        }
        let free: Vec<Candidate<'_>> = props
            .iter()
            .filter(|p| !map.contains_key(**p))
            .map(|p| {
                let desc = flat
                    .property(p)
                    .into_iter()
                    .find_map(|n| flatten(self.root(), n).description());
                Candidate::new(p, desc)
            })
            .collect();
        !contenders(&k, &free, |_| true).is_empty()
    }
}
