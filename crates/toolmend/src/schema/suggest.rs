//! Did-you-mean: matching a key the schema does not know to one it does.
//!
//! Keys are compared as tokens (`timeoutSeconds`, `timeout-seconds`, `TimeoutSeconds` and
//! `timeout_seconds` all read `timeout seconds`). A key scores against a property in tiers,
//! best first:
//!
//! | tier | example | score |
//! | --- | --- | --- |
//! | same tokens | `TimeoutSeconds` -> `timeout_seconds` | 1.0 |
//! | same tokens, other order | `seconds_timeout` -> `timeout_seconds` | 0.96 |
//! | synonym table | `max_rows` -> `limit`, `town` -> `city` | 0.95 |
//! | token containment | `forecast_days` -> `days`, `customer` -> `customer_id` | 0.85–0.95 |
//! | abbreviation | `temp` -> `target_temperature`, `lang` -> `language` | 0.75–0.84 |
//! | acronym | `dob` -> `birth_date` ("Date of birth") | 0.80 |
//! | Jaro-Winkler >= 0.85, length within 2 | `citty` -> `city` | 0.50–0.80 |
//!
//! A rename needs one best candidate with a strictly better score than the next; a property
//! two keys compete for gets neither.

use std::borrow::Cow;

/// Words that mean the same key in tool schemas. Every member of a group matches every other.
const SYNONYMS: &[&[&str]] = &[
    &[
        "limit",
        "max_rows",
        "max_results",
        "top_k",
        "count",
        "max_count",
        "max_items",
        "num_results",
        "number_of_results",
        "page_size",
        "n",
        "k",
    ],
    &["content", "text", "body", "data", "contents"],
    &["labels", "tags", "label"],
    &["city", "town", "city_name"],
    &[
        "query",
        "q",
        "search",
        "search_query",
        "query_string",
        "search_term",
        "search_terms",
        "keywords",
    ],
    &["language", "lang", "locale"],
    &["path", "file", "filename", "file_path", "filepath"],
    &["url", "link", "uri", "href"],
    &["email", "email_address", "mail", "e_mail"],
    &["to", "recipient", "recipients"],
    &["description", "desc", "details"],
    &["start", "start_time", "begin", "starts_at"],
    &["end", "end_time", "finish", "ends_at"],
    &["phone", "phone_number", "telephone", "tel", "mobile"],
    &["message", "msg"],
    &["title", "subject", "heading"],
    &["id", "identifier"],
    &["price", "cost"],
];

/// Tokens that only qualify a name: a key may leave them out (`customer` for `customer_id`,
/// `reminder` for `reminder_minutes`). A key that leaves out anything else (`page` for
/// `page_size`) is not taken for the property.
const QUALIFIERS: &[&str] = &[
    "id", "ids", "key", "name", "names", "code", "type", "kind", "value", "values", "text",
    "number", "num", "no", "count", "amount", "list", "url", "uri", "path", "date", "time", "at",
    "on", "ms", "millis", "seconds", "secs", "sec", "minutes", "mins", "min", "hours", "days",
    "weeks", "months", "years", "percent", "pct", "flag", "enabled",
];

/// Keys models add to talk about the call rather than to make it (`"reasoning": "…"`,
/// `"note": "assumed defaults"`). They are taken for a property only when they name it
/// exactly (up to case style), never by alias or spelling: `note` is not `notes`.
const CHATTER: &[&str] = &[
    "note",
    "reasoning",
    "reason",
    "thought",
    "thoughts",
    "thinking",
    "explanation",
    "rationale",
    "justification",
    "confidence",
    "comment",
    "analysis",
    "reflection",
    "step",
    "user_intent",
    "intent",
    "tool_name",
    "function_name",
];

/// Names that say a key holds no argument: a placeholder or a leftover (`"unknown":
/// "ignored"`, `"extra": …`, `"foo": …`). With a leading `_` (`_note`, `_debug`) a key is
/// private by the usual convention too. Such a key is never moved onto a missing key by
/// the structure alone (it may still name a property outright).
const PLACEHOLDERS: &[&str] = &[
    "unknown",
    "extra",
    "other",
    "misc",
    "dummy",
    "placeholder",
    "unused",
    "ignored",
    "ignore",
    "test",
    "tmp",
    "temp",
    "foo",
    "bar",
    "baz",
];

const STOPWORDS: &[&str] = &[
    "a", "an", "the", "of", "for", "to", "in", "on", "at", "and", "or",
];

const _: () = assert!(SYNONYMS.len() <= 32);

/// Words of a description read for matching (its opening, where the property is named).
const MAX_DESCRIPTION_WORDS: usize = 40;

/// How a key was matched to a property; decides the fix recorded and its safety.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Via {
    /// The same tokens in another case or separator style (`departDate` -> `depart_date`).
    Case,
    /// A typo: at most two edits (`adress` -> `address`).
    Spelling,
    /// A synonym, abbreviation, acronym, reordering, or a qualifier left out.
    Alias,
    /// The key names the property's head word, the rest of the name qualifying it
    /// (`notes` -> `delivery_notes`, `label` -> `shipping_label`).
    Tokens,
    /// The key's words are in the property's description (`arrival_city` -> `dest`,
    /// "City of arrival").
    Description,
    /// The one required field missing, the one unknown key beside it, its value fitting.
    Structure,
}

/// A light stem: plural endings off (`requests` -> `request`, `cities` -> `city`), so that
/// the singular and the plural of a word compare equal. Short words and `-ss` stay.
pub(crate) fn stem(t: &str) -> String {
    if t.len() > 4
        && let Some(base) = t.strip_suffix("ies")
    {
        return format!("{base}y");
    }
    if t.len() > 3 && t.ends_with('s') && !t.ends_with("ss") && !t.ends_with("us") {
        return t[..t.len() - 1].to_owned();
    }
    t.to_owned()
}

/// Splits a key into lower-case tokens at `_`, `-`, spaces, dots and camelCase boundaries.
pub(crate) fn tokens(key: &str) -> Vec<String> {
    let chars: Vec<char> = key.chars().collect();
    let mut out = Vec::new();
    let mut cur = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if matches!(c, '_' | '-' | ' ' | '.' | '/' | ':') {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if c.is_uppercase() && !cur.is_empty() {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
                out.push(std::mem::take(&mut cur));
            }
        }
        cur.extend(c.to_lowercase());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// A schema property as the matcher sees it.
#[derive(Debug, Clone)]
pub(crate) struct Candidate<'a> {
    pub name: &'a str,
    data: Cow<'a, CandidateData>,
}

/// What the matcher reads of a property name (and description), computed once.
#[derive(Debug, Clone)]
pub(crate) struct CandidateData {
    tokens: Vec<String>,
    /// `tokens` stemmed ([`stem`]).
    stems: Vec<String>,
    /// The stemmed content words of the description (stopwords left out), at most
    /// [`MAX_DESCRIPTION_WORDS`].
    described: Vec<String>,
    norm: String,
    acronyms: Vec<String>,
    /// The [`SYNONYMS`] groups `norm` belongs to, one bit per group.
    synonyms: u32,
}

impl CandidateData {
    pub(crate) fn new(name: &str, description: Option<&str>) -> Self {
        let tokens = tokens(name);
        let norm = tokens.join("_");
        let mut acronyms = Vec::new();
        if tokens.len() >= 2 {
            acronyms.push(initials(tokens.iter().map(String::as_str)));
        }
        if let Some(desc) = description {
            // The description's first clause only ("Date of birth, as YYYY-MM-DD").
            let clause = desc.split([',', '.', ';', '(', ':']).next().unwrap_or("");
            let words: Vec<&str> = clause
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .collect();
            if (2..=5).contains(&words.len()) {
                acronyms.push(initials(words.iter().copied()));
                let content: Vec<&str> = words
                    .iter()
                    .copied()
                    .filter(|w| !STOPWORDS.contains(&w.to_lowercase().as_str()))
                    .collect();
                if content.len() >= 2 {
                    acronyms.push(initials(content.into_iter()));
                }
            }
        }
        let synonyms = synonym_groups(&norm);
        let stems = tokens.iter().map(|t| stem(t)).collect();
        let mut described: Vec<String> = Vec::new();
        for w in description
            .unwrap_or("")
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .take(MAX_DESCRIPTION_WORDS)
        {
            let w = stem(&w.to_lowercase());
            if !STOPWORDS.contains(&w.as_str()) && !described.contains(&w) {
                described.push(w);
            }
        }
        CandidateData {
            tokens,
            stems,
            described,
            norm,
            acronyms,
            synonyms,
        }
    }
}

impl<'a> Candidate<'a> {
    pub(crate) fn new(name: &'a str, description: Option<&str>) -> Self {
        Candidate {
            name,
            data: Cow::Owned(CandidateData::new(name, description)),
        }
    }

    /// A candidate from data computed before (by [`CandidateData::new`] for `name`).
    pub(crate) fn borrowed(name: &'a str, data: &'a CandidateData) -> Self {
        Candidate {
            name,
            data: Cow::Borrowed(data),
        }
    }
}

/// One bit per [`SYNONYMS`] group that lists `norm`.
fn synonym_groups(norm: &str) -> u32 {
    let mut bits = 0;
    for (i, g) in SYNONYMS.iter().enumerate() {
        if g.contains(&norm) {
            bits |= 1 << i;
        }
    }
    bits
}

fn initials<'w>(words: impl Iterator<Item = &'w str>) -> String {
    words
        .filter_map(|w| w.chars().next())
        .flat_map(char::to_lowercase)
        .collect()
}

/// A key to match, tokenised once.
#[derive(Debug, Clone)]
pub(crate) struct Key {
    tokens: Vec<String>,
    /// `tokens` stemmed ([`stem`]).
    stems: Vec<String>,
    norm: String,
    /// The [`SYNONYMS`] groups `norm` belongs to, one bit per group.
    synonyms: u32,
    /// `norm` is one of [`CHATTER`].
    chatter: bool,
    /// `norm` is one of [`PLACEHOLDERS`], or the key starts with `_`.
    placeholder: bool,
}

impl Key {
    pub(crate) fn new(key: &str) -> Self {
        let tokens = tokens(key);
        let norm = tokens.join("_");
        let synonyms = synonym_groups(&norm);
        let chatter = CHATTER.contains(&norm.as_str());
        let placeholder = key.starts_with('_') || PLACEHOLDERS.contains(&norm.as_str());
        let stems = tokens.iter().map(|t| stem(t)).collect();
        Key {
            tokens,
            stems,
            norm,
            synonyms,
            chatter,
            placeholder,
        }
    }

    /// True when both keys have the same tokens (`timeoutSeconds` ~ `timeout_seconds`).
    pub(crate) fn same_key(&self, other: &Key) -> bool {
        !self.norm.is_empty() && self.norm == other.norm
    }

    /// True when the key names `cand` in another case style.
    pub(crate) fn same_as(&self, cand: &Candidate<'_>) -> bool {
        !self.norm.is_empty() && self.norm == cand.data.norm
    }

    /// True for a key models add to talk about the call ([`CHATTER`]): never given a
    /// property by anything but its exact name.
    pub(crate) fn is_chatter(&self) -> bool {
        self.chatter
    }

    /// True for a key whose name says it holds no argument ([`PLACEHOLDERS`], a leading
    /// `_`): the structure alone never gives it a property.
    pub(crate) fn is_placeholder(&self) -> bool {
        self.placeholder
    }
}

/// How well `key` names `cand`, in `0.0..=1.0`; `0.0` is no match.
pub(crate) fn score(key: &Key, cand: &Candidate<'_>) -> f64 {
    let cand = &*cand.data;
    if key.norm.is_empty() || cand.norm.is_empty() {
        return 0.0;
    }
    if key.norm == cand.norm {
        return 1.0;
    }
    if key.chatter {
        return 0.0;
    }
    let mut best: f64 = 0.0;
    let kt = &key.tokens;
    let pt = &cand.tokens;
    let common = kt.iter().filter(|t| pt.contains(t)).count();
    let key_in_prop = kt.iter().all(|t| pt.contains(t));
    let prop_in_key = pt.iter().all(|t| kt.contains(t));
    if key_in_prop && prop_in_key {
        best = best.max(0.96);
    }
    if key.synonyms & cand.synonyms != 0 {
        best = best.max(0.95);
    }
    // A key may drop qualifiers of the property's name (`customer` -> `customer_id`) or
    // add its own words (`forecast_days` -> `days`).
    let drops_only_qualifiers = pt
        .iter()
        .filter(|t| !kt.contains(t))
        .all(|t| QUALIFIERS.contains(&t.as_str()));
    if common > 0 && ((key_in_prop && drops_only_qualifiers) || prop_in_key) {
        let union = kt.len() + pt.len() - common;
        #[allow(clippy::cast_precision_loss)]
        let jaccard = common as f64 / union as f64;
        best = best.max(0.85 + 0.1 * jaccard.min(0.99));
    }
    if let Some(s) = abbreviation(kt, pt) {
        best = best.max(s);
    }
    if kt.len() == 1 && (2..=5).contains(&key.norm.len()) && cand.acronyms.contains(&key.norm) {
        best = best.max(0.80);
    }
    // Spelling: a typo changes a character or two, not a whole word (`page` is not a
    // misspelt `page_size`).
    if key.norm.len().abs_diff(cand.norm.len()) <= 2 {
        let jw = strsim::jaro_winkler(&key.norm, &cand.norm);
        if jw >= 0.85 {
            best = best.max(0.5 + 0.3 * (jw - 0.85) / 0.15);
        }
    }
    best
}

/// Every key token abbreviates a distinct property token, in order (`temp` ->
/// `target_temperature`, `lang` -> `language`, `qty` -> `quantity`).
fn abbreviation(kt: &[String], pt: &[String]) -> Option<f64> {
    if kt.is_empty() || kt.len() > pt.len() {
        return None;
    }
    let mut j = 0;
    let mut all_prefix = true;
    let mut mapped = 0usize;
    for k in kt {
        let mut found = false;
        while j < pt.len() {
            let p = &pt[j];
            j += 1;
            if k == p {
                found = true;
                mapped += 1;
                break;
            }
            if k.len() >= 3 && k.len() < p.len() && p.starts_with(k.as_str()) {
                found = true;
                mapped += 1;
                break;
            }
            if k.len() >= 3 && k.len() < p.len() && is_subsequence(k, p) {
                found = true;
                all_prefix = false;
                mapped += 1;
                break;
            }
        }
        if !found {
            return None;
        }
    }
    // Only an abbreviation if at least one token was shortened.
    if kt.iter().all(|k| pt.contains(k)) {
        return None;
    }
    #[allow(clippy::cast_precision_loss)]
    let coverage = mapped as f64 / pt.len() as f64;
    let base = if all_prefix { 0.80 } else { 0.75 };
    Some(base + 0.04 * coverage)
}

/// `k` is a subsequence of `p` starting at the same letter (`qty` in `quantity`).
fn is_subsequence(k: &str, p: &str) -> bool {
    if k.chars().next() != p.chars().next() {
        return false;
    }
    let mut it = p.chars();
    k.chars().all(|c| it.any(|x| x == c))
}

/// How a match of `key` to `cand` by [`score`] was made: a case style, a typo, or an alias.
pub(crate) fn via(key: &Key, cand: &Candidate<'_>) -> Via {
    let c = &*cand.data;
    if key.norm == c.norm {
        return Via::Case;
    }
    let same_words = key.tokens.len() == c.tokens.len()
        && key
            .tokens
            .iter()
            .zip(&c.tokens)
            .filter(|(a, b)| a != b)
            .count()
            == 1;
    // A typo: every word but one the same (or one word), that one two edits away at most,
    // and long enough that two edits do not make another word.
    if key.synonyms & c.synonyms == 0
        && (same_words || key.tokens.len() == 1 && c.tokens.len() == 1)
        && key.norm.len() >= 5
        && strsim::levenshtein(&key.norm, &c.norm) <= 2
        && !key.stems.iter().all(|t| c.stems.contains(t))
    {
        return Via::Spelling;
    }
    Via::Alias
}

/// The weaker readings, tried only when [`score`] finds nothing: the key names the head
/// word of the property ([`Via::Tokens`]), or its words are in the property's description
/// ([`Via::Description`]). Words compare stemmed. `0.0` is no match.
pub(crate) fn weak_score(key: &Key, cand: &Candidate<'_>) -> (f64, Via) {
    let c = &*cand.data;
    if key.chatter || key.stems.is_empty() || c.stems.is_empty() {
        return (0.0, Via::Tokens);
    }
    let ks = &key.stems;
    // Head word: the property's last word is the key's last word, and every key word is in
    // the name (`requests` -> `special_requests`); `page` is not `page_size`.
    if ks.len() < c.stems.len()
        && ks.iter().all(|t| c.stems.contains(t))
        && ks.last() == c.stems.last()
    {
        #[allow(clippy::cast_precision_loss)]
        let coverage = ks.len() as f64 / c.stems.len() as f64;
        return (0.6 + 0.1 * coverage, Via::Tokens);
    }
    // Description: every word of the key in the name or the description, one at least in
    // the description, and one that is not a mere qualifier.
    let in_desc = ks.iter().filter(|t| c.described.contains(t)).count();
    let all_known = ks
        .iter()
        .all(|t| c.described.contains(t) || c.stems.contains(t));
    let distinctive = ks
        .iter()
        .any(|t| c.described.contains(t) && !QUALIFIERS.contains(&t.as_str()));
    if in_desc > 0 && all_known && distinctive {
        #[allow(clippy::cast_precision_loss)]
        let share = in_desc as f64 / ks.len() as f64;
        return (0.4 + 0.1 * share, Via::Description);
    }
    (0.0, Via::Tokens)
}

/// The candidates tied for the best score (strong, else weak) among the eligible ones;
/// one name is a clear reading, two or more a choice to put back to the model.
pub(crate) fn contenders(
    key: &Key,
    cands: &[Candidate<'_>],
    mut eligible: impl FnMut(usize) -> bool,
) -> Vec<usize> {
    let mut strong: Vec<(usize, f64)> = Vec::new();
    let mut weak: Vec<(usize, f64)> = Vec::new();
    for (i, c) in cands.iter().enumerate() {
        if !eligible(i) {
            continue;
        }
        let s = score(key, c);
        if s > 0.0 {
            strong.push((i, s));
        } else {
            let (w, _) = weak_score(key, c);
            if w > 0.0 {
                weak.push((i, w));
            }
        }
    }
    let pool = if strong.is_empty() { weak } else { strong };
    let best = pool.iter().map(|(_, s)| *s).fold(0.0_f64, f64::max);
    pool.into_iter()
        .filter(|(_, s)| best - *s < 1e-9)
        .map(|(i, _)| i)
        .collect()
}

/// The index of the single best candidate (score > 0, strictly above the runner-up).
pub(crate) fn best_unique(
    key: &Key,
    cands: &[Candidate<'_>],
    mut eligible: impl FnMut(usize) -> bool,
) -> Option<(usize, f64)> {
    let mut best: Option<(usize, f64)> = None;
    let mut runner_up = 0.0_f64;
    for (i, cand) in cands.iter().enumerate() {
        let s = score(key, cand);
        if s <= 0.0 || !eligible(i) {
            continue;
        }
        match best {
            Some((_, b)) if s > b => {
                runner_up = b;
                best = Some((i, s));
            }
            Some(_) => runner_up = runner_up.max(s),
            None => best = Some((i, s)),
        }
    }
    best.filter(|(_, b)| *b > runner_up)
}

/// [`best_unique`] by [`weak_score`].
fn best_unique_weak(
    key: &Key,
    cands: &[Candidate<'_>],
    mut eligible: impl FnMut(usize) -> bool,
) -> Option<(usize, Via)> {
    let mut best: Option<(usize, f64, Via)> = None;
    let mut runner_up = 0.0_f64;
    for (i, cand) in cands.iter().enumerate() {
        let (s, v) = weak_score(key, cand);
        if s <= 0.0 || !eligible(i) {
            continue;
        }
        match best {
            Some((_, b, _)) if s > b => {
                runner_up = b;
                best = Some((i, s, v));
            }
            Some(_) => runner_up = runner_up.max(s),
            None => best = Some((i, s, v)),
        }
    }
    best.filter(|(_, b, _)| *b > runner_up)
        .map(|(i, _, v)| (i, v))
}

/// A display-only did-you-mean: the best unique candidate, or a close spelling.
pub(crate) fn did_you_mean<'c>(key: &str, cands: &'c [Candidate<'c>]) -> Option<&'c str> {
    let k = Key::new(key);
    if let Some((i, _)) = best_unique(&k, cands, |_| true) {
        return Some(cands[i].name);
    }
    // Looser spelling match for display only.
    let mut best: Option<(&str, f64)> = None;
    let mut tie = false;
    for c in cands {
        if k.norm.len().abs_diff(c.data.norm.len()) > 3 {
            continue;
        }
        let jw = strsim::jaro_winkler(&k.norm, &c.data.norm);
        if jw < 0.78 {
            continue;
        }
        match best {
            Some((_, b)) if jw > b => {
                best = Some((c.name, jw));
                tie = false;
            }
            Some((_, b)) if (jw - b).abs() < f64::EPSILON => tie = true,
            Some(_) => {}
            None => best = Some((c.name, jw)),
        }
    }
    if tie {
        return None;
    }
    best.map(|(n, _)| n)
        .or_else(|| best_unique_weak(&k, cands, |_| true).map(|(i, _)| cands[i].name))
}

/// The suggestion of an `unknown_key` issue: `did you mean "city"?`, or, when the schema
/// leaves two readings, both (`did you mean "first_name" or "last_name"? …`).
pub(crate) fn key_suggestion(key: &str, cands: &[Candidate<'_>]) -> Option<String> {
    let k = Key::new(key);
    let tied = contenders(&k, cands, |_| true);
    if tied.len() >= 2 {
        let names: Vec<String> = tied
            .iter()
            .map(|&i| format!("\"{}\"", cands[i].name))
            .collect();
        let (last, rest) = names.split_last()?;
        return Some(format!(
            "did you mean {} or {last}? send the value under the key it is for",
            rest.join(", ")
        ));
    }
    did_you_mean(key, cands).map(|s| format!("did you mean \"{s}\"?"))
}

/// Plans renames for `unknown` keys onto `cands`. `available[i]` says whether property `i`
/// may receive a key (it is not present yet); `fits(u, c)` whether unknown key `u`'s value
/// fits (or can be coerced to) candidate `c`. Returns `(unknown index, candidate index)`.
///
/// Case-style matches are resolved first, then aliases against what is still free, then
/// the weaker readings ([`weak_score`]: head word, description). A candidate two keys
/// claim at the same stage is given to neither.
pub(crate) fn plan_renames(
    unknown: &[&str],
    cands: &[Candidate<'_>],
    available: &[bool],
    mut fits: impl FnMut(usize, usize) -> bool,
) -> Vec<(usize, usize, Via)> {
    let keys: Vec<Key> = unknown.iter().map(|k| Key::new(k)).collect();
    let mut taken: Vec<bool> = available.iter().map(|a| !a).collect();
    let mut done = vec![false; keys.len()];
    let mut out = Vec::new();

    // Stage 1: the same tokens in another case style.
    let mut claims: Vec<(usize, usize, Via)> = Vec::new();
    for (u, key) in keys.iter().enumerate() {
        if let Some(c) = cands
            .iter()
            .position(|c| key.same_as(c))
            .filter(|&c| !taken[c] && fits(u, c))
        {
            claims.push((u, c, Via::Case));
        }
    }
    settle(&claims, &mut taken, &mut done, &mut out);

    // Stage 2: aliases, against properties still free.
    claims.clear();
    for (u, key) in keys.iter().enumerate() {
        if done[u] {
            continue;
        }
        if let Some((c, _)) = best_unique(key, cands, |c| !taken[c] && fits(u, c)) {
            claims.push((u, c, via(key, &cands[c])));
        }
    }
    settle(&claims, &mut taken, &mut done, &mut out);

    // Stage 3: the head word, the description (a key no stronger reading took, and with
    // no strong reading of its own anywhere: a tie there is a choice, not a weak match).
    claims.clear();
    for (u, key) in keys.iter().enumerate() {
        if done[u] || cands.iter().any(|c| score(key, c) > 0.0) {
            continue;
        }
        if let Some((c, v)) = best_unique_weak(key, cands, |c| !taken[c] && fits(u, c)) {
            claims.push((u, c, v));
        }
    }
    settle(&claims, &mut taken, &mut done, &mut out);
    out.sort_unstable();
    out
}

fn settle(
    claims: &[(usize, usize, Via)],
    taken: &mut [bool],
    done: &mut [bool],
    out: &mut Vec<(usize, usize, Via)>,
) {
    for &(u, c, v) in claims {
        if claims.iter().filter(|(_, c2, _)| *c2 == c).count() == 1 {
            taken[c] = true;
            done[u] = true;
            out.push((u, c, v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenises_case_styles() {
        for k in [
            "timeoutSeconds",
            "timeout-seconds",
            "TimeoutSeconds",
            "timeout_seconds",
            "Timeout Seconds",
            "TIMEOUT_SECONDS",
        ] {
            assert_eq!(tokens(k), ["timeout", "seconds"], "{k}");
        }
        assert_eq!(tokens("HTTPServerURL"), ["http", "server", "url"]);
        assert_eq!(tokens("maxPrice2"), ["max", "price2"]);
    }

    fn pick(key: &str, props: &[(&str, Option<&str>)]) -> Option<String> {
        let cands: Vec<Candidate<'_>> = props.iter().map(|(n, d)| Candidate::new(n, *d)).collect();
        let avail = vec![true; cands.len()];
        let r = plan_renames(&[key], &cands, &avail, |_, _| true);
        r.first().map(|&(_, c, _)| cands[c].name.to_owned())
    }

    #[test]
    fn aliases() {
        let weather = [
            ("city", None),
            ("country_code", None),
            ("units", None),
            ("days", None),
            ("include_hourly", None),
        ];
        assert_eq!(pick("forecast_days", &weather).as_deref(), Some("days"));
        assert_eq!(pick("town", &weather).as_deref(), Some("city"));
        assert_eq!(pick("citty", &weather).as_deref(), Some("city"));
        assert_eq!(pick("reasoning", &weather), None);
        let invoice = [
            ("customer_id", None),
            ("currency", None),
            ("due_date", None),
            ("send_to_customer", None),
        ];
        assert_eq!(pick("customer", &invoice).as_deref(), Some("customer_id"));
        let profile = [
            ("user_id", None),
            ("birth_date", Some("Date of birth")),
            ("display_name", None),
        ];
        assert_eq!(pick("dob", &profile).as_deref(), Some("birth_date"));
        let thermo = [
            ("device_id", None),
            ("mode", None),
            ("target_temperature", None),
        ];
        assert_eq!(pick("temp", &thermo).as_deref(), Some("target_temperature"));
        let search = [("query", None), ("safe_search", None), ("language", None)];
        assert_eq!(pick("search_query", &search).as_deref(), Some("query"));
        assert_eq!(pick("lang", &search).as_deref(), Some("language"));
        let paging = [("query", None), ("page_size", None), ("user_agent", None)];
        assert_eq!(pick("page", &paging), None);
        assert_eq!(pick("user", &paging), None);
    }

    #[test]
    fn stems_and_weak_readings() {
        assert_eq!(stem("requests"), "request");
        assert_eq!(stem("cities"), "city");
        assert_eq!(stem("address"), "address");
        assert_eq!(stem("status"), "status");
        assert_eq!(stem("bus"), "bus");
        let cargo = [
            ("crate_count", None),
            ("handling_notes", None),
            ("port", Some("Port of loading")),
        ];
        assert_eq!(pick("note", &cargo), None); // chatter never takes a weak reading
        assert_eq!(pick("notes", &cargo).as_deref(), Some("handling_notes"));
        assert_eq!(pick("loading_port", &cargo).as_deref(), Some("port"));
        // `handling` is the modifier of `handling_notes`, not its head.
        assert_eq!(pick("handling", &cargo), None);
    }

    #[test]
    fn ambiguous_is_refused() {
        let props = [("user_id", None), ("account_id", None)];
        assert_eq!(pick("id", &props), None);
        let cands: Vec<Candidate<'_>> = [("days", None)]
            .iter()
            .map(|(n, d)| Candidate::new(n, *d))
            .collect();
        // Two keys competing for one property: neither is renamed.
        let r = plan_renames(&["forecast_days", "num_days"], &cands, &[true], |_, _| true);
        assert!(r.is_empty());
    }
}
