//! The templates' `date()` helper: ISO dates and date-times, unix seconds.

use super::*;

pub(super) const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
pub(super) const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// A civil date-time (no zone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DateTime {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    /// Read from a date without a time.
    date_only: bool,
}

pub(super) fn from_unix(secs: i64) -> Option<DateTime> {
    // Years 0..=9999.
    if !(-62_167_219_200..=253_402_300_799).contains(&secs) {
        return None;
    }
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400) as u32;
    Some(DateTime {
        year: y,
        month: m,
        day: d,
        hour: s / 3600,
        minute: s / 60 % 60,
        second: s % 60,
        date_only: false,
    })
}

pub(super) fn digits(s: &[u8], at: usize, n: usize) -> Option<u32> {
    let part = s.get(at..at + n)?;
    part.iter().try_fold(0u32, |acc, b| {
        b.is_ascii_digit().then(|| acc * 10 + u32::from(b - b'0'))
    })
}

pub(super) fn parse_iso(s: &str) -> Option<DateTime> {
    let b = s.trim().as_bytes();
    let year = i64::from(digits(b, 0, 4)?);
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let month = digits(b, 5, 2)?;
    let day = digits(b, 8, 2)?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let mut dt = DateTime {
        year,
        month,
        day,
        hour: 0,
        minute: 0,
        second: 0,
        date_only: b.len() == 10,
    };
    if dt.date_only {
        return Some(dt);
    }
    if !matches!(b.get(10), Some(b'T' | b't' | b' ')) || b.get(13) != Some(&b':') {
        return None;
    }
    dt.hour = digits(b, 11, 2)?;
    dt.minute = digits(b, 14, 2)?;
    let mut at = 16;
    if b.get(at) == Some(&b':') {
        dt.second = digits(b, at + 1, 2)?;
        at += 3;
        if matches!(b.get(at), Some(b'.' | b',')) {
            at += 1;
            let start = at;
            while b.get(at).is_some_and(u8::is_ascii_digit) {
                at += 1;
            }
            if at == start {
                return None;
            }
        }
    }
    if dt.hour > 23 || dt.minute > 59 || dt.second > 60 {
        return None;
    }
    // The zone: read, not applied.
    match &b[at..] {
        [] | [b'Z' | b'z'] => {}
        [b'+' | b'-', rest @ ..] => {
            let ok = match rest {
                [h1, h2] | [h1, h2, b':', _, _] | [h1, h2, _, _] => {
                    h1.is_ascii_digit() && h2.is_ascii_digit()
                }
                _ => false,
            };
            if !ok || !rest.iter().all(|c| c.is_ascii_digit() || *c == b':') {
                return None;
            }
        }
        _ => return None,
    }
    Some(dt)
}

pub(super) fn read_date(value: &Mj) -> Option<DateTime> {
    if let Some(s) = value.as_str() {
        let t = s.trim();
        if !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()) {
            return from_unix(t.parse().ok()?);
        }
        return parse_iso(t);
    }
    if let Ok(i) = i64::try_from(value.clone()) {
        return from_unix(i);
    }
    let f = f64::try_from(value.clone()).ok()?;
    if !f.is_finite() || f.abs() > 1e12 {
        return None;
    }
    from_unix(f.floor() as i64)
}

pub(super) fn format_date(dt: &DateTime, fmt: &str) -> Result<String, String> {
    let mut out = String::with_capacity(fmt.len() + 16);
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let month = MONTHS[(dt.month - 1) as usize];
        let weekday =
            WEEKDAYS[(days_from_civil(dt.year, dt.month, dt.day) + 4).rem_euclid(7) as usize];
        let _ = match chars.next() {
            Some('Y') => write!(out, "{:04}", dt.year),
            Some('m') => write!(out, "{:02}", dt.month),
            Some('d') => write!(out, "{:02}", dt.day),
            Some('H') => write!(out, "{:02}", dt.hour),
            Some('M') => write!(out, "{:02}", dt.minute),
            Some('S') => write!(out, "{:02}", dt.second),
            Some('b') => out.write_str(&month[..3]),
            Some('B') => out.write_str(month),
            Some('a') => out.write_str(&weekday[..3]),
            Some('A') => out.write_str(weekday),
            Some('%') => out.write_str("%"),
            Some(other) => {
                return Err(format!(
                    "date: unsupported directive %{other} (supported: %Y %m %d %H %M %S %b %B %a %A %%)"
                ));
            }
            None => return Err("date: the format ends with a lone %".into()),
        };
    }
    Ok(out)
}

pub(super) fn date(value: &Mj, fmt: Option<&str>) -> Result<String, Error> {
    let dt = read_date(value).ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("date: cannot read {value:?} as an ISO date, date-time or unix seconds"),
        )
    })?;
    let fmt = fmt.unwrap_or(if dt.date_only {
        "%Y-%m-%d"
    } else {
        "%Y-%m-%d %H:%M:%S"
    });
    format_date(&dt, fmt).map_err(|e| Error::new(ErrorKind::InvalidOperation, e))
}
