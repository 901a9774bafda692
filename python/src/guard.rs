//! `toolmend._core.Guard`: the core's [`RuleGuard`] for Python (flood control and loop
//! detection). One `check` per assistant message with all its runnable calls, the GIL
//! released while the rules (and their store) decide.
//!
//! The guard's future needs a Tokio runtime (the store's answer is awaited under a
//! timeout, and a Redis store does its I/O there): the extension makes one on first use,
//! multi-threaded with one worker, and blocks on it from the calling Python thread.
//! `redis_url=` keeps the counts in Redis (`toolmend-redis`), connected in the
//! background on that runtime.

use std::{
    sync::{Arc, LazyLock, RwLock},
    time::Duration,
};

use pyo3::{
    exceptions::{PyRuntimeError, PyValueError},
    intern,
    prelude::*,
    types::{PyDict, PyList, PyString},
};
use serde_json::Value;

use toolmend_redis::{RedisOptions, RedisStore, redis_guard_store};

use toolmend::{
    conversation::Message,
    guard::{
        Decision, FailMode, Guard as _, GuardConfig, GuardContext, GuardRequest, RuleGuard,
        ToolRules, Verdict, stage,
    },
};

use crate::{Seen, from_py, to_py, to_value};

/// The runtime guard futures run on, made on first use.
pub(crate) static RUNTIME: LazyLock<Result<tokio::runtime::Runtime, String>> =
    LazyLock::new(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("toolmend-guard")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    });

/// A Python value as JSON (dicts, lists, numbers, strings; NaN refused).
fn json_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    let mut seen = Seen::default();
    let v =
        to_value(obj, 0, &mut seen).map_err(|e| PyValueError::new_err(format!("{what}: {e}")))?;
    if seen.non_finite {
        return Err(PyValueError::new_err(format!(
            "{what}: NaN or infinity is not a setting"
        )));
    }
    Ok(v)
}

/// `value` read as `T`, the error naming the key (`guard.<path>: why`).
fn read_as<T: serde::de::DeserializeOwned>(value: Value, prefix: &str) -> PyResult<T> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let key = if path == "." || path.is_empty() {
            prefix.to_owned()
        } else {
            format!("{prefix}.{path}")
        };
        PyValueError::new_err(format!("{key}: {}", e.inner()))
    })
}

fn fail_mode(fail: &str) -> PyResult<FailMode> {
    match fail {
        "open" => Ok(FailMode::Open),
        "closed" => Ok(FailMode::Closed),
        other => Err(PyValueError::new_err(format!(
            "fail={other:?}: use \"open\" (let calls run when the store does not answer) or \
             \"closed\" (refuse them)"
        ))),
    }
}

/// One call as Python gives it: `{"id", "name", "arguments"}` (`args` is read too).
struct Call {
    id: String,
    name: String,
    arguments: Value,
}

fn read_call(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Call> {
    let d = obj.cast::<PyDict>().map_err(|_| {
        PyValueError::new_err(
            "calls: each call must be a dict with \"id\", \"name\", \"arguments\"",
        )
    })?;
    let text = |key: &Bound<'_, PyString>| -> PyResult<String> {
        match d.get_item(key)? {
            Some(v) if !v.is_none() => Ok(v.str()?.to_str()?.to_owned()),
            _ => Ok(String::new()),
        }
    };
    let id = text(intern!(py, "id"))?;
    let name = text(intern!(py, "name"))?;
    let args = match d.get_item(intern!(py, "arguments"))? {
        Some(a) => Some(a),
        None => d.get_item(intern!(py, "args"))?,
    };
    let arguments = match args {
        None => Value::Object(serde_json::Map::new()),
        Some(a) if a.is_none() => Value::Object(serde_json::Map::new()),
        Some(a) => match a.cast::<PyString>() {
            // JSON text: read; a text that is no JSON is fingerprinted as the string.
            Ok(s) => {
                let s = s.to_str()?;
                serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.to_owned()))
            }
            Err(_) => {
                let mut seen = Seen::default();
                to_value(&a, 0, &mut seen)?
            }
        },
    };
    Ok(Call {
        id,
        name,
        arguments,
    })
}

fn ms(d: Option<Duration>) -> Option<u64> {
    d.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

pub(crate) fn decision_to_py<'py>(py: Python<'py>, d: &Decision) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item(intern!(py, "rule"), d.rule.as_str())?;
    out.set_item(intern!(py, "action"), d.action.as_str())?;
    out.set_item(intern!(py, "shadow"), d.shadow)?;
    out.set_item(intern!(py, "count"), d.count)?;
    out.set_item(intern!(py, "limit"), d.limit)?;
    out.set_item(intern!(py, "window_ms"), ms(d.window))?;
    out.set_item(intern!(py, "retry_after_ms"), ms(d.retry_after))?;
    Ok(out)
}

fn verdict_to_py<'py>(py: Python<'py>, v: &Verdict) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item(intern!(py, "action"), v.action.as_str())?;
    out.set_item(intern!(py, "reason"), v.reason.as_deref())?;
    out.set_item(intern!(py, "retry_after_ms"), ms(v.retry_after))?;
    let decisions = PyList::empty(py);
    for d in &v.decisions {
        decisions.append(decision_to_py(py, d)?)?;
    }
    out.set_item(intern!(py, "decisions"), decisions)?;
    out.set_item(intern!(py, "id_reused"), v.id_reused)?;
    Ok(out)
}

/// Flood control and loop detection: the rules of `[guard]` (windows per session, per
/// tool and across sessions, duplicates after mending, the repeat ladder, ping-pong, no
/// progress, thread and run budgets), over an in-memory store or Redis.
#[pyclass(frozen, module = "toolmend._core")]
pub(crate) struct Guard {
    /// Shared with the resolutions in flight (`Resolver`); tools are declared before.
    inner: RwLock<Arc<RuleGuard>>,
    /// The Redis store's handle, for its counters.
    redis: Option<RedisStore>,
}

impl Guard {
    /// The guard, shared with a resolution in flight.
    pub(crate) fn shared(&self) -> PyResult<Arc<RuleGuard>> {
        self.inner
            .read()
            .map(|g| Arc::clone(&g))
            .map_err(|_| PyRuntimeError::new_err("guard: its lock is poisoned"))
    }

    fn decide(
        &self,
        session: Option<&str>,
        history: &[Message],
        calls: &[Call],
    ) -> PyResult<Vec<Verdict>> {
        let rt = RUNTIME
            .as_ref()
            .map_err(|e| PyRuntimeError::new_err(format!("guard: no Tokio runtime: {e}")))?;
        let guard = self
            .inner
            .read()
            .map_err(|_| PyRuntimeError::new_err("guard: its lock is poisoned"))?;
        if !guard.is_enabled() || calls.is_empty() {
            return Ok(vec![Verdict::allow(); calls.len()]);
        }
        let requests: Vec<GuardRequest<'_>> = calls
            .iter()
            .map(|c| GuardRequest {
                call_id: &c.id,
                tool: &c.name,
                arguments: &c.arguments,
            })
            .collect();
        let ctx = GuardContext { session, history };
        // The core's guard stage: one verdict per call; a panic or a guard past its limit
        // refuses (a call is never run unchecked).
        let limit = guard.stage_limit();
        let verdicts = rt.block_on(stage::verdicts(&*guard, ctx, &requests, limit));
        Ok(verdicts)
    }
}

#[pymethods]
impl Guard {
    /// `config`: the `[guard]` table as a dict (`session`, `tools`, `duplicate`, `repeat`,
    /// `ping_pong`, `no_progress`, `limits`, `session_ttl_secs`); keyword arguments of the
    /// same names add to it (and win). `fail`: `"open"` (default) or `"closed"`, what a
    /// store that does not answer within `timeout_ms` means. `redis_url`
    /// (`redis://host:port/db`): keep the counts in Redis, shared by every process that
    /// names it (connected in the background; until it answers, `fail` applies). A
    /// setting that cannot work raises `ValueError` naming its key.
    #[new]
    #[pyo3(signature = (config = None, *, fail = "open", timeout_ms = 20.0, redis_url = None, **rules))]
    fn new(
        py: Python<'_>,
        config: Option<&Bound<'_, PyAny>>,
        fail: &str,
        timeout_ms: f64,
        redis_url: Option<&str>,
        rules: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let mut value = match config.filter(|c| !c.is_none()) {
            Some(c) => {
                if c.cast::<PyDict>().is_err() {
                    return Err(PyValueError::new_err(
                        "guard: the configuration must be a dict (the [guard] table)",
                    ));
                }
                json_of(c, "guard")?
            }
            None => Value::Object(serde_json::Map::new()),
        };
        if let (Some(rules), Value::Object(map)) = (rules, &mut value) {
            for (k, v) in rules.iter() {
                let k: String = k.extract()?;
                let v = json_of(&v, &format!("guard.{k}"))?;
                map.insert(k, v);
            }
        }
        let config: GuardConfig = read_as(value, "guard")?;
        if !(timeout_ms.is_finite() && timeout_ms > 0.0 && timeout_ms <= 60_000.0) {
            return Err(PyValueError::new_err(format!(
                "timeout_ms: must be above 0 and at most 60000, not {timeout_ms}"
            )));
        }
        let timeout = Duration::from_secs_f64(timeout_ms / 1000.0);
        let mut guard = RuleGuard::new(config)
            .map_err(PyValueError::new_err)?
            .fail_mode(fail_mode(fail)?)
            .timeout(timeout);
        let mut redis = None;
        if let Some(url) = redis_url {
            let rt = RUNTIME
                .as_ref()
                .map_err(|e| PyRuntimeError::new_err(format!("guard: no Tokio runtime: {e}")))?;
            // The store connects in a task of the current runtime: ours.
            let _entered = rt.enter();
            let opts = RedisOptions {
                timeout,
                ..RedisOptions::default()
            };
            let store = redis_guard_store(url, opts)
                .map_err(|e| PyValueError::new_err(format!("redis_url: {e}")))?;
            redis = Some(store.inner().clone());
            // The store's own timeout answers first; the guard's is the backstop.
            guard = guard
                .with_store(store)
                .timeout(timeout + Duration::from_millis(10));
        }
        if !guard.is_enabled() {
            // Never silently off: a guard that checks nothing says so once, where it is made.
            let msg = std::ffi::CString::new(
                "toolmend.Guard() without any rule checks nothing: give it rules (session, \
                 global, tools, limits, duplicate, repeat), or pass guard=None",
            )
            .unwrap_or_default();
            PyErr::warn(
                py,
                &py.get_type::<pyo3::exceptions::PyUserWarning>(),
                &msg,
                1,
            )?;
        }
        Ok(Guard {
            inner: RwLock::new(Arc::new(guard)),
            redis,
        })
    }

    /// Adds limits a tool declares on itself (`{"session", "global", "limits",
    /// "duplicate", "repeat"}`, as `[guard.tools.<name>]`); the configuration's own entry
    /// for the tool wins key by key.
    fn declare_tool(&self, name: &str, rules: &Bound<'_, PyAny>) -> PyResult<()> {
        if name.is_empty() {
            return Err(PyValueError::new_err(
                "declare_tool: the tool name is empty",
            ));
        }
        let rules: ToolRules = read_as(json_of(rules, "rules")?, &format!("guard.tools.{name}"))?;
        let mut guard = self
            .inner
            .write()
            .map_err(|_| PyRuntimeError::new_err("guard: its lock is poisoned"))?;
        Arc::get_mut(&mut guard)
            .ok_or_else(|| {
                PyRuntimeError::new_err(
                    "declare_tool: the guard is checking calls; declare tools before it runs",
                )
            })?
            .declare_tool(name, rules)
            .map_err(PyValueError::new_err)
    }

    /// The verdicts on the runnable calls of one assistant message, in order. `session`:
    /// the conversation (LangGraph's `thread_id`), `None` when unknown (the rules that
    /// need one then do not apply); `history`: the messages before the assistant message,
    /// OpenAI-format dicts; `calls`: `{"id", "name", "arguments"}` with the mended
    /// arguments (a dict). Each verdict: `action` (`allow` | `deny` | `end` | `error`),
    /// `reason` (the tool message for a refused call), `retry_after_ms`, `decisions`
    /// (`rule`, `action`, `shadow`, `count`, `limit`, `window_ms`, `retry_after_ms`: every
    /// rule that had something to say, observations and shadow decisions included),
    /// `id_reused` (the id was seen earlier in the session).
    #[pyo3(signature = (session, history, calls))]
    fn check(
        &self,
        py: Python<'_>,
        session: Option<&str>,
        history: &Bound<'_, PyAny>,
        calls: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let history: Vec<Message> = if history.is_none() {
            Vec::new()
        } else {
            from_py(history, "history")?
        };
        let calls: Vec<Call> = calls
            .try_iter()?
            .map(|c| read_call(py, &c?))
            .collect::<PyResult<_>>()?;
        let verdicts = py.detach(|| self.decide(session, &history, &calls))?;
        let out = PyList::empty(py);
        for v in &verdicts {
            out.append(verdict_to_py(py, v)?)?;
        }
        Ok(out.into_any().unbind())
    }

    /// False when no rule is configured (the fronts then skip the stage).
    #[getter]
    fn enabled(&self) -> PyResult<bool> {
        let guard = self
            .inner
            .read()
            .map_err(|_| PyRuntimeError::new_err("guard: its lock is poisoned"))?;
        Ok(guard.is_enabled())
    }

    /// The rules in effect (declared tool limits merged), as the `[guard]` dict.
    #[getter]
    fn config(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let guard = self
            .inner
            .read()
            .map_err(|_| PyRuntimeError::new_err("guard: its lock is poisoned"))?;
        to_py(py, guard.config())
    }

    /// The store's name (`"memory"` …), `None` when no rule needs one.
    #[getter]
    fn store(&self) -> PyResult<Option<&'static str>> {
        let guard = self
            .inner
            .read()
            .map_err(|_| PyRuntimeError::new_err("guard: its lock is poisoned"))?;
        Ok(guard.store_name())
    }

    /// The Redis store's counters (`admissions`, `round_trips`, `retries`, `timeouts`,
    /// `unavailable`, `protocol_errors`, `reconnects`, `connected`); `None` without Redis.
    fn store_stats(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let Some(redis) = &self.redis else {
            return Ok(None);
        };
        let s = redis.stats();
        let out = PyDict::new(py);
        out.set_item("admissions", s.admissions)?;
        out.set_item("round_trips", s.round_trips)?;
        out.set_item("retries", s.retries)?;
        out.set_item("timeouts", s.timeouts)?;
        out.set_item("unavailable", s.unavailable)?;
        out.set_item("protocol_errors", s.protocol_errors)?;
        out.set_item("reconnects", s.reconnects)?;
        out.set_item("connected", s.connected)?;
        Ok(Some(out.into_any().unbind()))
    }

    /// Waits up to `timeout_s` for the Redis store to connect (the GIL released); True
    /// when connected, also True without Redis.
    #[pyo3(signature = (timeout_s = 2.0))]
    fn wait_connected(&self, py: Python<'_>, timeout_s: f64) -> PyResult<bool> {
        let Some(redis) = &self.redis else {
            return Ok(true);
        };
        let rt = RUNTIME
            .as_ref()
            .map_err(|e| PyRuntimeError::new_err(format!("guard: no Tokio runtime: {e}")))?;
        let within = Duration::from_secs_f64(timeout_s.clamp(0.0, 60.0));
        Ok(py.detach(|| rt.block_on(redis.wait_connected(within))))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let config = self.config(py)?;
        Ok(format!("Guard({})", config.bind(py).repr()?))
    }
}

/// A guard whose store breaks on purpose (`kind`: `panics`, `hangs` or `short`), over
/// `config` (the `[guard]` table), failing `fail`: for the suite's tests that a broken
/// guard refuses the calls it leaves unjudged, in every Python path. Not the supported API.
#[pyfunction]
#[pyo3(signature = (kind, config, fail = "open"))]
pub(crate) fn _broken_guard(kind: &str, config: &Bound<'_, PyAny>, fail: &str) -> PyResult<Guard> {
    let store = toolmend::testing::BrokenStore::named(kind).ok_or_else(|| {
        PyValueError::new_err(format!("kind: panics, hangs or short, not {kind:?}"))
    })?;
    let config: GuardConfig = read_as(json_of(config, "guard")?, "guard")?;
    let guard = RuleGuard::new(config)
        .map_err(PyValueError::new_err)?
        .fail_mode(fail_mode(fail)?)
        .with_store(store);
    Ok(Guard {
        inner: RwLock::new(Arc::new(guard)),
        redis: None,
    })
}
