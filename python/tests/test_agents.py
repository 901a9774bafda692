"""Coding agents, headless, through the gateway: Claude Code (`claude -p`, pointed at the
gateway with `ANTHROPIC_BASE_URL`: the Messages front) and the Codex CLI (`codex exec`,
with a model provider whose `wire_api = "responses"`: the Responses front), each in front
of the strict scripted provider speaking Chat Completions, which answers the agent's own
shell tool as a small open model does: the call written into its text with broken JSON,
then a final answer. The agent must run the command and finish; pointed at the provider
directly (which speaks Messages and Responses too), or with mending off, the same run
never runs it. Each agent also runs through the gateway in front of the provider
speaking the agent's own API (`upstream.api`): the client's body passed through, the
answer mended in place.

The agents: `$TOOLMEND_CLAUDE` / `$TOOLMEND_CODEX`, else `<repo>/.tools/agents/node_modules/.bin/`
(installed at their pinned versions by `scripts/agents-env.sh`). A missing agent fails
the test; it does not skip it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from _servers import clean_env
from test_gateway_clients import said, stack  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
CLAUDE = Path(os.environ.get("TOOLMEND_CLAUDE", ROOT / ".tools/agents/node_modules/.bin/claude"))
CODEX = Path(os.environ.get("TOOLMEND_CODEX", ROOT / ".tools/agents/node_modules/.bin/codex"))

# The shell call as a small model writes it: in the text, Hermes-style, a trailing comma.
BROKEN_BASH = (
    "I'll write the file.\n<tool_call>\n"
    '{"name": "Bash", "arguments": {"command": "echo toolmend-ok > out.txt", '
    '"description": "Write the file",}}\n</tool_call>'
)


def agent(path: Path, what: str, env: str) -> Path:
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{what} is missing: {path}; install it with scripts/agents-env.sh "
                    f"or point {env} at one.", pytrace=False)
    return path


def claude() -> Path:
    return agent(CLAUDE, "Claude Code", "TOOLMEND_CLAUDE")


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


def test_claude_code_pointed_at_the_provider_directly_never_runs_the_command(stack, tmp_path):
    s = stack(said(BROKEN_BASH), said("Done: the file is written."))
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    done = run_claude(s.provider.removesuffix("/v1"), work, home)
    assert not (work / "out.txt").exists()
    assert "<tool_call>" in done.stdout


def test_claude_code_runs_through_the_gateway_in_front_of_a_messages_upstream(stack, tmp_path):
    s = stack(said(BROKEN_BASH), said("Done: the file is written."),
              env_extra={"TOOLMEND_UPSTREAM__API": "messages"})
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    done = run_claude(s.gateway.removesuffix("/v1"), work, home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (work / "out.txt").read_text() == "toolmend-ok\n"
    assert "Done: the file is written." in done.stdout


# ---------------------------------------------------------------------------------------
# The Codex CLI, through the Responses front.

# Codex's shell tool is `exec_command` (`cmd`); written as a small model writes it.
BROKEN_EXEC = (
    "I'll write the file.\n<tool_call>\n"
    '{"name": "exec_command", "arguments": {"cmd": "echo toolmend-ok > out.txt",}}\n</tool_call>'
)


def run_codex(base_url: str, workdir: Path, home: Path) -> subprocess.CompletedProcess:
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text(
        'model = "scripted"\nmodel_provider = "toolmend"\n\n'
        "[model_providers.toolmend]\n"
        f'name = "toolmend"\nbase_url = "{base_url}"\nwire_api = "responses"\n'
        'env_key = "TOOLMEND_TEST_KEY"\n'
    )
    env = clean_env() | {"HOME": str(home), "CODEX_HOME": str(codex_home),
                         "TOOLMEND_TEST_KEY": "sk-not-a-key"}
    return subprocess.run(
        [str(agent(CODEX, "The Codex CLI", "TOOLMEND_CODEX")), "exec", "--skip-git-repo-check",
         "--dangerously-bypass-approvals-and-sandbox",
         "Write toolmend-ok into out.txt using the shell."],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
    )


def test_codex_runs_a_broken_text_call_through_the_responses_front(stack, tmp_path):
    s = stack(said(BROKEN_EXEC), said("Done: the file is written."))
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    done = run_codex(s.gateway, work, home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (work / "out.txt").read_text() == "toolmend-ok\n"
    assert "Done: the file is written." in done.stdout
    assert s.provider_is_exhausted()


def test_codex_without_the_mending_never_runs_the_command(stack, tmp_path):
    s = stack(said(BROKEN_EXEC), said("Done: the file is written."),
              env_extra={"TOOLMEND_CALLS__MEND": "false"})
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    done = run_codex(s.gateway, work, home)
    assert not (work / "out.txt").exists()
    assert "<tool_call>" in done.stdout


def test_codex_pointed_at_the_provider_directly_never_runs_the_command(stack, tmp_path):
    s = stack(said(BROKEN_EXEC), said("Done: the file is written."))
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    done = run_codex(s.provider, work, home)
    assert not (work / "out.txt").exists()
    assert "<tool_call>" in done.stdout


def test_codex_runs_through_the_gateway_in_front_of_a_responses_upstream(stack, tmp_path):
    s = stack(said(BROKEN_EXEC), said("Done: the file is written."),
              env_extra={"TOOLMEND_UPSTREAM__API": "responses"})
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    done = run_codex(s.gateway, work, home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (work / "out.txt").read_text() == "toolmend-ok\n"
    assert "Done: the file is written." in done.stdout
