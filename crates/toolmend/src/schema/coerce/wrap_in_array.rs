//! `wrap_in_array`: `"x"` -> `["x"]` for array fields (any scalar, or an object for an
//! array of objects), when the value fits the array's items.

use serde_json::Value;

use super::{super::compile::Flat, Walker};
use crate::FixKind;

impl<'t> Walker<'t> {
    /// `value` as a one-element array, when it fits the items of the array `flat` describes.
    pub(super) fn wrapped(&self, flat: &Flat<'t>, value: &Value) -> Option<(FixKind, Value)> {
        self.item_fits(flat, value)
            .then(|| (FixKind::WrappedInArray, Value::Array(vec![value.clone()])))
    }

    /// True when `value` could be the first element of the array `flat` describes.
    fn item_fits(&self, flat: &Flat<'t>, value: &Value) -> bool {
        match flat.item(0) {
            Some(node) => self.fits(value, &[node]),
            None => true,
        }
    }
}
