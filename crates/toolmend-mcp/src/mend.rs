//! One `tools/call` through the core's driver: the same plan, guard and feedback as in
//! every other front. The request's `params` become an assistant message with one call
//! (its id the JSON-RPC id, its arguments their JSON text), mended against the tool's
//! `inputSchema`; what comes back is either the call to forward (its arguments mended,
//! or untouched) or the result to answer in the server's place (`isError`, toolmend's
//! field-level feedback as its text). What was done rides in the result's `_meta` under
//! [`META_MEND`].

use std::{sync::Arc, time::Duration};

use serde_json::{Map, Value, json};
use toolmend::{
    Toolbox,
    conversation::{AssistantMessage, Message, ToolCall},
    drive::{self, CallReport, GuardTally, Guarding, OnRefused, Stages, Tally, Turn},
    events::{self, CallEvent},
    guard::RuleGuard,
    message::{CallOutcome, PlanOptions, TimeOrderedIds},
};

/// The `_meta` key of a result that says what toolmend did to its call.
pub const META_MEND: &str = "io.toolmend/mend";

/// What becomes of one `tools/call`.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Forward it; `params` are the mended ones (`None`: as sent). `record` goes into the
    /// result's `_meta` (`None`: nothing was done).
    Forward {
        /// The mended params, when anything changed.
        params: Option<Value>,
        /// What was done, for the result's `_meta`.
        record: Option<Value>,
    },
    /// Answer it here with this `CallToolResult`: the server never sees the call.
    Answer(Value),
}

/// The guard of a proxy's sessions.
#[derive(Debug, Clone)]
pub struct ProxyGuard {
    /// The configured guard (memory or a shared store).
    pub guard: Arc<RuleGuard>,
}

/// Where a mender reports each call: the event log (the gateway's format, `front`
/// `mcp`), written without waiting.
pub trait Events: Send + Sync + std::fmt::Debug {
    /// Takes one call's event.
    fn send(&self, event: CallEvent);
    /// The hash of a session id (the log never holds the id itself).
    fn session_hash(&self, id: &str) -> String;
}

/// Mends `tools/call` requests: the plan's options, the guard, the event log.
#[derive(Debug)]
pub struct Mender {
    plan: PlanOptions,
    guard: Option<ProxyGuard>,
    fresh_ids: TimeOrderedIds,
    events: Option<Arc<dyn Events>>,
}

impl Mender {
    /// A mender with these plan options. One request is one call: a list given for a
    /// scalar field cannot become several calls, so `split_merged_calls` is turned off
    /// (such a call gets feedback, as a LangGraph `Send` payload does).
    pub fn new(mut plan: PlanOptions, guard: Option<ProxyGuard>) -> Self {
        plan.mend.coercions.split_merged_calls = false;
        for m in plan.tool_mend.values_mut() {
            m.coercions.split_merged_calls = false;
        }
        Mender {
            plan,
            guard,
            fresh_ids: TimeOrderedIds::new(),
            events: None,
        }
    }

    /// Whether a guard checks the calls (its loop rules read the session's recent calls).
    pub fn guarded(&self) -> bool {
        self.guard.is_some()
    }

    /// The same mender, reporting each call to `events`.
    #[must_use]
    pub fn with_events(mut self, events: Arc<dyn Events>) -> Self {
        self.events = Some(events);
        self
    }

    /// Counts the call (`toolmend_mcp_calls_total{outcome, mend}`) and logs its event.
    fn report(&self, toolbox: &Toolbox, report: &CallReport, call_id: &str, session: &str) {
        metrics::counter!(
            "toolmend_mcp_calls_total",
            "outcome" => report.outcome.as_str(),
            "mend" => events::mend_id(report.mend),
        )
        .increment(1);
        let Some(sink) = &self.events else { return };
        let ctx = events::Context {
            ts: events::now(),
            front: "mcp".to_owned(),
            request_id: Some(call_id.to_owned()),
            session: Some(sink.session_hash(session)),
            ..events::Context::default()
        };
        let call = events::Call {
            index: 0,
            tool: &report.tool,
            schema: toolbox.get(&report.tool).map(|t| t.parameters()),
            source: report.source,
            outcome: report.outcome,
            mend: report.mend,
            fixes: &report.fixes,
            issues: &report.issues,
        };
        sink.send(CallEvent::new(&ctx, &call));
    }

    /// The verdict on the `tools/call` whose JSON-RPC id is `id` and whose params are
    /// `params`, for the MCP session `session` (the guard counts by it); `history` holds
    /// the session's recent calls and results (the guard's loop rules read it).
    pub async fn mend(
        &self,
        toolbox: &Toolbox,
        id: &Value,
        params: &Value,
        session: &str,
        history: &[Message],
    ) -> Verdict {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            // Not a call toolmend can read: the server answers it as it would.
            return Verdict::Forward {
                params: None,
                record: None,
            };
        };
        let call_id = match id {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let text = match params.get("arguments") {
            None | Some(Value::Null) => "{}".to_owned(),
            // A JSON string where the object belongs is the arguments encoded twice: the
            // plan decodes it and says so (`double_encoded_decoded`).
            Some(v) => v.to_string(),
        };
        let message = AssistantMessage {
            content: Some(None),
            tool_calls: Some(vec![ToolCall::new(call_id.clone(), name, text)]),
            ..AssistantMessage::default()
        };
        let mut stages = Stages::plan_only(toolbox, &self.plan);
        if let Some(g) = &self.guard {
            stages.guard = Some(Guarding {
                guard: &*g.guard,
                session: Some(session),
                timeout: g.guard.stage_limit(),
                fresh_ids: &self.fresh_ids,
                // The id is the client's JSON-RPC id: it cannot change.
                rename_reused: false,
                on_refused: OnRefused::Answer,
                max_re_asks: 0,
            });
            stages.stage_timeout = Duration::from_secs(5);
        }
        let turn = Turn::fresh(&message, history, false);
        let driven = drive::drive(
            turn,
            &stages,
            &mut Tally::default(),
            &mut GuardTally::default(),
        )
        .await;
        let resolved = match driven {
            Ok(d) => d.resolved,
            Err(drive::Stop::Rejected(r)) => {
                return Verdict::Answer(error_result(&r.message(), None));
            }
            Err(drive::Stop::Unresolved(_)) => {
                return Verdict::Answer(error_result("the call could not be mended", None));
            }
        };
        let answered: Vec<&CallReport> = resolved
            .calls
            .iter()
            .filter(|c| c.outcome != CallOutcome::Dropped)
            .collect();
        let [report] = answered.as_slice() else {
            let n = answered.len();
            return Verdict::Answer(error_result(
                &format!(
                    "one tools/call is one call, and these arguments hold {n}: send each as its own tools/call"
                ),
                None,
            ));
        };
        self.report(toolbox, report, &call_id, session);
        let record = record(report);
        if !report.may_run() {
            let text = report
                .feedback
                .clone()
                .or_else(|| report.note.clone())
                .unwrap_or_else(|| "the call was not run".to_owned());
            return Verdict::Answer(error_result(&text, Some(record)));
        }
        if report.fixes.is_empty() && report.tool == name {
            return Verdict::Forward {
                params: None,
                record: None,
            };
        }
        let mut params = params.as_object().cloned().unwrap_or_default();
        params.insert("name".into(), Value::String(report.tool.clone()));
        params.insert(
            "arguments".into(),
            report.arguments.clone().unwrap_or_else(|| json!({})),
        );
        Verdict::Forward {
            params: Some(Value::Object(params)),
            record: Some(record),
        }
    }
}

/// Puts `record` into `result`'s `_meta` (made an object when the server sent none, or
/// `null`; a `_meta` of another kind, which the protocol does not allow, is left as the
/// server sent it, and the record with it).
pub fn attach(result: &mut Value, record: Value) {
    let Some(obj) = result.as_object_mut() else {
        return;
    };
    let meta = obj.entry("_meta").or_insert(Value::Null);
    if meta.is_null() {
        *meta = json!({});
    }
    if let Some(m) = meta.as_object_mut() {
        m.insert(META_MEND.into(), record);
    }
}

/// What was done to the call, as the result's `_meta` carries it: the report's outcome,
/// the mending (`valid`, `repaired`, `feedback`), every fix and issue.
fn record(report: &CallReport) -> Value {
    let mut v = serde_json::to_value(report).unwrap_or_else(|_| json!({}));
    if let Some(m) = v.as_object_mut() {
        // The call's id is the request's; the source is always the request.
        m.remove("id");
        m.remove("source");
        m.remove("from_text");
        m.remove("feedback");
        // Each fix with its safety: how sure the reading is (`safe`, `unsafe`, `lossy`).
        if let Some(Value::Array(fixes)) = m.get_mut("fixes") {
            for (f, fix) in fixes.iter_mut().zip(&report.fixes) {
                if let Some(f) = f.as_object_mut() {
                    f.insert("safety".into(), json!(fix.safety()));
                }
            }
        }
    }
    v
}

/// A `CallToolResult` that answers the call with `text`, as an error the model reads.
fn error_result(text: &str, record: Option<Value>) -> Value {
    let mut result = Map::new();
    result.insert("content".into(), json!([{"type": "text", "text": text}]));
    result.insert("isError".into(), Value::Bool(true));
    if let Some(r) = record {
        result.insert("_meta".into(), json!({ META_MEND: r }));
    }
    Value::Object(result)
}
