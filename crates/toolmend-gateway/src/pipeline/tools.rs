//! The compiled tools of a request, cached by their exact text; the front converts its
//! wire's definitions into the core's neutral [`Tool`]s on a miss.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
};

use serde_json::json;
use toolmend::{CompiledTool, Toolbox, conversation::Tool};

/// Compiled tool sets by the exact bytes of the request's `tools` (as serialized): agents
/// send the same tools with every request, and compiling schemas costs more than mending.
/// A lookup hashes those bytes once; two sets are the same entry only when their bytes
/// are equal.
#[derive(Debug)]
pub struct ToolCache {
    capacity: usize,
    max_tools: usize,
    max_schema_bytes: usize,
    inner: Mutex<Lru>,
}

/// The compiled sets and their insertion order (oldest first). The keys are the client's
/// bytes, hashed with foldhash (seeded per process): SipHash cost a few thousand
/// instructions per request on an agent's tools, and the map never holds more than
/// `capacity` sets, so no set of keys a client chooses can make a lookup long.
type Lru = (
    HashMap<Box<[u8]>, Arc<Toolbox>, foldhash::fast::RandomState>,
    VecDeque<Box<[u8]>>,
);

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
            inner: Mutex::new((HashMap::default(), VecDeque::new())),
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

    /// The compiled tools of a request whose tools' exact bytes are `key` (`count()` of
    /// them): from the cache, or compiled from `specs` (the front's conversion of its
    /// wire's definitions, called on a miss only). `count` is asked on a miss only too:
    /// a cached set's bytes were counted, and within the limit, when it was compiled.
    ///
    /// # Errors
    ///
    /// More than `limits.max_tools` tools, a definition the front refuses, a schema that
    /// does not compile.
    pub fn get(
        &self,
        key: &[u8],
        count: impl FnOnce() -> usize,
        specs: impl FnOnce(usize) -> Result<Vec<Tool>, ToolsError>,
    ) -> Result<Arc<Toolbox>, ToolsError> {
        if let Ok(guard) = self.inner.lock()
            && let Some(hit) = guard.0.get(key)
        {
            return Ok(Arc::clone(hit));
        }
        let count = count();
        if count > self.max_tools {
            return Err(ToolsError(format!(
                "{count} tools, more than limits.max_tools ({})",
                self.max_tools
            )));
        }
        // Checked on a miss only: a cached set was checked when it was compiled. A
        // definition longer than `limits.max_schema_bytes` is the front's to refuse (it
        // measures its own wire's text); it is told the limit when the whole set is over.
        let limit = if key.len() > self.max_schema_bytes {
            self.max_schema_bytes
        } else {
            usize::MAX
        };
        let mut toolbox = Toolbox::new();
        // A definition without a schema takes no arguments' shape: any object.
        let any_object = json!({"type": "object", "properties": {}});
        for spec in specs(limit)? {
            let compiled = CompiledTool::compile(
                &spec.name,
                spec.description.as_deref().unwrap_or(""),
                spec.parameters.as_ref().unwrap_or(&any_object),
            )
            .map_err(|e| ToolsError(format!("{}: {e}", spec.name)))?;
            toolbox
                .add(compiled)
                .map_err(|e| ToolsError(format!("{}: {e}", spec.name)))?;
        }
        let toolbox = Arc::new(toolbox);
        if let Ok(mut guard) = self.inner.lock() {
            let (map, order) = &mut *guard;
            if map.len() >= self.capacity
                && let Some(old) = order.pop_front()
            {
                map.remove(&old);
            }
            let key: Box<[u8]> = key.into();
            map.insert(key.clone(), Arc::clone(&toolbox));
            order.push_back(key);
        }
        Ok(toolbox)
    }
}
