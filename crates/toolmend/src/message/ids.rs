//! The one id rule. Every front and `history::sanitize` settle call ids with it:
//!
//! - an id is at most [`MAX_ID_LEN`] (40) characters, OpenAI's limit;
//! - a call without a usable id (none, empty, blanks) gets `call_tm_{m}_{c}`: `m` the
//!   message's index in the conversation, `c` the call's place in the message, so the same
//!   conversation always mints the same ids and two turns never mint the same one;
//! - an id already taken (by an earlier call of the message or of the history) becomes
//!   `{id}_2`, `{id}_3` … (the smallest free suffix; the base cut so the whole fits);
//! - an id longer than 40 characters becomes its first 31 characters, `_` and 8 hex
//!   digits of its hash (FNV-1a), so two long ids that share a prefix stay apart;
//! - a part split off a glued call takes its call's id with the next free suffix.
//!
//! Deterministic and linear: taken candidates are skipped by a per-base counter, so
//! renaming n calls to the same base costs O(n), not O(n²).

use std::collections::{HashMap, HashSet};

/// OpenAI refuses call ids longer than this (characters).
pub use crate::history::MAX_ID_LEN;

/// The stem of minted ids.
pub const MINT_STEM: &str = "call_tm";

/// Ids in use outside the allocator's own set (the history a message belongs to).
pub trait IdSet: Sync {
    /// True when `id` is taken.
    fn contains(&self, id: &str) -> bool;
}

impl IdSet for HashSet<String> {
    fn contains(&self, id: &str) -> bool {
        HashSet::contains(self, id)
    }
}

impl IdSet for HashSet<&str> {
    fn contains(&self, id: &str) -> bool {
        HashSet::contains(self, id)
    }
}

/// No ids outside.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoIds;

impl IdSet for NoIds {
    fn contains(&self, _: &str) -> bool {
        false
    }
}

/// Hands out ids that clash with none taken: its own set plus an outside [`IdSet`].
pub struct IdAllocator<'o> {
    taken: HashSet<String>,
    outside: &'o dyn IdSet,
    /// Per (cut base, digit count): every candidate of that class below the value is taken.
    next_suffix: HashMap<(String, u32), usize>,
}

impl std::fmt::Debug for IdAllocator<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdAllocator")
            .field("taken", &self.taken.len())
            .finish_non_exhaustive()
    }
}

impl Default for IdAllocator<'static> {
    fn default() -> Self {
        IdAllocator::new(&NoIds)
    }
}

impl<'o> IdAllocator<'o> {
    /// An allocator that also avoids every id of `outside`.
    pub fn new(outside: &'o dyn IdSet) -> Self {
        IdAllocator {
            taken: HashSet::new(),
            outside,
            next_suffix: HashMap::new(),
        }
    }

    /// Marks `id` taken; false when it already was (here or outside).
    pub fn reserve(&mut self, id: &str) -> bool {
        if self.outside.contains(id) {
            return false;
        }
        self.taken.insert(id.to_owned())
    }

    /// True when `id` is taken (here or outside).
    pub fn is_taken(&self, id: &str) -> bool {
        self.taken.contains(id) || self.outside.contains(id)
    }

    /// `stem` (cut to 40 characters) if free, else `{base}_{n}` with the smallest free
    /// `n >= 2`; the id is then taken.
    pub fn fresh(&mut self, stem: &str) -> String {
        let whole = truncate_chars(stem, MAX_ID_LEN);
        if !self.is_taken(whole) {
            let id = whole.to_owned();
            self.taken.insert(id.clone());
            return id;
        }
        self.suffixed(stem, 2)
    }

    /// The id for call `call` of the message at `message` that had none.
    pub fn minted(&mut self, message: usize, call: usize) -> String {
        self.fresh(&format!("{MINT_STEM}_{message}_{call}"))
    }

    /// A new id for `id`, which is taken or too long.
    pub fn renamed(&mut self, id: &str) -> String {
        if is_too_long(id) {
            self.fresh(&shorten(id))
        } else {
            self.suffixed(id, 2)
        }
    }

    /// `{base}_{n}`, the smallest free `n >= start`, the base cut so the whole fits.
    fn suffixed(&mut self, stem: &str, start: usize) -> String {
        // `n` runs through the classes of 1, 2, 3 … digits; within a class the cut base is
        // the same for every `n`, and the search resumes where the last one stopped.
        let mut digits: u32 = 1;
        let mut start = start;
        loop {
            let end = 10usize.checked_pow(digits).unwrap_or(usize::MAX);
            if start < end {
                let base = truncate_chars(stem, MAX_ID_LEN.saturating_sub(digits as usize + 1));
                let key = (base.to_owned(), digits);
                let mut n = self
                    .next_suffix
                    .get(&key)
                    .copied()
                    .unwrap_or(start)
                    .max(start);
                while n < end {
                    let candidate = format!("{base}_{n}");
                    n += 1;
                    if !self.is_taken(&candidate) {
                        self.next_suffix.insert(key, n);
                        self.taken.insert(candidate.clone());
                        return candidate;
                    }
                }
                self.next_suffix.insert(key, end);
            }
            digits += 1;
            start = start.max(end);
        }
    }
}

/// Fresh ids that are unique across processes and ordered by time, for an id a session
/// already used in a turn the history no longer shows: `call_tm_` + 10 characters of
/// milliseconds since 1970 (Crockford base 32, so text order is time order) + 4 of a
/// per-process counter + 8 of the process's own random tag. 30 characters in all.
#[derive(Debug)]
pub struct TimeOrderedIds {
    tag: String,
    counter: std::sync::atomic::AtomicU32,
}

const CROCKFORD: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

fn base32(mut v: u64, width: usize, out: &mut String) {
    let mut buf = vec![b'0'; width];
    for slot in buf.iter_mut().rev() {
        *slot = CROCKFORD[(v & 31) as usize];
        v >>= 5;
    }
    out.extend(buf.into_iter().map(char::from));
}

impl Default for TimeOrderedIds {
    fn default() -> Self {
        TimeOrderedIds::new()
    }
}

impl TimeOrderedIds {
    /// A generator whose tag mixes the process id, the start time and an address: two
    /// processes (or two generators) started in the same nanosecond still differ.
    pub fn new() -> Self {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        let mut tag = String::with_capacity(8);
        base32(h.finish(), 8, &mut tag);
        TimeOrderedIds {
            tag,
            counter: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// The next id.
    pub fn next_id(&self) -> String {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let n = self
            .counter
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut id = String::with_capacity(30);
        id.push_str(MINT_STEM);
        id.push('_');
        base32(ms, 10, &mut id);
        base32(u64::from(n & 0xf_ffff), 4, &mut id);
        id.push_str(&self.tag);
        id
    }
}

/// True for an id that is no id: empty or blanks.
pub fn is_blank_id(id: &str) -> bool {
    id.trim().is_empty()
}

/// True for an id longer than [`MAX_ID_LEN`] characters.
pub fn is_too_long(id: &str) -> bool {
    id.len() > MAX_ID_LEN && id.chars().nth(MAX_ID_LEN).is_some()
}

/// A long id cut to 31 characters plus `_` and 8 hex digits of its hash: 40 in all.
pub fn shorten(id: &str) -> String {
    format!("{}_{:08x}", truncate_chars(id, MAX_ID_LEN - 9), fnv1a(id))
}

/// FNV-1a, 32 bits: stable across platforms and Rust versions.
fn fnv1a(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5, |h: u32, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The first `max` characters of `s`.
fn truncate_chars(s: &str, max: usize) -> &str {
    s.char_indices().nth(max).map_or(s, |(at, _)| &s[..at])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taken_ids_get_the_smallest_free_suffix() {
        let mut ids = IdAllocator::default();
        assert!(ids.reserve("call_1"));
        assert!(ids.reserve("call_1_2"));
        assert!(!ids.reserve("call_1"));
        assert_eq!(ids.renamed("call_1"), "call_1_3");
        assert_eq!(ids.renamed("call_1"), "call_1_4");
        assert_eq!(ids.fresh("other"), "other");
        assert_eq!(ids.fresh("other"), "other_2");
    }

    #[test]
    fn minted_ids_name_the_message_and_the_call() {
        let outside: HashSet<String> = ["call_tm_3_0".to_owned()].into();
        let mut ids = IdAllocator::new(&outside);
        assert_eq!(ids.minted(3, 0), "call_tm_3_0_2");
        assert_eq!(ids.minted(3, 1), "call_tm_3_1");
    }

    #[test]
    fn long_ids_are_cut_with_a_hash_and_stay_apart() {
        let mut ids = IdAllocator::default();
        let a = format!("{}a", "x".repeat(60));
        let b = format!("{}b", "x".repeat(60));
        let (ra, rb) = (ids.renamed(&a), ids.renamed(&b));
        assert_eq!(ra.chars().count(), MAX_ID_LEN);
        assert_eq!(rb.chars().count(), MAX_ID_LEN);
        assert_ne!(ra, rb);
        // Multi-byte characters count as characters, and are never split.
        let wide = "é".repeat(50);
        let r = ids.renamed(&wide);
        assert_eq!(r.chars().count(), MAX_ID_LEN);
        assert!(!is_too_long(&"é".repeat(40)));
        assert!(is_too_long(&"é".repeat(41)));
    }

    #[test]
    fn a_suffix_never_pushes_an_id_past_forty() {
        let mut ids = IdAllocator::default();
        let base = "y".repeat(40);
        ids.reserve(&base);
        for _ in 0..120 {
            let id = ids.renamed(&base);
            assert!(id.chars().count() <= MAX_ID_LEN, "{id}");
        }
    }

    #[test]
    fn renaming_many_calls_to_one_base_is_linear() {
        // 1x vs 10x: the counter resumes, so 10x the calls cost about 10x, not 100x.
        let rename = |n: usize| {
            let mut ids = IdAllocator::default();
            ids.reserve("dup");
            for _ in 0..n {
                std::hint::black_box(ids.renamed("dup"));
            }
        };
        crate::work::assert_linear("IdAllocator::renamed", 2_000, 20_000, rename);
    }
}
