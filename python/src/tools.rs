//! `toolmend._core.NetTools`: the tools of a tools file (`[[tools]]` HTTP tool services,
//! `[[mcp]]` servers; `toolmend-tools`) for Python. `toolmend.tools.load_tools` makes one
//! LangChain tool of each.
//!
//! Each `NetTools` has a Tokio runtime of its own (two workers): the file is loaded on it
//! (MCP servers are started or connected and listed there, and their transports keep
//! running there), and every call blocks the calling Python thread on it with the GIL
//! released. A call is checked against its tool's schema and business rules first
//! (strictly: mending is the node's or the middleware's work), then sent, verified and
//! shaped by the tool; every way it can fail (the service's error, a dirty answer, a
//! protocol violation, a timeout, a panic) is an error result, never an exception and
//! never another call's data.

use std::{
    collections::HashMap,
    panic::{AssertUnwindSafe, catch_unwind},
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};

use pyo3::{
    create_exception,
    exceptions::{PyKeyError, PyRuntimeError, PyValueError},
    intern,
    prelude::*,
    types::{PyDict, PyList},
};
use serde_json::Value;

use toolmend::{
    MendOptions,
    conversation::Content,
    feedback,
    mend::{self, Outcome},
    node::{CallContext, Registry, Tool as _, ToolError},
    schema::{Phase, ValidationContext},
};
use toolmend_tools::{LoadError, ToolSet, ToolsFile};

use crate::{Seen, ToolmendError, from_value, to_value};

create_exception!(
    _core,
    ToolsLoadError,
    ToolmendError,
    "A tools file that cannot be loaded: `origin` (the file), `line`, `tool` and `reason` \
     say where and what; the message names them all."
);

/// What a load error becomes: `ToolsLoadError` with its parts as attributes.
fn load_error(py: Python<'_>, e: &LoadError) -> PyErr {
    let err = ToolsLoadError::new_err(e.to_string());
    let value = err.value(py);
    // Attributes on a fresh exception object cannot fail in practice; the message
    // carries the same facts if they did.
    let _ = value.setattr(intern!(py, "origin"), e.origin.as_str());
    let _ = value.setattr(intern!(py, "line"), e.line);
    let _ = value.setattr(intern!(py, "tool"), e.tool.as_deref());
    let _ = value.setattr(intern!(py, "reason"), e.message.as_str());
    err
}

/// How much longer than the tool's own timeout a call may block before it is answered
/// with a timeout anyway.
const BACKSTOP_MARGIN: Duration = Duration::from_millis(500);

/// What is kept while the tools may be called.
struct Loaded {
    set: ToolSet,
    /// The same tools compiled with their business rules, to check a call before it is
    /// sent.
    registry: Registry,
}

/// A runtime and the tools that live on it. Dropped inside the runtime (an MCP
/// connection may need it to close), then the runtime is shut down without waiting.
struct Inner {
    loaded: Option<Loaded>,
    rt: Option<tokio::runtime::Runtime>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            {
                let _entered = rt.enter();
                self.loaded = None;
            }
            rt.shutdown_background();
        }
    }
}

impl Inner {
    fn parts(&self) -> PyResult<(&tokio::runtime::Runtime, &Loaded)> {
        match (&self.rt, &self.loaded) {
            (Some(rt), Some(l)) => Ok((rt, l)),
            _ => Err(closed()),
        }
    }
}

fn closed() -> PyErr {
    PyRuntimeError::new_err("these tools were closed (NetTools.close()); load the file again")
}

/// One call's result, before it becomes a dict.
struct CallResult {
    content: Option<Content>,
    artifact: Option<Value>,
    metadata: Option<Value>,
    error: Option<(&'static str, String)>,
}

impl CallResult {
    fn failed(kind: &'static str, message: String) -> Self {
        CallResult {
            content: None,
            artifact: None,
            metadata: None,
            error: Some((kind, message)),
        }
    }
}

fn error_kind(e: &ToolError) -> &'static str {
    match e {
        ToolError::Timeout(_) => "timeout",
        ToolError::Panicked(_) => "panicked",
        ToolError::Arguments(_) => "arguments",
        _ => "failed",
    }
}

/// The tools of one tools file, loaded and ready to call.
#[pyclass(frozen, module = "toolmend._core")]
pub(crate) struct NetTools {
    inner: RwLock<Option<Arc<Inner>>>,
    origin: String,
}

impl NetTools {
    fn inner(&self) -> PyResult<Arc<Inner>> {
        self.inner
            .read()
            .map_err(|_| PyRuntimeError::new_err("NetTools: its lock is poisoned"))?
            .clone()
            .ok_or_else(closed)
    }

    fn run(
        inner: &Inner,
        name: &str,
        arguments: Value,
        call_id: String,
        trace_id: Option<String>,
    ) -> PyResult<CallResult> {
        let (rt, loaded) = inner.parts()?;
        let Some(tool) = loaded.set.get(name) else {
            return Err(PyKeyError::new_err(format!(
                "no tool named {name:?} in these tools"
            )));
        };
        let received_at = Instant::now();
        // Checked as sent: a call that fails its schema or a business rule is not sent.
        let ctx = ValidationContext::new(name, Phase::Initial);
        let checked = mend::mend_value_named_in(
            name,
            arguments,
            loaded.registry.toolbox(),
            &MendOptions::strict(),
            &ctx,
        );
        let arguments = match (checked.outcome, checked.arguments) {
            (Outcome::Feedback, _) | (_, None) => {
                let f = feedback::render(name, &checked.issues);
                return Ok(CallResult::failed("invalid_arguments", f.text));
            }
            (_, Some(a)) => a,
        };
        // The tool keeps its own timeouts (per attempt, retries included); this one is the
        // backstop that answers the call if it does not, a little later so that the
        // tool's own reason wins.
        let limit = tool.total_timeout();
        let backstop = limit + BACKSTOP_MARGIN;
        let ctx = CallContext {
            call_id,
            tool: name.to_owned(),
            state: None,
            trace_id: trace_id.map(Into::into),
            received_at: Some(received_at),
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            rt.block_on(async {
                match tokio::time::timeout(backstop, tool.call(arguments, ctx)).await {
                    Ok(r) => r,
                    Err(_) => Err(ToolError::Timeout(limit)),
                }
            })
        }))
        .unwrap_or_else(|_| Err(ToolError::Panicked("the tool panicked".into())));
        Ok(match outcome {
            Ok(out) => CallResult {
                content: Some(out.content),
                artifact: out.artifact,
                metadata: out.metadata,
                error: None,
            },
            Err(e) => {
                let failed = CallResult::failed(error_kind(&e), e.to_string());
                let (artifact, metadata) = e.into_details();
                CallResult {
                    artifact,
                    metadata,
                    ..failed
                }
            }
        })
    }
}

#[pymethods]
impl NetTools {
    /// Loads a tools file: `source` is its path, or (`text=True`) the TOML itself
    /// (`origin` names it in errors; default `"<inline>"`). Secrets (`{ env = "VAR" }`)
    /// are read from `env` (a mapping; default: the process environment). MCP servers
    /// are started or connected, and listed, before this returns. Raises
    /// `ToolsLoadError` naming the file, the line and the tool.
    #[new]
    #[pyo3(signature = (source, *, text = false, origin = None, env = None))]
    fn new(
        py: Python<'_>,
        source: &str,
        text: bool,
        origin: Option<&str>,
        env: Option<HashMap<String, String>>,
    ) -> PyResult<Self> {
        let origin = match (text, origin) {
            (_, Some(o)) => o.to_owned(),
            (true, None) => "<inline>".to_owned(),
            (false, None) => source.to_owned(),
        };
        let toml = if text {
            source.to_owned()
        } else {
            std::fs::read_to_string(source).map_err(|e| {
                load_error(
                    py,
                    &LoadError {
                        origin: origin.clone(),
                        line: None,
                        tool: None,
                        message: format!("cannot read the tools file: {e}"),
                    },
                )
            })?
        };
        let file = ToolsFile::parse(&toml, &origin).map_err(|e| load_error(py, &e))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("toolmend-tools")
            .enable_all()
            .build()
            .map_err(|e| PyRuntimeError::new_err(format!("tools: no Tokio runtime: {e}")))?;
        // Made first, so that a load that fails is dropped inside it too.
        let mut inner = Inner {
            loaded: None,
            rt: Some(rt),
        };
        let loaded = py.detach(|| {
            let rt = inner.rt.as_ref().ok_or_else(|| LoadError {
                origin: origin.clone(),
                line: None,
                tool: None,
                message: "no runtime".into(),
            })?;
            let lookup = |name: &str| match &env {
                Some(map) => map.get(name).cloned(),
                None => std::env::var(name).ok(),
            };
            let set = rt.block_on(ToolSet::load(&file, &lookup))?;
            let registry = set.registry().map_err(|e| LoadError {
                origin: origin.clone(),
                line: None,
                tool: None,
                message: e.to_string(),
            })?;
            Ok::<_, LoadError>(Loaded { set, registry })
        });
        inner.loaded = Some(loaded.map_err(|e| load_error(py, &e))?);
        Ok(NetTools {
            inner: RwLock::new(Some(Arc::new(inner))),
            origin,
        })
    }

    /// Where the tools came from (the path, or the `origin` given with the text).
    #[getter]
    fn origin(&self) -> &str {
        &self.origin
    }

    /// The tools, in file order: `[{"name", "description", "parameters", "kind",
    /// "server_side"}]` (`kind`: `"http"` or `"mcp"`).
    fn definitions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let inner = self.inner()?;
        let (_, loaded) = inner.parts()?;
        let out = PyList::empty(py);
        for t in loaded.set.tools() {
            let d = PyDict::new(py);
            d.set_item(intern!(py, "name"), t.name())?;
            d.set_item(intern!(py, "description"), t.description())?;
            d.set_item(intern!(py, "parameters"), from_value(py, t.parameters())?)?;
            d.set_item(intern!(py, "kind"), t.kind())?;
            d.set_item(intern!(py, "server_side"), t.server_side())?;
            // `[tools.limits]`, in the form the Python guard reads from a tool's metadata.
            let limits = match t.limits() {
                Some(l) => serde_json::to_value(l).unwrap_or(serde_json::Value::Null),
                None => serde_json::Value::Null,
            };
            d.set_item(intern!(py, "limits"), from_value(py, &limits)?)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// What was left out at load, and why (an MCP tool whose schema does not compile, a
    /// name taken twice).
    fn problems(&self) -> PyResult<Vec<String>> {
        let inner = self.inner()?;
        let (_, loaded) = inner.parts()?;
        Ok(loaded.set.problems().to_vec())
    }

    /// True when the gateway runs `name` itself (`server_side = true`).
    fn server_side(&self, name: &str) -> PyResult<bool> {
        let inner = self.inner()?;
        let (_, loaded) = inner.parts()?;
        match loaded.set.get(name) {
            Some(t) => Ok(t.server_side()),
            None => Err(PyKeyError::new_err(format!(
                "no tool named {name:?} in these tools"
            ))),
        }
    }

    /// Calls `name` with `args` (a dict) as call `call_id` (what the service gets as
    /// `X-Tool-Call-ID`, and must echo), in trace `trace_id` (`X-Trace-ID`; default: the
    /// call id). Blocks until the result, with the GIL released; at most the tool's
    /// timeout (retries included).
    ///
    /// Returns `{"status": "success" | "error", "content", "artifact", "metadata",
    /// "error", "error_kind"}`: on success `content` is what the model reads (a str,
    /// or a list of content parts), `artifact` the whole payload, `metadata` how it was
    /// made (latency, attempts, shaping, trace id); on an error `error` says what
    /// happened and `error_kind` is `"invalid_arguments"` (not sent: the schema or a
    /// business rule), `"failed"` (the tool's error, a dirty answer, a protocol
    /// violation, an unreachable service), `"timeout"` or `"panicked"`. Raises only on
    /// misuse (an unknown tool, arguments that are not JSON).
    #[pyo3(signature = (name, args, call_id, trace_id = None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        args: &Bound<'py, PyAny>,
        call_id: &str,
        trace_id: Option<&str>,
    ) -> PyResult<Bound<'py, PyDict>> {
        if call_id.is_empty() {
            return Err(PyValueError::new_err(
                "call_id: give the call's id (it must not be empty)",
            ));
        }
        let mut seen = Seen::default();
        let arguments = if args.is_none() {
            Value::Object(serde_json::Map::new())
        } else {
            to_value(args, 0, &mut seen)?
        };
        if seen.non_finite {
            return Err(PyValueError::new_err(
                "args: NaN or infinity cannot be sent as JSON",
            ));
        }
        if !arguments.is_object() {
            return Err(PyValueError::new_err("args: the arguments must be a dict"));
        }
        let inner = self.inner()?;
        let (call_id, trace_id) = (call_id.to_owned(), trace_id.map(str::to_owned));
        let r = py.detach(|| Self::run(&inner, name, arguments, call_id, trace_id))?;
        let out = PyDict::new(py);
        let status = if r.error.is_some() {
            "error"
        } else {
            "success"
        };
        out.set_item(intern!(py, "status"), status)?;
        let content = match &r.content {
            None => py.None().into_bound(py),
            Some(Content::Text(s)) => s.into_pyobject(py)?.into_any(),
            Some(c @ Content::Parts(_)) => {
                let v = serde_json::to_value(c).map_err(crate::error)?;
                from_value(py, &v)?
            }
        };
        out.set_item(intern!(py, "content"), content)?;
        let artifact = match &r.artifact {
            Some(v) => from_value(py, v)?,
            None => py.None().into_bound(py),
        };
        out.set_item(intern!(py, "artifact"), artifact)?;
        let metadata = match &r.metadata {
            Some(v) => from_value(py, v)?,
            None => py.None().into_bound(py),
        };
        out.set_item(intern!(py, "metadata"), metadata)?;
        let (kind, error) = match r.error {
            Some((k, e)) => (Some(k), Some(e)),
            None => (None, None),
        };
        out.set_item(intern!(py, "error"), error)?;
        out.set_item(intern!(py, "error_kind"), kind)?;
        Ok(out)
    }

    /// Stops the runtime and closes MCP connections (stdio servers are ended). Calls
    /// after this raise `RuntimeError`. Dropping the object does the same.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self
            .inner
            .write()
            .map_err(|_| PyRuntimeError::new_err("NetTools: its lock is poisoned"))?
            .take();
        // A call in progress holds its own reference; the last one out closes.
        py.detach(|| drop(taken));
        Ok(())
    }

    fn __repr__(&self) -> String {
        match self.inner() {
            Ok(inner) => {
                let n = inner.parts().map_or(0, |(_, l)| l.set.tools().len());
                format!("NetTools({:?}, {n} tools)", self.origin)
            }
            Err(_) => format!("NetTools({:?}, closed)", self.origin),
        }
    }
}
