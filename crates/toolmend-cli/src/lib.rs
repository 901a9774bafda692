//! The `toolmend` command line as a library: `run(args)` parses the arguments, runs the
//! command and returns its exit status. Wiring only; the work is in the `toolmend` library.
//!
//! Two front ends call [`run`]: the `toolmend` binary (`src/main.rs`, `cargo install`) and
//! the Python wheel's `toolmend` command (`toolmend._core.run_cli`, a console script), so
//! both are the same command, option for option.

mod events_file;
mod history_cmd;
mod history_io;
mod input;
mod key_cmd;
mod log_lines;
#[cfg(feature = "mcp-proxy")]
mod mcp_proxy_cmd;
mod mend_cmd;
mod report;
mod report_cmd;
mod serve_cmd;

use std::{ffi::OsString, io::Write, path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand, ValueEnum};

/// Mend the tool calls language models emit.
///
/// toolmend repairs broken argument text (quotes, commas, truncation, think
/// leaks, chat-template tags, wrappers …), coerces it to the tool's JSON Schema
/// ("Celsius" -> "celsius", "5" -> 5, town -> city) and validates it, and says
/// precisely what is still wrong, so an agent's loop keeps running.
/// `toolmend history` checks, sanitizes and trims the conversation that carries
/// the calls, so a provider accepts it.
///
/// Every fix is recorded with its safety (docs/issue-kinds.md): safe (the meaning
/// is certainly kept: a trailing comma, "Celsius" -> "celsius"), unsafe (a reading
/// was chosen: "5" -> 5, town -> city) or lossy (something was lost: a cut-off
/// call, a key the schema forbids dropped). The unsafe fixes that run by default:
/// duplicate_call_dropped, tool_name_fixed, concatenated_calls_split,
/// json_candidate_chosen, json_in_prose_dropped, unquoted_string, inner_quote_escaped,
/// non_finite_number,
/// missing_colon, missing_value_dropped, garbage_skipped, unquoted_text_joined,
/// string_to_number, string_to_integer, string_to_boolean, csv_split,
/// json_text_encoded, escapes_kept_literal, key_renamed, key_renamed_by_tokens,
/// key_renamed_by_description, key_renamed_by_structure, date_normalized,
/// merged_call_split, duplicate_key_conflict, tool_name_inferred, drifted_close_tag,
/// missing_call_opener.
/// `mend --strict` turns off every repair of the text and every coercion
/// (tool_name_fixed stays); `mend --coerce NAME=false` one coercion; the libraries
/// switch each coercion (Rust `Coercions`, Python `coerce=`), and so does the gateway,
/// by the same names (`calls.strict = true`, `calls.coercions = { string_to_integer =
/// false }`).
///
/// Exit status: 0 on success, 1 when `mend` met a malformed input line or
/// `history check` finds violations, 2 on a usage or input error (a missing
/// file, JSON that cannot be read).
#[derive(Debug, Parser)]
#[command(name = "toolmend", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Mend tool calls read from JSONL and report what was done.
    ///
    /// Each input line is one of:
    ///   {"tool": {"name", "description", "parameters"}, "raw_arguments": "...", "id": "..."}
    ///   {"message": <OpenAI assistant message>, "tools": [<OpenAI tool definitions>]}
    ///
    /// A malformed line gets an error naming its line number and the batch goes on.
    /// A call cut off mid-text is answered with feedback asking for the whole call
    /// (as the tool node, the Python package and the gateway answer it), unless
    /// --accept-truncated; `lossy` marks it in the JSON output either way.
    ///
    /// Exit status: 0 when every line was read as a record (whatever became of its
    /// calls), 1 when some line was malformed (not JSON, not UTF-8, not a record),
    /// 2 on a usage error or when the input cannot be opened or read.
    ///
    /// Examples:
    ///   toolmend mend examples/broken_calls.jsonl
    ///   toolmend mend --format json calls.jsonl > mended.jsonl
    ///   some-producer | toolmend mend --lines     # one output line per input line, flushed
    #[command(verbatim_doc_comment)]
    Mend(MendArgs),

    /// Check, sanitize or trim a conversation history (a request's `messages`).
    ///
    /// Providers reject a history where a tool call has no result, a result answers
    /// no call or sits after a user message, a call id repeats, or a past call's
    /// arguments are not a JSON object, and one broken message fails every later
    /// request of the conversation.
    ///
    /// A history is a JSON file: an array of OpenAI chat messages, or a whole
    /// chat-completions request with a `messages` key (the output then keeps every
    /// other key of the request as it was). `-` or no file reads standard input.
    ///
    /// Examples:
    ///   toolmend history check examples/broken_history.json
    ///   toolmend history sanitize examples/broken_history.json | toolmend history check
    ///   toolmend history sanitize request.json > mended.json 2> actions.txt
    ///   toolmend history trim --tokens 8000 request.json > trimmed.json
    #[command(verbatim_doc_comment)]
    History(HistoryArgs),

    /// Serve a scripted OpenAI-compatible provider on 127.0.0.1 (tests and demos).
    ///
    /// Answers POST /v1/chat/completions from a script, as JSON or as SSE chunks in
    /// OpenAI's format, and refuses a request whose history breaks the tool-call
    /// contract with HTTP 400 and OpenAI's error body and wording (an unanswered call,
    /// an orphan result, a duplicate id, a result after a user message, an invalid
    /// function name). Point any OpenAI client's base URL at the printed address.
    ///
    /// The script is JSON Lines, one step per request:
    ///   {"content": "text", "tool_calls": [{"id": "c1", "type": "function",
    ///     "function": {"name": "get_weather", "arguments": "{'city': 'Paris',}"}}]}
    ///   {"error": {"status": 429, "body": {"error": {"message": "Rate limit", ...}}}}
    /// Lines starting with # are comments. Past the last step: HTTP 500.
    ///
    /// Examples:
    ///   toolmend scripted-provider examples/script.jsonl
    ///   toolmend scripted-provider --port 8089 --strictness all script.jsonl
    #[command(verbatim_doc_comment)]
    ScriptedProvider(ProviderArgs),

    // No doc comment here: the help (`toolmend serve --help`) is `ServeArgs`'s.
    Serve(serve_cmd::ServeArgs),

    // No doc comment here: the help (`toolmend report --help`) is `ReportArgs`'s.
    Report(report_cmd::ReportArgs),

    /// Client keys for `toolmend serve`: make one, or hash one for [access].
    ///
    /// The gateway's configuration holds each client's key as its SHA-256 only
    /// ([[access.clients]] name, key_sha256); the key itself goes to the client.
    ///
    /// Examples:
    ///   toolmend key new ci                          # a key and its entry
    ///   printf %s "$KEY" | toolmend key hash --name ci
    #[command(verbatim_doc_comment)]
    Key(key_cmd::KeyArgs),

    // No doc comment here: the help (`toolmend mcp-proxy --help`) is `McpProxyArgs`'s.
    #[cfg(feature = "mcp-proxy")]
    McpProxy(mcp_proxy_cmd::McpProxyArgs),
}

#[derive(Debug, clap::Args)]
struct ProviderArgs {
    /// The script (JSON Lines); `-` reads standard input.
    script: std::path::PathBuf,
    /// The port on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 0, env = "TOOLMEND_PROVIDER_PORT")]
    port: u16,
    /// Which rules to enforce: OpenAI's, or also vLLM's and Anthropic's (argument text
    /// that is not a JSON object, empty tool results).
    #[arg(long, value_enum, default_value_t = ProviderStrictness::Openai)]
    strictness: ProviderStrictness,
    /// Play the script in a loop instead of answering 500 past its last step
    /// (benchmarks, long demos).
    #[arg(long)]
    repeat: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ProviderStrictness {
    /// What OpenAI refuses.
    Openai,
    /// Every rule `toolmend history check` knows.
    All,
}

#[derive(Debug, clap::Args)]
struct HistoryArgs {
    #[command(subcommand)]
    action: HistoryAction,
}

#[derive(Debug, Subcommand)]
enum HistoryAction {
    /// List every rule the history breaks, with the error each provider answers.
    ///
    /// Each violation names the message (and call) by index and input line, the
    /// ids involved, and the provider's error text, with other providers' wording
    /// where it differs. Kinds: unanswered_call, orphan_result, duplicate_call_id,
    /// duplicate_result, result_out_of_place, missing_call_id, call_id_too_long,
    /// arguments_not_object, empty_tool_content, invalid_function_name.
    ///
    /// Exit status: 0 when the history is valid, 1 when violations were found,
    /// 2 when the input cannot be read.
    ///
    /// Examples:
    ///   toolmend history check examples/broken_history.json
    ///   toolmend history check --format json request.json | jq -r '.kind // empty'
    ///   jq .messages request.json | toolmend history check > /dev/null && echo valid
    #[command(verbatim_doc_comment)]
    Check(CheckArgs),

    /// Write a history every provider accepts, and list what was changed.
    ///
    /// The history goes to standard output, in the input's shape (an array, or
    /// the request with only `messages` replaced). The actions go to standard
    /// error (or --report FILE), one line each: where, the call id, the kind, what
    /// was done. A missing result gets an error result saying why; orphan results
    /// are dropped; repeated ids are renamed and their results follow; broken
    /// arguments are repaired (the original text is kept in the JSON report).
    /// A valid history comes back unchanged. Exit status: 0, or 2 on an input error.
    ///
    /// Examples:
    ///   toolmend history sanitize examples/broken_history.json > mended.json
    ///   toolmend history sanitize --orphans rehome --report actions.jsonl \
    ///       --report-format json request.json > mended.json
    #[command(verbatim_doc_comment)]
    Sanitize(SanitizeArgs),

    /// Drop the oldest turns until the history fits a budget, never splitting a group.
    ///
    /// Always kept: system and developer messages, the first user message, and the
    /// last turn (even when they alone exceed the budget; the summary then says
    /// "over budget"). An assistant message with tool calls and its results are
    /// kept or dropped together, and the kept part never starts with a tool
    /// result. Run `history sanitize` first on a history that `check` rejects.
    ///
    /// The trimmed history goes to standard output, in the input's shape; a
    /// one-line summary (kept, dropped, size, budget) goes to standard error.
    /// Exit status: 0, or 2 on an input error.
    ///
    /// Examples:
    ///   toolmend history trim --messages 20 history.json
    ///   toolmend history trim --tokens 8000 request.json > trimmed.json
    ///   toolmend history trim --tokens 8000 --model gpt-4.1 request.json
    ///   toolmend history sanitize request.json | toolmend history trim --tokens 8000
    #[command(verbatim_doc_comment)]
    Trim(TrimArgs),
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// History file (JSON array of messages, or a request with `messages`); `-` or nothing reads standard input.
    input: Option<PathBuf>,

    /// Report format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

#[derive(Debug, clap::Args)]
struct SanitizeArgs {
    /// History file (JSON array of messages, or a request with `messages`); `-` or nothing reads standard input.
    input: Option<PathBuf>,

    /// What to do with a result that answers an earlier call but sits out of place
    /// (after a user message, in another call's results). A result that answers no
    /// earlier call is always dropped.
    #[arg(long, value_enum, default_value_t = Orphans::Drop)]
    orphans: Orphans,

    /// What to do with a call that has no id.
    #[arg(long, value_enum, default_value_t = MissingIds::Mint)]
    missing_ids: MissingIds,

    /// Write the actions to this file instead of standard error.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,

    /// Format of the actions.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    report_format: Format,

    /// Write the history as one line of JSON instead of indented.
    #[arg(long)]
    compact: bool,
}

#[derive(Debug, clap::Args)]
struct TrimArgs {
    /// History file (JSON array of messages, or a request with `messages`); `-` or nothing reads standard input.
    input: Option<PathBuf>,

    #[command(flatten)]
    budget: BudgetArgs,

    /// How to count tokens for --tokens [default: o200k_base]: an OpenAI tokenizer,
    /// or `bytes` (a rough estimate for any model).
    #[arg(long, value_enum, conflicts_with = "model")]
    encoding: Option<Encoding>,

    /// Count tokens for --tokens with this OpenAI model's encoding (gpt-4o, gpt-4.1,
    /// gpt-4, o3 …).
    #[arg(long)]
    model: Option<String>,

    /// Write the history as one line of JSON instead of indented.
    #[arg(long)]
    compact: bool,
}

/// The budget: exactly one of --messages and --tokens.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
struct BudgetArgs {
    /// Keep at most N messages.
    #[arg(long, value_name = "N")]
    messages: Option<usize>,

    /// Keep at most N tokens (counted with --encoding or --model).
    #[arg(long, value_name = "N")]
    tokens: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Orphans {
    /// Drop it; its call gets an error result saying the result was removed.
    Drop,
    /// Move it back into its call's group.
    Rehome,
}

impl From<Orphans> for toolmend::history::OrphanPolicy {
    fn from(o: Orphans) -> Self {
        match o {
            Orphans::Drop => Self::Drop,
            Orphans::Rehome => Self::Rehome,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum MissingIds {
    /// Give the call an id (`call_tm_<message>_<call>`) and pair it with its result.
    Mint,
    /// Remove the call.
    Remove,
}

impl From<MissingIds> for toolmend::history::MissingIdPolicy {
    fn from(m: MissingIds) -> Self {
        match m {
            MissingIds::Mint => Self::Mint,
            MissingIds::Remove => Self::Remove,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Encoding {
    /// GPT-4o, GPT-4.1, GPT-5, o-series.
    #[value(name = "o200k_base")]
    O200kBase,
    /// GPT-4, GPT-3.5-turbo.
    #[value(name = "cl100k_base")]
    Cl100kBase,
    /// One token per 4 bytes: fast, no tables to build.
    Bytes,
}

#[derive(Debug, clap::Args)]
struct MendArgs {
    /// JSONL file to read; `-` or nothing reads standard input.
    input: Option<PathBuf>,

    /// Report format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,

    /// Line protocol for scripts: exactly one flushed output line per input line:
    /// the mended arguments as JSON (a JSON array when the text held several calls or a
    /// merged call was split into one call per value),
    /// or `ERROR <reason>` when no faithful repair exists. No summary.
    #[arg(long)]
    lines: bool,

    /// Strict mode: repair nothing, coerce nothing; report what is wrong.
    #[arg(long)]
    strict: bool,

    /// Switch one coercion from its default, by the name Python's `coerce=` and the
    /// gateway's `calls.coercions` take (or the id of a fix it makes); repeatable.
    /// `--coerce split_merged_calls=false`: a list given for a scalar field (a merged
    /// call) is answered with feedback instead of one call per value.
    #[arg(long, value_name = "NAME=BOOL", conflicts_with = "strict", value_parser = parse_switch)]
    coerce: Vec<(String, bool)>,

    /// Keep `<think>` blocks (then a call holding one is an error).
    #[arg(long)]
    keep_thinking: bool,

    /// Run a call cut off mid-text on its salvaged prefix (marked lossy) instead of
    /// answering it with feedback. The same opt-in as the gateway's
    /// `calls.accept_truncated` and the Python package's `accept_truncated`.
    #[arg(long, conflicts_with = "strict")]
    accept_truncated: bool,

    /// Deprecated: refusing cut-off calls is the default now (a no-op, kept so that
    /// old scripts still run).
    #[arg(long, hide = true, conflicts_with = "accept_truncated")]
    refuse_truncated: bool,

    /// Also write the event log of the batch to FILE (created or replaced): one JSON
    /// line per call, the gateway's `[events]` format (tool, outcome, fields, fix and
    /// issue kinds; never values). `toolmend report FILE` turns it into a page.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,

    /// The model the calls came from, written into each event (`--events`).
    #[arg(long, value_name = "NAME", requires = "events")]
    events_model: Option<String>,

    /// Deepest nesting accepted (1 to 1000).
    #[arg(long, default_value_t = 128, env = "TOOLMEND_MAX_DEPTH",
          value_parser = clap::builder::TypedValueParser::map(
              clap::value_parser!(u16).range(1..=1000), usize::from))]
    max_depth: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Human-readable lines and a summary.
    Text,
    /// One JSON object per line (per input line for `mend`, per violation or action
    /// for `history`), then a `{"summary": …}` line.
    Json,
}

/// `NAME=true|false` for `--coerce`.
fn parse_switch(s: &str) -> Result<(String, bool), String> {
    let (name, on) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected NAME=true or NAME=false"))?;
    let on = match on.trim() {
        "true" => true,
        "false" => false,
        other => return Err(format!("{other:?}: expected true or false")),
    };
    let name = name.trim();
    toolmend::schema::Coercions::default()
        .set(name, on)
        .map_err(|e| e.to_string())?;
    Ok((name.to_owned(), on))
}

/// Exit status for a usage or input error, as clap uses for usage errors.
const EXIT_ERROR: u8 = 2;

/// Runs the command line `args` (the program name first, as `std::env::args_os` gives
/// it) and returns the exit status: 0 on success, 1 when `mend` met a malformed line or
/// `history check` found violations, 2 on a usage or input error. `--help` and
/// `--version` print and return 0. Never exits the process: the Python wheel calls this
/// inside the interpreter.
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let status = match Cli::try_parse_from(args) {
        Ok(cli) => run_command(&cli.command),
        Err(e) => {
            // Usage errors to stderr, --help and --version to stdout, as clap's `exit` does.
            let _ = e.print();
            u8::try_from(e.exit_code()).unwrap_or(EXIT_ERROR)
        }
    };
    // A binary's stdout is flushed when `main` returns; inside Python nothing would.
    let _ = std::io::stdout().flush();
    status
}

fn run_command(command: &Command) -> u8 {
    let result = match command {
        Command::Mend(args) => mend_cmd::run(args),
        Command::History(args) => history_cmd::run(&args.action),
        Command::ScriptedProvider(args) => provider_cmd(args),
        Command::Serve(args) => serve_cmd::run(args),
        Command::Report(args) => report_cmd::run(args),
        Command::Key(args) => key_cmd::run(args),
        #[cfg(feature = "mcp-proxy")]
        Command::McpProxy(args) => mcp_proxy_cmd::run(args),
    };
    match result {
        Ok(code) => status_of(code),
        // A closed pipe (`toolmend mend … | head`) is the reader's choice, not an error.
        Err(e) if is_broken_pipe(&e) => 0,
        Err(e) => {
            // Not eprintln!: it panics when standard error is closed.
            let _ = writeln!(std::io::stderr(), "toolmend: {e:#}");
            EXIT_ERROR
        }
    }
}

/// The number an `ExitCode` stands for (std gives no accessor; it compares).
fn status_of(code: ExitCode) -> u8 {
    (0..=u8::MAX)
        .find(|n| ExitCode::from(*n) == code)
        .unwrap_or(1)
}

/// Serves the scripted provider until interrupted.
fn provider_cmd(args: &ProviderArgs) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    let text = if args.script.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading the script from stdin")?
    } else {
        std::fs::read_to_string(&args.script)
            .with_context(|| format!("reading the script {}", args.script.display()))?
    };
    let mut script = toolmend_scripted::Script::from_jsonl(&text)?;
    if args.repeat {
        script = script.repeating();
    }
    let steps = script.len();
    let strictness = match args.strictness {
        ProviderStrictness::Openai => toolmend::agent::Strictness::OpenAi,
        ProviderStrictness::All => toolmend::agent::Strictness::All,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let provider =
            // Nothing reads the request bodies here: keep none (a long run would hold them all).
            toolmend_scripted::ScriptedProvider::start_keeping(script, strictness, args.port, 0)
                .await
                .with_context(|| format!("binding 127.0.0.1:{}", args.port))?;
        let mut out = std::io::stdout();
        writeln!(
            out,
            "scripted provider: {} ({steps} step(s)); Ctrl-C stops it",
            provider.base_url()
        )?;
        out.flush()?;
        tokio::signal::ctrl_c()
            .await
            .context("waiting for Ctrl-C")?;
        Ok(ExitCode::SUCCESS)
    })
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            .or_else(|| {
                cause
                    .downcast_ref::<serde_json::Error>()
                    .and_then(serde_json::Error::io_error_kind)
            })
            == Some(std::io::ErrorKind::BrokenPipe)
    })
}
