//! Input lines of `toolmend mend`.

use std::{collections::HashMap, sync::Arc};

use anyhow::{Context, Result, bail};
use serde_json::Value;
use toolmend::{
    CompiledTool, Toolbox,
    conversation::{AssistantMessage, Message, Tool},
};

/// One parsed input line.
pub enum Record {
    /// One call with its tool.
    Call {
        id: Option<String>,
        tool: Arc<CompiledTool>,
        raw_arguments: String,
    },
    /// An assistant message and the request's tools.
    Message {
        message: AssistantMessage,
        tools: Toolbox,
        /// The conversation before the message (`history`, optional): ids it used are not
        /// minted again, and minted ids name the message's place in it.
        history: Vec<Message>,
        /// `finish_reason: "length"`: the model stopped at its token limit.
        cut_off: bool,
    },
}

/// Compiled tools by their JSON text: a batch usually repeats a few tools, and
/// compiling a schema costs far more than mending a call.
#[derive(Default)]
pub struct ToolCache {
    tools: HashMap<String, Arc<CompiledTool>>,
}

impl ToolCache {
    fn get(&mut self, v: &Value) -> Result<Arc<CompiledTool>> {
        let key = v.to_string();
        if let Some(t) = self.tools.get(&key) {
            return Ok(Arc::clone(t));
        }
        let tool = Arc::new(compile(v)?);
        self.tools.insert(key, Arc::clone(&tool));
        Ok(tool)
    }
}

/// Reads one input line into a record, or says precisely why it cannot.
pub fn parse_line(line: &str, cache: &mut ToolCache) -> Result<Record> {
    let v: Value = serde_json::from_str(line).context("the line is not valid JSON")?;
    let Value::Object(obj) = v else {
        bail!("the line is not a JSON object");
    };
    if let Some(tool) = obj.get("tool") {
        let tool = cache.get(tool).context("field `tool`")?;
        let raw_arguments = match obj.get("raw_arguments").or_else(|| obj.get("arguments")) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => bail!("missing field `raw_arguments` (the argument text the model sent)"),
        };
        let id = obj.get("id").and_then(Value::as_str).map(str::to_owned);
        return Ok(Record::Call {
            id,
            tool,
            raw_arguments,
        });
    }
    if let Some(message) = obj.get("message") {
        let message = match serde_json::from_value::<Message>(message.clone())
            .context("field `message` is not an OpenAI chat message")?
        {
            Message::Assistant(a) => a,
            other => bail!(
                "field `message` has role `{}`; only assistant messages carry tool calls",
                other.role()
            ),
        };
        let tools = match obj.get("tools") {
            Some(Value::Array(items)) => items,
            Some(_) => bail!("field `tools` must be a list of tool definitions"),
            None => bail!("missing field `tools` (the request's tool definitions)"),
        };
        let mut toolbox = Toolbox::new();
        for (i, t) in tools.iter().enumerate() {
            let tool = compile(t).with_context(|| format!("tools[{i}]"))?;
            toolbox.add(tool)?;
        }
        let history = match obj.get("history") {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => serde_json::from_value::<Vec<Message>>(v.clone())
                .context("field `history` is not a list of OpenAI chat messages")?,
        };
        let cut_off = obj.get("finish_reason").and_then(Value::as_str) == Some("length");
        return Ok(Record::Message {
            message,
            tools: toolbox,
            history,
            cut_off,
        });
    }
    bail!("expected {{\"tool\": …, \"raw_arguments\": …}} or {{\"message\": …, \"tools\": […]}}")
}

/// Compiles `{name, description, parameters}` or an OpenAI `{type: "function", function: {…}}`.
fn compile(v: &Value) -> Result<CompiledTool> {
    /// A tool written flat, as every API but chat defines one.
    #[derive(serde::Deserialize)]
    struct Flat {
        name: String,
        #[serde(default)]
        description: Option<String>,
        #[serde(default)]
        parameters: Option<Value>,
    }
    let def = if v.get("function").is_some() {
        serde_json::from_value::<Tool>(v.clone()).context("not an OpenAI tool definition")?
    } else {
        let f: Flat = serde_json::from_value(v.clone())
            .context("expected {name, description, parameters}")?;
        Tool {
            name: f.name,
            description: f.description,
            parameters: f.parameters,
            strict: None,
            extra: serde_json::Map::new(),
        }
    };
    let empty = Value::Object(serde_json::Map::new());
    Ok(CompiledTool::compile(
        &def.name,
        def.description.as_deref().unwrap_or(""),
        def.parameters.as_ref().unwrap_or(&empty),
    )?)
}
