//! [`Coercions`] by name: the one mapping every front uses (Python's `coerce=`, the
//! gateway's `calls.coercions`): a switch's field name (`numeric_strings`) or the id of a
//! fix it makes (`string_to_integer`, which turns its whole switch on or off).

use std::fmt;

use serde::{Deserialize, Serialize, de};

use super::Coercions;
use crate::FixKind;

/// A name that is neither a switch of [`Coercions`] nor the id of a fix one makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownSwitch {
    /// The name given.
    pub name: String,
}

impl fmt::Display for UnknownSwitch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<&str> = Coercions::fix_ids().map(|(id, _)| id).collect();
        write!(
            f,
            "unknown coercion {:?}; known switches: {}; or the fix ids they make: {}",
            self.name,
            Coercions::SWITCHES.join(", "),
            ids.join(", ")
        )
    }
}

impl std::error::Error for UnknownSwitch {}

/// Why a list of names does not make one [`Coercions`] ([`Coercions::from_names`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwitchError {
    /// A name that is no switch and no fix id.
    Unknown(UnknownSwitch),
    /// Two names of one switch set to different values (`string_to_integer = false`,
    /// `string_to_number = true`: both are `numeric_strings`).
    Contradiction {
        /// The switch both names make.
        switch: &'static str,
        /// The first name and its value.
        first: (String, bool),
        /// The second name and its value.
        second: (String, bool),
    },
}

impl fmt::Display for SwitchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SwitchError::Unknown(e) => e.fmt(f),
            SwitchError::Contradiction {
                switch,
                first,
                second,
            } => write!(
                f,
                "{:?}: {} and {:?}: {} contradict each other: both are the coercion {switch:?}, \
                 which makes them together",
                first.0, first.1, second.0, second.1
            ),
        }
    }
}

impl std::error::Error for SwitchError {}

impl From<UnknownSwitch> for SwitchError {
    fn from(e: UnknownSwitch) -> Self {
        SwitchError::Unknown(e)
    }
}

impl Coercions {
    /// The fix ids a switch can be named by, each with its switch, in [`FixKind::ALL`]'s
    /// order (`("string_to_integer", "numeric_strings")` …).
    pub fn fix_ids() -> impl Iterator<Item = (&'static str, &'static str)> {
        FixKind::ALL
            .iter()
            .filter_map(|k| Some((k.id(), Coercions::switch_of(*k)?)))
    }

    /// The switch `name` makes: itself when it is one of [`SWITCHES`](Self::SWITCHES),
    /// the switch of the fix when it is a fix id ([`fix_ids`](Self::fix_ids)); `None`
    /// otherwise.
    pub fn switch_named(name: &str) -> Option<&'static str> {
        Coercions::SWITCHES
            .iter()
            .copied()
            .find(|s| *s == name)
            .or_else(|| {
                Coercions::fix_ids()
                    .find(|(id, _)| *id == name)
                    .map(|(_, s)| s)
            })
    }

    /// Turns the switch `name` on or off: a switch's name, or the id of a fix it makes
    /// (which sets the whole switch: `key_case_fixed` is `rename_keys`).
    ///
    /// # Errors
    ///
    /// [`UnknownSwitch`] for any other name (its message lists the valid ones).
    pub fn set(&mut self, name: &str, on: bool) -> Result<(), UnknownSwitch> {
        let switch = Coercions::switch_named(name).ok_or_else(|| UnknownSwitch {
            name: name.to_owned(),
        })?;
        let rule = super::coerce::RULES
            .iter()
            .find(|r| r.switch == switch)
            .unwrap_or_else(|| unreachable!("a switch without a rule: {switch}"));
        *(rule.field)(self) = on;
        Ok(())
    }

    /// The defaults with each named switch set ([`set`](Self::set)): what Python's
    /// `coerce={...}` and the gateway's `calls.coercions` take.
    ///
    /// # Errors
    ///
    /// An unknown name, or two names of one switch that disagree.
    pub fn from_names<N: AsRef<str>>(
        names: impl IntoIterator<Item = (N, bool)>,
    ) -> Result<Coercions, SwitchError> {
        let mut seen: Vec<(&'static str, String, bool)> = Vec::new();
        let mut c = Coercions::default();
        for (name, on) in names {
            let name = name.as_ref();
            c.set(name, on)?;
            let switch = Coercions::switch_named(name).unwrap_or_default();
            if let Some((_, prev, prev_on)) = seen.iter().find(|(s, _, _)| *s == switch)
                && *prev_on != on
            {
                return Err(SwitchError::Contradiction {
                    switch,
                    first: (prev.clone(), *prev_on),
                    second: (name.to_owned(), on),
                });
            }
            seen.push((switch, name.to_owned(), on));
        }
        Ok(c)
    }
}

/// Every switch by name, as a map (`{"numeric_strings": true, …}`): what
/// [`Deserialize`] reads back.
impl Serialize for Coercions {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(Coercions::SWITCHES.len()))?;
        for name in Coercions::SWITCHES {
            map.serialize_entry(name, &self.get(name).unwrap_or_default())?;
        }
        map.end()
    }
}

/// What Python's `coerce=` takes: `true` (the defaults), `false` (none:
/// [`Coercions::none`]), or a map of switch names or fix ids to booleans over the
/// defaults ([`Coercions::from_names`]); an unknown name is an error listing the valid
/// ones.
impl<'de> Deserialize<'de> for Coercions {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> de::Visitor<'de> for Visitor {
            type Value = Coercions;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a boolean, or a map of coercion names (or fix ids) to booleans")
            }

            fn visit_bool<E: de::Error>(self, all: bool) -> Result<Coercions, E> {
                Ok(if all {
                    Coercions::default()
                } else {
                    Coercions::none()
                })
            }

            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Coercions, A::Error> {
                let mut names: Vec<(String, bool)> = Vec::new();
                while let Some((name, on)) = map.next_entry::<String, bool>()? {
                    names.push((name, on));
                }
                Coercions::from_names(names).map_err(de::Error::custom)
            }
        }
        d.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::{Coercions, SwitchError};

    #[test]
    fn a_switch_or_a_fix_id_sets_the_whole_switch() {
        let mut c = Coercions::default();
        c.set("string_to_integer", false).unwrap();
        assert!(!c.numeric_strings);
        c.set("key_case_fixed", false).unwrap();
        assert!(!c.rename_keys);
        c.set("split_merged_calls", true).unwrap();
        assert!(c.split_merged_calls);
        // Every switch and every fix id reaches its field.
        for name in Coercions::SWITCHES
            .into_iter()
            .chain(Coercions::fix_ids().map(|(id, _)| id))
        {
            let switch = Coercions::switch_named(name).unwrap();
            let mut c = Coercions::none();
            c.set(name, true).unwrap();
            assert_eq!(c.get(switch), Some(true), "{name}");
            let on: Vec<&str> = Coercions::SWITCHES
                .into_iter()
                .filter(|s| c.get(s) == Some(true))
                .collect();
            assert_eq!(on, [switch], "{name}");
        }
    }

    #[test]
    fn an_unknown_name_is_refused_listing_the_valid_ones() {
        let e = Coercions::default()
            .set("string_to_int", false)
            .unwrap_err();
        let m = e.to_string();
        assert!(m.contains("\"string_to_int\""), "{m}");
        assert!(
            m.contains("numeric_strings") && m.contains("string_to_integer"),
            "{m}"
        );
        assert!(
            m.contains("key_renamed") && m.contains("enum_case_fixed"),
            "{m}"
        );
        // Not a fix a switch makes.
        assert!(Coercions::switch_named("trailing_comma").is_none());
    }

    #[test]
    fn names_of_one_switch_must_agree() {
        let e = Coercions::from_names([("string_to_integer", false), ("string_to_number", true)])
            .unwrap_err();
        assert!(
            matches!(
                e,
                SwitchError::Contradiction {
                    switch: "numeric_strings",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("contradict"), "{e}");
        let c = Coercions::from_names([("string_to_integer", false), ("numeric_strings", false)])
            .unwrap();
        assert_eq!(
            c,
            Coercions {
                numeric_strings: false,
                ..Coercions::default()
            }
        );
    }

    #[test]
    fn serde_takes_a_bool_or_names_over_the_defaults() {
        let de = |v: serde_json::Value| serde_json::from_value::<Coercions>(v);
        assert_eq!(de(serde_json::json!(true)).unwrap(), Coercions::default());
        assert_eq!(de(serde_json::json!(false)).unwrap(), Coercions::none());
        let c = de(serde_json::json!({"string_to_integer": false, "key_renamed": false})).unwrap();
        assert!(!c.numeric_strings && !c.rename_keys && c.enum_case);
        let e = de(serde_json::json!({"strng_to_integer": false})).unwrap_err();
        assert!(
            e.to_string()
                .contains("unknown coercion \"strng_to_integer\""),
            "{e}"
        );
        assert!(de(serde_json::json!("yes")).is_err());
        // What it writes, it reads back.
        let c = Coercions {
            dates: false,
            split_merged_calls: true,
            ..Coercions::default()
        };
        assert_eq!(de(serde_json::to_value(&c).unwrap()).unwrap(), c);
    }
}
