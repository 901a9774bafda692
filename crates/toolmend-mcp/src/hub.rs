//! The aggregating server: many MCP servers behind one endpoint (stdio or streamable
//! HTTP), each call mended on its way.
//!
//! ```text
//! client ──► Hub (an rmcp server) ──► McpConnection per [[mcp]] server (stdio or HTTP)
//!              tools/list     every server's tools, every page, named by the template
//!                             where two servers share a name
//!              tools/call     mended (crate::mend), routed to its server by name
//!              prompts        likewise named and routed; resources routed by URI
//!              completion     routed by the prompt or the resource template it names
//! ```
//!
//! Unlike the stdio wrapper ([`crate::stdio`]), the hub is an MCP server of its own: it
//! negotiates the protocol with its clients and, separately, with each server (through
//! `toolmend_tools::mcp`, which restarts a session that ended). What it does not carry
//! between the two sides: progress notifications of a server, and a server's own
//! requests (sampling, elicitation, roots): a server behind the hub gets no client
//! capabilities for them.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, RwLock},
    time::Duration,
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest,
        CompleteRequestParams, CompleteResult, ErrorCode, GetPromptRequestParams,
        GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
        ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
        ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ServerCapabilities,
        ServerConfig,
    },
    service::RequestContext,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use toolmend::{CompiledTool, Toolbox};
use toolmend_tools::mcp::{Forwarded, McpConnection};

use crate::{
    mend::{META_MEND, Mender, Verdict},
    recent::Recent,
    relay::MAX_LIST_PAGES,
};

/// Where a call's `arguments` that were not an object (a JSON string, most often) wait
/// for the hub: the protocol library reads `arguments` as an object and would refuse the
/// whole request (`-32601`), so [`stash_text_arguments`] moves the value under this key
/// before it reads the message, and the hub mends the value as sent.
pub const STASHED_ARGUMENTS: &str = "io.toolmend/arguments";

/// The message (or batch) `body` with the `arguments` of each `tools/call` that are not
/// an object moved into an object under [`STASHED_ARGUMENTS`]; `None` when none was.
pub fn stash_text_arguments(body: &[u8]) -> Option<Vec<u8>> {
    let mut v: Value = serde_json::from_slice(body).ok()?;
    let mut changed = false;
    let mut stash = |m: &mut Value| {
        if m.get("method").and_then(Value::as_str) != Some("tools/call") {
            return;
        }
        if let Some(args) = m.pointer_mut("/params/arguments")
            && !args.is_object()
            && !args.is_null()
        {
            *args = json!({ STASHED_ARGUMENTS: args.take() });
            changed = true;
        }
    };
    match &mut v {
        Value::Array(items) => items.iter_mut().for_each(&mut stash),
        m => stash(m),
    }
    changed.then(|| v.to_string().into_bytes())
}

/// How the hub names a server's tools and prompts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Naming {
    /// The name of a tool (or prompt) `{tool}` of server `{server}`.
    pub template: String,
    /// Every name by the template; otherwise only names two servers share.
    pub always: bool,
}

impl Default for Naming {
    fn default() -> Self {
        Naming {
            template: "{server}_{tool}".to_owned(),
            always: false,
        }
    }
}

impl Naming {
    fn apply(&self, server: &str, item: &str) -> String {
        self.template
            .replace("{server}", server)
            .replace("{tool}", item)
    }
}

/// The aggregating server (cheap to clone: every session of its clients shares the
/// servers behind it).
#[derive(Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("servers", &self.inner.servers.len())
            .field("naming", &self.inner.naming)
            .finish_non_exhaustive()
    }
}

struct Inner {
    servers: Vec<McpConnection>,
    naming: Naming,
    mender: Mender,
    timeout: Duration,
    session: String,
    tools: RwLock<Option<Arc<Catalog>>>,
    prompts: RwLock<HashMap<String, (usize, String)>>,
    resources: RwLock<HashMap<String, usize>>,
    templates: RwLock<Vec<(String, usize)>>,
    /// Each session's recent calls, when a guard reads them.
    recent: Option<std::sync::Mutex<Sessions>>,
}

/// Sessions' recent calls, the oldest session forgotten past [`MAX_SESSIONS`].
#[derive(Default)]
struct Sessions {
    by_id: HashMap<String, Recent>,
    order: std::collections::VecDeque<String>,
}

/// Sessions whose recent calls the hub keeps for the guard.
pub const MAX_SESSIONS: usize = 4096;

impl Sessions {
    fn get(&mut self, session: &str) -> &mut Recent {
        if !self.by_id.contains_key(session) {
            if self.order.len() == MAX_SESSIONS
                && let Some(old) = self.order.pop_front()
            {
                self.by_id.remove(&old);
            }
            self.order.push_back(session.to_owned());
        }
        self.by_id.entry(session.to_owned()).or_default()
    }
}

/// The tools as the hub shows them.
struct Catalog {
    /// Each tool's definition, under its name here.
    tools: Vec<Value>,
    /// Name here -> (server, name there).
    routes: HashMap<String, (usize, String)>,
    toolbox: Toolbox,
    /// Tools whose schema does not compile: their calls pass as sent.
    unmended: HashSet<String>,
}

impl Hub {
    /// A hub over `servers` (connected), naming by `naming`, mending with `mender`;
    /// `timeout` bounds each request to a server; `session` is the guard's session for a
    /// client that names none (stdio).
    pub fn new(
        servers: Vec<McpConnection>,
        naming: Naming,
        mender: Mender,
        timeout: Duration,
        session: impl Into<String>,
    ) -> Self {
        let recent = mender.guarded().then(Default::default);
        Hub {
            inner: Arc::new(Inner {
                recent,
                servers,
                naming,
                mender,
                timeout,
                session: session.into(),
                tools: RwLock::new(None),
                prompts: RwLock::new(HashMap::new()),
                resources: RwLock::new(HashMap::new()),
                templates: RwLock::new(Vec::new()),
            }),
        }
    }

    /// One request to server `at`, as JSON both ways.
    async fn ask(
        &self,
        at: usize,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, ErrorData> {
        self.ask_until(at, method, params, std::future::pending())
            .await
    }

    /// [`Hub::ask`], given up (and cancelled at the server) when `cancelled` resolves.
    async fn ask_until(
        &self,
        at: usize,
        method: &str,
        params: Option<Value>,
        cancelled: impl std::future::Future<Output = ()>,
    ) -> Result<Value, ErrorData> {
        let server = &self.inner.servers[at];
        let mut request = json!({ "method": method });
        if let Some(p) = params {
            request["params"] = p;
        }
        let request: ClientRequest = serde_json::from_value(request).map_err(|e| {
            ErrorData::invalid_params(
                format!("toolmend mcp-proxy cannot forward this {method}: {e}"),
                None,
            )
        })?;
        match server.forward(request, self.inner.timeout, cancelled).await {
            Ok(result) => serde_json::to_value(result)
                .map_err(|e| ErrorData::internal_error(format!("{e}"), None)),
            Err(Forwarded::Rpc(e)) => Err(e),
            Err(Forwarded::Cancelled) => {
                Err(ErrorData::new(ErrorCode(-32800), "request cancelled", None))
            }
            Err(Forwarded::Transport(e)) => Err(ErrorData::internal_error(
                format!("MCP server {:?}: {e}", server.name()),
                None,
            )),
        }
    }

    /// Every page of a listing of server `at`: the items under `key`.
    async fn pages(&self, at: usize, method: &str, key: &str) -> Result<Vec<Value>, ErrorData> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_LIST_PAGES {
            let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
            let page = self.ask(at, method, params).await?;
            if let Some(list) = page.get(key).and_then(Value::as_array) {
                items.extend(list.iter().cloned());
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(c) => cursor = Some(c.to_owned()),
                None => break,
            }
        }
        Ok(items)
    }

    /// Every server's listing, each item with its server's index; a server that fails
    /// is left out (and logged), the others still listed.
    async fn list_all(&self, method: &str, key: &str) -> Vec<(usize, Value)> {
        let asks = (0..self.inner.servers.len())
            .map(|at| async move { (at, self.pages(at, method, key).await) });
        let mut out = Vec::new();
        for (at, listed) in futures::future::join_all(asks).await {
            match listed {
                Ok(items) => out.extend(items.into_iter().map(|i| (at, i))),
                Err(e) => {
                    let server = self.inner.servers[at].name();
                    tracing::warn!(target: "toolmend::mcp", server, method, error = %e.message, "an MCP server did not answer a listing; its items are left out");
                }
            }
        }
        out
    }

    /// Names items (by `name`) as the hub shows them: the template where two servers
    /// share a name (or always).
    fn named(&self, items: Vec<(usize, Value)>) -> Vec<(String, usize, String, Value)> {
        let mut count: HashMap<String, usize> = HashMap::new();
        for (_, item) in &items {
            if let Some(n) = item.get("name").and_then(Value::as_str) {
                *count.entry(n.to_owned()).or_default() += 1;
            }
        }
        items
            .into_iter()
            .filter_map(|(at, mut item)| {
                let name = item.get("name")?.as_str()?.to_owned();
                let shown = if self.inner.naming.always || count[&name] > 1 {
                    self.inner
                        .naming
                        .apply(self.inner.servers[at].name(), &name)
                } else {
                    name.clone()
                };
                item["name"] = Value::String(shown.clone());
                Some((shown, at, name, item))
            })
            .collect()
    }

    /// Lists every server's tools again.
    async fn refresh_tools(&self) -> Arc<Catalog> {
        let listed = self.list_all("tools/list", "tools").await;
        let mut catalog = Catalog {
            tools: Vec::new(),
            routes: HashMap::new(),
            toolbox: Toolbox::new(),
            unmended: HashSet::new(),
        };
        for (shown, at, name, item) in self.named(listed) {
            if catalog.routes.contains_key(&shown) {
                tracing::warn!(target: "toolmend::mcp", tool = %shown, "two tools have one name even by the template; the first is kept");
                continue;
            }
            let description = item
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("");
            let schema = item
                .get("inputSchema")
                .cloned()
                .unwrap_or_else(|| json!({"type": "object"}));
            match CompiledTool::compile(&shown, description, &schema) {
                Ok(c) => {
                    let _ = catalog.toolbox.add(c);
                }
                Err(e) => {
                    tracing::warn!(target: "toolmend::mcp", tool = %shown, error = %e, "the tool's inputSchema does not compile; its calls pass as sent");
                    catalog.unmended.insert(shown.clone());
                }
            }
            catalog.routes.insert(shown, (at, name));
            catalog.tools.push(item);
        }
        let catalog = Arc::new(catalog);
        *self
            .inner
            .tools
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::clone(&catalog));
        catalog
    }

    /// The tools known now, listed first if they never were.
    async fn catalog(&self) -> Arc<Catalog> {
        let known = self
            .inner
            .tools
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        match known {
            Some(c) => c,
            None => self.refresh_tools().await,
        }
    }

    /// `f` on `session`'s recent calls, when the hub keeps them (a guard reads them).
    fn recent<T>(&self, session: &str, f: impl FnOnce(&mut Recent) -> T) -> Option<T> {
        let sessions = self.inner.recent.as_ref()?;
        let mut s = sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(f(s.get(session)))
    }

    /// The guard's session of a request: the streamable HTTP session, else the hub's.
    fn session_of(&self, context: &RequestContext<RoleServer>) -> String {
        context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map_or_else(|| self.inner.session.clone(), |s| format!("mcp-http:{s}"))
    }

    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut catalog = self.catalog().await;
        if !catalog.routes.contains_key(request.name.as_ref()) {
            catalog = self.refresh_tools().await;
        }
        let mut params = serde_json::to_value(&request)
            .map_err(|e| ErrorData::internal_error(format!("{e}"), None))?;
        if let Some(sent) = params
            .pointer_mut("/arguments")
            .and_then(|a| a.as_object_mut())
            .filter(|a| a.len() == 1)
            .and_then(|a| a.remove(STASHED_ARGUMENTS))
        {
            params["arguments"] = sent;
        }
        let id = serde_json::to_value(&context.id).unwrap_or(Value::Null);
        let call_id = match &id {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let session = self.session_of(&context);
        let (params, record) = if catalog.unmended.contains(request.name.as_ref()) {
            (params, None)
        } else {
            let history = self
                .recent(&session, |r| r.messages().to_vec())
                .unwrap_or_default();
            match self
                .inner
                .mender
                .mend(&catalog.toolbox, &id, &params, &session, &history)
                .await
            {
                Verdict::Answer(result) => {
                    self.recent(&session, |r| {
                        r.call(&call_id, &params);
                        r.result(&call_id, &result);
                    });
                    return typed(result);
                }
                Verdict::Forward {
                    params: mended,
                    record,
                } => (mended.unwrap_or(params), record),
            }
        };
        self.recent(&session, |r| r.call(&call_id, &params));
        let shown = params.get("name").and_then(Value::as_str).unwrap_or("");
        let Some((at, name)) = catalog.routes.get(shown).cloned() else {
            // Unknown even after listing, and not mended (its server's schema did not
            // compile): no server has it.
            return typed(
                json!({"content": [{"type": "text", "text": format!("there is no tool named {shown:?}")}], "isError": true}),
            );
        };
        let mut upstream = params;
        upstream["name"] = Value::String(name);
        // The client giving up cancels the call at the server too.
        let answer = self
            .ask_until(at, "tools/call", Some(upstream), context.ct.cancelled())
            .await;
        let mut result = match answer {
            Ok(result) => result,
            Err(mut e) => {
                // The server's error still says what was done to the call it refused.
                if let Some(r) = record {
                    let data = e.data.get_or_insert_with(|| json!({}));
                    if let Some(d) = data.as_object_mut() {
                        d.insert(META_MEND.into(), r);
                    }
                }
                return Err(e);
            }
        };
        self.recent(&session, |r| r.result(&call_id, &result));
        if let Some(r) = record {
            crate::mend::attach(&mut result, r);
        }
        typed(result)
    }
}

/// A JSON result as the type the handler returns.
fn typed<T: DeserializeOwned>(v: Value) -> Result<T, ErrorData> {
    serde_json::from_value(v).map_err(|e| {
        ErrorData::internal_error(format!("the MCP server's answer does not read: {e}"), None)
    })
}

impl ServerHandler for Hub {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .enable_completions()
                .build(),
        )
        .with_server_info(Implementation::new(
            "toolmend-mcp-proxy",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let catalog = self.refresh_tools().await;
        typed(json!({ "tools": catalog.tools }))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(request, context)
            .await
            .map(CallToolResponse::Complete)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let listed = self.list_all("prompts/list", "prompts").await;
        let named = self.named(listed);
        let mut routes = HashMap::new();
        let mut prompts = Vec::new();
        for (shown, at, name, item) in named {
            routes.entry(shown).or_insert((at, name));
            prompts.push(item);
        }
        *self
            .inner
            .prompts
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = routes;
        typed(json!({ "prompts": prompts }))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let route = |hub: &Hub| {
            hub.inner
                .prompts
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(&request.name)
                .cloned()
        };
        let route = match route(self) {
            Some(r) => Some(r),
            None => {
                self.list_prompts(None, context).await?;
                route(self)
            }
        };
        let Some((at, name)) = route else {
            return Err(ErrorData::invalid_params(
                format!("there is no prompt named {:?}", request.name),
                None,
            ));
        };
        let mut params = serde_json::to_value(&request)
            .map_err(|e| ErrorData::internal_error(format!("{e}"), None))?;
        params["name"] = Value::String(name);
        let result: GetPromptResult = typed(self.ask(at, "prompts/get", Some(params)).await?)?;
        Ok(GetPromptResponse::Complete(result))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let listed = self.list_all("resources/list", "resources").await;
        let mut routes = HashMap::new();
        let mut resources = Vec::new();
        for (at, item) in listed {
            if let Some(uri) = item.get("uri").and_then(Value::as_str) {
                routes.entry(uri.to_owned()).or_insert(at);
            }
            resources.push(item);
        }
        *self
            .inner
            .resources
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = routes;
        typed(json!({ "resources": resources }))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let listed = self
            .list_all("resources/templates/list", "resourceTemplates")
            .await;
        let mut routes = Vec::new();
        let mut templates = Vec::new();
        for (at, item) in listed {
            if let Some(t) = item.get("uriTemplate").and_then(Value::as_str) {
                routes.push((t.to_owned(), at));
            }
            templates.push(item);
        }
        *self
            .inner
            .templates
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = routes;
        typed(json!({ "resourceTemplates": templates }))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let params = serde_json::to_value(&request)
            .map_err(|e| ErrorData::internal_error(format!("{e}"), None))?;
        let listed = self
            .inner
            .resources
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&request.uri)
            .copied();
        // A listed resource: its server. Any other (a template's): each server in turn,
        // until one has it.
        let order: Vec<usize> = match listed {
            Some(at) => vec![at],
            None => (0..self.inner.servers.len()).collect(),
        };
        let mut last = ErrorData::resource_not_found(
            format!("no MCP server has the resource {:?}", request.uri),
            None,
        );
        for at in order {
            match self.ask(at, "resources/read", Some(params.clone())).await {
                Ok(v) => {
                    let result: ReadResourceResult = typed(v)?;
                    return Ok(ReadResourceResponse::Complete(result));
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let mut params = serde_json::to_value(&request)
            .map_err(|e| ErrorData::internal_error(format!("{e}"), None))?;
        let at = match params.pointer("/ref/type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let shown = params
                    .pointer("/ref/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let route = self
                    .inner
                    .prompts
                    .read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .get(shown)
                    .cloned();
                route.map(|(at, name)| {
                    params["ref"]["name"] = Value::String(name);
                    at
                })
            }
            Some("ref/resource") => {
                let uri = params
                    .pointer("/ref/uri")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                self.inner
                    .templates
                    .read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .iter()
                    .find(|(t, _)| t == uri)
                    .map(|(_, at)| *at)
            }
            _ => None,
        };
        let Some(at) = at else {
            return Ok(CompleteResult::default());
        };
        typed(self.ask(at, "completion/complete", Some(params)).await?)
    }
}
