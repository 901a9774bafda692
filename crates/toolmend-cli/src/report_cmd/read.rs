//! Reading event logs: line by line, each line bounded.

use super::*;

/// The longest line read as an event; a longer one is skipped and counted as bad.
pub const MAX_LINE: usize = 1 << 20;
/// Reads one log into `agg`, line by line, each line bounded by [`MAX_LINE`].
pub(super) fn read_log(mut r: impl BufRead, name: &str, agg: &mut Aggregate) -> io::Result<()> {
    let mut buf = Vec::new();
    let mut n: u64 = 0;
    loop {
        buf.clear();
        let (read, too_long) = read_bounded_line(&mut r, &mut buf)?;
        if read == 0 {
            return Ok(());
        }
        n += 1;
        if too_long {
            agg.bad_line(name, n, "longer than 1 MiB".to_owned());
            continue;
        }
        let line = match std::str::from_utf8(&buf) {
            Ok(l) => l.trim(),
            Err(e) => {
                agg.bad_line(name, n, format!("not UTF-8 (byte {})", e.valid_up_to()));
                continue;
            }
        };
        if line.is_empty() {
            continue;
        }
        match serde_json::from_str::<CallEvent>(line) {
            Ok(e) => agg.add(&e),
            Err(e) => agg.bad_line(name, n, format!("not an event: {e}")),
        }
    }
}

/// One line into `buf` (without its newline), at most [`MAX_LINE`] bytes kept; the
/// bytes read, and whether the line was longer (the rest is skipped).
pub(super) fn read_bounded_line(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
) -> io::Result<(usize, bool)> {
    let mut total = 0;
    let mut too_long = false;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok((total, too_long));
        }
        let (take, end) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if buf.len() + take > MAX_LINE {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        let used = take + usize::from(end);
        r.consume(used);
        total += used;
        if end {
            return Ok((total, too_long));
        }
    }
}
