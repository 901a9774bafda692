//! Templates: compiled once, rendered in a sandbox (fuel, recursion, an output cap),
//! with toolmend's helpers.

use super::*;

pub(super) fn describe(e: &Error) -> String {
    let what = match e.detail() {
        Some(d) => format!("{}: {d}", e.kind()),
        None => e.kind().to_string(),
    };
    match e.line() {
        Some(line) => format!("line {line}: {what}"),
        None => what,
    }
}

pub(super) fn compile(source: &str, markdown: bool) -> Result<Environment<'static>, String> {
    let mut env = Environment::new();
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_undefined_behavior(UndefinedBehavior::Chainable);
    env.set_fuel(Some(TEMPLATE_FUEL));
    env.set_recursion_limit(TEMPLATE_RECURSION);
    if markdown {
        env.set_formatter(|out, _state, value| {
            if value.is_safe() || value.is_undefined() {
                return write!(out, "{value}").map_err(Error::from);
            }
            let text = value.to_string();
            let mut escaped = String::with_capacity(text.len() + 8);
            escape_markdown(&text, &mut escaped);
            out.write_str(&escaped).map_err(Error::from)
        });
    }
    env.add_function("sum", minijinja::filters::sum);
    env.add_function("join", minijinja::filters::join);
    env.add_function("round", minijinja::filters::round);
    for name in ["len", "length", "count"] {
        env.add_function(name, minijinja::filters::length);
    }
    env.add_filter("len", minijinja::filters::length);
    env.add_function("date", date);
    env.add_filter("date", date);
    env.add_function("tojson", tojson);
    env.add_filter("tojson", tojson);
    env.add_template_owned(TEMPLATE_NAME, source.to_owned())
        .map_err(|e| describe(&e))?;
    // minijinja looks filters, functions and included templates up as it renders: one
    // trial render over an empty payload finds those it reaches (best effort: a name in a
    // branch the trial does not take is found at shape time, and falls back).
    let trial = env.get_template(TEMPLATE_NAME).and_then(|t| {
        t.render_captured_to(context(&Value::Null, None), io::sink())
            .map(drop)
    });
    if let Err(e) = trial
        && matches!(
            e.kind(),
            ErrorKind::UnknownFilter
                | ErrorKind::UnknownFunction
                | ErrorKind::UnknownTest
                | ErrorKind::TemplateNotFound
        )
    {
        let mut reason = describe(&e);
        if e.kind() == ErrorKind::TemplateNotFound {
            reason.push_str(" (a result template cannot include, import or extend another)");
        }
        return Err(reason);
    }
    Ok(env)
}

pub(super) fn context(data: &Value, message: Option<&str>) -> Mj {
    let whole = Mj::from(Serde(data));
    let mut scope: BTreeMap<String, Mj> = BTreeMap::new();
    if let Value::Object(map) = data {
        for key in map.keys() {
            scope.insert(key.clone(), whole.get_attr(key).unwrap_or_default());
        }
    }
    scope.insert("message".into(), message.map_or(Mj::UNDEFINED, Mj::from));
    scope.insert("data".into(), whole);
    Mj::from(scope)
}

/// An `io::Write` that refuses to grow past `cap` (which stops the render).
pub(super) struct CapWriter {
    buf: Vec<u8>,
    cap: usize,
    over: bool,
}

impl io::Write for CapWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.buf.len().saturating_add(bytes.len()) > self.cap {
            self.over = true;
            return Err(io::Error::other("over the output cap"));
        }
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub(super) fn render(
    env: &Environment<'static>,
    data: &Value,
    message: Option<&str>,
    budget: usize,
) -> Result<String, String> {
    let template = env.get_template(TEMPLATE_NAME).map_err(|e| describe(&e))?;
    let cap = TEMPLATE_OUTPUT_CAP.max(budget);
    let mut w = CapWriter {
        buf: Vec::new(),
        cap,
        over: false,
    };
    let done = template
        .render_captured_to(context(data, message), &mut w)
        .map(drop);
    if w.over {
        return Err(format!(
            "the output passed {} bytes (toolmend's cap)",
            group(cap)
        ));
    }
    done.map_err(|e| describe(&e))?;
    Ok(match String::from_utf8(w.buf) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

pub(super) fn tojson(value: &Mj, indent: Option<Mj>, kwargs: Kwargs) -> Result<Mj, Error> {
    let json = minijinja::filters::tojson(value, indent, kwargs)?;
    // Not marked safe: in Markdown mode it is escaped like every other value.
    Ok(Mj::from(json.as_str().unwrap_or_default()))
}
