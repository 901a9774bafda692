//! [`ToolSet`]: a tools file loaded: every `[[tools]]` entry checked (name, schema,
//! business rules, template, endpoint, retries, backup, secrets), every `[[mcp]]` server
//! connected and listed, and each tool a [`NetTool`]. Startup fails on the first error,
//! naming the file, the line and the tool; a schema an MCP server sends that does not
//! compile is reported ([`ToolSet::problems`]) and its tool left out, not trusted.

use std::{collections::HashMap, sync::Arc, time::Duration};

use toolmend::{
    conversation,
    node::{Registry, ToolOptions},
    schema::CompiledTool,
};

use crate::{
    LoadError, NetTool, ToolsFile,
    http::{HttpOptions, HttpTransport, parse_endpoint},
    mcp::{McpConnection, McpToolDef},
    shape::{ShapeSpec, Shaper},
    sla::{Sla, SlaPolicy},
    spec::{self, ToolKind, ToolSpec},
    tool::Target,
};

/// The tools of a tools file, ready to run.
#[derive(Debug, Default)]
pub struct ToolSet {
    tools: Vec<Arc<NetTool>>,
    /// Index into `tools` by name.
    by_name: HashMap<String, usize>,
    problems: Vec<String>,
    servers: Vec<Arc<McpConnection>>,
}

/// Reads the process environment (the loader's default for secrets).
pub fn std_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl ToolSet {
    /// Loads a file that holds only `[[tools]]` and `[[mcp]]`, secrets from the process
    /// environment.
    ///
    /// # Errors
    ///
    /// The file cannot be read, or anything [`load`](Self::load) refuses.
    pub async fn from_path(path: &std::path::Path) -> Result<ToolSet, LoadError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| LoadError {
            origin: origin.clone(),
            line: None,
            tool: None,
            message: format!("cannot read the tools file: {e}"),
        })?;
        let file = ToolsFile::parse(&text, &origin)?;
        ToolSet::load(&file, &std_env).await
    }

    /// Loads `file`; `env` resolves secrets (headers, MCP child environments).
    ///
    /// # Errors
    ///
    /// The first problem, with the file, line and tool: a name that is not valid or is
    /// used twice, a schema or template that does not compile, an endpoint that is not an
    /// http(s) URL, retries on a tool that is not safe to retry, a backup that is not
    /// declared, a secret whose variable is not set, an MCP server that cannot be reached
    /// or does not list a tool named for it.
    pub async fn load(
        file: &ToolsFile,
        env: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> Result<ToolSet, LoadError> {
        let mut set = ToolSet::default();
        let mut names: HashMap<&str, usize> = HashMap::new();
        for (line, t) in &file.tools {
            if !toolmend::history::is_valid_function_name(&t.name) {
                return Err(file.error(
                    *line,
                    &t.name,
                    "a tool name must match ^[a-zA-Z0-9_-]{1,64}$",
                ));
            }
            if let Some(first) = names.insert(&t.name, *line) {
                return Err(file.error(
                    *line,
                    &t.name,
                    format!("declared twice (first at line {first})"),
                ));
            }
        }
        // MCP servers: connected concurrently, each listed once.
        let mut by_server: HashMap<&str, (usize, Arc<McpConnection>, Vec<McpToolDef>)> =
            HashMap::new();
        {
            let mut seen: HashMap<&str, usize> = HashMap::new();
            for (line, m) in &file.mcp {
                if let Some(first) = seen.insert(&m.name, *line) {
                    return Err(file.error(
                        *line,
                        &m.name,
                        format!("MCP server declared twice (first at line {first})"),
                    ));
                }
                if m.url.is_some() == m.command.is_some() {
                    return Err(file.error(*line, &m.name, "an [[mcp]] server needs exactly one of `url` (streamable HTTP) or `command` (stdio)"));
                }
                if let Some(url) = &m.url {
                    parse_endpoint(url).map_err(|e| file.error(*line, &m.name, e))?;
                }
            }
            let connected =
                futures::future::join_all(file.mcp.iter().map(|(line, m)| async move {
                    let conn = McpConnection::connect(m, env).await?;
                    let tools = conn.list_tools().await?;
                    Ok::<_, String>((*line, m, conn, tools))
                }))
                .await;
            for (r, (line, m)) in connected.into_iter().zip(&file.mcp) {
                let (line, m, conn, tools) =
                    r.map_err(|e| file.error(*line, &m.name, format!("MCP server: {e}")))?;
                let conn = Arc::new(conn);
                set.servers.push(Arc::clone(&conn));
                by_server.insert(&m.name, (line, conn, tools));
            }
        }
        let mut declared_remote: HashMap<(&str, &str), ()> = HashMap::new();
        for (line, t) in &file.tools {
            let tool = build_declared(file, *line, t, &by_server, env)?;
            if let (ToolKind::Mcp, Some(server)) = (t.kind, t.server.as_deref()) {
                declared_remote.insert((server, t.remote_name.as_deref().unwrap_or(&t.name)), ());
            }
            set.push(tool);
        }
        // The rest of each server's tools, with the server's defaults.
        for (line, m) in &file.mcp {
            let Some((_, conn, listed)) = by_server.get(m.name.as_str()) else {
                continue;
            };
            if let Some(wanted) = &m.tools {
                for w in wanted {
                    if !listed.iter().any(|d| &d.name == w) {
                        let have: Vec<&str> = listed.iter().map(|d| d.name.as_str()).collect();
                        return Err(file.error(
                            *line,
                            &m.name,
                            format!(
                                "the server lists no tool {w:?} (it lists: {})",
                                have.join(", ")
                            ),
                        ));
                    }
                }
            }
            for def in listed {
                if m.tools.as_ref().is_some_and(|w| !w.contains(&def.name))
                    || declared_remote.contains_key(&(m.name.as_str(), def.name.as_str()))
                {
                    continue;
                }
                if names.contains_key(def.name.as_str())
                    || set.by_name.contains_key(def.name.as_str())
                {
                    set.problems.push(format!("MCP server {:?}: tool {:?} has the name of another tool; left out (declare it in [[tools]] with another name and remote_name)", m.name, def.name));
                    continue;
                }
                if !toolmend::history::is_valid_function_name(&def.name) {
                    set.problems.push(format!(
                        "MCP server {:?}: tool {:?} has a name models cannot call; left out",
                        m.name, def.name
                    ));
                    continue;
                }
                if let Err(e) =
                    CompiledTool::compile(&def.name, &def.description, &def.input_schema)
                {
                    let p = format!(
                        "MCP server {:?}: the inputSchema of tool {:?} does not compile ({e}); left out, not trusted",
                        m.name, def.name
                    );
                    tracing::warn!("{p}");
                    set.problems.push(p);
                    continue;
                }
                let shaper = Shaper::new(&ShapeSpec {
                    template: None,
                    budget_bytes: m.budget_bytes.unwrap_or(spec::DEFAULT_BUDGET_BYTES),
                    markdown: m.markdown,
                })
                .map_err(|e| file.error(*line, &m.name, e))?;
                set.push(NetTool {
                    name: def.name.clone(),
                    description: def.description.clone(),
                    parameters: def.input_schema.clone(),
                    target: Target::Mcp {
                        conn: Arc::clone(conn),
                        remote: def.name.clone(),
                    },
                    shaper,
                    timeout: Duration::from_millis(
                        m.timeout_ms.unwrap_or(spec::DEFAULT_TIMEOUT_MS),
                    ),
                    retries: 0,
                    sla: None,
                    backup: std::sync::OnceLock::new(),
                    server_side: m.server_side,
                    accept_truncated: false,
                    limits: None,
                    kind: "mcp",
                });
            }
        }
        // Backups, once every tool exists.
        for (line, t) in &file.tools {
            let Some(b) = &t.backup else { continue };
            if b == &t.name {
                return Err(file.error(*line, &t.name, "a tool cannot be its own backup"));
            }
            let Some(backup) = set.get(b).cloned() else {
                return Err(file.error(
                    *line,
                    &t.name,
                    format!("backup {b:?} is not a declared tool"),
                ));
            };
            if let Some(me) = set.get(&t.name) {
                let _ = me.backup.set(backup);
            }
        }
        Ok(set)
    }

    fn push(&mut self, tool: NetTool) {
        self.by_name.insert(tool.name.clone(), self.tools.len());
        self.tools.push(Arc::new(tool));
    }

    /// The tools, in file order (declared tools first, then the rest of each MCP server's).
    pub fn tools(&self) -> &[Arc<NetTool>] {
        &self.tools
    }

    /// A tool by name.
    pub fn get(&self, name: &str) -> Option<&Arc<NetTool>> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// What was left out, and why (MCP schemas that do not compile, names taken).
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// True when no tool was loaded.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// True when the gateway runs `name` itself.
    pub fn is_server_side(&self, name: &str) -> bool {
        self.get(name).is_some_and(|t| t.server_side)
    }

    /// The tool definitions to send a model (`tools` of a chat request), all or only the
    /// server-side ones.
    pub fn definitions(&self, only_server_side: bool) -> Vec<conversation::Tool> {
        self.tools
            .iter()
            .filter(|t| !only_server_side || t.server_side)
            .map(|t| conversation::Tool::function(&t.name, &t.description, t.parameters.clone()))
            .collect()
    }

    /// Adds every tool to `registry` with its settings: the whole timeout (retries
    /// included), its business rules, its flood limits, `accept_truncated`.
    ///
    /// # Errors
    ///
    /// A name the registry already has.
    pub fn add_to(&self, registry: &mut Registry) -> Result<(), toolmend::Error> {
        self.add_where(registry, |_| true)
    }

    /// [`add_to`](Self::add_to) for the tools `keep` names only (a request that allows a
    /// few: a call to another is then an unknown tool, answered with feedback that lists
    /// the allowed ones).
    ///
    /// # Errors
    ///
    /// As [`add_to`](Self::add_to).
    pub fn add_where(
        &self,
        registry: &mut Registry,
        keep: impl Fn(&str) -> bool,
    ) -> Result<(), toolmend::Error> {
        for t in self.tools.iter().filter(|t| keep(&t.name)) {
            let mut opts = ToolOptions::default().timeout(t.total_timeout());
            if t.accept_truncated {
                opts = opts.accept_truncated();
            }
            if let Some(l) = &t.limits {
                opts = opts.guard(l.clone());
            }
            registry.add_shared(Arc::clone(t) as Arc<dyn toolmend::node::Tool>, opts)?;
        }
        Ok(())
    }

    /// A registry of these tools (see [`add_to`](Self::add_to)).
    ///
    /// # Errors
    ///
    /// As [`add_to`](Self::add_to).
    pub fn registry(&self) -> Result<Registry, toolmend::Error> {
        let mut r = Registry::new();
        self.add_to(&mut r)?;
        Ok(r)
    }
}

fn build_declared(
    file: &ToolsFile,
    line: usize,
    t: &ToolSpec,
    servers: &HashMap<&str, (usize, Arc<McpConnection>, Vec<McpToolDef>)>,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<NetTool, LoadError> {
    let err = |m: String| file.error(line, &t.name, m);
    if t.parameters.is_some() && t.parameters_json.is_some() {
        return Err(err(
            "give `parameters` or `parameters_json`, not both".into()
        ));
    }
    let mut parameters = match (&t.parameters, &t.parameters_json) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(j)) => Some(
            serde_json::from_str(j)
                .map_err(|e| err(format!("parameters_json is not JSON: {e}")))?,
        ),
        _ => None,
    };
    let mut description = t.description.clone();
    let target = match t.kind {
        ToolKind::Http => {
            if t.server.is_some() || t.remote_name.is_some() {
                return Err(err(
                    "`server` and `remote_name` are for kind = \"mcp\"".into()
                ));
            }
            let Some(endpoint) = &t.endpoint else {
                return Err(err(
                    "an http tool needs `endpoint` (the URL its calls are POSTed to)".into(),
                ));
            };
            let url = parse_endpoint(endpoint).map_err(err)?;
            if t.retries > 0 && !t.idempotent && !t.idempotency_key {
                return Err(err(format!(
                    "retries = {} on a tool that is neither idempotent nor sends an Idempotency-Key: a retry could run it twice; set idempotent = true (a lookup) or idempotency_key = true (the service dedups by it), or retries = 0",
                    t.retries
                )));
            }
            let headers = spec::resolve_headers(&t.headers, env).map_err(err)?;
            let http = HttpTransport::new(
                url,
                &headers,
                HttpOptions {
                    retries: t.retries,
                    idempotency_key: t.idempotency_key,
                    adapter: t.adapter.clone(),
                    max_bytes: t
                        .max_response_bytes
                        .unwrap_or(spec::DEFAULT_MAX_RESPONSE_BYTES),
                    skew_tolerance: Duration::from_millis(
                        t.skew_tolerance_ms
                            .unwrap_or(spec::DEFAULT_SKEW_TOLERANCE_MS),
                    ),
                },
            )
            .map_err(err)?;
            Target::Http(Box::new(http))
        }
        ToolKind::Mcp => {
            if t.endpoint.is_some() || t.adapter.is_some() || !t.headers.is_empty() {
                return Err(err("`endpoint`, `adapter` and `headers` are for http tools; an mcp tool is reached through its [[mcp]] server".into()));
            }
            if t.retries > 0 {
                return Err(err("retries are not offered for mcp tools (a tools/call may have run); set retries = 0".into()));
            }
            let Some(server) = &t.server else {
                return Err(err(
                    "an mcp tool needs `server` (the name of an [[mcp]] entry)".into(),
                ));
            };
            let Some((_, conn, listed)) = servers.get(server.as_str()) else {
                return Err(err(format!("server {server:?} is not an [[mcp]] entry")));
            };
            let remote = t.remote_name.clone().unwrap_or_else(|| t.name.clone());
            let Some(def) = listed.iter().find(|d| d.name == remote) else {
                let have: Vec<&str> = listed.iter().map(|d| d.name.as_str()).collect();
                return Err(err(format!(
                    "MCP server {server:?} lists no tool {remote:?} (it lists: {})",
                    have.join(", ")
                )));
            };
            if parameters.is_none() {
                parameters = Some(def.input_schema.clone());
            }
            if description.is_none() {
                description = Some(def.description.clone());
            }
            Target::Mcp {
                conn: Arc::clone(conn),
                remote,
            }
        }
    };
    let Some(parameters) = parameters else {
        return Err(err(
            "an http tool needs `parameters` (the JSON Schema of its arguments)".into(),
        ));
    };
    let description = description.unwrap_or_default();
    CompiledTool::compile(&t.name, &description, &parameters)
        .map_err(|e| err(format!("the parameters schema does not compile: {e}")))?;
    let shaper = Shaper::new(&ShapeSpec {
        template: t.template.clone(),
        budget_bytes: t.budget_bytes.unwrap_or(spec::DEFAULT_BUDGET_BYTES),
        markdown: t.markdown,
    })
    .map_err(|e| err(format!("the template does not compile: {e}")))?;
    if t.sla_ms.is_some() && t.backup.is_none() {
        return Err(err("sla_ms needs a `backup` tool to degrade to".into()));
    }
    Ok(NetTool {
        name: t.name.clone(),
        description,
        parameters,
        target,
        shaper,
        timeout: Duration::from_millis(t.timeout_ms.unwrap_or(spec::DEFAULT_TIMEOUT_MS).max(1)),
        retries: t.retries,
        sla: t
            .sla_ms
            .map(|ms| Sla::new(SlaPolicy::new(Duration::from_millis(ms)))),
        backup: std::sync::OnceLock::new(),
        server_side: t.server_side,
        accept_truncated: t.accept_truncated,
        limits: t.limits.clone(),
        kind: match t.kind {
            ToolKind::Http => "http",
            ToolKind::Mcp => "mcp",
        },
    })
}
