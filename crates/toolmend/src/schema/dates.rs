//! Dates for `format: date` and `format: date-time`.
//!
//! [`normalize_date`] reads the common forms models write (`01/19/2026`, `28.02.2025`,
//! `20010113`, `27 July 2026`, `February 14, 1985`, `2026-06-24T00:00:00`) and returns the
//! ISO 8601 `YYYY-MM-DD` form. [`normalize_date_time`] rewrites RFC 3339 look-alikes
//! (`2025-07-02 18:45Z`, `+0200` offsets) into RFC 3339, but never invents a time zone.
//! Both reject impossible dates (month 13, February 30) and return `None` when the text is
//! already canonical or cannot be read without guessing.

/// `YYYY-MM-DD` for a date written in another common form; `None` when it is already ISO,
/// impossible, or unreadable.
pub(crate) fn normalize_date(text: &str) -> Option<String> {
    let s = text.trim();
    if is_iso_date(s) && s.len() == text.len() {
        return None;
    }
    let (y, m, d) = parse_date(s)?;
    let out = format_date(y, m, d);
    (out != text).then_some(out)
}

/// RFC 3339 for a date-time written in a near form; `None` when it is already RFC 3339,
/// has no time zone (one is never invented), or cannot be read.
pub(crate) fn normalize_date_time(text: &str) -> Option<String> {
    let s = text.trim();
    if s.len() < 16 || is_rfc3339(text) {
        return None;
    }
    let (date, rest) = s.split_at(10);
    let (y, m, d) = iso_parts(date)?;
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    // Time: HH:MM[:SS[.frac]]
    let bytes = rest.as_bytes();
    let two = |i: usize| -> Option<u32> {
        let a = *bytes.get(i)?;
        let b = *bytes.get(i + 1)?;
        (a.is_ascii_digit() && b.is_ascii_digit())
            .then(|| u32::from(a - b'0') * 10 + u32::from(b - b'0'))
    };
    let hh = two(0)?;
    if bytes.get(2) != Some(&b':') {
        return None;
    }
    let mm = two(3)?;
    let mut i = 5;
    let mut ss = 0;
    let mut frac = "";
    if bytes.get(i) == Some(&b':') {
        ss = two(i + 1)?;
        i += 3;
        if bytes.get(i) == Some(&b'.') {
            let start = i;
            i += 1;
            while bytes.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == start + 1 {
                return None;
            }
            frac = &rest[start..i];
        }
    }
    if hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let zone = rest[i..].trim_start();
    let zone = normalize_zone(zone)?;
    let out = format!(
        "{}T{hh:02}:{mm:02}:{ss:02}{frac}{zone}",
        format_date(y, m, d)
    );
    (out != text).then_some(out)
}

/// `Z`, `+HH:MM` from `Z`/`z`/`UTC`/`GMT`/`+HH:MM`/`+HHMM`/`+HH`; `None` when absent or odd.
fn normalize_zone(zone: &str) -> Option<String> {
    if ["Z", "z", "UTC", "utc", "GMT", "gmt"].contains(&zone) {
        return Some("Z".to_owned());
    }
    let (sign, rest) = match zone.as_bytes().first()? {
        b'+' => ('+', &zone[1..]),
        b'-' => ('-', &zone[1..]),
        _ => return None,
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if !digits.bytes().all(|b| b.is_ascii_digit()) || rest.matches(':').count() > 1 {
        return None;
    }
    let (h, m) = match digits.len() {
        2 => (&digits[..2], "00"),
        4 => (&digits[..2], &digits[2..]),
        _ => return None,
    };
    let (hv, mv): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    if hv > 23 || mv > 59 {
        return None;
    }
    Some(format!("{sign}{h}:{m}"))
}

/// True for an RFC 3339 date-time as the `date-time` format accepts it.
pub(crate) fn is_rfc3339(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() < 20 || !matches!(b[10], b'T' | b't') {
        return false;
    }
    let (date, rest) = text.split_at(10);
    let rest = &rest[1..];
    let rb = rest.as_bytes();
    if iso_parts(date).is_none() || rb.len() < 9 || rb[2] != b':' || rb[5] != b':' {
        return false;
    }
    let num = |s: &str| digits(s).unwrap_or(99);
    if num(&rest[0..2]) > 23 || num(&rest[3..5]) > 59 || num(&rest[6..8]) > 60 {
        return false;
    }
    let mut i = 8;
    if rb[i] == b'.' {
        i += 1;
        let start = i;
        while rb.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    let zone = &rest[i..];
    matches!(zone, "Z" | "z")
        || (zone.len() == 6
            && matches!(zone.as_bytes()[0], b'+' | b'-')
            && zone.as_bytes()[3] == b':'
            && num(&zone[1..3]) <= 23
            && num(&zone[4..6]) <= 59)
}

fn format_date(y: u32, m: u32, d: u32) -> String {
    format!("{y:04}-{m:02}-{d:02}")
}

/// True for a valid `YYYY-MM-DD`.
pub(crate) fn is_iso_date(s: &str) -> bool {
    iso_parts(s).is_some()
}

fn iso_parts(s: &str) -> Option<(u32, u32, u32)> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let y = digits(&s[0..4])?;
    let m = digits(&s[5..7])?;
    let d = digits(&s[8..10])?;
    valid(y, m, d).then_some((y, m, d))
}

fn digits(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn valid(y: u32, m: u32, d: u32) -> bool {
    (1..=9999).contains(&y)
        && (1..=12).contains(&m)
        && d >= 1
        && d <= crate::calendar::days_in_month(i64::from(y), m)
}

fn parse_date(s: &str) -> Option<(u32, u32, u32)> {
    // An ISO date followed by a time: keep the date.
    if s.len() > 10 && s.is_char_boundary(10) {
        let (date, rest) = s.split_at(10);
        if let Some(parts) = iso_parts(date)
            && rest.starts_with(['T', 't', ' '])
            && rest.as_bytes().get(1).is_some_and(u8::is_ascii_digit)
        {
            return Some(parts);
        }
    }
    // Compact YYYYMMDD.
    if s.len() == 8 && s.bytes().all(|b| b.is_ascii_digit()) {
        let (y, m, d) = (digits(&s[0..4])?, digits(&s[4..6])?, digits(&s[6..8])?);
        return valid(y, m, d).then_some((y, m, d));
    }
    numeric_date(s).or_else(|| worded_date(s))
}

/// `YYYY/MM/DD`, `YYYY.MM.DD`, `M/D/YYYY` (or `D/M/YYYY` when the first part is above 12),
/// `D.M.YYYY`, `D-M-YYYY` / `M-D-YYYY` like `/`.
fn numeric_date(s: &str) -> Option<(u32, u32, u32)> {
    let sep = s.chars().find(|c| matches!(c, '/' | '.' | '-'))?;
    let parts: Vec<&str> = s.split(sep).collect();
    if parts.len() != 3 || parts.iter().any(|p| p.is_empty() || p.len() > 4) {
        return None;
    }
    let nums: Vec<u32> = parts.iter().map(|p| digits(p)).collect::<Option<_>>()?;
    let (y, m, d) = if parts[0].len() == 4 {
        (nums[0], nums[1], nums[2])
    } else if parts[2].len() == 4 && parts[0].len() <= 2 && parts[1].len() <= 2 {
        let (a, b) = (nums[0], nums[1]);
        let day_first = sep == '.' || a > 12;
        if day_first {
            (nums[2], b, a)
        } else {
            (nums[2], a, b)
        }
    } else {
        // Two-digit years would need an invented century.
        return None;
    };
    valid(y, m, d).then_some((y, m, d))
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

fn month_number(word: &str) -> Option<u32> {
    let w = word.trim_end_matches('.').to_ascii_lowercase();
    if w.len() < 3 {
        return None;
    }
    let w = if w == "sept" { "sep".to_owned() } else { w };
    MONTHS
        .iter()
        .position(|m| *m == w || (w.len() == 3 && m.starts_with(&w)))
        .and_then(|i| u32::try_from(i + 1).ok())
}

fn is_weekday(word: &str) -> bool {
    let w = word.trim_end_matches([',', '.']).to_ascii_lowercase();
    w.len() >= 3
        && WEEKDAYS
            .iter()
            .any(|d| *d == w || (w.len() == 3 && d.starts_with(&w)))
}

/// A day number, allowing English ordinals (`27th`, `1st`).
fn day_number(word: &str) -> Option<u32> {
    let w = word.to_ascii_lowercase();
    let w = ["st", "nd", "rd", "th"]
        .iter()
        .find_map(|suffix| w.strip_suffix(suffix))
        .unwrap_or(&w);
    if w.len() > 2 {
        return None;
    }
    digits(w)
}

/// `27 July 2026`, `27th of July, 2026`, `February 14, 1985`, `Feb 14 1985`,
/// with an optional leading weekday.
fn worded_date(s: &str) -> Option<(u32, u32, u32)> {
    let words: Vec<&str> = s
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty() && !w.eq_ignore_ascii_case("of"))
        .collect();
    let words = match words.first() {
        Some(first) if is_weekday(first) => &words[1..],
        _ => &words[..],
    };
    let [a, b, c] = words else { return None };
    if c.len() != 4 {
        return None;
    }
    let y = digits(c)?;
    let (m, d) = if let Some(m) = month_number(a) {
        (m, day_number(b)?)
    } else {
        (month_number(b)?, day_number(a)?)
    };
    valid(y, m, d).then_some((y, m, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        let cases = [
            ("01/19/2026", Some("2026-01-19")),
            ("19/01/2026", Some("2026-01-19")),
            ("03/04/2026", Some("2026-03-04")),
            ("28.02.2025", Some("2025-02-28")),
            ("20010113", Some("2001-01-13")),
            ("27 July 2026", Some("2026-07-27")),
            ("27th of July, 2026", Some("2026-07-27")),
            ("February 14, 1985", Some("1985-02-14")),
            ("Feb 14 1985", Some("1985-02-14")),
            ("Thursday, February 14, 1985", Some("1985-02-14")),
            ("2026-06-24T00:00:00", Some("2026-06-24")),
            ("2026/06/24", Some("2026-06-24")),
            (" 2026-06-24 ", Some("2026-06-24")),
            ("2026-06-24", None),
            ("2026-02-30", None),
            ("13/13/2026", None),
            ("02/30/2026", None),
            ("01/19/26", None),
            ("20011313", None),
            ("tomorrow", None),
            ("30 Febuary 2026", None),
        ];
        for (input, want) in cases {
            assert_eq!(normalize_date(input).as_deref(), want, "{input}");
        }
    }

    #[test]
    fn date_times() {
        let cases = [
            ("2025-07-02 18:45:00Z", Some("2025-07-02T18:45:00Z")),
            ("2025-07-02T18:45Z", Some("2025-07-02T18:45:00Z")),
            (
                "2025-07-02T18:45:00+0200",
                Some("2025-07-02T18:45:00+02:00"),
            ),
            (
                "2025-07-02T18:45:00.5-05",
                Some("2025-07-02T18:45:00.5-05:00"),
            ),
            ("2025-07-02T18:45:00 UTC", Some("2025-07-02T18:45:00Z")),
            ("2025-07-02T18:45:00Z", None),
            ("2025-07-02t18:45:00z", None),
            ("2025-07-02T18:45:00+02:00", None),
            ("2025-07-02T18:45:00", None),
            ("2025-07-02 18:45", None),
            ("2025-13-02T18:45:00Z", None),
            ("2025-07-02T25:45:00Z", None),
        ];
        for (input, want) in cases {
            assert_eq!(normalize_date_time(input).as_deref(), want, "{input}");
        }
    }
}
