//! `toolmend`: the command line. Wiring only; the work is in the `toolmend` library.

mod input;
mod mend_cmd;
mod report;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

// Mending allocates many small strings and maps; mimalloc serves them faster than
// the system allocator (about 13 % on the corpus), as pydantic-core does for the same reason.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Mend the tool calls language models emit.
///
/// toolmend repairs broken argument text (quotes, commas, truncation, think
/// leaks, chat-template tags, wrappers …), validates it against the tool's JSON
/// Schema with safe coercions ("5" -> 5, "Celsius" -> "celsius", town -> city),
/// and says precisely what is still wrong, so an agent's loop keeps running.
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
    ///
    /// Examples:
    ///   toolmend mend examples/broken_calls.jsonl
    ///   toolmend mend --format json calls.jsonl > mended.jsonl
    ///   some-producer | toolmend mend --lines     # one output line per input line, flushed
    #[command(verbatim_doc_comment)]
    Mend(MendArgs),
}

#[derive(Debug, clap::Args)]
struct MendArgs {
    /// JSONL file to read; `-` or nothing reads standard input.
    input: Option<PathBuf>,

    /// Report format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,

    /// Line protocol for scripts: exactly one flushed output line per input line:
    /// the mended arguments as JSON (a JSON array when the text held several calls),
    /// or `ERROR <reason>` when no faithful repair exists. No summary.
    #[arg(long)]
    lines: bool,

    /// Strict mode: repair nothing, coerce nothing; report what is wrong.
    #[arg(long)]
    strict: bool,

    /// Keep `<think>` blocks (then a call holding one is an error).
    #[arg(long)]
    keep_thinking: bool,

    /// Answer a cut-off call with feedback instead of its salvaged prefix.
    #[arg(long)]
    refuse_truncated: bool,

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
    /// One JSON object per input line, then a `{"summary": …}` line.
    Json,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Mend(args) => mend_cmd::run(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // A closed pipe (`toolmend mend … | head`) is the reader's choice, not an error.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("toolmend: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
