//! Loop detection over the history: pure, no store. The history is the truth every
//! instance sees, so these rules need no shared state.
//!
//! A run is the turns since the last user message; a turn is one assistant message with
//! calls. Rules, after OpenRouter's doom-loop counting and OpenHands' stuck detector:
//! - `repeat`: the same call (tool and canonical arguments) in consecutive turns.
//!   Parallel duplicates in one turn count once; turns calling only other tools do not
//!   break a streak; the same tool with other arguments does; so does a changed result
//!   (progress: a poll whose answer moved on is no loop). A refusal (a result beginning
//!   with the flood prefix) is no result: it neither breaks a streak nor counts as one.
//! - `no_progress`: the same call got the same result `n` times in the run, in a row or not.
//! - `ping_pong`: the turns alternate between two call sets, A B A B, with each side's
//!   results unchanged.
//!
//! Work is linear in the history once per message, then bounded per call.

use std::collections::HashMap;

use serde_json::Value;

use super::fingerprint::{fingerprint_text, result_hash};
use crate::conversation::Message;

/// One call of the message being checked.
#[derive(Debug, Clone, Copy)]
pub struct NewCall<'a> {
    /// The tool.
    pub tool: &'a str,
    /// Its fingerprint (after mending).
    pub fingerprint: u64,
}

/// What the history says about one new call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopSignals {
    /// This call included: how many consecutive turns make the same call with unchanged
    /// results (1 = no earlier one). Counted up to the walk's cap.
    pub repeat: u32,
    /// Earlier times in this run the same call returned the same result as its latest.
    pub same_result: u32,
    /// Full A B cycles the turns have alternated, this message completing the last one
    /// (0 = no ping-pong).
    pub ping_pong: u32,
}

/// One past turn: its calls' fingerprints and results.
#[derive(Debug, Default)]
struct Turn<'a> {
    /// (tool, fingerprint, result hash if answered), in call order.
    calls: Vec<(&'a str, u64, Option<u64>)>,
}

impl Turn<'_> {
    fn signature(&self) -> Vec<u64> {
        let mut s: Vec<u64> = self.calls.iter().map(|c| c.1).collect();
        s.sort_unstable();
        s.dedup();
        s
    }

    fn results(&self) -> Vec<(u64, Option<u64>)> {
        let mut r: Vec<(u64, Option<u64>)> = self.calls.iter().map(|c| (c.1, c.2)).collect();
        r.sort_unstable();
        r.dedup();
        r
    }
}

/// The run so far, indexed for the per-call questions.
#[derive(Debug, Default)]
pub struct RunIndex<'a> {
    turns: Vec<Turn<'a>>,
    /// Per tool: (turn, fingerprint) in order.
    by_tool: HashMap<&'a str, Vec<(usize, u64)>>,
    /// Per fingerprint: its latest result.
    last_result: HashMap<u64, u64>,
    /// Per (fingerprint, result): how many times.
    pairs: HashMap<(u64, u64), u32>,
}

/// The number of the current run: user messages so far. A new user message starts a
/// new run (LangChain's `run_limit` counts one invocation, which is one user turn).
pub fn run_number(history: &[Message]) -> u64 {
    history
        .iter()
        .filter(|m| matches!(m, Message::User(_)))
        .count() as u64
}

impl<'a> RunIndex<'a> {
    /// Indexes the turns since the last user message.
    pub fn new(history: &'a [Message]) -> Self {
        let start = history
            .iter()
            .rposition(|m| matches!(m, Message::User(_)))
            .map_or(0, |i| i + 1);
        let run = &history[start..];
        let mut results: HashMap<&str, u64> = HashMap::new();
        for m in run {
            if let Message::Tool(t) = m {
                let text = t.content.text();
                // A refusal is no result: the call did not run, so it shows no progress
                // (else every refusal would reset the streak it answers).
                if super::is_refusal(&text) {
                    continue;
                }
                results
                    .entry(t.call_id.as_str())
                    .or_insert_with(|| result_hash(&text));
            }
        }
        let mut index = RunIndex::default();
        for m in run {
            let Message::Assistant(a) = m else { continue };
            let Some(calls) = a.tool_calls.as_deref().filter(|c| !c.is_empty()) else {
                continue;
            };
            let turn_no = index.turns.len();
            let mut turn = Turn::default();
            for c in calls {
                let fp = fingerprint_text(&c.name, &c.arguments);
                let result = c.id.as_deref().and_then(|id| results.get(id).copied());
                turn.calls.push((c.name.as_str(), fp, result));
                index
                    .by_tool
                    .entry(c.name.as_str())
                    .or_default()
                    .push((turn_no, fp));
                if let Some(r) = result {
                    index.last_result.insert(fp, r);
                    *index.pairs.entry((fp, r)).or_default() += 1;
                }
            }
            index.turns.push(turn);
        }
        index
    }

    /// Past turns in the run.
    pub fn turns(&self) -> usize {
        self.turns.len()
    }

    /// The signals for each of `calls` (the new message), walking back at most `cap`
    /// turns for `repeat`.
    pub fn signals(&self, calls: &[NewCall<'_>], cap: u32) -> Vec<LoopSignals> {
        let ping_pong = self.ping_pong(calls);
        calls
            .iter()
            .map(|c| LoopSignals {
                repeat: self.repeat(c, cap),
                same_result: self
                    .last_result
                    .get(&c.fingerprint)
                    .and_then(|r| self.pairs.get(&(c.fingerprint, *r)))
                    .copied()
                    .unwrap_or(0),
                ping_pong,
            })
            .collect()
    }

    fn repeat(&self, call: &NewCall<'_>, cap: u32) -> u32 {
        let Some(entries) = self.by_tool.get(call.tool) else {
            return 1;
        };
        let mut streak = 1u32;
        // The latest real result in the streak (refused or unanswered calls have none).
        let mut newer_result: Option<u64> = None;
        let mut i = entries.len();
        while i > 0 && streak < cap {
            // The entries of one turn for this tool.
            let turn = entries[i - 1].0;
            let mut j = i;
            while j > 0 && entries[j - 1].0 == turn {
                j -= 1;
            }
            let has_same = entries[j..i].iter().any(|e| e.1 == call.fingerprint);
            if !has_same {
                // The same tool with other arguments: the streak ends.
                break;
            }
            let result = self.turns[turn]
                .calls
                .iter()
                .find(|c| c.1 == call.fingerprint)
                .and_then(|c| c.2);
            if let Some(r) = result {
                if newer_result.is_some_and(|newer| newer != r) {
                    // The result changed between these two: progress.
                    break;
                }
                newer_result = Some(r);
            }
            streak += 1;
            i = j;
        }
        streak
    }

    /// Cycles of A B alternation the turns show, counting the new message as the last.
    fn ping_pong(&self, calls: &[NewCall<'_>]) -> u32 {
        let n = self.turns.len();
        if n < 3 {
            return 0;
        }
        let mut now: Vec<u64> = calls.iter().map(|c| c.fingerprint).collect();
        now.sort_unstable();
        now.dedup();
        let sigs: Vec<Vec<u64>> = self.turns.iter().map(Turn::signature).collect();
        if sigs[n - 2] != now || sigs[n - 1] == now {
            return 0;
        }
        // Length of the alternating suffix, the new message included.
        let mut len = 2usize; // sigs[n-1], now
        let mut k = n - 1; // the earliest turn in the suffix so far
        while k >= 1 {
            let earlier = k - 1;
            let same_phase = earlier + 2; // index of the turn two later
            let matches = if same_phase == n {
                sigs[earlier] == now
            } else {
                sigs[earlier] == sigs[same_phase]
                    && self.turns[earlier].results() == self.turns[same_phase].results()
            };
            if !matches {
                break;
            }
            len += 1;
            k = earlier;
        }
        u32::try_from(len / 2).unwrap_or(u32::MAX)
    }
}

/// Fingerprint of a new call whose mended arguments may be missing (then `null`).
pub fn new_call_fingerprint(tool: &str, arguments: Option<&Value>) -> u64 {
    super::fingerprint::fingerprint(tool, arguments.unwrap_or(&Value::Null))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::guard::fingerprint::fingerprint;

    /// One turn: its calls (tool, arguments) and their results.
    type TurnSpec<'a> = (&'a [(&'a str, Value)], &'a [&'a str]);

    fn history(turns: &[TurnSpec<'_>]) -> Vec<Message> {
        let mut msgs =
            vec![serde_json::from_value(json!({"role": "user", "content": "go"})).expect("user")];
        for (t, (calls, results)) in turns.iter().enumerate() {
            let tool_calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(k, (name, args))| {
                    json!({"id": format!("c{t}_{k}"), "type": "function",
                           "function": {"name": name, "arguments": args.to_string()}})
                })
                .collect();
            msgs.push(
                serde_json::from_value(
                    json!({"role": "assistant", "content": null, "tool_calls": tool_calls}),
                )
                .expect("assistant"),
            );
            for (k, r) in results.iter().enumerate() {
                msgs.push(
                    serde_json::from_value(
                        json!({"role": "tool", "tool_call_id": format!("c{t}_{k}"), "content": r}),
                    )
                    .expect("tool"),
                );
            }
        }
        msgs
    }

    fn new(tool: &str, args: Value) -> (String, u64) {
        (tool.to_owned(), fingerprint(tool, &args))
    }

    fn signals(h: &[Message], calls: &[(String, u64)]) -> Vec<LoopSignals> {
        let calls: Vec<NewCall<'_>> = calls
            .iter()
            .map(|(t, f)| NewCall {
                tool: t,
                fingerprint: *f,
            })
            .collect();
        RunIndex::new(h).signals(&calls, 100)
    }

    proptest::proptest! {
        /// Any run: no panic, every call gets signals, a streak is at least the call
        /// itself and never more than the turns plus one, and the walk stops at its cap.
        #[test]
        fn signals_are_bounded_for_any_run(
            turns in proptest::collection::vec(
                proptest::collection::vec((0..3usize, 0..3u8, 0..3u8), 0..4), 0..30),
            new in proptest::collection::vec((0..3usize, 0..3u8), 1..5),
            cap in 1..10u32,
        ) {
            let names = ["a", "b", "c"];
            let mut msgs = vec![serde_json::from_value::<Message>(json!({"role": "user", "content": "go"})).expect("user")];
            for (t, calls) in turns.iter().enumerate() {
                let tool_calls: Vec<Value> = calls.iter().enumerate().map(|(k, (n, a, _))| json!({
                    "id": format!("c{t}_{k}"), "type": "function",
                    "function": {"name": names[*n], "arguments": json!({"x": a}).to_string()}})).collect();
                msgs.push(serde_json::from_value(json!({"role": "assistant", "content": null, "tool_calls": tool_calls})).expect("a"));
                for (k, (_, _, r)) in calls.iter().enumerate() {
                    msgs.push(serde_json::from_value(json!({"role": "tool", "tool_call_id": format!("c{t}_{k}"), "content": format!("r{r}")})).expect("t"));
                }
            }
            let new: Vec<(String, u64)> = new.iter().map(|(n, a)| (names[*n].to_owned(), fingerprint(names[*n], &json!({"x": a})))).collect();
            let calls: Vec<NewCall<'_>> = new.iter().map(|(t, f)| NewCall { tool: t, fingerprint: *f }).collect();
            let out = RunIndex::new(&msgs).signals(&calls, cap);
            proptest::prop_assert_eq!(out.len(), calls.len());
            for s in out {
                proptest::prop_assert!(s.repeat >= 1);
                proptest::prop_assert!(s.repeat <= cap.max(1));
                proptest::prop_assert!(s.repeat as usize <= turns.len() + 1);
                proptest::prop_assert!(s.ping_pong as usize <= turns.len());
            }
        }
    }

    #[test]
    fn a_streak_survives_other_tools_and_parallel_duplicates() {
        let q = json!({"q": "rome"});
        let h = history(&[
            (&[("search", q.clone()), ("search", q.clone())], &["r", "r"]),
            (&[("clock", json!({}))], &["12:00"]),
            (&[("search", q.clone())], &["r"]),
        ]);
        assert_eq!(signals(&h, &[new("search", q.clone())])[0].repeat, 3);
    }

    #[test]
    fn changed_arguments_or_results_end_a_streak() {
        let q = json!({"q": "rome"});
        let h = history(&[
            (&[("search", q.clone())], &["r"]),
            (&[("search", json!({"q": "paris"}))], &["p"]),
            (&[("search", q.clone())], &["r"]),
        ]);
        assert_eq!(signals(&h, &[new("search", q.clone())])[0].repeat, 2);
        let polls = history(&[
            (&[("status", json!({"job": 1}))], &["10%"]),
            (&[("status", json!({"job": 1}))], &["40%"]),
            (&[("status", json!({"job": 1}))], &["90%"]),
        ]);
        let s = signals(&polls, &[new("status", json!({"job": 1}))])[0];
        assert_eq!(s.repeat, 2, "only the latest result counts as unchanged");
        assert_eq!(s.same_result, 1);
    }

    #[test]
    fn a_new_user_message_starts_a_new_run() {
        let q = json!({"q": "rome"});
        let mut h = history(&[(&[("search", q.clone())], &["r"])]);
        h.push(serde_json::from_value(json!({"role": "user", "content": "again"})).expect("u"));
        assert_eq!(signals(&h, &[new("search", q)])[0].repeat, 1);
        assert_eq!(run_number(&h), 2);
    }

    #[test]
    fn same_results_count_across_interleaved_arguments() {
        let h = history(&[
            (&[("status", json!({"job": 1}))], &["pending"]),
            (&[("status", json!({"job": 2}))], &["pending"]),
            (&[("status", json!({"job": 1}))], &["pending"]),
            (&[("status", json!({"job": 2}))], &["pending"]),
        ]);
        let s = signals(&h, &[new("status", json!({"job": 1}))])[0];
        assert_eq!(s.repeat, 1);
        assert_eq!(s.same_result, 2);
        assert_eq!(
            s.ping_pong, 2,
            "A B A B, then A: two full cycles and a half"
        );
    }

    #[test]
    fn ping_pong_needs_unchanged_results() {
        let a = || ("read", json!({"f": "a"}));
        let b = || ("write", json!({"f": "a"}));
        let h = history(&[
            (&[a()], &["x"]),
            (&[b()], &["ok"]),
            (&[a()], &["x"]),
            (&[b()], &["ok"]),
            (&[a()], &["x"]),
            (&[b()], &["ok"]),
        ]);
        assert_eq!(
            signals(&h, &[new("read", json!({"f": "a"}))])[0].ping_pong,
            3
        );
        // A's result moved on at the last A: the pattern counts from there only.
        let moving = history(&[
            (&[a()], &["x1"]),
            (&[b()], &["ok"]),
            (&[a()], &["x2"]),
            (&[b()], &["ok"]),
            (&[a()], &["x3"]),
            (&[b()], &["ok"]),
        ]);
        assert_eq!(
            signals(&moving, &[new("read", json!({"f": "a"}))])[0].ping_pong,
            2
        );
    }
}
