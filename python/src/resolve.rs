//! `toolmend._core.Resolver`: one assistant message resolved by the core's driver
//! (`toolmend::drive`), one Rust call per message: plan, the calls LangGraph takes as
//! sent, the validators, correction, raise or the hook, the guard, in the core's one
//! order. The front's capabilities are Python callables. One that answers with an
//! awaitable (an async model, validator or hook) pauses the driver: the call returns a
//! [`Pending`] whose `awaitables` Python awaits (on its event loop, or with `asyncio.run`
//! on the sync path) and hands back to `resume`. No stage and no order lives in Python.

use std::{
    collections::HashSet,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    task::Poll,
    time::Duration,
};

use futures::channel::oneshot;
use pyo3::{
    exceptions::{PyRuntimeError, PyValueError},
    intern,
    prelude::*,
    types::{PyDict, PyList, PyString},
};
use serde_json::Value;
use toolmend::{
    Issue,
    conversation::{AssistantMessage, Message, ToolCall},
    correct::{
        self, CorrectError, Correction, CorrectionRequest, CorrectionScope, Corrector,
        PromptOptions,
    },
    drive::{
        self, Accept, CallReport, Correcting, Driven, GuardTally, Guarding, Invalid, NoObserver,
        OnRefused, Place, Resolution, Settle, Stages, Stop, Taken, Tally, Turn, UnresolvedCall,
        Validate, Validation,
    },
    future::BoxFuture,
    guard::{Guard as _, RuleGuard},
    mend::Outcome,
    message::{Around, CallOutcome, CallSource, PlanOptions, TimeOrderedIds},
};

use crate::{
    PyArgs, Toolbox, error, fix_to_py, from_py, from_value, guard::Guard, guard::RUNTIME, id_set,
    issue_to_py, list_of, read_call, word,
};

/// Python's own callbacks take this long at most per answer: they are the user's (a
/// model, a database lookup), which the node never bounded; an hour only keeps a lost
/// future from living forever.
const CALLBACK_LIMIT: Duration = Duration::from_secs(3600);

/// An answer Python owes the driver: an awaitable, and where its result goes.
struct Ask {
    awaitable: Py<PyAny>,
    answer: oneshot::Sender<PyResult<Py<PyAny>>>,
}

/// What the capabilities share with the call that polls the driver: the awaitables
/// Python owes, and the first error a user callback raised (it is raised once the driver
/// is done, as the callback itself would have).
#[derive(Default)]
struct Bridge {
    asks: Mutex<Vec<Ask>>,
    failed: Mutex<Option<PyErr>>,
}

enum Now {
    Ready(Py<PyAny>),
    Later(oneshot::Receiver<PyResult<Py<PyAny>>>),
}

impl Bridge {
    /// The callback's answer: at once, or once Python has awaited it.
    async fn answer(
        &self,
        call: impl FnOnce(Python<'_>) -> PyResult<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let now = Python::attach(|py| -> PyResult<Now> {
            let got = call(py)?;
            if !got.bind(py).hasattr(intern!(py, "__await__"))? {
                return Ok(Now::Ready(got));
            }
            let (answer, later) = oneshot::channel();
            self.asks
                .lock()
                .map_err(|_| PyRuntimeError::new_err("resolver: a lock is poisoned"))?
                .push(Ask {
                    awaitable: got,
                    answer,
                });
            Ok(Now::Later(later))
        })?;
        match now {
            Now::Ready(v) => Ok(v),
            Now::Later(later) => later.await.unwrap_or_else(|_| {
                Err(PyRuntimeError::new_err(
                    "resolver: an awaitable was never answered",
                ))
            }),
        }
    }

    /// Keeps the first error of a user callback.
    fn fail(&self, e: PyErr) {
        if let Ok(mut f) = self.failed.lock() {
            f.get_or_insert(e);
        }
    }

    fn has_asks(&self) -> bool {
        self.asks.lock().is_ok_and(|a| !a.is_empty())
    }
}

/// The front's context object, handed to every callback as its first argument.
#[derive(Clone)]
struct Callbacks {
    context: Arc<Py<PyAny>>,
    bridge: Arc<Bridge>,
}

fn issues_to_py<'py>(py: Python<'py>, issues: &[Issue]) -> PyResult<Bound<'py, PyList>> {
    list_of(py, issues, issue_to_py)
}

/// LangGraph's own handling of invalid calls it was sent (`accept(ctx, index, tool,
/// issues)` → `None`, or `(runs, note)`).
struct PyAccept {
    f: Py<PyAny>,
    cb: Callbacks,
    /// The arguments as sent, per sent call (what a call LangGraph runs runs with).
    sent: Arc<Vec<Option<Value>>>,
}

impl Accept for PyAccept {
    fn accept(&self, index: usize, tool: &str, issues: &[Issue]) -> Option<Taken> {
        let got = Python::attach(|py| -> PyResult<Option<(bool, String)>> {
            let issues = issues_to_py(py, issues)?;
            self.f
                .call1(py, (&*self.cb.context, index, tool, issues))?
                .extract(py)
        });
        match got {
            Ok(None) => None,
            Ok(Some((true, note))) => Some(Taken::Runs {
                arguments: self.sent.get(index).cloned().flatten(),
                note,
            }),
            Ok(Some((false, note))) => Some(Taken::Answers(note)),
            Err(e) => {
                self.cb.bridge.fail(e);
                None
            }
        }
    }
}

/// Per-tool validators (`validate(ctx, tool, call_id, arguments, phase)` → problems:
/// `None`, a text, a list of texts, or an awaitable of one).
struct PyValidate {
    f: Py<PyAny>,
    cb: Callbacks,
    tools: HashSet<String>,
}

impl Validate for PyValidate {
    fn validate<'a>(&'a self, call: Validation<'a>) -> BoxFuture<'a, Vec<String>> {
        Box::pin(async move {
            if !self.tools.contains(call.tool) {
                return Vec::new();
            }
            let phase = match call.phase {
                toolmend::schema::Phase::Initial => "initial",
                toolmend::schema::Phase::Correction => "correction",
                toolmend::schema::Phase::Salvage => "salvage",
            };
            let got = self
                .cb
                .bridge
                .answer(|py| {
                    let args = from_value(py, call.arguments)?;
                    self.f.call1(
                        py,
                        (&*self.cb.context, call.tool, call.call_id, args, phase),
                    )
                })
                .await;
            let read = got.and_then(|v| {
                Python::attach(|py| -> PyResult<Vec<String>> {
                    let v = v.bind(py);
                    if v.is_none() {
                        Ok(Vec::new())
                    } else if let Ok(s) = v.cast::<PyString>() {
                        Ok(vec![s.to_str()?.to_owned()])
                    } else {
                        v.try_iter()?
                            .map(|p| Ok(p?.str()?.to_str()?.to_owned()))
                            .collect()
                    }
                })
            });
            match read {
                Ok(problems) => problems,
                Err(e) => {
                    // A failing validator is the user's error, raised once the driver is
                    // done; the call is refused meanwhile (never run unchecked).
                    self.cb.bridge.fail(e);
                    vec!["the validator failed".to_owned()]
                }
            }
        })
    }
}

/// The correction model (`correct(ctx, tool, prompt)` → the answer: arguments as a dict,
/// the model's text, `None` when it gave up, or an awaitable of one). The prompt is the
/// core's.
struct PyCorrect {
    f: Py<PyAny>,
    cb: Callbacks,
    prompt: PromptOptions,
}

impl Corrector for PyCorrect {
    fn correct<'a>(
        &'a self,
        request: CorrectionRequest<'a>,
    ) -> BoxFuture<'a, Result<Correction, CorrectError>> {
        Box::pin(async move {
            let prompt = correct::prompt(&request, &self.prompt);
            let tool = request.tool.name();
            let got = self
                .cb
                .bridge
                .answer(|py| self.f.call1(py, (&*self.cb.context, tool, prompt)))
                .await;
            let read = got.and_then(|v| {
                Python::attach(|py| -> PyResult<Option<Value>> {
                    let v = v.bind(py);
                    if v.is_none() {
                        Ok(None)
                    } else if let Ok(text) = v.cast::<PyString>() {
                        Ok(correct::read_answer(text.to_str()?))
                    } else {
                        from_py::<Value>(v, "the correction answer").map(Some)
                    }
                })
            });
            match read {
                Ok(arguments) => Ok(Correction {
                    arguments,
                    usage: None,
                }),
                Err(e) => Err(Python::attach(|py| CorrectError {
                    message: format!(
                        "{}: {}",
                        e.get_type(py)
                            .name()
                            .map_or_else(|_| "Exception".to_owned(), |n| n.to_string()),
                        e.value(py)
                    ),
                    transient: false,
                })),
            }
        })
    }
}

/// The unresolved-call hook (`settle(ctx, call)` → arguments to run with (a dict), a
/// text to answer with, `None` for the default feedback, or an awaitable of one).
struct PySettle {
    f: Py<PyAny>,
    cb: Callbacks,
    /// Ids the hook answered with its own text (the front frames no text of the hook's).
    texts: Mutex<HashSet<String>>,
}

impl Settle for PySettle {
    fn settle<'a>(
        &'a self,
        call: UnresolvedCall,
        _history: &'a [Message],
    ) -> BoxFuture<'a, Resolution> {
        Box::pin(async move {
            let got = self
                .cb
                .bridge
                .answer(|py| {
                    let d = PyDict::new(py);
                    d.set_item(intern!(py, "index"), call.index)?;
                    d.set_item(intern!(py, "split"), call.split)?;
                    d.set_item(intern!(py, "raw_arguments"), &call.raw_arguments)?;
                    d.set_item(intern!(py, "call_id"), &call.call_id)?;
                    d.set_item(intern!(py, "tool"), &call.tool)?;
                    d.set_item(intern!(py, "issues"), issues_to_py(py, &call.issues)?)?;
                    d.set_item(intern!(py, "feedback"), &call.feedback)?;
                    d.set_item(intern!(py, "correction_attempts"), call.correction_attempts)?;
                    self.f.call1(py, (&*self.cb.context, d))
                })
                .await;
            let read = got.and_then(|v| {
                Python::attach(|py| -> PyResult<Resolution> {
                    let v = v.bind(py);
                    if v.is_none() {
                        Ok(Resolution::Default)
                    } else if let Ok(text) = v.cast::<PyString>() {
                        Ok(Resolution::Feedback(text.to_str()?.to_owned()))
                    } else if v.cast::<PyDict>().is_ok() {
                        from_py::<Value>(v, "the hook's arguments").map(Resolution::Salvage)
                    } else {
                        Ok(Resolution::Default)
                    }
                })
            });
            match read {
                Ok(r) => {
                    if matches!(r, Resolution::Feedback(_))
                        && let Ok(mut t) = self.texts.lock()
                    {
                        t.insert(call.call_id.clone());
                    }
                    r
                }
                Err(e) => {
                    self.cb.bridge.fail(e);
                    Resolution::Default
                }
            }
        })
    }
}

/// What one resolution owns: the driver's future runs over it.
struct Job {
    tools: Arc<toolmend::Toolbox>,
    plan: Arc<PlanOptions>,
    message: AssistantMessage,
    history: Vec<Message>,
    earlier: HashSet<String>,
    answered: HashSet<String>,
    position: usize,
    /// Per sent call, its arguments as parsed (a dict), when they came so.
    parsed: Arc<Vec<Option<Value>>>,
    accept: Option<PyAccept>,
    validate: Option<PyValidate>,
    correct: Option<PyCorrect>,
    settle: Option<Arc<PySettle>>,
    guard: Option<Arc<RuleGuard>>,
    session: Option<String>,
    rename_reused: bool,
    fresh_ids: Arc<TimeOrderedIds>,
    raise_unresolved: bool,
    max_retries: u32,
    concurrency: usize,
    scope: CorrectionScope,
}

/// Settle through a shared hook (the resolution keeps it, for its texts).
struct SharedSettle(Arc<PySettle>);

impl Settle for SharedSettle {
    fn settle<'a>(
        &'a self,
        call: UnresolvedCall,
        history: &'a [Message],
    ) -> BoxFuture<'a, Resolution> {
        self.0.settle(call, history)
    }
}

impl Job {
    async fn run(self) -> Result<Driven, Stop> {
        let settle = self.settle.clone().map(SharedSettle);
        let invalid: &[Invalid] = if self.correct.is_some() {
            &[Invalid::Correct]
        } else {
            &[]
        };
        let stages = Stages {
            toolbox: &self.tools,
            accept: self.accept.as_ref().map(|a| a as &dyn Accept),
            validate: self.validate.as_ref().map(|v| v as &dyn Validate),
            plan: &self.plan,
            invalid,
            correction: self.correct.as_ref().map(|c| Correcting {
                corrector: c,
                max_retries: self.max_retries,
                timeout: CALLBACK_LIMIT,
                concurrency: self.concurrency,
                scope: self.scope,
            }),
            re_ask: None,
            max_re_asks: 0,
            raise_unresolved: self.raise_unresolved,
            settle: settle.as_ref().map(|s| s as &dyn Settle),
            budget: None,
            guard: self.guard.as_ref().map(|g| Guarding {
                guard: &**g,
                session: self.session.as_deref(),
                timeout: g.stage_limit(),
                fresh_ids: &self.fresh_ids,
                rename_reused: self.rename_reused,
                on_refused: OnRefused::Answer,
                max_re_asks: 0,
            }),
            stage_timeout: CALLBACK_LIMIT,
            observer: &NoObserver,
        };
        let turn = Turn {
            place: Some(Place {
                around: Around {
                    earlier: &self.earlier,
                    answered: &self.answered,
                },
                position: self.position,
                parsed: &self.parsed,
            }),
            ..Turn::fresh(&self.message, &self.history, false)
        };
        drive::drive(
            turn,
            &stages,
            &mut Tally::default(),
            &mut GuardTally::default(),
        )
        .await
    }
}

type Driving = Pin<Box<dyn Future<Output = Result<Driven, Stop>> + Send>>;

/// What the output needs besides the driver's answer.
struct Shape {
    /// Per sent call: its arguments came parsed (a dict), not as text.
    parsed: Vec<bool>,
    hook: Option<Arc<PySettle>>,
}

/// A resolution paused on awaitables Python owes it.
#[pyclass(module = "toolmend._core")]
pub(crate) struct Pending {
    driving: Mutex<Option<Driving>>,
    bridge: Arc<Bridge>,
    shape: Arc<Shape>,
    answers: Mutex<Vec<oneshot::Sender<PyResult<Py<PyAny>>>>>,
    #[pyo3(get)]
    awaitables: Py<PyList>,
}

#[pymethods]
impl Pending {
    /// Hands back the awaitables' results, in order (an exception instance for one that
    /// raised); returns the next `Pending`, or the resolution.
    fn resume(&self, py: Python<'_>, results: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let answers = std::mem::take(
            &mut *self
                .answers
                .lock()
                .map_err(|_| PyRuntimeError::new_err("resolver: a lock is poisoned"))?,
        );
        let results: Vec<Bound<'_, PyAny>> = results.try_iter()?.collect::<PyResult<_>>()?;
        if results.len() != answers.len() {
            return Err(error(format!(
                "resume: {} results for {} awaitables",
                results.len(),
                answers.len()
            )));
        }
        let base = py.get_type::<pyo3::exceptions::PyBaseException>();
        for (answer, r) in answers.into_iter().zip(results) {
            let r = if r.is_instance(&base)? {
                Err(PyErr::from_value(r))
            } else {
                Ok(r.unbind())
            };
            let _ = answer.send(r);
        }
        let driving = self
            .driving
            .lock()
            .map_err(|_| PyRuntimeError::new_err("resolver: a lock is poisoned"))?
            .take()
            .ok_or_else(|| error("resume: this resolution is finished"))?;
        step(py, driving, &self.bridge, &self.shape)
    }
}

/// Polls the driver until it is done or waits on Python only.
fn step(
    py: Python<'_>,
    mut driving: Driving,
    bridge: &Arc<Bridge>,
    shape: &Arc<Shape>,
) -> PyResult<Py<PyAny>> {
    let rt = RUNTIME
        .as_ref()
        .map_err(|e| PyRuntimeError::new_err(format!("resolver: no Tokio runtime: {e}")))?;
    let mut poll = |cx: &mut std::task::Context<'_>| match driving.as_mut().poll(cx) {
        Poll::Ready(done) => Poll::Ready(Some(done)),
        // Waiting on Python: hand it what it owes.
        Poll::Pending if bridge.has_asks() => Poll::Ready(None),
        Poll::Pending => Poll::Pending,
    };
    // Most messages resolve in one poll (nothing awaits a store or Python): no runtime
    // round trip then, only its context for the timers the stages set.
    let first = py.detach(|| {
        let _entered = rt.enter();
        poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
    });
    let polled = match first {
        Poll::Ready(p) => p,
        Poll::Pending => py.detach(|| rt.block_on(std::future::poll_fn(&mut poll))),
    };
    match polled {
        Some(done) => {
            let failed = bridge.failed.lock().ok().and_then(|mut f| f.take());
            if let Some(e) = failed {
                return Err(e);
            }
            done_to_py(py, done, shape)
        }
        None => {
            let asks = std::mem::take(
                &mut *bridge
                    .asks
                    .lock()
                    .map_err(|_| PyRuntimeError::new_err("resolver: a lock is poisoned"))?,
            );
            let awaitables = PyList::empty(py);
            let mut answers = Vec::with_capacity(asks.len());
            for ask in asks {
                awaitables.append(ask.awaitable)?;
                answers.push(ask.answer);
            }
            let pending = Pending {
                driving: Mutex::new(Some(driving)),
                bridge: Arc::clone(bridge),
                shape: Arc::clone(shape),
                answers: Mutex::new(answers),
                awaitables: awaitables.unbind(),
            };
            Ok(Py::new(py, pending)?.into_any())
        }
    }
}

fn report_to_py<'py>(
    py: Python<'py>,
    c: &CallReport,
    parsed_as_sent: bool,
    hook_text: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(intern!(py, "index"), c.index)?;
    d.set_item(intern!(py, "id"), &c.id)?;
    d.set_item(intern!(py, "original_id"), c.original_id.as_deref())?;
    d.set_item(intern!(py, "source"), word(py, c.source.as_str()))?;
    d.set_item(intern!(py, "split"), c.split)?;
    d.set_item(intern!(py, "tool"), &c.tool)?;
    d.set_item(intern!(py, "outcome"), word(py, c.outcome.as_str()))?;
    let mended = match c.mend {
        Outcome::Valid => intern!(py, "valid"),
        Outcome::Repaired => intern!(py, "repaired"),
        Outcome::Feedback => intern!(py, "feedback"),
    };
    d.set_item(intern!(py, "mended"), mended)?;
    // Parsed arguments valid as sent and run: the caller has them already.
    let as_sent = parsed_as_sent
        && c.mend == Outcome::Valid
        && !c.split
        && c.outcome == CallOutcome::Executed;
    if !as_sent {
        match &c.arguments {
            Some(v) => d.set_item(intern!(py, "arguments"), from_value(py, v)?)?,
            None => d.set_item(intern!(py, "arguments"), py.None())?,
        }
    }
    d.set_item(intern!(py, "fixes"), list_of(py, &c.fixes, fix_to_py)?)?;
    d.set_item(intern!(py, "issues"), issues_to_py(py, &c.issues)?)?;
    d.set_item(intern!(py, "note"), c.note.as_deref())?;
    d.set_item(intern!(py, "mend_us"), c.timings.mend.as_secs_f64() * 1e6)?;
    d.set_item(
        intern!(py, "correct_us"),
        c.timings.correct.as_secs_f64() * 1e6,
    )?;
    d.set_item(intern!(py, "correction_attempts"), c.correction_attempts)?;
    d.set_item(intern!(py, "front_answers"), c.front_answers)?;
    d.set_item(intern!(py, "hook_text"), hook_text)?;
    let feedback = match c.outcome {
        CallOutcome::Feedback => c.feedback.as_deref(),
        CallOutcome::Flooded => c.note.as_deref(),
        _ => None,
    };
    d.set_item(intern!(py, "feedback"), feedback)?;
    let guard = PyList::empty(py);
    for decision in &c.guard {
        guard.append(crate::guard::decision_to_py(py, decision)?)?;
    }
    d.set_item(intern!(py, "guard"), guard)?;
    Ok(d)
}

fn text_calls_to_py<'py>(py: Python<'py>, calls: &[ToolCall]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for tc in calls {
        out.append((&tc.name, &tc.arguments))?;
    }
    Ok(out)
}

/// Every call runs exactly as it was sent, nothing recorded: the caller keeps its own.
fn runs_as_sent(r: &drive::Resolved) -> bool {
    !r.changed
        && r.message_fixes.is_empty()
        && r.answered.is_empty()
        && r.calls.iter().all(|c| {
            c.outcome == CallOutcome::Executed
                && c.mend == Outcome::Valid
                && c.source == CallSource::ToolCalls
                && c.original_id.is_none()
                && c.fixes.is_empty()
                && c.note.is_none()
                && c.guard.is_empty()
        })
}

fn done_to_py(py: Python<'_>, done: Result<Driven, Stop>, shape: &Shape) -> PyResult<Py<PyAny>> {
    let out = PyDict::new(py);
    let driven = match done {
        Ok(d) => d,
        Err(Stop::Unresolved(calls)) => {
            let list = PyList::empty(py);
            for c in &calls {
                let d = PyDict::new(py);
                d.set_item(intern!(py, "index"), c.index)?;
                d.set_item(intern!(py, "split"), c.split)?;
                d.set_item(intern!(py, "raw_arguments"), &c.raw_arguments)?;
                d.set_item(intern!(py, "call_id"), &c.call_id)?;
                d.set_item(intern!(py, "tool"), &c.tool)?;
                d.set_item(intern!(py, "issues"), issues_to_py(py, &c.issues)?)?;
                d.set_item(intern!(py, "feedback"), &c.feedback)?;
                d.set_item(intern!(py, "correction_attempts"), c.correction_attempts)?;
                list.append(d)?;
            }
            out.set_item(intern!(py, "unresolved"), list)?;
            return Ok(out.into_any().unbind());
        }
        Err(Stop::Rejected(rejected)) => {
            let d = PyDict::new(py);
            let gravest = rejected.refused.iter().max_by_key(|r| r.action);
            d.set_item(
                intern!(py, "reason"),
                gravest.map_or("the call was not run: refused by the guard", |r| &r.reason),
            )?;
            d.set_item(intern!(py, "call_id"), gravest.map(|r| r.id.as_str()))?;
            d.set_item(intern!(py, "tool"), gravest.map(|r| r.tool.as_str()))?;
            let decisions = PyList::empty(py);
            for decision in gravest.map(|r| r.decisions.as_slice()).unwrap_or_default() {
                decisions.append(crate::guard::decision_to_py(py, decision)?)?;
            }
            d.set_item(intern!(py, "decisions"), decisions)?;
            out.set_item(intern!(py, "rejected"), d)?;
            return Ok(out.into_any().unbind());
        }
    };
    let r = &driven.resolved;
    if driven.stopped.is_none() && runs_as_sent(r) {
        return Ok(py.None());
    }
    let texts = shape
        .hook
        .as_ref()
        .and_then(|h| h.texts.lock().ok().map(|t| t.clone()))
        .unwrap_or_default();
    let calls = PyList::empty(py);
    for c in &r.calls {
        let parsed = c.source == CallSource::ToolCalls
            && shape.parsed.get(c.index).copied().unwrap_or(false);
        calls.append(report_to_py(py, c, parsed, texts.contains(&c.id))?)?;
    }
    out.set_item(intern!(py, "calls"), calls)?;
    let answered = PyList::empty(py);
    for a in &r.answered {
        answered.append((a.index, &a.id))?;
    }
    out.set_item(intern!(py, "answered"), answered)?;
    out.set_item(
        intern!(py, "text_calls"),
        text_calls_to_py(py, &r.text_calls)?,
    )?;
    out.set_item(intern!(py, "content"), r.message.text())?;
    out.set_item(
        intern!(py, "message_fixes"),
        list_of(py, &r.message_fixes, fix_to_py)?,
    )?;
    out.set_item(intern!(py, "changed"), r.changed)?;
    out.set_item(intern!(py, "stopped"), driven.stopped.as_deref())?;
    Ok(out.into_any().unbind())
}

/// The driver for one front: its toolbox, its options and its callbacks, built once per
/// node or middleware.
#[pyclass(frozen, module = "toolmend._core")]
pub(crate) struct Resolver {
    toolbox: Py<Toolbox>,
    accept: Option<Py<PyAny>>,
    validate: Option<(Py<PyAny>, HashSet<String>)>,
    correct: Option<Py<PyAny>>,
    settle: Option<Py<PyAny>>,
    guard: Option<Py<Guard>>,
    raise_unresolved: bool,
    max_retries: u32,
    concurrency: usize,
    scope: CorrectionScope,
    prompt: PromptOptions,
    fresh_ids: Arc<TimeOrderedIds>,
}

#[pymethods]
impl Resolver {
    /// `toolbox`: the tools and planning options. The callbacks, each called with the
    /// context object `resolve` was given first: `accept(ctx, index, tool, issues)` (an
    /// invalid call the message sent whole: `None` for toolmend to answer it, `(True,
    /// note)` when the runtime runs it as sent, `(False, note)` when it answers it
    /// itself); `validate(ctx, tool, call_id, arguments, phase)` for the tools in
    /// `validated` (problems: `None`, a text or a list of texts); `correct(ctx, tool,
    /// prompt)` (the corrector's answer: a dict, a text, `None` when it gave up);
    /// `settle(ctx, call)` (a call still invalid: arguments to run with, a text to answer
    /// with, or `None`). Any of them may return an awaitable instead. `raise_unresolved`:
    /// what stays invalid is returned as `unresolved` instead of answered. `guard`: a
    /// `Guard`.
    #[new]
    #[pyo3(signature = (toolbox, *, accept = None, validate = None, validated = None, correct = None, settle = None, raise_unresolved = false, guard = None, max_retries = 2, concurrency = 16, context_messages = 10, ask_for_json = false, correction_scope = "issues"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        toolbox: Py<Toolbox>,
        accept: Option<Py<PyAny>>,
        validate: Option<Py<PyAny>>,
        validated: Option<HashSet<String>>,
        correct: Option<Py<PyAny>>,
        settle: Option<Py<PyAny>>,
        raise_unresolved: bool,
        guard: Option<Py<Guard>>,
        max_retries: u32,
        concurrency: usize,
        context_messages: usize,
        ask_for_json: bool,
        correction_scope: &str,
    ) -> PyResult<Self> {
        let scope = CorrectionScope::parse(correction_scope).ok_or_else(|| {
            PyValueError::new_err(format!(
                "correction_scope={correction_scope:?}: use 'issues' or 'unsafe'"
            ))
        })?;
        Ok(Resolver {
            toolbox,
            accept,
            validate: validate.map(|f| (f, validated.unwrap_or_default())),
            correct,
            settle,
            guard,
            raise_unresolved,
            max_retries,
            concurrency,
            scope,
            prompt: PromptOptions {
                context_messages,
                ask_for_json,
            },
            fresh_ids: Arc::new(TimeOrderedIds::new()),
        })
    }

    /// Resolves one assistant message: `content` (its text, `None` for none), `calls`
    /// (`{"id", "name", "args"}`, `args` parsed or text), `position` (its index in the
    /// conversation), `earlier_ids` (every call and result id before it), `answered_ids`
    /// (the ids the tool messages right after it answer), `history` (the messages before
    /// it as OpenAI-format dicts: what the guard's rules and the correction prompt read),
    /// `session` (the guard's), `rename_reused` (a call whose id the session used gets a
    /// new one), `context` (handed to every callback), `split` (`False`: a merged call, a
    /// list for a scalar field, is feedback even where `split_merged_calls` is on: for
    /// calls that must each come back as one call under their own id, LangGraph's `Send`
    /// payloads).
    ///
    /// Returns `None` when every call runs exactly as sent; a `Pending` when a callback
    /// answered with an awaitable; else a dict: `calls` (one per call: `index`, `id`,
    /// `original_id`, `source`, `split`, `tool`, `outcome`, `mended`, `arguments` (left
    /// out for parsed arguments that run as sent), `fixes`, `issues`, `note`, `mend_us`,
    /// `correct_us`, `correction_attempts`, `front_answers`, `hook_text`, `feedback` (the
    /// text a call not run is answered with), `guard` (decisions)), `answered`,
    /// `text_calls`, `content`, `message_fixes`, `changed`, `stopped` (the reason, when a
    /// guard rule ended the run); or `{"unresolved": [...]}` (raise), or `{"rejected":
    /// {"reason", "call_id"}}` (a guard rule whose action is `error`).
    #[pyo3(signature = (content, calls, *, position = 0, earlier_ids = None, answered_ids = None, history = None, session = None, rename_reused = true, context = None, split = true))]
    #[allow(clippy::too_many_arguments)]
    fn resolve(
        &self,
        py: Python<'_>,
        content: Option<String>,
        calls: &Bound<'_, PyAny>,
        position: usize,
        earlier_ids: Option<&Bound<'_, PyAny>>,
        answered_ids: Option<&Bound<'_, PyAny>>,
        history: Option<&Bound<'_, PyAny>>,
        session: Option<String>,
        rename_reused: bool,
        context: Option<Py<PyAny>>,
        split: bool,
    ) -> PyResult<Py<PyAny>> {
        let sent = calls
            .try_iter()?
            .map(|c| read_call(py, &c?))
            .collect::<PyResult<Vec<_>>>()?;
        let parsed: Vec<bool> = sent
            .iter()
            .map(|c| matches!(c.args, PyArgs::Value(_)))
            .collect();
        // The message carries each call's argument text; parsed arguments are planned
        // from their value (moved, not copied).
        let mut values: Vec<Option<Value>> = Vec::with_capacity(sent.len());
        let tool_calls: Vec<ToolCall> = sent
            .into_iter()
            .map(|c| {
                let arguments = match c.args {
                    PyArgs::Value(v) => {
                        let text = v.to_string();
                        values.push(Some(v));
                        text
                    }
                    PyArgs::Text(t) => {
                        values.push(None);
                        t
                    }
                };
                let mut call = ToolCall::new("", c.name, arguments);
                call.id = c.id;
                call
            })
            .collect();
        let values = Arc::new(values);
        let message = AssistantMessage {
            content: Some(content.map(toolmend::conversation::Content::Text)),
            tool_calls: (!tool_calls.is_empty()).then_some(tool_calls),
            ..AssistantMessage::default()
        };
        let history: Vec<Message> = match history.filter(|h| !h.is_none()) {
            Some(h) => from_py(h, "history")?,
            None => Vec::new(),
        };
        let cb = Callbacks {
            context: Arc::new(context.unwrap_or_else(|| py.None())),
            bridge: Arc::new(Bridge::default()),
        };
        let settle = self.settle.as_ref().map(|f| {
            Arc::new(PySettle {
                f: f.clone_ref(py),
                cb: cb.clone(),
                texts: Mutex::new(HashSet::new()),
            })
        });
        let toolbox = self.toolbox.get();
        let guard = match &self.guard {
            Some(g) => Some(g.get().shared()?).filter(|g| g.is_enabled()),
            None => None,
        };
        let plan = if split || !splits_merged_calls(&toolbox.plan) {
            Arc::clone(&toolbox.plan)
        } else {
            Arc::new(unsplit(&toolbox.plan))
        };
        let job = Job {
            tools: Arc::clone(&toolbox.tools),
            plan,
            message,
            history,
            earlier: id_set(earlier_ids)?,
            answered: id_set(answered_ids)?,
            position,
            parsed: Arc::clone(&values),
            accept: self.accept.as_ref().map(|f| PyAccept {
                f: f.clone_ref(py),
                cb: cb.clone(),
                sent: values,
            }),
            validate: self.validate.as_ref().map(|(f, tools)| PyValidate {
                f: f.clone_ref(py),
                cb: cb.clone(),
                tools: tools.clone(),
            }),
            correct: self.correct.as_ref().map(|f| PyCorrect {
                f: f.clone_ref(py),
                cb: cb.clone(),
                prompt: self.prompt,
            }),
            settle: settle.clone(),
            guard,
            session,
            rename_reused,
            fresh_ids: Arc::clone(&self.fresh_ids),
            raise_unresolved: self.raise_unresolved,
            max_retries: self.max_retries,
            scope: self.scope,
            concurrency: self.concurrency.max(1),
        };
        let shape = Arc::new(Shape {
            parsed,
            hook: settle,
        });
        step(py, Box::pin(job.run()), &cb.bridge, &shape)
    }
}

/// True when some tool's calls may be split into one call per value.
fn splits_merged_calls(plan: &PlanOptions) -> bool {
    plan.mend.coercions.split_merged_calls
        || plan
            .tool_mend
            .values()
            .any(|m| m.coercions.split_merged_calls)
}

/// `plan` with no merged call split, for any tool.
fn unsplit(plan: &PlanOptions) -> PlanOptions {
    let mut plan = plan.clone();
    plan.mend.coercions.split_merged_calls = false;
    for m in plan.tool_mend.values_mut() {
        m.coercions.split_merged_calls = false;
    }
    plan
}
