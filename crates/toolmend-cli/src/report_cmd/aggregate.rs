//! The aggregate of the events read: counts per tool, field, kind, model and time, each
//! table capped.

use super::*;

/// Distinct tools kept; more are counted as `(other)`.
pub(super) const MAX_TOOLS: usize = 1000;
/// Distinct (tool, field) pairs kept.
pub(super) const MAX_FIELDS: usize = 5000;
/// Distinct models kept.
pub(super) const MAX_MODELS: usize = 200;
/// Distinct fix or issue kinds kept (the vocabulary has fewer than 100).
pub(super) const MAX_KINDS: usize = 300;
/// Distinct (tool, model) pairs kept.
pub(super) const MAX_PAIRS: usize = 10_000;
/// Time buckets kept while reading; past it the interval widens.
pub(super) const MAX_BUCKETS: usize = 2048;
/// Columns of the time chart, at most.
pub(super) const TIME_COLUMNS: i64 = 60;
/// Bad lines listed on the page (all are counted).
pub(super) const BAD_SAMPLES: usize = 10;
/// The key anything past a cap is counted under.
pub(super) const OTHER: &str = "(other)";

/// Bucket widths, in milliseconds: a minute to a year.
pub(super) const WIDTHS: [i64; 10] = [
    60_000,
    300_000,
    900_000,
    3_600_000,
    21_600_000,
    86_400_000,
    604_800_000,
    2_592_000_000,
    7_776_000_000,
    31_536_000_000,
];

/// How a call ended, as the page groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    /// Valid as sent, nothing done.
    Clean,
    /// Runs after fixes (repaired, corrected, salvaged).
    Mended,
    /// Left with issues (feedback), refused by the guard or dropped as a repeat.
    Unresolved,
}

/// Calls of one group (a tool, a model, everything).
#[derive(Debug, Default, Clone)]
pub(super) struct Counts {
    pub(super) calls: u64,
    pub(super) clean: u64,
    pub(super) repaired: u64,
    pub(super) corrected: u64,
    pub(super) feedback: u64,
    pub(super) dropped: u64,
    pub(super) flooded: u64,
    pub(super) lossy: u64,
}

impl Counts {
    pub(super) fn add(&mut self, e: &CallEvent) -> Status {
        self.calls += 1;
        self.lossy += u64::from(e.lossy);
        match e.outcome.as_str() {
            "feedback" => {
                self.feedback += 1;
                Status::Unresolved
            }
            "dropped" => {
                self.dropped += 1;
                Status::Unresolved
            }
            "flooded" => {
                self.flooded += 1;
                Status::Unresolved
            }
            "corrected" | "salvaged" => {
                self.corrected += 1;
                Status::Mended
            }
            _ if e.is_clean() => {
                self.clean += 1;
                Status::Clean
            }
            _ => {
                self.repaired += 1;
                Status::Mended
            }
        }
    }

    pub(super) fn mended(&self) -> u64 {
        self.repaired + self.corrected
    }

    pub(super) fn unresolved(&self) -> u64 {
        self.feedback + self.dropped + self.flooded
    }

    /// Calls that needed anything: mended or left unresolved.
    pub(super) fn problems(&self) -> u64 {
        self.calls - self.clean
    }
}

/// What one (tool, field) pair saw.
#[derive(Debug, Default)]
pub(super) struct FieldCounts {
    pub(super) calls: u64,
    pub(super) fixes: BTreeMap<String, u64>,
    pub(super) issues: BTreeMap<String, u64>,
}

/// A map that keeps at most `cap` keys; a new key past it is counted under [`OTHER`].
#[derive(Debug)]
pub(super) struct Capped<V> {
    pub(super) map: HashMap<String, V>,
    pub(super) cap: usize,
    /// Entries counted under [`OTHER`] because the cap was reached.
    pub(super) folded: u64,
}

impl<V: Default> Capped<V> {
    pub(super) fn new(cap: usize) -> Self {
        Capped {
            map: HashMap::new(),
            cap,
            folded: 0,
        }
    }

    pub(super) fn entry(&mut self, key: &str) -> &mut V {
        if !self.map.contains_key(key) {
            if self.map.len() >= self.cap {
                self.folded += 1;
                return self.map.entry(OTHER.to_owned()).or_default();
            }
            self.map.insert(key.to_owned(), V::default());
        }
        self.map.entry(key.to_owned()).or_default()
    }
}

/// Clean, mended, unresolved calls of one interval.
pub(super) type Bucket = [u64; 3];

/// Everything the page shows, counted while reading.
#[derive(Debug)]
pub(super) struct Aggregate {
    pub(super) total: Counts,
    pub(super) tools: Capped<Counts>,
    pub(super) fields: Capped<FieldCounts>,
    /// The (tool, field) key's parts, for display.
    pub(super) field_parts: HashMap<String, (String, String)>,
    pub(super) fixes: Capped<u64>,
    pub(super) issues: Capped<u64>,
    pub(super) models: Capped<Counts>,
    /// (model, tool) -> problems, calls.
    pub(super) pairs: Capped<Counts>,
    pub(super) pair_parts: HashMap<String, (String, String)>,
    /// Bucket index (ts / width) -> counts.
    pub(super) buckets: BTreeMap<i64, Bucket>,
    pub(super) width: usize,
    pub(super) first_ts: Option<i64>,
    pub(super) last_ts: Option<i64>,
    pub(super) no_ts: u64,
    pub(super) fronts: BTreeMap<String, u64>,
    pub(super) sessions_seen: bool,
    pub(super) bad: u64,
    pub(super) bad_samples: Vec<String>,
}

impl Default for Aggregate {
    fn default() -> Self {
        Aggregate {
            total: Counts::default(),
            tools: Capped::new(MAX_TOOLS),
            fields: Capped::new(MAX_FIELDS),
            field_parts: HashMap::new(),
            fixes: Capped::new(MAX_KINDS),
            issues: Capped::new(MAX_KINDS),
            models: Capped::new(MAX_MODELS),
            pairs: Capped::new(MAX_PAIRS),
            pair_parts: HashMap::new(),
            buckets: BTreeMap::new(),
            width: 0,
            first_ts: None,
            last_ts: None,
            no_ts: 0,
            fronts: BTreeMap::new(),
            sessions_seen: false,
            bad: 0,
            bad_samples: Vec::new(),
        }
    }
}

/// Text from the log fit for a key: control characters out, at most 120 characters.
pub(super) fn clip(s: &str) -> String {
    let s: String = s.chars().filter(|c| !c.is_control()).take(120).collect();
    if s.is_empty() { "(none)".to_owned() } else { s }
}

impl Aggregate {
    pub(super) fn bad_line(&mut self, file: &str, line: u64, why: String) {
        self.bad += 1;
        if self.bad_samples.len() < BAD_SAMPLES {
            let why: String = why.chars().take(200).collect();
            self.bad_samples.push(format!("{file}:{line}: {why}"));
        }
    }

    pub(super) fn add(&mut self, e: &CallEvent) {
        let status = self.total.add(e);
        let tool = clip(&e.tool);
        let model = e.model.as_deref().map_or_else(|| "(none)".to_owned(), clip);
        self.tools.entry(&tool).add(e);
        self.models.entry(&model).add(e);
        let pair = format!("{model}\u{0}{tool}");
        if !self.pair_parts.contains_key(&pair) && self.pairs.map.len() < self.pairs.cap {
            self.pair_parts
                .insert(pair.clone(), (model.clone(), tool.clone()));
        }
        self.pairs.entry(&pair).add(e);
        *self.fronts.entry(clip(&e.front)).or_default() += 1;
        self.sessions_seen |= e.session.is_some();
        for f in &e.fields {
            let path = clip(&f.path);
            let path = if f.path.is_empty() {
                String::new()
            } else {
                path
            };
            let key = format!("{tool}\u{0}{path}");
            if !self.field_parts.contains_key(&key) && self.fields.map.len() < self.fields.cap {
                self.field_parts
                    .insert(key.clone(), (tool.clone(), path.clone()));
            }
            let fc = self.fields.entry(&key);
            fc.calls += 1;
            for k in &f.fixes {
                let k = kind(k);
                *fc.fixes.entry(k.clone()).or_default() += 1;
                *self.fixes.entry(&k) += 1;
            }
            for k in &f.issues {
                let k = kind(k);
                *fc.issues.entry(k.clone()).or_default() += 1;
                *self.issues.entry(&k) += 1;
            }
        }
        match parse_ts(&e.ts) {
            Some(t) => self.add_time(t, status),
            None => self.no_ts += 1,
        }
    }

    pub(super) fn add_time(&mut self, t: i64, status: Status) {
        self.first_ts = Some(self.first_ts.map_or(t, |f| f.min(t)));
        self.last_ts = Some(self.last_ts.map_or(t, |l| l.max(t)));
        let slot = match status {
            Status::Clean => 0,
            Status::Mended => 1,
            Status::Unresolved => 2,
        };
        self.buckets
            .entry(t.div_euclid(WIDTHS[self.width]))
            .or_default()[slot] += 1;
        while self.buckets.len() > MAX_BUCKETS && self.width + 1 < WIDTHS.len() {
            self.width += 1;
            self.buckets = rebucket(&self.buckets, WIDTHS[self.width - 1], WIDTHS[self.width]);
        }
    }
}

/// A fix or issue kind from the log: a snake_case id, else `(invalid)`.
pub(super) fn kind(k: &str) -> String {
    let ok = !k.is_empty()
        && k.len() <= 64
        && k.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        k.to_owned()
    } else {
        "(invalid)".to_owned()
    }
}

/// `buckets` of `from` ms as buckets of `to` ms (`to` a multiple of `from` or not: each
/// old bucket goes where its start falls).
pub(super) fn rebucket(
    buckets: &BTreeMap<i64, Bucket>,
    from: i64,
    to: i64,
) -> BTreeMap<i64, Bucket> {
    let mut out: BTreeMap<i64, Bucket> = BTreeMap::new();
    for (&i, b) in buckets {
        let slot = out.entry((i * from).div_euclid(to)).or_default();
        for k in 0..3 {
            slot[k] += b[k];
        }
    }
    out
}

/// Sorted most first, ties by key: the page's one order.
pub(super) fn ranked<V>(map: &HashMap<String, V>, count: impl Fn(&V) -> u64) -> Vec<(&String, &V)> {
    let mut v: Vec<(&String, &V)> = map.iter().filter(|(_, v)| count(v) > 0).collect();
    v.sort_by(|a, b| count(b.1).cmp(&count(a.1)).then_with(|| a.0.cmp(b.0)));
    v
}
