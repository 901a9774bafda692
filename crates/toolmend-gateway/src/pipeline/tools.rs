//! The compiled tools of a request, cached by their exact text.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
};

use serde_json::Value;
use toolmend::{CompiledTool, Toolbox, protocol::Tool};

/// Compiled tool sets by the exact text of the request's `tools`: agents send the same
/// tools with every request, and compiling schemas costs more than mending.
#[derive(Debug)]
pub struct ToolCache {
    capacity: usize,
    max_tools: usize,
    max_schema_bytes: usize,
    inner: Mutex<Lru>,
}

/// The compiled sets and their insertion order (oldest first).
type Lru = (HashMap<String, Arc<Toolbox>>, VecDeque<String>);

/// A request's `tools` that cannot be compiled.
#[derive(Debug, thiserror::Error)]
#[error("invalid tools in the request: {0}")]
pub struct ToolsError(pub String);

impl ToolCache {
    /// Keeps at most `capacity` tool sets (oldest evicted first).
    pub fn new(capacity: usize) -> Self {
        ToolCache {
            capacity: capacity.max(1),
            max_tools: usize::MAX,
            max_schema_bytes: usize::MAX,
            inner: Mutex::new((HashMap::new(), VecDeque::new())),
        }
    }

    /// Refuses a `tools` list longer than `max_tools`, or a tool whose definition is
    /// longer than `max_schema_bytes` serialized.
    #[must_use]
    pub fn limits(mut self, max_tools: usize, max_schema_bytes: usize) -> Self {
        self.max_tools = max_tools;
        self.max_schema_bytes = max_schema_bytes;
        self
    }

    /// The compiled tools of a request's `tools` value.
    ///
    /// # Errors
    ///
    /// A tool that is not a function definition, or whose schema does not compile.
    pub fn get(&self, tools: &Value) -> Result<Arc<Toolbox>, ToolsError> {
        if let Some(n) = tools.as_array().map(Vec::len)
            && n > self.max_tools
        {
            return Err(ToolsError(format!(
                "{n} tools, more than limits.max_tools ({})",
                self.max_tools
            )));
        }
        let key = tools.to_string();
        if let Ok(guard) = self.inner.lock()
            && let Some(hit) = guard.0.get(&key)
        {
            return Ok(Arc::clone(hit));
        }
        // Checked on a miss only: a cached set was checked when it was compiled.
        if key.len() > self.max_schema_bytes {
            for (i, t) in tools.as_array().into_iter().flatten().enumerate() {
                let len = t.to_string().len();
                if len > self.max_schema_bytes {
                    return Err(ToolsError(format!(
                        "tools[{i}] is {len} bytes, more than limits.max_schema_bytes ({})",
                        self.max_schema_bytes
                    )));
                }
            }
        }
        let defs: Vec<Tool> =
            serde_json::from_value(tools.clone()).map_err(|e| ToolsError(e.to_string()))?;
        let mut toolbox = Toolbox::new();
        for def in defs.iter().filter(|d| d.kind == "function") {
            let f = &def.function;
            let params = f
                .parameters
                .clone()
                .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
            let compiled = CompiledTool::compile(
                &f.name,
                f.description.as_deref().unwrap_or_default(),
                &params,
            )
            .map_err(|e| ToolsError(format!("{}: {e}", f.name)))?;
            toolbox
                .add(compiled)
                .map_err(|e| ToolsError(format!("{}: {e}", f.name)))?;
        }
        let toolbox = Arc::new(toolbox);
        if let Ok(mut guard) = self.inner.lock() {
            let (map, order) = &mut *guard;
            if map.len() >= self.capacity
                && let Some(old) = order.pop_front()
            {
                map.remove(&old);
            }
            map.insert(key.clone(), Arc::clone(&toolbox));
            order.push_back(key);
        }
        Ok(toolbox)
    }
}
