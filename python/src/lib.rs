//! `toolmend._core`: the Rust engine for Python. Repair, validation against compiled
//! schemas, mending (one call or a whole text), calls written into content, and history
//! check / sanitize / trim. Values cross as Python objects (`pythonize`); the Rust work
//! runs with the GIL released.
//!
//! The Python integrations (`toolmend.langgraph`, `toolmend.langchain`) are written in
//! Python on top of this module: execution, injection and `Command`s stay LangGraph's.

use pyo3::{
    create_exception,
    exceptions::PyException,
    intern,
    prelude::*,
    types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple},
};
use pythonize::depythonize;
use serde::Serialize;
use serde_json::{Value, json};
use std::{
    borrow::Cow,
    collections::{HashMap, HashSet},
    sync::{Arc, LazyLock, Mutex},
};

mod guard;
mod resolve;
mod tools;

use toolmend::{
    CompiledTool, Fix, Issue, MendOptions, MendedCall, RepairOptions,
    conversation::{AssistantMessage, Content, Message},
    correct::{self, CorrectionRequest, PromptOptions},
    feedback,
    history::{
        self, Budget, ByteEstimate, MissingIdPolicy, OrphanPolicy, SanitizePolicy, Tiktoken,
        TokenCounter,
    },
    mend::{self, Outcome},
    message::{
        self, AcceptTruncated, Args, Around, CallOutcome, MessageInput, MessagePlan, PlanOptions,
        PlannedCall, SentCall,
    },
    schema::{Coercions, Phase, SwitchError, ValidationContext},
};

create_exception!(
    _core,
    ToolmendError,
    PyException,
    "Bad input to toolmend (an invalid schema, a malformed message, an unknown option); \
     the message says what is wrong and what to do."
);

fn error(e: impl std::fmt::Display) -> PyErr {
    ToolmendError::new_err(e.to_string())
}

fn to_py<T: Serialize>(py: Python<'_>, value: &T) -> PyResult<Py<PyAny>> {
    let value = serde_json::to_value(value).map_err(error)?;
    Ok(from_value(py, &value)?.unbind())
}

/// JSON as Python objects, written out (faster than `pythonize` on small values).
fn from_value<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(from_value(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, from_value(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

fn from_py<T: serde::de::DeserializeOwned>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<T> {
    depythonize(obj).map_err(|e| error(format!("{what}: {e}")))
}

fn phase(name: &str) -> PyResult<Phase> {
    match name {
        "initial" => Ok(Phase::Initial),
        "correction" => Ok(Phase::Correction),
        "salvage" => Ok(Phase::Salvage),
        other => Err(error(format!(
            "unknown phase {other:?}: use \"initial\", \"correction\" or \"salvage\""
        ))),
    }
}

/// A mended call as Python sees it: the Rust fields (as serde writes them: `fixes` and
/// `issues` only when not empty) plus `lossy`, and for feedback the text to send and its
/// `error`. Built as Python objects directly: no JSON tree of the call in between.
/// `sent`: the caller's parsed arguments, when they are the call's arguments unchanged.
fn call_to_py(
    py: Python<'_>,
    call: &MendedCall,
    sent: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let d = PyDict::new(py);
    d.set_item(intern!(py, "tool"), &call.tool)?;
    match (&call.arguments, sent) {
        (_, Some(sent)) => d.set_item(intern!(py, "arguments"), sent)?,
        (Some(v), None) => d.set_item(intern!(py, "arguments"), from_value(py, v)?)?,
        (None, None) => d.set_item(intern!(py, "arguments"), py.None())?,
    }
    if !call.fixes.is_empty() {
        d.set_item(intern!(py, "fixes"), list_of(py, &call.fixes, fix_to_py)?)?;
    }
    if !call.issues.is_empty() {
        d.set_item(
            intern!(py, "issues"),
            list_of(py, &call.issues, issue_to_py)?,
        )?;
    }
    d.set_item(intern!(py, "outcome"), outcome_word(py, call.outcome))?;
    d.set_item(intern!(py, "lossy"), call.is_lossy())?;
    if call.outcome == Outcome::Feedback {
        let f = feedback::render(&call.tool, &call.issues);
        d.set_item(intern!(py, "feedback"), f.text)?;
        d.set_item(intern!(py, "error"), from_value(py, &f.json["error"])?)?;
    }
    Ok(d.into_any().unbind())
}

/// `valid`, `repaired` or `feedback`, as serde names an [`Outcome`].
fn outcome_word(py: Python<'_>, outcome: Outcome) -> &Bound<'_, PyString> {
    match outcome {
        Outcome::Valid => intern!(py, "valid"),
        Outcome::Repaired => intern!(py, "repaired"),
        Outcome::Feedback => intern!(py, "feedback"),
    }
}

/// Tools compiled once (their JSON Schemas), with the mending and planning options: what
/// a tool node keeps for its lifetime.
#[pyclass(frozen, module = "toolmend._core")]
struct Toolbox {
    /// Shared with the resolutions in flight (`Resolver`).
    tools: Arc<toolmend::Toolbox>,
    /// How messages are planned (tools with coercions of their own included).
    plan: Arc<PlanOptions>,
}

impl Toolbox {
    /// The core plan of one message (`toolmend::message::plan`): a call LangChain parsed
    /// is planned from its parsed arguments (a call wrapper among them read as the text
    /// it was, as the core reads parsed arguments).
    fn plan(
        &self,
        content: Option<&str>,
        calls: &[PyCall],
        position: usize,
        earlier: &HashSet<String>,
        answered: &HashSet<String>,
    ) -> MessagePlan {
        let input = MessageInput {
            text: content.map(Cow::Borrowed),
            calls: calls.iter().map(PyCall::sent).collect(),
            position,
            cut_off: false,
        };
        let around = Around { earlier, answered };
        let ctx = ValidationContext::new("", Phase::Initial);
        message::plan(&input, around, &self.tools, &self.plan, &ctx)
    }

    /// The mending options for calls to `name`.
    fn opts(&self, name: &str) -> &MendOptions {
        self.plan.mend_for(name)
    }
}

/// A call's arguments as they came from Python.
enum PyArgs {
    Text(String),
    Value(Value),
}

/// A call as it came from Python: `{"id", "name", "args"}`.
struct PyCall {
    id: Option<String>,
    name: String,
    args: PyArgs,
}

impl PyCall {
    fn sent(&self) -> SentCall<'_> {
        SentCall {
            id: self.id.as_deref(),
            name: &self.name,
            arguments: match &self.args {
                PyArgs::Text(t) => Args::Text(t),
                PyArgs::Value(v) => Args::Value(v),
            },
        }
    }
}

fn read_call(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<PyCall> {
    let d = obj
        .cast::<PyDict>()
        .map_err(|_| error("calls: each call must be a dict with \"name\", \"args\", \"id\""))?;
    let text = |v: Bound<'_, PyAny>| -> PyResult<String> {
        match v.cast::<PyString>() {
            Ok(s) => Ok(s.to_str()?.to_owned()),
            Err(_) => Ok(v.str()?.to_str()?.to_owned()),
        }
    };
    let id = match d.get_item(intern!(py, "id"))? {
        Some(v) if !v.is_none() => Some(text(v)?),
        _ => None,
    };
    let name = match d.get_item(intern!(py, "name"))? {
        Some(v) if !v.is_none() => text(v)?,
        _ => String::new(),
    };
    let args = match d.get_item(intern!(py, "args"))? {
        None => PyArgs::Text(String::new()),
        Some(a) if a.is_none() => PyArgs::Text(String::new()),
        Some(a) => {
            if let Ok(text) = a.cast::<PyString>() {
                PyArgs::Text(text.to_str()?.to_owned())
            } else {
                let mut seen = Seen::default();
                let value = to_value(&a, 0, &mut seen)?;
                if seen.non_finite {
                    // serde_json has no NaN: the JSON text (with its NaN tokens) is mended,
                    // so the repair replaces and records them.
                    PyArgs::Text(py.import("json")?.call_method1("dumps", (&a,))?.extract()?)
                } else {
                    PyArgs::Value(value)
                }
            }
        }
    };
    Ok(PyCall { id, name, args })
}

fn id_set(ids: Option<&Bound<'_, PyAny>>) -> PyResult<HashSet<String>> {
    let mut out = HashSet::new();
    if let Some(ids) = ids.filter(|i| !i.is_none()) {
        for id in ids.try_iter()? {
            let id = id?;
            if !id.is_none() {
                out.insert(id.str()?.to_str()?.to_owned());
            }
        }
    }
    Ok(out)
}

/// True when the plan runs every call as it was sent: the caller may pass the calls on
/// untouched (the common case, answered without building a dict per call).
fn runs_as_sent(plan: &MessagePlan, calls: &[PyCall]) -> bool {
    plan.answered.is_empty()
        && !plan.shape.from_text
        && plan.shape.content.is_none()
        && plan.shape.message_fixes.is_empty()
        && plan.calls.len() == calls.len()
        && plan.calls.iter().all(|c| {
            c.outcome == CallOutcome::Executed
                && c.call.outcome == Outcome::Valid
                && !c.split
                && c.original_id.is_none()
                && matches!(calls[c.index].args, PyArgs::Value(_))
                && c.id.as_deref() == calls[c.index].id.as_deref()
        })
}

/// A Python string for a `'static` name (a fix or issue kind, a vocabulary word), made
/// once: plans hand out the same few words again and again.
fn word<'py>(py: Python<'py>, s: &'static str) -> Bound<'py, PyString> {
    static WORDS: LazyLock<Mutex<HashMap<&'static str, Py<PyString>>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    let Ok(mut words) = WORDS.lock() else {
        return PyString::new(py, s);
    };
    words
        .entry(s)
        .or_insert_with(|| PyString::intern(py, s).unbind())
        .bind(py)
        .clone()
}

/// A fix as `mend` gives it (`kind`, and `path`, `offset`, `detail` when set).
fn fix_to_py<'py>(py: Python<'py>, f: &Fix) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(intern!(py, "kind"), word(py, f.kind.id()))?;
    if !f.path.is_empty() {
        d.set_item(intern!(py, "path"), &f.path)?;
    }
    if let Some(offset) = f.offset {
        d.set_item(intern!(py, "offset"), offset)?;
    }
    if !f.detail.is_empty() {
        d.set_item(intern!(py, "detail"), &f.detail)?;
    }
    Ok(d)
}

/// An issue as `mend` gives it.
fn issue_to_py<'py>(py: Python<'py>, i: &Issue) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(intern!(py, "kind"), word(py, i.kind.id()))?;
    d.set_item(intern!(py, "path"), &i.path)?;
    d.set_item(intern!(py, "message"), &i.message)?;
    if let Some(expected) = &i.expected {
        d.set_item(intern!(py, "expected"), expected)?;
    }
    if let Some(got) = &i.got {
        d.set_item(intern!(py, "got"), from_value(py, got)?)?;
    }
    if !i.allowed.is_empty() {
        let allowed = PyList::empty(py);
        for a in &i.allowed {
            allowed.append(from_value(py, a)?)?;
        }
        d.set_item(intern!(py, "allowed"), allowed)?;
    }
    if let Some(suggestion) = &i.suggestion {
        d.set_item(intern!(py, "suggestion"), suggestion)?;
    }
    Ok(d)
}

fn list_of<'py, T>(
    py: Python<'py>,
    items: &[T],
    one: impl Fn(Python<'py>, &T) -> PyResult<Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for item in items {
        list.append(one(py, item)?)?;
    }
    Ok(list)
}

fn planned_to_py<'py>(
    py: Python<'py>,
    c: &PlannedCall,
    parsed_as_sent: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(intern!(py, "index"), c.index)?;
    d.set_item(intern!(py, "id"), c.id.as_deref())?;
    d.set_item(intern!(py, "original_id"), c.original_id.as_deref())?;
    d.set_item(intern!(py, "source"), word(py, c.source.as_str()))?;
    d.set_item(intern!(py, "split"), c.split)?;
    d.set_item(intern!(py, "tool"), &c.call.tool)?;
    d.set_item(intern!(py, "outcome"), word(py, c.outcome.as_str()))?;
    d.set_item(intern!(py, "mended"), outcome_word(py, c.call.outcome))?;
    // Parsed arguments valid as sent: the caller has them already.
    if !(parsed_as_sent && c.call.outcome == Outcome::Valid && !c.split) {
        match &c.call.arguments {
            Some(v) => d.set_item(intern!(py, "arguments"), from_value(py, v)?)?,
            None => d.set_item(intern!(py, "arguments"), py.None())?,
        }
    }
    d.set_item(intern!(py, "fixes"), list_of(py, &c.call.fixes, fix_to_py)?)?;
    d.set_item(
        intern!(py, "issues"),
        list_of(py, &c.call.issues, issue_to_py)?,
    )?;
    d.set_item(intern!(py, "correctable"), c.correctable)?;
    d.set_item(intern!(py, "note"), c.note.as_deref())?;
    d.set_item(intern!(py, "mend_us"), c.mend_time.as_secs_f64() * 1e6)?;
    if c.call.outcome == Outcome::Feedback && c.outcome != CallOutcome::Dropped {
        let f = feedback::render(&c.call.tool, &c.call.issues);
        d.set_item(intern!(py, "feedback"), f.text)?;
    }
    Ok(d)
}

#[pymethods]
impl Toolbox {
    /// `tools`: dicts `{"name", "description", "parameters"}` or OpenAI tool definitions
    /// (`{"type": "function", "function": {…}}`).
    ///
    /// `coerce`: `True` (the default coercions, safe and unsafe), `False` (none), or a
    /// dict switching single coercions from the default, e.g. `{"scalar_to_string": False}`.
    ///
    /// The planning options (`plan_message`): `calls_in_text` (read calls written into the
    /// text when the message sent none), `accept_truncated` (`True`, or the tools that run
    /// a cut-off call on what could be read), `correct_missing_fields` (a call missing a
    /// required value may be corrected), `tool_coerce` (`{tool: coerce}`: tools with
    /// coercions of their own, e.g. every coercion for tools no other validator checks).
    #[new]
    #[pyo3(signature = (tools, *, coerce = None, strip_thinking = true, calls_in_text = true, accept_truncated = None, correct_missing_fields = false, tool_coerce = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        tools: &Bound<'_, PyAny>,
        coerce: Option<&Bound<'_, PyAny>>,
        strip_thinking: bool,
        calls_in_text: bool,
        accept_truncated: Option<&Bound<'_, PyAny>>,
        correct_missing_fields: bool,
        tool_coerce: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let defs: Vec<Value> = from_py(tools, "tools must be a list of dicts")?;
        let mut toolbox = toolmend::Toolbox::new();
        for def in defs {
            let f = def.get("function").unwrap_or(&def);
            let name = f["name"]
                .as_str()
                .ok_or_else(|| error(format!("a tool has no \"name\": {}", cut(&f.to_string()))))?;
            let description = f["description"].as_str().unwrap_or_default();
            let empty = json!({"type": "object", "properties": {}});
            let parameters = f.get("parameters").unwrap_or(&empty);
            toolbox
                .add(CompiledTool::compile(name, description, parameters).map_err(error)?)
                .map_err(error)?;
        }
        let mut opts = MendOptions::default();
        if let Some(coerce) = coerce {
            opts.coercions = coercions(coerce)?;
        }
        opts.repair.strip_thinking = strip_thinking;
        let accept_truncated = match accept_truncated {
            None => AcceptTruncated::None,
            Some(a) if a.is_none() => AcceptTruncated::None,
            Some(a) => match a.extract::<bool>() {
                Ok(true) => AcceptTruncated::All,
                Ok(false) => AcceptTruncated::None,
                Err(_) => AcceptTruncated::Only(
                    from_py::<Vec<String>>(a, "accept_truncated must be a bool or tool names")?
                        .into_iter()
                        .collect(),
                ),
            },
        };
        let mut plan = PlanOptions {
            mend: opts,
            calls_in_text,
            strip_thinking,
            accept_truncated,
            correct_missing_fields,
            tool_mend: HashMap::new(),
        };
        if let Some(per_tool) = tool_coerce.filter(|t| !t.is_none()) {
            let per_tool = per_tool
                .cast::<PyDict>()
                .map_err(|_| error("tool_coerce must be a dict {tool name: coerce}"))?;
            for (name, coerce) in per_tool.iter() {
                let coercions = coercions(&coerce)?;
                if coercions != plan.mend.coercions {
                    let mend = MendOptions {
                        coercions,
                        ..plan.mend.clone()
                    };
                    plan.tool_mend.insert(name.extract()?, mend);
                }
            }
        }
        Ok(Toolbox {
            tools: Arc::new(toolbox),
            plan: Arc::new(plan),
        })
    }

    /// Plans one assistant message: the core's per-message plan (`toolmend::message`),
    /// the GIL released while it runs. `content`: the message's text (`None` for none or
    /// content parts); `calls`: its calls in order, dicts `{"id", "name", "args"}` with
    /// `args` parsed (a dict: coerced and validated) or text (repaired first); `position`:
    /// the message's index in the conversation (minted ids name it); `earlier_ids`: every
    /// call and result id before the message; `answered_ids`: the ids the tool messages
    /// right after it answer.
    ///
    /// Returns `None` when every call runs exactly as sent (valid, under its own id, the
    /// message unchanged). Otherwise a dict: `calls`, one per planned call (glued calls
    /// split, dropped ones included): `index` (its call in `calls`, or in `text_calls`),
    /// `id`, `original_id`, `source` (`tool_calls` | `text` | `glued`), `split`, `tool`,
    /// `outcome` (`executed` | `feedback` | `dropped`), `mended` (`valid` | `repaired` |
    /// `feedback`), `arguments` (left out for parsed arguments valid as sent), `fixes`,
    /// `issues`, `correctable`, `note`, `mend_us`, and for feedback the `feedback` text;
    /// `answered`: `(index, id)` of calls not planned again; `text_calls`: `(name,
    /// arguments)` of the calls read from the text (empty unless the calls came from it);
    /// `content` (only when the text changes: the new text, `None` for none);
    /// `message_fixes`; `changed` (the sanitized message differs from the sent one).
    #[pyo3(signature = (content, calls, *, position = 0, earlier_ids = None, answered_ids = None))]
    fn plan_message(
        &self,
        py: Python<'_>,
        content: Option<&str>,
        calls: &Bound<'_, PyAny>,
        position: usize,
        earlier_ids: Option<&Bound<'_, PyAny>>,
        answered_ids: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let calls: Vec<PyCall> = calls
            .try_iter()?
            .map(|c| read_call(py, &c?))
            .collect::<PyResult<_>>()?;
        let earlier = id_set(earlier_ids)?;
        let answered = id_set(answered_ids)?;
        let plan = py.detach(|| self.plan(content, &calls, position, &earlier, &answered));
        if runs_as_sent(&plan, &calls) {
            return Ok(None);
        }
        let out = PyDict::new(py);
        let planned = PyList::empty(py);
        for c in &plan.calls {
            let parsed = !plan.shape.from_text
                && calls
                    .get(c.index)
                    .is_some_and(|s| matches!(s.args, PyArgs::Value(_)));
            planned.append(planned_to_py(py, c, parsed)?)?;
        }
        out.set_item(intern!(py, "calls"), planned)?;
        let answered = PyList::empty(py);
        for a in &plan.answered {
            answered.append((a.index, &a.id))?;
        }
        out.set_item(intern!(py, "answered"), answered)?;
        let text_calls = PyList::empty(py);
        for tc in &plan.shape.text_calls {
            text_calls.append((&tc.name, &tc.arguments))?;
        }
        out.set_item(intern!(py, "text_calls"), text_calls)?;
        if let Some(content) = &plan.shape.content {
            out.set_item(intern!(py, "content"), content.as_deref())?;
        }
        out.set_item(
            intern!(py, "message_fixes"),
            list_of(py, &plan.shape.message_fixes, fix_to_py)?,
        )?;
        out.set_item(intern!(py, "changed"), plan.changes_message())?;
        Ok(Some(out.into_any().unbind()))
    }

    /// The tool names, in the order given.
    fn names(&self) -> Vec<String> {
        self.tools.names().map(str::to_owned).collect()
    }

    /// Mends one call. `arguments` is the text the model sent (repaired, maybe split into
    /// several calls) or an already parsed dict (coerced and validated). Returns a list of
    /// calls (two or more when calls were glued together, or when a list given for a scalar
    /// field was split into one call per value: `split_merged_calls`), each a dict: `tool`,
    /// `arguments`, `fixes`, `issues`, `outcome` (`valid` | `repaired` | `feedback`),
    /// `lossy`, and for feedback `feedback` (the text for the agent) and `error`.
    /// A cut-off text is feedback unless `accept_truncated`. `read_fixes`: the `fixes` that
    /// [`calls_in_text`](Self::calls_in_text) gave the call (reading it out of the text): they
    /// head its record, and a lossy one means the call was cut off.
    #[pyo3(signature = (name, arguments, *, phase = "initial", accept_truncated = false, read_fixes = None))]
    fn mend(
        &self,
        py: Python<'_>,
        name: &str,
        arguments: &Bound<'_, PyAny>,
        phase: &str,
        accept_truncated: bool,
        read_fixes: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<Py<PyAny>>> {
        let read_fixes: Vec<toolmend::Fix> = match read_fixes {
            Some(f) if !f.is_none() => from_py(f, "read_fixes")?,
            _ => Vec::new(),
        };
        let ctx = ValidationContext::new("", self::phase(phase)?);
        let opts = self.opts(name);
        let mut calls = if let Ok(text) = arguments.cast::<PyString>() {
            let text = text.to_str()?;
            py.detach(|| mend::mend_named_in(name, text, &self.tools, opts, &ctx).calls)
        } else {
            let mut seen = Seen::default();
            let value = to_value(arguments, 0, &mut seen)?;
            if seen.non_finite {
                // Python's json reads NaN and Infinity, serde_json has no such values: mend
                // the JSON text (with its NaN tokens), so the repair replaces and records them.
                let text: String = py
                    .import("json")?
                    .call_method1("dumps", (arguments,))?
                    .extract()?;
                py.detach(|| mend::mend_named_in(name, &text, &self.tools, opts, &ctx).calls)
            } else {
                // Parsed as text is: a merged call (a list for a scalar field) is one call
                // per value unless `coerce={"split_merged_calls": False}`.
                let calls =
                    py.detach(|| mend::mend_parsed_in(name, &value, &self.tools, opts, &ctx));
                // Valid as sent, nothing changed: the arguments are the caller's own object,
                // not a copy built back from JSON.
                if let [call] = calls.as_slice()
                    && !seen.converted
                    && call.outcome == Outcome::Valid
                    && call.fixes.is_empty()
                    && read_fixes.is_empty()
                    && call.arguments.as_ref() == Some(&value)
                {
                    return Ok(vec![call_to_py(py, call, Some(arguments))?]);
                }
                calls
            }
        };
        for c in &mut calls {
            mend::with_prior_fixes(c, &read_fixes);
        }
        if !accept_truncated {
            calls.iter_mut().for_each(mend::refuse_lossy);
        }
        calls.iter().map(|c| call_to_py(py, c, None)).collect()
    }

    /// True when parsed arguments would be passed through unchanged by `mend` (valid, no
    /// key to rename, no NaN): the tool node's fast path for the common case.
    fn passes(&self, py: Python<'_>, name: &str, arguments: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Some(tool) = self.tools.get(name) else {
            return Ok(false);
        };
        let mut seen = Seen::default();
        let Ok(value) = to_value(arguments, 0, &mut seen) else {
            return Ok(false);
        };
        if seen.non_finite {
            return Ok(false);
        }
        // Too little work to be worth releasing the GIL.
        let _ = py;
        Ok(tool.passes_as_sent(&value, &self.opts(name).coercions))
    }

    /// Validates parsed arguments as they are (no repair, no coercion): the issues, each
    /// a dict (`kind`, `path`, `message`, `expected`, `got`, `suggestion`); `[]` when valid.
    fn validate(
        &self,
        py: Python<'_>,
        name: &str,
        arguments: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let value: Value = from_py(arguments, "arguments must be JSON-like")?;
        let issues = match self.tools.get(name) {
            Some(tool) => py.detach(|| tool.validate(&value)),
            None => vec![self.tools.unknown_tool_issue(name)],
        };
        to_py(py, &issues)
    }

    /// Calls a model wrote into its text (`<tool_call>{…}`, `[TOOL_CALLS]`, `f(a=1)` …), as
    /// `{"name", "arguments", "fixes"}` with the arguments as JSON text and the fixes reading
    /// them took (pass them to [`mend`](Self::mend) as `read_fixes`); only calls naming a
    /// known tool count, and all or nothing: `[]` when any part is not a call.
    fn calls_in_text(&self, py: Python<'_>, text: &str) -> PyResult<Py<PyAny>> {
        let message = AssistantMessage {
            content: Some(Some(Content::Text(text.to_owned()))),
            ..Default::default()
        };
        let calls = py
            .detach(|| message::read_calls_in_text(&message, &self.tools, &self.plan.mend.repair));
        let out: Vec<Value> = calls
            .into_iter()
            .map(|t| {
                json!({"name": t.call.name, "arguments": t.call.arguments,
                       "fixes": t.fixes})
            })
            .collect();
        to_py(py, &out)
    }

    /// The prompt for one correction attempt: the core's one prompt (the tool, its schema,
    /// `raw_arguments` as sent, what `issues` say is wrong, the last `context_messages` of
    /// `messages` without system ones, then `assistant_text`). `messages`: OpenAI-format
    /// dicts (`role`, `content`, an assistant's `tool_calls`, a result's `tool_call_id`).
    /// `ask_for_json`: end by asking for one JSON object (a model answering in text).
    #[pyo3(signature = (name, raw_arguments, issues, messages, assistant_text = None, *, context_messages = 10, ask_for_json = false))]
    #[allow(clippy::too_many_arguments)]
    fn correction_prompt(
        &self,
        py: Python<'_>,
        name: &str,
        raw_arguments: &str,
        issues: &Bound<'_, PyAny>,
        messages: &Bound<'_, PyAny>,
        assistant_text: Option<&str>,
        context_messages: usize,
        ask_for_json: bool,
    ) -> PyResult<String> {
        let tool = self
            .tools
            .get(name)
            .ok_or_else(|| error(format!("correction_prompt: no tool named {name:?}")))?;
        let issues: Vec<Issue> = from_py(issues, "issues")?;
        let messages: Vec<Message> = if context_messages == 0 {
            Vec::new()
        } else {
            from_py(messages, "messages")?
        };
        let request = CorrectionRequest {
            tool,
            call_id: "",
            raw_arguments,
            arguments: None,
            issues: &issues,
            attempt: 1,
            messages: &messages,
            assistant_text,
        };
        let options = PromptOptions {
            context_messages,
            ask_for_json,
        };
        Ok(py.detach(|| correct::prompt(&request, &options)))
    }

    /// A correction model's answer re-validated (no repair beyond reading it): `answer`
    /// is parsed arguments (a dict) or the model's text (read with the core's
    /// `read_answer`: mended, one object only). Returns a mended call dict as
    /// [`mend`](Self::mend) does, or `None` when no arguments could be read or the tool is
    /// unknown. `first`: the arguments the call first carried; a value of its lists the
    /// answer dropped is a `values_lost` issue, so such an answer is never clean (the
    /// core's `values_lost_issues`, as the Rust correction loop and the gateway's re-ask
    /// check it).
    #[pyo3(signature = (name, answer, *, phase = "correction", first = None))]
    fn check_answer(
        &self,
        py: Python<'_>,
        name: &str,
        answer: &Bound<'_, PyAny>,
        phase: &str,
        first: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let Some(tool) = self.tools.get(name) else {
            return Ok(None);
        };
        let value = if let Ok(text) = answer.cast::<PyString>() {
            let text = text.to_str()?;
            match py.detach(|| correct::read_answer(text)) {
                Some(v) => v,
                None => return Ok(None),
            }
        } else if answer.is_none() {
            return Ok(None);
        } else {
            let mut seen = Seen::default();
            let value = to_value(answer, 0, &mut seen)?;
            if seen.non_finite {
                return Ok(None);
            }
            value
        };
        let ctx = ValidationContext::new(tool.name(), self::phase(phase)?);
        let coercions = &self.opts(name).coercions;
        let first = match first.filter(|f| !f.is_none()) {
            Some(f) => {
                let mut seen = Seen::default();
                Some(to_value(f, 0, &mut seen)?)
            }
            None => None,
        };
        let checked = py.detach(|| {
            let mut checked = tool.check(value, coercions, &ctx);
            if let Some(first) = &first {
                checked
                    .issues
                    .extend(mend::values_lost_issues(first, &checked.value));
            }
            checked
        });
        let outcome = if !checked.is_valid() {
            Outcome::Feedback
        } else if checked.fixes.is_empty() {
            Outcome::Valid
        } else {
            Outcome::Repaired
        };
        let call = MendedCall {
            tool: tool.name().to_owned(),
            arguments: Some(checked.value),
            fixes: checked.fixes,
            issues: checked.issues,
            outcome,
        };
        call_to_py(py, &call, None).map(Some)
    }

    fn __repr__(&self) -> String {
        format!("Toolbox({})", self.names().join(", "))
    }
}

/// `coerce=`: a bool (the defaults, or none), or a dict of switch names or fix ids to
/// bools over the defaults: the core's one mapping (`Coercions::from_names`).
fn coercions(coerce: &Bound<'_, PyAny>) -> PyResult<Coercions> {
    if let Ok(all) = coerce.extract::<bool>() {
        return Ok(if all {
            Coercions::default()
        } else {
            Coercions::none()
        });
    }
    let flags: std::collections::BTreeMap<String, bool> = from_py(
        coerce,
        "coerce must be a bool or a dict of coercion names (or fix ids) to bools",
    )?;
    Coercions::from_names(flags).map_err(|e| match e {
        SwitchError::Contradiction {
            switch,
            first,
            second,
        } => error(format!(
            "coerce: {:?}: {} and {:?}: {} contradict each other: both are the coercion \
             {switch:?}, which makes them together",
            first.0,
            py_bool(first.1),
            second.0,
            py_bool(second.1)
        )),
        other => error(format!("coerce: {other}")),
    })
}

fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// What [`to_value`] met on its way, besides JSON's own types.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// A float NaN or infinity (serde_json cannot hold them: the value holds `null`).
    pub(crate) non_finite: bool,
    /// A value JSON has no type for, converted: a tuple (as a list), a key that is no
    /// string, or anything else (a pydantic model, a date …) as pythonize sees it.
    pub(crate) converted: bool,
}

/// A parsed Python value (dict, list, str, int, float, bool, None) as JSON, with what it
/// met besides ([`Seen`]). Written out rather than through `depythonize`, which is
/// several times slower on the small dicts of tool calls.
fn to_value(obj: &Bound<'_, PyAny>, depth: usize, seen: &mut Seen) -> PyResult<Value> {
    if depth > 128 {
        return Err(error("arguments nested deeper than 128 levels"));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        // A subclass (a StrEnum member …) is read as its text: a plain str is what comes
        // back, so the caller's object is not handed back as the arguments.
        seen.converted |= !s.is_exact_instance_of::<PyString>();
        return Ok(Value::String(s.to_str()?.to_owned()));
    }
    // bool before int: a Python bool is an int.
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(i) = obj.cast::<PyInt>() {
        seen.converted |= !i.is_exact_instance_of::<PyInt>();
        if let Ok(v) = i.extract::<i64>() {
            return Ok(Value::from(v));
        }
        if let Ok(v) = i.extract::<u64>() {
            return Ok(Value::from(v));
        }
        // Beyond 64 bits: a float, so not the value the caller holds.
        seen.converted = true;
        let f: f64 = i.extract()?;
        return Ok(serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        seen.converted |= !f.is_exact_instance_of::<PyFloat>();
        let v = f.value();
        return Ok(match serde_json::Number::from_f64(v) {
            Some(n) => Value::Number(n),
            None => {
                seen.non_finite = true;
                Value::Null
            }
        });
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        seen.converted |= !d.is_exact_instance_of::<PyDict>();
        let mut map = serde_json::Map::with_capacity(d.len());
        for (k, v) in d.iter() {
            let key = match k.cast::<PyString>() {
                Ok(s) => s.to_str()?.to_owned(),
                Err(_) => {
                    seen.converted = true;
                    k.str()?.to_str()?.to_owned()
                }
            };
            map.insert(key, to_value(&v, depth + 1, seen)?);
        }
        return Ok(Value::Object(map));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        seen.converted |= !l.is_exact_instance_of::<PyList>();
        return l
            .iter()
            .map(|v| to_value(&v, depth + 1, seen))
            .collect::<PyResult<Vec<_>>>()
            .map(Value::Array);
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        seen.converted = true;
        return t
            .iter()
            .map(|v| to_value(&v, depth + 1, seen))
            .collect::<PyResult<Vec<_>>>()
            .map(Value::Array);
    }
    // Anything else (a pydantic model, a date …): as pythonize sees it.
    seen.converted = true;
    from_py(obj, "arguments")
}

/// A 64-bit digest of a JSON-like Python value (dict, list, str, int, float, bool,
/// None), the same whatever the order of a dict's keys: the key `toolmend.repair_json`
/// finds a compiled schema by, without writing the schema out as sorted JSON text on
/// every call. Strings and numbers enter by Python's own hash (a string caches it, a
/// dict's keys have it already), with their type: it holds within this process only, as
/// the cache does. The caller compares the schema itself on a hit (a collision never
/// picks another schema's tools). `None` for anything else (a pydantic model, a date, a
/// NaN, a schema nested deeper than 128 levels): the caller keys those by their JSON text.
#[pyfunction]
fn schema_digest(schema: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    fn walk(obj: &Bound<'_, PyAny>, depth: usize, h: &mut Fx) -> PyResult<bool> {
        if depth > 128 {
            return Ok(false);
        }
        if obj.is_none() {
            h.add(0);
        } else if obj.is_instance_of::<PyString>() {
            h.add(1);
            h.add(obj.hash()? as u64);
        } else if let Ok(b) = obj.cast::<PyBool>() {
            h.add(2);
            h.add(u64::from(b.is_true()));
        } else if let Ok(i) = obj.cast::<PyInt>() {
            h.add(3);
            // By value where it fits (Python hashes -1 and -2 alike), else by hash.
            match i.extract::<i64>() {
                Ok(v) => h.add(v as u64),
                Err(_) => h.add(obj.hash()? as u64),
            }
        } else if let Ok(f) = obj.cast::<PyFloat>() {
            let v = f.value();
            if !v.is_finite() {
                return Ok(false);
            }
            h.add(4);
            h.add(v.to_bits());
        } else if let Ok(l) = obj.cast::<PyList>() {
            h.add(5);
            h.add(l.len() as u64);
            for v in l.iter() {
                if !walk(&v, depth + 1, h)? {
                    return Ok(false);
                }
            }
        } else if let Ok(d) = obj.cast::<PyDict>() {
            // Each member digested on its own and summed: the order of the keys is no
            // part of a schema.
            let mut sum = 0u64;
            for (k, v) in d.iter() {
                if !k.is_instance_of::<PyString>() {
                    return Ok(false);
                }
                let mut member = Fx::default();
                member.add(k.hash()? as u64);
                if !walk(&v, depth + 1, &mut member)? {
                    return Ok(false);
                }
                sum = sum.wrapping_add(member.finish());
            }
            h.add(6);
            h.add(d.len() as u64);
            h.add(sum);
        } else {
            return Ok(false);
        }
        Ok(true)
    }
    let mut h = Fx::default();
    Ok(walk(schema, 0, &mut h)?.then(|| h.finish()))
}

/// A small fast hash (Firefox's rotate-xor-multiply) for [`schema_digest`]: no key, no
/// defence against chosen collisions, which only cost a compile (a hit is compared).
#[derive(Default)]
struct Fx(u64);

impl Fx {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Whether `json.loads` would read `text`, without building the value or paying for a
/// `JSONDecodeError`: `True` when serde_json reads it (strict JSON), `None` when serde
/// refuses it for a reason Python's reader may not share (the literals NaN and Infinity, a
/// lone surrogate escape, a number beyond a float's range, nesting deeper than 128
/// levels: then only `json.loads` can tell), `False` when `json.loads` would refuse it too.
#[pyfunction]
fn json_loads_reads(py: Python<'_>, text: &str) -> Option<bool> {
    let check = || match serde_json::from_str::<serde::de::IgnoredAny>(text) {
        Ok(_) => Some(true),
        Err(e) => {
            let why = e.to_string();
            let python_may_read = text.contains("NaN")
                || text.contains("Infinity")
                || why.starts_with("number out of range")
                || why.starts_with("recursion limit exceeded")
                || why.contains("surrogate")
                || why.contains("hex escape")
                || why.starts_with("invalid unicode code point");
            (!python_may_read).then_some(false)
        }
    };
    // A long text is checked without the GIL; a short one costs less than releasing it.
    if text.len() > 16 * 1024 {
        py.detach(check)
    } else {
        check()
    }
}

fn cut(s: &str) -> String {
    s.chars().take(120).collect()
}

/// Repairs a text into JSON object(s) with no schema: `{"calls": [{"name", "arguments",
/// "fixes"}], "lossy"}`. Raises `ToolmendError` when no object can be read. `strict`:
/// repair nothing (only a valid object is read).
#[pyfunction]
#[pyo3(signature = (text, *, strip_thinking = true, strict = false))]
fn repair(py: Python<'_>, text: &str, strip_thinking: bool, strict: bool) -> PyResult<Py<PyAny>> {
    let opts = if strict {
        RepairOptions::strict()
    } else {
        RepairOptions {
            strip_thinking,
            ..RepairOptions::default()
        }
    };
    let repaired = py.detach(|| toolmend::repair(text, &opts)).map_err(error)?;
    // `{"calls": [{"name", "arguments", "fixes"}], "lossy"}`, built as Python objects
    // directly (no JSON tree of the answer in between).
    let calls = PyList::empty(py);
    for c in &repaired.calls {
        let d = PyDict::new(py);
        d.set_item(intern!(py, "name"), c.name.as_deref())?;
        d.set_item(intern!(py, "arguments"), from_value(py, &c.arguments)?)?;
        d.set_item(intern!(py, "fixes"), list_of(py, &c.fixes, fix_to_py)?)?;
        calls.append(d)?;
    }
    let out = PyDict::new(py);
    out.set_item(intern!(py, "calls"), calls)?;
    out.set_item(
        intern!(py, "lossy"),
        repaired.calls.iter().any(|c| c.is_lossy()),
    )?;
    Ok(out.into_any().unbind())
}

/// The one rule for "is this invalid call worth asking a correction model about", from
/// its `issues` and `fixes` (dicts as `mend` gives them): not an unknown tool, not a
/// cut-off call, not a missing required value unless an unknown key may be it misnamed
/// or `correct_missing_fields`.
#[pyfunction]
#[pyo3(signature = (issues, fixes, correct_missing_fields = false))]
fn correctable(
    issues: &Bound<'_, PyAny>,
    fixes: &Bound<'_, PyAny>,
    correct_missing_fields: bool,
) -> PyResult<bool> {
    let issues: Vec<Issue> = from_py(issues, "issues")?;
    let fixes: Vec<Fix> = from_py(fixes, "fixes")?;
    Ok(correct::correctable(
        &issues,
        &fixes,
        correct_missing_fields,
    ))
}

/// Removes leaked reasoning (`<think>…</think>` …) from a text; `None` when there was none.
#[pyfunction]
fn strip_thinking(text: &str) -> Option<String> {
    toolmend::node::strip_thinking(text)
}

/// The pairing violations of an OpenAI-format history (list of message dicts), each a
/// dict `{kind, message, call, call_id, detail, providers}`; `[]` when valid.
#[pyfunction]
fn history_check(py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let messages: Vec<Message> = from_py(messages, "messages")?;
    let violations = py.detach(|| history::check(&messages));
    to_py(py, &violations)
}

/// A valid history from any history: `(messages, actions)`. `orphans`: "drop" | "rehome";
/// `missing_ids`: "mint" | "remove".
#[pyfunction]
#[pyo3(signature = (messages, *, orphans = "drop", missing_ids = "mint"))]
fn history_sanitize(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    orphans: &str,
    missing_ids: &str,
) -> PyResult<(Py<PyAny>, Py<PyAny>)> {
    let messages: Vec<Message> = from_py(messages, "messages")?;
    let policy = SanitizePolicy {
        orphans: match orphans {
            "drop" => OrphanPolicy::Drop,
            "rehome" => OrphanPolicy::Rehome,
            o => return Err(error(format!("orphans={o:?}: use \"drop\" or \"rehome\""))),
        },
        missing_ids: match missing_ids {
            "mint" => MissingIdPolicy::Mint,
            "remove" => MissingIdPolicy::Remove,
            o => {
                return Err(error(format!(
                    "missing_ids={o:?}: use \"mint\" or \"remove\""
                )));
            }
        },
        ..SanitizePolicy::default()
    };
    let out = py.detach(|| history::sanitize(messages, &policy));
    Ok((to_py(py, &out.messages)?, to_py(py, &out.actions)?))
}

/// Drops the oldest turns to fit a budget, never splitting a call from its results;
/// system/developer messages and the first user message stay. Give `max_messages` or
/// `max_tokens` (counted with `encoding`: "o200k_base", "cl100k_base" or "bytes", or the
/// encoding of `model`). Returns the kept messages.
#[pyfunction]
#[pyo3(signature = (messages, *, max_messages = None, max_tokens = None, encoding = "o200k_base", model = None))]
fn history_trim(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    max_messages: Option<usize>,
    max_tokens: Option<usize>,
    encoding: &str,
    model: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let messages: Vec<Message> = from_py(messages, "messages")?;
    let budget = match (max_messages, max_tokens) {
        (Some(n), None) => Budget::Messages(n),
        (None, Some(n)) => Budget::Tokens(n),
        _ => return Err(error("give exactly one of max_messages and max_tokens")),
    };
    let counter: Box<dyn TokenCounter + Send + Sync> = match (model, encoding) {
        (Some(m), _) => Box::new(Tiktoken::for_model(m).ok_or_else(|| {
            error(format!(
                "no tokenizer known for model {m:?}: pass encoding= instead"
            ))
        })?),
        (None, "o200k_base") => Box::new(Tiktoken::o200k_base()),
        (None, "cl100k_base") => Box::new(Tiktoken::cl100k_base()),
        (None, "bytes") => Box::new(ByteEstimate),
        (None, e) => {
            return Err(error(format!(
                "encoding={e:?}: use \"o200k_base\", \"cl100k_base\" or \"bytes\""
            )));
        }
    };
    let trimmed = py.detach(|| history::trim(messages, budget, counter.as_ref()));
    to_py(py, &trimmed.messages)
}

/// Runs the `toolmend` command line (`toolmend_cli::run`, the very code of the Rust
/// binary) with `args`, the program name first; returns its exit status. The wheel's
/// `toolmend` console script (`toolmend._cli:main`) calls it. It writes to the process's
/// standard output and error (file descriptors 1 and 2, not `sys.stdout`) and runs with
/// the GIL released; `serve` and `scripted-provider` run until SIGINT or SIGTERM.
#[pyfunction]
fn run_cli(py: Python<'_>, args: Vec<std::ffi::OsString>) -> u8 {
    py.detach(|| toolmend_cli::run(args))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ToolmendError", m.py().get_type::<ToolmendError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Toolbox>()?;
    m.add_class::<resolve::Resolver>()?;
    m.add_class::<resolve::Pending>()?;
    m.add_class::<guard::Guard>()?;
    m.add_class::<tools::NetTools>()?;
    m.add("ToolsLoadError", m.py().get_type::<tools::ToolsLoadError>())?;
    m.add_function(wrap_pyfunction!(schema_digest, m)?)?;
    m.add_function(wrap_pyfunction!(json_loads_reads, m)?)?;
    m.add_function(wrap_pyfunction!(repair, m)?)?;
    m.add_function(wrap_pyfunction!(strip_thinking, m)?)?;
    m.add_function(wrap_pyfunction!(correctable, m)?)?;
    m.add_function(wrap_pyfunction!(history_check, m)?)?;
    m.add_function(wrap_pyfunction!(history_sanitize, m)?)?;
    m.add_function(wrap_pyfunction!(history_trim, m)?)?;
    m.add_function(wrap_pyfunction!(run_cli, m)?)?;
    m.add_function(wrap_pyfunction!(guard::_broken_guard, m)?)?;
    Ok(())
}
