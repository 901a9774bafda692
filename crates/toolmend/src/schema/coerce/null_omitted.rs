//! `null_omitted`: `null` for an optional field that does not allow null: the field is
//! omitted (never a default put in its place).

use serde_json::{Map, Value};

use super::{
    super::compile::{Flat, flatten},
    Walker, child_path, quote,
};
use crate::FixKind;

impl<'t> Walker<'t> {
    /// Omits the optional properties of `map` given as a `null` they do not allow.
    pub(super) fn omit_nulls(
        &mut self,
        map: &mut Map<String, Value>,
        flat: &Flat<'t>,
        props: &[&'t str],
        required: &[&str],
        path: &str,
    ) {
        let mut omit: Vec<String> = Vec::new();
        for (k, v) in map.iter() {
            if v.is_null()
                && !required.contains(&k.as_str())
                && props.contains(&k.as_str())
                && flat
                    .property(k)
                    .into_iter()
                    .any(|n| !flatten(self.root(), n).allows_null())
            {
                omit.push(k.clone());
            }
        }
        if !omit.is_empty() {
            map.retain(|k, _| !omit.contains(k));
            for k in omit {
                let p = child_path(path, &k);
                self.fix(
                    FixKind::NullOmitted,
                    &p,
                    format!("{} -> omitted", quote(&k)),
                );
            }
        }
    }
}
