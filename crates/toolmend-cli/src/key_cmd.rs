//! `toolmend key`: the client keys of `toolmend serve`'s `[access]`: a new key and its
//! configuration entry (`key new`), or the SHA-256 of a key one has (`key hash`). The
//! configuration holds the hash only; the key goes to the client.

use std::{io::Write as _, process::ExitCode};

use anyhow::Context as _;

#[derive(Debug, clap::Args)]
pub(crate) struct KeyArgs {
    #[command(subcommand)]
    action: KeyAction,
}

#[derive(Debug, clap::Subcommand)]
enum KeyAction {
    /// Make a new client key (256 random bits) and print it with its [access] entry.
    ///
    /// The key is printed once, for the client (its SDK's api_key, sent as
    /// `Authorization: Bearer KEY`); the gateway's configuration takes the entry
    /// below it, which holds only the key's SHA-256. Nothing is stored.
    ///
    /// Examples:
    ///   toolmend key new ci
    ///   toolmend key new ci --key-only > ci.key    # the key alone; hash it later
    #[command(verbatim_doc_comment)]
    New {
        /// The client's name: 1 to 64 of A-Z a-z 0-9 _ - . (its guard session's
        /// prefix, its `client` label in the metrics, its `client` in the event log).
        name: String,
        /// Print the key alone, without the entry.
        #[arg(long)]
        key_only: bool,
    },

    /// Print the SHA-256 (hex) of a key read from standard input, for [access].
    ///
    /// One key, its trailing newline ignored (so `echo "$KEY" | toolmend key hash` and
    /// `printf %s "$KEY" | toolmend key hash` agree). With --name, the whole
    /// [[access.clients]] entry. The same hash serves access.admin_key_sha256.
    ///
    /// Examples:
    ///   printf %s "$CI_KEY" | toolmend key hash --name ci >> gateway.toml
    ///   toolmend key hash < admin.key        # for access.admin_key_sha256
    #[command(verbatim_doc_comment)]
    Hash {
        /// The client's name: print the [[access.clients]] entry, not the hash alone.
        #[arg(long)]
        name: Option<String>,
    },
}

/// Runs `toolmend key …`.
pub(crate) fn run(args: &KeyArgs) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match &args.action {
        KeyAction::New { name, key_only } => {
            check_name(name)?;
            let key = new_key()?;
            if *key_only {
                writeln!(out, "{key}")?;
            } else {
                writeln!(
                    out,
                    "# The key, for the client {name:?} only (shown once, stored nowhere):\n\
                     # {key}\n{}",
                    entry(name, &key)
                )?;
            }
        }
        KeyAction::Hash { name } => {
            let text = std::io::read_to_string(std::io::stdin()).context("reading the key")?;
            let key = text.strip_suffix('\n').unwrap_or(&text);
            let key = key.strip_suffix('\r').unwrap_or(key);
            if key.trim().is_empty() {
                anyhow::bail!(
                    "no key on standard input: printf %s \"$KEY\" | toolmend key hash \
                     (toolmend key new NAME makes one)"
                );
            }
            if key.contains('\n') {
                anyhow::bail!("more than one line on standard input: give one key at a time");
            }
            if key.trim() != key {
                anyhow::bail!(
                    "the key starts or ends with spaces, which the gateway trims from what \
                     clients send: it could never match; remove them"
                );
            }
            match name {
                Some(name) => {
                    check_name(name)?;
                    writeln!(out, "{}", entry(name, key))?;
                }
                None => writeln!(out, "{}", toolmend_gateway::sha256_hex(key.as_bytes()))?,
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The `[[access.clients]]` entry of `name` with `key`.
fn entry(name: &str, key: &str) -> String {
    format!(
        "[[access.clients]]\nname = \"{name}\"\nkey_sha256 = \"{}\"",
        toolmend_gateway::sha256_hex(key.as_bytes())
    )
}

fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if !ok {
        anyhow::bail!("the client name {name:?} is not 1 to 64 of A-Z a-z 0-9 _ - .");
    }
    Ok(())
}

/// `tmk_` and 256 random bits in hex, from the system's generator.
fn new_key() -> anyhow::Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context(
            "reading /dev/urandom (no such device here: make a key with another generator, \
             then toolmend key hash)",
        )?;
    Ok(bytes
        .iter()
        .fold(String::from("tmk_"), |s, b| format!("{s}{b:02x}")))
}
