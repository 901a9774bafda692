//! One MCP session between a client and a server, as JSON-RPC messages: what passes
//! through as it came (byte for byte), what is mended, what is answered here.
//!
//! | message | what the relay does |
//! | --- | --- |
//! | `tools/call` (client) | mended against the tool's `inputSchema` ([`crate::mend`]): forwarded (mended, or as sent), or answered here with an `isError` result; waits while the tool list is being read |
//! | the server's answer to a mended call | `_meta["io.toolmend/mend"]` added to its result |
//! | `notifications/cancelled` (client) | forwarded when the server has the request; dropped when the call was answered here or still waits (it never runs) |
//! | `initialize` / `server/discover` (client) | forwarded; the answer tells whether the server has tools |
//! | the server's answer to the client's `tools/list` | forwarded; its tools (every page) are the ones calls are mended against |
//! | `notifications/tools/list_changed` (server) | forwarded; the tools are read again at the next call (the client's own listing, or the relay's) |
//! | every other request, response and notification, either way | forwarded unchanged |
//! | a line that is no JSON, or no JSON-RPC message (client) | answered here: `-32700` / `-32600` |
//! | a line over the size limit | skipped without being held; its request (if its id shows) answered with an error |
//!
//! When a call comes and the tools are not known (the client did not list them, or the
//! list changed since), the relay lists them itself, every page, and the call waits for
//! it. Its own requests carry ids starting with [`OWN_ID_PREFIX`] and the protocol's
//! `_meta` stamps of the call that needed them (`io.modelcontextprotocol/…`: the
//! 2026-07-28 revision sends its version and the client's capabilities with every
//! request); their answers never reach the client. Ids are not rewritten: one client,
//! one server. Both eras are read: the `initialize` handshake and the stateless
//! revision's `server/discover`.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{Map, Value, json};
use toolmend::{CompiledTool, Toolbox};

use crate::{
    frame::sniff_id,
    mend::{META_MEND, Mender, Verdict},
    recent::Recent,
};

/// A message over the size limit, known by its ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Dropped {
    /// Its length in bytes.
    pub len: usize,
    /// Its top-level id, when its ends show one.
    pub id: Option<Value>,
    /// A request or a notification (it has a `method`), not a response.
    pub request: bool,
}

impl Dropped {
    /// What the ends of a line over the limit show.
    pub fn of(len: usize, head: &[u8], tail: &[u8]) -> Self {
        Dropped {
            len,
            id: sniff_id(head, tail),
            request: crate::frame::sniff_is_request(head),
        }
    }
}

/// How the relay's own requests' ids begin.
pub const OWN_ID_PREFIX: &str = "io.toolmend/";

/// Calls held while the tool list is read; past it a call is answered with an error.
pub const MAX_WAITING_CALLS: usize = 4096;

/// Pages of `tools/list` read before the list is taken as complete.
pub const MAX_LIST_PAGES: u32 = 1000;

/// JSON-RPC's parse error.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's invalid request.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's internal error.
pub const INTERNAL_ERROR: i64 = -32603;
/// The server is gone (implementation-defined server error).
pub const SERVER_GONE: i64 = -32000;

/// A message for one side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    /// To the server.
    Server(Vec<u8>),
    /// To the client.
    Client(Vec<u8>),
}

/// A client request the server has.
#[derive(Debug)]
enum Pending {
    /// `initialize` or `server/discover`: its answer says whether the server has tools.
    Initialize,
    /// The client's `tools/list`; `first`: it asked for the first page.
    List {
        first: bool,
    },
    Call {
        record: Option<Value>,
        call_id: String,
    },
    Other,
}

/// What the relay knows of the server's tools.
#[derive(Debug)]
enum Tools {
    /// Not listed yet.
    Unknown,
    /// Listed.
    Known {
        toolbox: Toolbox,
        /// Tools whose `inputSchema` does not compile: their calls pass as sent.
        unmended: HashSet<String>,
    },
    /// The server could not list them: calls pass as sent.
    Unavailable,
}

/// A listing in progress.
#[derive(Debug)]
struct Listing {
    id: String,
    tools: Vec<Value>,
    pages: u32,
    /// The list changed while it was read: read it again.
    again: bool,
    /// The `_meta` stamps its requests carry.
    meta: Option<Value>,
}

/// One session's state (see the module).
#[derive(Debug)]
pub struct Relay {
    mender: std::sync::Arc<Mender>,
    session: String,
    tools: Tools,
    listing: Option<Listing>,
    /// The server declared `tools` in its capabilities (`None`: not initialized yet).
    server_tools: Option<bool>,
    /// The list changed since it was read.
    stale: bool,
    /// The tools of the client's own listing read so far, and its pages (`None`: none
    /// under way).
    client_pages: Option<(Vec<Value>, u32)>,
    pending: HashMap<String, Pending>,
    waiting: VecDeque<(String, Value)>,
    own_seq: u64,
    history: Recent,
    keep_history: bool,
}

impl Relay {
    /// A session, named `session` for the guard.
    pub fn new(mender: std::sync::Arc<Mender>, session: impl Into<String>, guarded: bool) -> Self {
        Relay {
            mender,
            session: session.into(),
            tools: Tools::Unknown,
            listing: None,
            server_tools: None,
            stale: false,
            client_pages: None,
            pending: HashMap::new(),
            waiting: VecDeque::new(),
            own_seq: 0,
            history: Recent::default(),
            keep_history: guarded,
        }
    }

    /// Calls held for the tool list, or the relay's own listing under way: what the
    /// server must still get.
    pub fn holds_unsent(&self) -> bool {
        self.listing.is_some() || !self.waiting.is_empty()
    }

    /// Requests the server has not answered yet (the relay's own included).
    pub fn in_flight(&self) -> usize {
        self.pending.len() + self.waiting.len() + usize::from(self.listing.is_some())
    }

    /// A line from the client.
    pub async fn from_client(&mut self, line: Vec<u8>, out: &mut Vec<Out>) {
        let v: Value = match serde_json::from_slice(&line) {
            Ok(v) => v,
            Err(e) => {
                out.push(Out::Client(error(
                    &Value::Null,
                    PARSE_ERROR,
                    &format!("Parse error: the message is no JSON ({e}); toolmend mcp-proxy did not forward it"),
                )));
                return;
            }
        };
        match v {
            Value::Array(items) if items.iter().any(|m| is_call(m) || is_cancel(m)) => {
                // A batch with calls: each message on its own, so each call is mended.
                for item in items {
                    let raw = item.to_string().into_bytes();
                    Box::pin(self.client_message(item, raw, out)).await;
                }
            }
            Value::Array(items) if !items.is_empty() => {
                for item in &items {
                    self.note_request(item);
                }
                out.push(Out::Server(line));
            }
            v @ Value::Object(_) => self.client_message(v, line, out).await,
            _ => out.push(Out::Client(error(
                &Value::Null,
                INVALID_REQUEST,
                "Invalid Request: a JSON-RPC message is an object (or a non-empty batch of them); toolmend mcp-proxy did not forward it",
            ))),
        }
    }

    async fn client_message(&mut self, v: Value, raw: Vec<u8>, out: &mut Vec<Out>) {
        let id = v.get("id").filter(|i| !i.is_null()).cloned();
        let Some(method) = v.get("method").and_then(Value::as_str) else {
            if id.is_some() && (v.get("result").is_some() || v.get("error").is_some()) {
                // The client's answer to a request of the server's.
                out.push(Out::Server(raw));
            } else {
                out.push(Out::Client(error(
                    id.as_ref().unwrap_or(&Value::Null),
                    INVALID_REQUEST,
                    "Invalid Request: a JSON-RPC message has a \"method\" (a request or a notification) or an \"id\" with a \"result\" or an \"error\" (a response); toolmend mcp-proxy did not forward it",
                )));
            }
            return;
        };
        match (method, id) {
            (_, Some(id)) if id.as_str().is_some_and(|s| s.starts_with(OWN_ID_PREFIX)) => {
                out.push(Out::Client(error(
                    &id,
                    INVALID_REQUEST,
                    &format!("Invalid Request: ids beginning with {OWN_ID_PREFIX:?} are toolmend mcp-proxy's own; use another id"),
                )));
            }
            ("tools/call", Some(id)) => self.call(id, v, raw, out).await,
            ("notifications/cancelled", None) => {
                let target = v.pointer("/params/requestId").map(key).unwrap_or_default();
                if let Some(at) = self.waiting.iter().position(|(k, _)| *k == target) {
                    // It never reached the server, and now never will.
                    self.waiting.remove(at);
                } else if self.pending.remove(&target).is_some() {
                    // Its answer, if one still comes, passes as it is (the client ignores it).
                    out.push(Out::Server(raw));
                }
            }
            (_, Some(id)) => {
                let pending = match method {
                    "initialize" | "server/discover" => Pending::Initialize,
                    "tools/list" => Pending::List {
                        first: v.pointer("/params/cursor").is_none_or(Value::is_null),
                    },
                    _ => Pending::Other,
                };
                self.pending.insert(key(&id), pending);
                out.push(Out::Server(raw));
            }
            (_, None) => out.push(Out::Server(raw)),
        }
    }

    /// Notes a request of a batch passed as it came.
    fn note_request(&mut self, item: &Value) {
        if let (Some(id), Some(_)) = (item.get("id").filter(|i| !i.is_null()), item.get("method")) {
            self.pending.insert(key(id), Pending::Other);
        }
    }

    async fn call(&mut self, id: Value, v: Value, raw: Vec<u8>, out: &mut Vec<Out>) {
        if self.server_tools == Some(false) {
            self.pending.insert(key(&id), Pending::Other);
            out.push(Out::Server(raw));
            return;
        }
        if self.listing.is_some() || self.stale || matches!(self.tools, Tools::Unknown) {
            if self.waiting.len() >= MAX_WAITING_CALLS {
                out.push(Out::Client(error(
                    &id,
                    INTERNAL_ERROR,
                    &format!("toolmend mcp-proxy: {MAX_WAITING_CALLS} calls already wait for the server's tool list; send this one again"),
                )));
                return;
            }
            if self.listing.is_none() {
                self.list(stamps(&v), out);
            }
            self.waiting.push_back((key(&id), v));
            return;
        }
        self.mend_and_send(id, v, Some(raw), out).await;
    }

    async fn mend_and_send(
        &mut self,
        id: Value,
        mut v: Value,
        raw: Option<Vec<u8>>,
        out: &mut Vec<Out>,
    ) {
        let params = v.get("params").cloned().unwrap_or(Value::Null);
        let verdict = match &self.tools {
            Tools::Known { toolbox, unmended } => {
                let name = params.get("name").and_then(Value::as_str).unwrap_or("");
                if unmended.contains(name) {
                    None
                } else {
                    let history = self.history.messages();
                    Some(
                        self.mender
                            .mend(toolbox, &id, &params, &self.session, history)
                            .await,
                    )
                }
            }
            Tools::Unknown | Tools::Unavailable => None,
        };
        let call_id = key(&id);
        match verdict {
            None
            | Some(Verdict::Forward {
                params: None,
                record: None,
            }) => {
                self.remember_call(&call_id, &params);
                self.pending.insert(
                    call_id.clone(),
                    Pending::Call {
                        record: None,
                        call_id,
                    },
                );
                out.push(Out::Server(
                    raw.unwrap_or_else(|| v.to_string().into_bytes()),
                ));
            }
            Some(Verdict::Forward {
                params: mended,
                record,
            }) => {
                if let (Some(p), Some(obj)) = (mended, v.as_object_mut()) {
                    obj.insert("params".into(), p);
                }
                let sent = v.get("params").cloned().unwrap_or(Value::Null);
                let tool = sent.get("name").and_then(Value::as_str).unwrap_or("");
                let fixes = record
                    .as_ref()
                    .and_then(|r| r.get("fixes"))
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                tracing::info!(target: "toolmend::mcp", id = %call_id, tool, fixes, "tools/call mended and forwarded");
                self.remember_call(&call_id, &sent);
                self.pending
                    .insert(call_id.clone(), Pending::Call { record, call_id });
                out.push(Out::Server(v.to_string().into_bytes()));
            }
            Some(Verdict::Answer(result)) => {
                let tool = params.get("name").and_then(Value::as_str).unwrap_or("");
                let outcome = result
                    .get("_meta")
                    .and_then(|m| m.get(META_MEND))
                    .and_then(|r| r.get("outcome"))
                    .and_then(Value::as_str)
                    .unwrap_or("refused");
                tracing::info!(target: "toolmend::mcp", id = %call_id, tool, outcome, "tools/call answered with feedback; the server did not see it");
                self.remember_call(&call_id, &params);
                self.remember_result(&call_id, &result);
                let mut result = result;
                if is_modern(&v) {
                    // The 2026-07-28 revision's results say they are complete.
                    result["resultType"] = Value::String("complete".into());
                }
                out.push(Out::Client(response(&id, result)));
            }
        }
    }

    /// A line from the server.
    pub async fn from_server(&mut self, line: Vec<u8>, out: &mut Vec<Out>) {
        let v: Value = match serde_json::from_slice(&line) {
            Ok(v) => v,
            Err(_) => {
                // The answer to the relay's own listing, unreadable: the listing failed.
                let own = self.listing.as_ref().is_some_and(|l| {
                    let head = &line[..line.len().min(crate::frame::KEPT)];
                    let tail = &line[line.len().saturating_sub(crate::frame::KEPT)..];
                    sniff_id(head, tail).is_some_and(|id| key(&id) == l.id)
                });
                if own {
                    self.listing_failed("its answer is no JSON");
                    self.flush(out).await;
                    return;
                }
                // Not ours to judge: the client sees what the server sent.
                out.push(Out::Client(line));
                return;
            }
        };
        match &v {
            Value::Object(m) if m.contains_key("method") => {
                let changed = m.get("method").and_then(Value::as_str)
                    == Some("notifications/tools/list_changed");
                out.push(Out::Client(line));
                if changed {
                    self.stale = true;
                    if let Some(l) = &mut self.listing {
                        l.again = true;
                    }
                }
            }
            Value::Object(m) => {
                let id = m.get("id").map(key).unwrap_or_default();
                if self.listing.as_ref().is_some_and(|l| l.id == id) {
                    self.listed(&v, out).await;
                    return;
                }
                match self.pending.remove(&id) {
                    Some(Pending::Initialize) => {
                        self.server_tools = Some(
                            v.pointer("/result/capabilities/tools")
                                .is_some_and(Value::is_object),
                        );
                        out.push(Out::Client(line));
                    }
                    Some(Pending::List { first }) => {
                        self.client_listed(first, &v);
                        out.push(Out::Client(line));
                    }
                    Some(Pending::Call { record, call_id }) => {
                        if let Some(result) = v.get("result") {
                            self.remember_result(&call_id, result);
                        }
                        match record {
                            Some(r) => out.push(Out::Client(with_record(v, r))),
                            None => out.push(Out::Client(line)),
                        }
                    }
                    Some(Pending::Other) | None => out.push(Out::Client(line)),
                }
            }
            Value::Array(items) => {
                for item in items {
                    if let Some(id) = item.get("id") {
                        self.pending.remove(&key(id));
                    }
                }
                out.push(Out::Client(line));
            }
            _ => out.push(Out::Client(line)),
        }
    }

    /// A line over the size limit came from the client, known by its ends ([`Dropped`]):
    /// a request of its is answered with an error (when its id shows); an answer of its to
    /// a request of the server's goes to the server as an error instead.
    pub fn client_too_long(&mut self, dropped: &Dropped, max: usize, out: &mut Vec<Out>) {
        let len = dropped.len;
        if !dropped.request
            && let Some(id) = &dropped.id
        {
            out.push(Out::Server(error(
                id,
                INTERNAL_ERROR,
                &format!("the client's answer is {len} bytes, over toolmend mcp-proxy's limit of {max} bytes (--max-message-bytes); it was dropped"),
            )));
            return;
        }
        out.push(Out::Client(error(
            dropped.id.as_ref().unwrap_or(&Value::Null),
            INVALID_REQUEST,
            &format!("Invalid Request: the message is {len} bytes, over toolmend mcp-proxy's limit of {max} bytes (--max-message-bytes); it was not forwarded"),
        )));
    }

    /// A line over the size limit came from the server: the request of the client's it
    /// answered (when its id shows) is answered with an error; a request of the server's
    /// own is answered to the server; the answer to the relay's own listing ends it.
    pub async fn server_too_long(&mut self, dropped: &Dropped, max: usize, out: &mut Vec<Out>) {
        let len = dropped.len;
        tracing::warn!(target: "toolmend::mcp", len, max, "the server sent a message over the size limit; it was dropped");
        let Some(id) = &dropped.id else { return };
        if dropped.request {
            out.push(Out::Server(error(
                id,
                INVALID_REQUEST,
                &format!("Invalid Request: the message is {len} bytes, over toolmend mcp-proxy's limit of {max} bytes (--max-message-bytes); it was not forwarded"),
            )));
            return;
        }
        if self.listing.as_ref().is_some_and(|l| l.id == key(id)) {
            self.listing_failed("its answer is over the size limit");
            self.flush(out).await;
            return;
        }
        if self.pending.remove(&key(id)).is_some() {
            out.push(Out::Client(error(
                id,
                INTERNAL_ERROR,
                &format!("the MCP server's answer is {len} bytes, over toolmend mcp-proxy's limit of {max} bytes (--max-message-bytes); it was dropped"),
            )));
        }
    }

    /// The relay's own listing got no usable answer: calls pass as sent, unmended.
    fn listing_failed(&mut self, why: &str) {
        tracing::warn!(target: "toolmend::mcp", why, "the MCP server did not list its tools; calls pass as sent, unmended");
        self.listing = None;
        self.tools = Tools::Unavailable;
        self.stale = false;
    }

    /// The server is gone: every request it had, and every call waiting, is answered
    /// with an error saying so.
    pub fn server_gone(&mut self, why: &str, out: &mut Vec<Out>) {
        let mut ids: Vec<String> = self.pending.drain().map(|(k, _)| k).collect();
        ids.sort();
        ids.extend(self.waiting.drain(..).map(|(k, _)| k));
        self.listing = None;
        for k in ids {
            let id: Value = serde_json::from_str(&k).unwrap_or(Value::Null);
            out.push(Out::Client(error(
                &id,
                SERVER_GONE,
                &format!("the MCP server is gone ({why}) and did not answer; toolmend mcp-proxy ends with it"),
            )));
        }
    }

    /// A page of the client's own listing: the tools, once its last page came (and no
    /// listing of the relay's is under way).
    fn client_listed(&mut self, first: bool, v: &Value) {
        let Some(result) = v.get("result") else {
            self.client_pages = None;
            return;
        };
        if first {
            self.client_pages = Some((Vec::new(), 0));
        }
        let Some((pages, count)) = &mut self.client_pages else {
            return;
        };
        *count += 1;
        if *count > MAX_LIST_PAGES {
            // Past the bound the client's listing is not followed (the relay lists itself
            // when a call needs it).
            self.client_pages = None;
            return;
        }
        if let Some(tools) = result.get("tools").and_then(Value::as_array) {
            pages.extend(tools.iter().cloned());
        }
        if result.get("nextCursor").is_some_and(|c| !c.is_null()) {
            return;
        }
        if let Some((tools, _)) = self.client_pages.take()
            && self.listing.is_none()
        {
            self.tools = compile(&tools);
            self.stale = false;
        }
    }

    /// Lists the tools: the relay's own `tools/list`, with the protocol's `_meta`
    /// stamps of the request that needed it.
    fn list(&mut self, meta: Option<Value>, out: &mut Vec<Out>) {
        self.listing = Some(Listing {
            id: String::new(),
            tools: Vec::new(),
            pages: 0,
            again: false,
            meta,
        });
        self.list_page(None, out);
    }

    fn list_page(&mut self, cursor: Option<&str>, out: &mut Vec<Out>) {
        let Some(listing) = &mut self.listing else {
            return;
        };
        self.own_seq += 1;
        let id = format!("{OWN_ID_PREFIX}tools/list#{}", self.own_seq);
        let mut params = Map::new();
        if let Some(c) = cursor {
            params.insert("cursor".into(), Value::String(c.to_owned()));
        }
        if let Some(m) = &listing.meta {
            params.insert("_meta".into(), m.clone());
        }
        let mut request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
        if !params.is_empty() {
            request["params"] = Value::Object(params);
        }
        out.push(Out::Server(request.to_string().into_bytes()));
        listing.id = key(&Value::String(id));
        listing.pages += 1;
    }

    async fn listed(&mut self, v: &Value, out: &mut Vec<Out>) {
        let Some(mut listing) = self.listing.take() else {
            return;
        };
        let Some(result) = v.get("result") else {
            // Its code and message (redacted): never its data, which may hold anything.
            let code = v.pointer("/error/code").cloned().unwrap_or_default();
            let message = v
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("");
            self.listing_failed(&format!(
                "tools/list answered the error {code}: {}",
                toolmend::redact::text(message)
            ));
            self.flush(out).await;
            return;
        };
        if let Some(tools) = result.get("tools").and_then(Value::as_array) {
            listing.tools.extend(tools.iter().cloned());
        }
        if let Some(cursor) = result.get("nextCursor").and_then(Value::as_str)
            && listing.pages < MAX_LIST_PAGES
        {
            let cursor = cursor.to_owned();
            self.listing = Some(listing);
            self.list_page(Some(&cursor), out);
            return;
        }
        self.tools = compile(&listing.tools);
        if listing.again {
            self.list(listing.meta, out);
            return;
        }
        self.stale = false;
        self.flush(out).await;
    }

    /// The calls that waited for the list, in their order.
    async fn flush(&mut self, out: &mut Vec<Out>) {
        while self.listing.is_none()
            && let Some((_, v)) = self.waiting.pop_front()
        {
            let id = v.get("id").cloned().unwrap_or(Value::Null);
            self.mend_and_send(id, v, None, out).await;
        }
    }

    fn remember_call(&mut self, call_id: &str, params: &Value) {
        if self.keep_history {
            self.history.call(call_id, params);
        }
    }

    fn remember_result(&mut self, call_id: &str, result: &Value) {
        if self.keep_history {
            self.history.result(call_id, result);
        }
    }
}

/// The tools of a `tools/list`, compiled; a tool whose schema does not compile is kept
/// apart (its calls pass as sent), and so is a second tool of one name.
fn compile(tools: &[Value]) -> Tools {
    let mut toolbox = Toolbox::new();
    let mut unmended = HashSet::new();
    for t in tools {
        let Some(name) = t.get("name").and_then(Value::as_str) else {
            continue;
        };
        let description = t.get("description").and_then(Value::as_str).unwrap_or("");
        let schema = t
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object"}));
        match CompiledTool::compile(name, description, &schema) {
            Ok(c) => {
                if toolbox.add(c).is_err() {
                    unmended.insert(name.to_owned());
                }
            }
            Err(e) => {
                tracing::warn!(target: "toolmend::mcp", tool = name, error = %e, "the tool's inputSchema does not compile; its calls pass as sent");
                unmended.insert(name.to_owned());
            }
        }
    }
    Tools::Known { toolbox, unmended }
}

/// The protocol's own `_meta` stamps of a request (`io.modelcontextprotocol/…`: the
/// version, the client and its capabilities, in the 2026-07-28 revision), for a request
/// the relay sends on its behalf; `None` when it has none.
fn stamps(v: &Value) -> Option<Value> {
    let meta = v.pointer("/params/_meta")?.as_object()?;
    let kept: Map<String, Value> = meta
        .iter()
        .filter(|(k, _)| k.starts_with("io.modelcontextprotocol/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!kept.is_empty()).then_some(Value::Object(kept))
}

/// Whether request `v` is of the stateless 2026-07-28 revision (it carries the protocol
/// version in its `_meta`, as every request of that revision does).
fn is_modern(v: &Value) -> bool {
    v.pointer("/params/_meta")
        .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
        .is_some()
}

/// Whether `v` is a `notifications/cancelled` notification.
fn is_cancel(v: &Value) -> bool {
    v.get("method").and_then(Value::as_str) == Some("notifications/cancelled")
}

/// Whether `v` is a `tools/call` request.
fn is_call(v: &Value) -> bool {
    v.get("method").and_then(Value::as_str) == Some("tools/call")
        && v.get("id").is_some_and(|i| !i.is_null())
}

/// A JSON-RPC id as a map key (its JSON text: `7` and `"7"` stay apart).
fn key(id: &Value) -> String {
    id.to_string()
}

/// The server's answer with what toolmend did added to its result's `_meta`.
/// The server's answer to a mended call with what was done: in its result's `_meta`, or,
/// when the server refused the call, in its error's `data`.
fn with_record(mut v: Value, record: Value) -> Vec<u8> {
    if let Some(result) = v.get_mut("result") {
        crate::mend::attach(result, record);
    } else if let Some(error) = v.get_mut("error").and_then(Value::as_object_mut) {
        let data = error.entry("data").or_insert(Value::Null);
        if data.is_null() {
            *data = json!({});
        }
        if let Some(d) = data.as_object_mut() {
            d.insert(META_MEND.into(), record);
        }
    }
    v.to_string().into_bytes()
}

fn response(id: &Value, result: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
        .to_string()
        .into_bytes()
}

fn error(id: &Value, code: i64, message: &str) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string()
        .into_bytes()
}
