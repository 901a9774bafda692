//! `numeric_strings`: `"5"` -> `5`, `"2.5"` -> `2.5` for number fields; `5.0` -> `5` for
//! integer-only ones. Only plain decimals: `"5 apples"`, hex and separators are no number.

use serde_json::{Number, Value};

use super::super::compile::{INT, NUM};
use crate::FixKind;

/// An integer-only field's float with no fraction, as that integer.
pub(super) fn float_to_integer(value: &Value, types: u8) -> Option<Value> {
    if types & INT != 0
        && types & NUM == 0
        && let Value::Number(n) = value
        && n.is_f64()
    {
        n.as_f64().and_then(f64_to_i64).map(Value::from)
    } else {
        None
    }
}

/// A string (trimmed) as the number a field of `types` takes.
pub(super) fn from_string(trimmed: &str, types: u8) -> Option<(FixKind, Value)> {
    if types & INT != 0 && types & NUM == 0 {
        parse_integer(trimmed).map(|i| (FixKind::StringToInteger, i))
    } else if types & NUM != 0 {
        parse_number(trimmed).map(|n| (FixKind::StringToNumber, n))
    } else {
        None
    }
}

/// The enum's number a string (trimmed) writes.
pub(super) fn enum_member<'a>(trimmed: &str, allowed: &'a [Value]) -> Option<(FixKind, &'a Value)> {
    allowed
        .iter()
        .find(|a| a.is_number() && parse_number(trimmed).is_some_and(|n| n.as_f64() == a.as_f64()))
        .map(|a| {
            let kind = if a.is_f64() {
                FixKind::StringToNumber
            } else {
                FixKind::StringToInteger
            };
            (kind, a)
        })
}

/// `[+-]digits[.digits][e[+-]digits]` (also `.5` and `5.`); no hex, no separators.
fn is_decimal(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let int_start = i;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let mut digits = i - int_start;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let frac_start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        digits += i - frac_start;
    }
    if digits == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == exp_start {
            return false;
        }
    }
    i == b.len()
}

fn f64_to_i64(f: f64) -> Option<i64> {
    #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
    (f.is_finite() && f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15).then_some(f as i64)
}

/// `"5"`, `" 12 "`, `"5.0"`, `"1e3"` -> an integer; not `"5.5"` or `"5 apples"`.
fn parse_integer(s: &str) -> Option<Value> {
    if !is_decimal(s) {
        return None;
    }
    let plain = s.strip_prefix('+').unwrap_or(s);
    if let Ok(i) = plain.parse::<i64>() {
        return Some(Value::from(i));
    }
    if let Ok(u) = plain.parse::<u64>() {
        return Some(Value::from(u));
    }
    plain
        .parse::<f64>()
        .ok()
        .and_then(f64_to_i64)
        .map(Value::from)
}

/// `"21.5"`, `"1200"`, `"1e3"` -> a number (an integer when written as one).
fn parse_number(s: &str) -> Option<Value> {
    if !is_decimal(s) {
        return None;
    }
    let plain = s.strip_prefix('+').unwrap_or(s);
    if let Ok(i) = plain.parse::<i64>() {
        return Some(Value::from(i));
    }
    plain
        .parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .map(Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(parse_integer("5"), Some(Value::from(5)));
        assert_eq!(parse_integer("5.0"), Some(Value::from(5)));
        assert_eq!(parse_integer("1e3"), Some(Value::from(1000)));
        assert_eq!(parse_integer("+7"), Some(Value::from(7)));
        assert_eq!(parse_integer("5.5"), None);
        assert_eq!(parse_integer("5 apples"), None);
        assert_eq!(parse_integer("0x1F"), None);
        assert_eq!(parse_integer(""), None);
        assert_eq!(parse_integer("."), None);
        assert_eq!(parse_number("21.5"), Some(serde_json::json!(21.5)));
        assert_eq!(parse_number("1200"), Some(Value::from(1200)));
        assert_eq!(parse_number("1e3"), Some(serde_json::json!(1000.0)));
        assert_eq!(parse_number("NaN"), None);
        assert_eq!(parse_number("inf"), None);
        assert_eq!(parse_number("1,200"), None);
    }
}
