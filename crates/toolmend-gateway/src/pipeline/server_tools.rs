//! The tools the gateway runs itself: `[[tools]]` and `[[mcp]]`, loaded by
//! `toolmend-tools` into a [`ToolSet`], run by the core's tool node (mend, validate,
//! guard, execute; exactly one result per call id) for `POST /v1/tools/execute` and for
//! the round trip of the chat path. Every call it answers is a metric,
//! `toolmend_server_tool_calls_total{tool,outcome}`, labelled only with configured tool
//! names.
//!
//! Two nodes over the same tools: the round trip's has no guard of its own (the model's
//! answer passed the pipeline's guard stage before its server-side calls get here: a
//! second check would count every call twice); `/v1/tools/execute`'s has the gateway's
//! [`RuleGuard`] itself, the same rules and the same store as the chat path, with the
//! tools' own `[tools.limits]` merged in at start.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::Instant,
};

use toolmend::{
    MendOptions,
    conversation::Message,
    guard::RuleGuard,
    message::CallOutcome,
    node::{InvokeOptions, NodeError, NodeOutput, ResultStatus, ToolNode},
};
use toolmend_tools::ToolSet;

use crate::{metrics as m, server::error::GatewayError};

/// Restricted nodes kept (`"tools": [...]` lists seen).
const RESTRICTED_NODES: usize = 64;

/// Restricted nodes by their sorted tool names, and the names in insertion order.
type NodeCache = (HashMap<String, Arc<ToolNode>>, VecDeque<String>);

/// The server's tools and the nodes that run them.
#[derive(Debug)]
pub(crate) struct ServerTools {
    set: ToolSet,
    /// How every node mends (restricted ones too).
    mend: MendOptions,
    /// The round trip's node: no guard (see the module's docs).
    trip: ToolNode,
    /// `/v1/tools/execute`'s node: the gateway's guard.
    execute: ToolNode,
    /// The gateway's guard, for restricted nodes.
    guard: Option<Arc<RuleGuard>>,
    /// Nodes that run only some tools, by their sorted names.
    restricted: Mutex<NodeCache>,
    /// The server-side tools' definitions.
    definitions: Vec<toolmend::conversation::Tool>,
}

impl ServerTools {
    /// The nodes over `set`; `guard`: the gateway's, when a rule is set; `mend`: how the
    /// gateway mends (`calls.strict`, `calls.coercions`).
    pub(crate) fn new(
        set: ToolSet,
        guard: Option<Arc<RuleGuard>>,
        mend: MendOptions,
    ) -> Result<Self, String> {
        let registry = || {
            set.registry()
                .map_err(|e| format!("the tools' registry: {e}"))
        };
        let trip = ToolNode::builder(registry()?)
            .name("gateway")
            .mend_options(mend.clone())
            .build();
        let mut execute = ToolNode::builder(registry()?)
            .name("gateway")
            .mend_options(mend.clone());
        if let Some(g) = &guard {
            execute = execute.guard(Arc::clone(g));
        }
        let definitions = set.definitions(true);
        let server_side: Vec<&str> = set
            .tools()
            .iter()
            .filter(|t| t.server_side())
            .map(|t| t.name())
            .collect();
        tracing::info!(
            tools = set.tools().len(),
            server_side = %server_side.join(","),
            guard = guard.is_some(),
            "server tools loaded"
        );
        Ok(ServerTools {
            mend,
            trip,
            execute: execute.build(),
            guard,
            restricted: Mutex::new((HashMap::new(), VecDeque::new())),
            definitions,
            set,
        })
    }

    /// True when the gateway runs `name` itself in the round trip.
    pub(crate) fn is_server_side(&self, name: &str) -> bool {
        self.set.is_server_side(name)
    }

    /// True when any tool is server-side (the round trip is on).
    pub(crate) fn any_server_side(&self) -> bool {
        !self.definitions.is_empty()
    }

    /// The configured tools' names, in file order.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.set.tools().iter().map(|t| t.name()).collect()
    }

    /// The server-side tools' definitions, for a front to add to a request's tools.
    pub(crate) fn definitions(&self) -> &[toolmend::conversation::Tool] {
        &self.definitions
    }

    /// Runs the round trip's server-side calls: the last message of `messages` is the
    /// assistant message holding only them; `answered_at`: when the upstream's answer
    /// arrived (where the tools' call-initiation latency starts). One result per call id.
    pub(crate) async fn run_round(
        &self,
        messages: &[Message],
        trace_id: &Arc<str>,
        deadline: Instant,
        answered_at: Instant,
    ) -> Result<NodeOutput, GatewayError> {
        let opts = InvokeOptions {
            deadline: Some(deadline),
            trace_id: Some(Arc::clone(trace_id)),
            received_at: Some(answered_at),
            ..InvokeOptions::default()
        };
        let out = self
            .trip
            .invoke_with(messages, &opts)
            .await
            .map_err(node_error)?;
        self.record(&out);
        Ok(out)
    }

    /// `POST /v1/tools/execute`: the last assistant message of `messages` answered, by
    /// every tool or only those of `only` (a call to another is an unknown tool: feedback, never run).
    ///
    /// # Errors
    ///
    /// A name in `only` that is not a configured tool (400); no assistant message (400);
    /// a guard budget with `exit_behavior = "error"` (429).
    pub(crate) async fn execute(
        &self,
        messages: &[Message],
        only: Option<&[String]>,
        session: Option<String>,
        trace_id: &Arc<str>,
        deadline: Instant,
    ) -> Result<NodeOutput, GatewayError> {
        let opts = InvokeOptions {
            session,
            deadline: Some(deadline),
            trace_id: Some(Arc::clone(trace_id)),
            ..InvokeOptions::default()
        };
        let out = match only {
            None => self.execute.invoke_with(messages, &opts).await,
            Some(names) => {
                let node = self.restricted(names)?;
                node.invoke_with(messages, &opts).await
            }
        }
        .map_err(node_error)?;
        self.record(&out);
        Ok(out)
    }

    /// The node that runs only `names` (built once per distinct list, a few kept).
    fn restricted(&self, names: &[String]) -> Result<Arc<ToolNode>, GatewayError> {
        let mut sorted: Vec<&str> = names.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        sorted.dedup();
        let unknown: Vec<&str> = sorted
            .iter()
            .copied()
            .filter(|n| self.set.get(n).is_none())
            .collect();
        if !unknown.is_empty() {
            return Err(GatewayError::invalid(
                "invalid_tools",
                format!(
                    "'tools' names tools the gateway does not serve: {}; it serves: {}",
                    unknown.join(", "),
                    self.names().join(", ")
                ),
            ));
        }
        let key = sorted.join(",");
        if let Ok(cache) = self.restricted.lock()
            && let Some(node) = cache.0.get(&key)
        {
            return Ok(Arc::clone(node));
        }
        // Only the listed tools: a call to another is an unknown tool (feedback listing
        // the allowed ones), as for any node.
        let mut registry = toolmend::node::Registry::new();
        self.set
            .add_where(&mut registry, |n| sorted.contains(&n))
            .map_err(|e| GatewayError::Internal {
                code: "toolmend_internal_error",
                message: format!("the tools' registry: {e}"),
            })?;
        let mut builder = ToolNode::builder(registry)
            .name("gateway")
            .mend_options(self.mend.clone());
        if let Some(g) = &self.guard {
            builder = builder.guard(Arc::clone(g));
        }
        let node = Arc::new(builder.build());
        if let Ok(mut cache) = self.restricted.lock() {
            let (map, order) = &mut *cache;
            if map.len() >= RESTRICTED_NODES
                && let Some(old) = order.pop_front()
            {
                map.remove(&old);
            }
            map.insert(key.clone(), Arc::clone(&node));
            order.push_back(key);
        }
        Ok(node)
    }

    /// `toolmend_server_tool_calls_total{tool,outcome}` for every answered call:
    /// `success`, `error` (it ran and failed: the service's error, a timeout, a dirty
    /// answer), `feedback` (invalid: not run), `flooded` (refused: not run).
    fn record(&self, out: &NodeOutput) {
        for r in &out.results {
            let tool = if self.set.get(&r.tool).is_some() {
                r.tool.clone()
            } else {
                m::UNDECLARED.to_owned()
            };
            m::server_tool_call(tool, outcome_label(r.outcome, r.status));
        }
    }
}

/// The `outcome` label of one answered call.
pub(crate) fn outcome_label(outcome: CallOutcome, status: ResultStatus) -> &'static str {
    match (outcome, status) {
        (CallOutcome::Feedback, _) => "feedback",
        (CallOutcome::Flooded, _) => "flooded",
        (CallOutcome::Dropped, _) => "dropped",
        (_, ResultStatus::Success) => "success",
        (_, ResultStatus::Error) => "error",
    }
}

fn node_error(e: NodeError) -> GatewayError {
    match e {
        NodeError::NoAssistantMessage => GatewayError::invalid(
            "invalid_messages",
            "the messages hold no assistant message: the last assistant message's tool \
             calls are the ones answered",
        ),
        NodeError::LimitExceeded { reason } => GatewayError::Flooded {
            message: reason,
            retry_after: None,
            ends_run: false,
            outage: false,
            headers: Vec::new(),
        },
        // The node answers every failure (`ToolErrorPolicy::All`) and never raises on an
        // invalid call (`OnUnresolved::Feedback`): these would be a bug.
        other => GatewayError::Internal {
            code: "toolmend_internal_error",
            message: other.to_string(),
        },
    }
}
