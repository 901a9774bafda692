"""Coding agents, headless, through the gateway: Claude Code (`claude -p`, pointed at the
gateway with `ANTHROPIC_BASE_URL`) in front of the strict scripted provider speaking Chat
Completions, which answers the agent's own shell tool as a small open model does: the
call written into its text with broken JSON, then a final answer. The agent must run the
command and finish.

The agent: `$TOOLMEND_CLAUDE`, else `<repo>/.tools/agents/node_modules/.bin/claude`
(installed at its pinned version by `scripts/agents-env.sh`). A missing agent fails the
test; it does not skip it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from _servers import clean_env
from test_gateway_clients import said, stack  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
CLAUDE = Path(os.environ.get("TOOLMEND_CLAUDE", ROOT / ".tools/agents/node_modules/.bin/claude"))

# The shell call as a small model writes it: in the text, Hermes-style, a trailing comma.
BROKEN_BASH = (
    "I'll write the file.\n<tool_call>\n"
    '{"name": "Bash", "arguments": {"command": "echo toolmend-ok > out.txt", '
    '"description": "Write the file",}}\n</tool_call>'
)


def claude() -> Path:
    if not (CLAUDE.is_file() and os.access(CLAUDE, os.X_OK)):
        pytest.fail(f"Claude Code is missing: {CLAUDE}; install it with scripts/agents-env.sh "
                    "or point TOOLMEND_CLAUDE at one.", pytrace=False)
    return CLAUDE


def run_claude(base_url: str, workdir: Path, home: Path) -> subprocess.CompletedProcess:
    env = clean_env() | {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-not-a-key",
        "HOME": str(home),
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    return subprocess.run(
        [str(claude()), "-p", "Write toolmend-ok into out.txt using the shell.",
         "--allowedTools", "Bash", "--model", "scripted"],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=180,
    )


def test_claude_code_runs_a_broken_text_call_through_the_messages_front(stack, tmp_path):
    s = stack(said(BROKEN_BASH), said("Done: the file is written."))
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    done = run_claude(s.gateway.removesuffix("/v1"), work, home)
    assert done.returncode == 0, done.stdout + done.stderr
    # The agent ran its shell tool on the mended call, then finished.
    assert (work / "out.txt").read_text() == "toolmend-ok\n"
    assert "Done: the file is written." in done.stdout
    # Both answers were asked for, no more: the run took the script's two steps.
    assert s.provider_is_exhausted()


def test_without_the_mending_the_same_run_never_runs_the_command(stack, tmp_path):
    # The same gateway and script with mending off (`calls.mend = false`: translation
    # only): the call stays in the text, and the agent takes it for its final answer.
    s = stack(said(BROKEN_BASH), said("Done: the file is written."),
              env_extra={"TOOLMEND_CALLS__MEND": "false"})
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    done = run_claude(s.gateway.removesuffix("/v1"), work, home)
    assert not (work / "out.txt").exists()
    assert "<tool_call>" in done.stdout
