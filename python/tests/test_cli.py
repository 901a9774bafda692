"""The wheel's `toolmend` command: the Rust command line, installed by `pip install ./python`.

Run from the venv's `bin/` (the console script pip wrote), as a user runs it: the README's
first command, exit statuses, standard input, a closed pipe, Ctrl-C.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import sys

import pytest
from _servers import wait_until

import toolmend

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# The console script pip installed beside this interpreter (the venv's bin/).
TOOLMEND = pathlib.Path(sys.executable).parent / "toolmend"


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(TOOLMEND), *args], input=stdin, capture_output=True, timeout=60, cwd=ROOT)


def test_the_wheel_installs_the_toolmend_command() -> None:
    assert TOOLMEND.exists(), f"no console script at {TOOLMEND}: is the wheel installed in this venv?"
    out = run("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().strip() == f"toolmend {toolmend.__version__}"


def test_the_readme_first_command_runs_on_the_installed_command() -> None:
    out = run("mend", "examples/broken_calls.jsonl")
    text = out.stdout.decode()
    # The example holds one line that is not JSON, on purpose: exit 1 says so.
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert out.stderr == b""
    assert "line 2 (python-dict) get_weather: repaired\n  fix   single_quotes at byte 1\n" in text
    # A cut-off call is refused, as every front refuses it.
    assert "line 5 (truncated) send_email: feedback (cut off)\n" in text
    assert "error line 13: the line is not valid JSON" in text
    assert "summary: 13 line(s), 15 call(s), 1 malformed line(s)\n" in text
    assert "  outcomes: valid 1, repaired 9, feedback 5\n" in text


def test_it_is_the_rust_binary_byte_for_byte() -> None:
    # The same function runs behind both (toolmend_cli::run): same output, same status.
    candidates = (os.environ.get("TOOLMEND_BIN"), ROOT / "target/release/toolmend", ROOT / "target/debug/toolmend")
    binary = next((pathlib.Path(p) for p in candidates if p and pathlib.Path(p).exists()), None)
    if binary is None:
        pytest.skip("no cargo-built toolmend binary in target/")
    for args in (["mend", "--format", "json", "examples/broken_calls.jsonl"], ["history", "check", "examples/broken_history.json"]):
        ours = run(*args)
        theirs = subprocess.run([str(binary), *args], capture_output=True, timeout=60, cwd=ROOT)
        if ours.stdout != theirs.stdout and binary.stat().st_mtime < (ROOT / "crates/toolmend-cli/src/lib.rs").stat().st_mtime:
            pytest.skip(f"{binary} is older than the CLI's source")
        assert (ours.returncode, ours.stdout) == (theirs.returncode, theirs.stdout), args


def test_exit_statuses_and_standard_input() -> None:
    line = (
        b'{"tool": {"name": "get_weather", "parameters": {"type": "object", "properties": '
        b'{"city": {"type": "string"}}, "required": ["city"]}}, "raw_arguments": "{\'city\': \'Oslo\',}"}\n'
    )
    out = run("mend", "--lines", stdin=line)
    assert (out.returncode, out.stdout) == (0, b'{"city":"Oslo"}\n'), out.stderr
    out = run("mend", "--lines", stdin=line + b"not json\n")
    assert out.returncode == 1
    assert out.stdout.decode().splitlines()[1].startswith("ERROR line 2: ")
    # A usage error: clap's message on stderr, 2, and no Python traceback.
    out = run("mend", "--no-such-flag")
    assert out.returncode == 2
    assert b"--no-such-flag" in out.stderr and b"Traceback" not in out.stderr
    out = run("mend", "no/such/file.jsonl")
    assert out.returncode == 2
    assert b"toolmend: cannot open no/such/file.jsonl" in out.stderr
    # `history check`: 1 on violations.
    assert run("history", "check", "examples/broken_history.json").returncode == 1
    # --help goes to stdout with 0, as the binary's does.
    out = run("mend", "--help")
    assert out.returncode == 0 and b"--accept-truncated" in out.stdout


def test_a_reader_closing_the_pipe_is_no_error(tmp_path: pathlib.Path) -> None:
    # `toolmend mend big.jsonl | head -1`: the reader goes away; no error, no traceback.
    big = tmp_path / "big.jsonl"
    big.write_bytes((EXAMPLES / "broken_calls.jsonl").read_bytes() * 2000)
    proc = subprocess.Popen([str(TOOLMEND), "mend", "--lines", str(big)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"{")
    proc.stdout.close()
    assert proc.wait(timeout=60) in (0, 1)
    err = proc.stderr.read()
    assert b"Traceback" not in err and b"panicked" not in err, err


def catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler of its own for `signum` (Linux: /proc)."""
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    (mask,) = [line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")]
    return bool(int(mask, 16) >> (signum - 1) & 1)


def test_ctrl_c_stops_a_serving_command() -> None:
    # The scripted provider serves until Ctrl-C, as the binary does; Python's own SIGINT
    # handling (KeyboardInterrupt, raised only between Python bytecodes) must not swallow it.
    proc = subprocess.Popen(
        [str(TOOLMEND), "scripted-provider", str(EXAMPLES / "script.jsonl")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline().decode()
        assert banner.startswith("scripted provider: http://127.0.0.1:"), banner
        # The command prints its banner, then installs its SIGINT handler (Tokio's, at the
        # first poll of ctrl_c()): a signal in between would meet the default action. The
        # kernel says when the handler is there: SIGINT's bit in SigCgt.
        wait_until(
            lambda: proc.poll() is not None or catches(proc.pid, signal.SIGINT),
            "the scripted provider to catch SIGINT",
        )
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_run_cli_takes_the_program_name_first() -> None:
    # The function behind the script, for embedding: returns the status, never exits.
    from toolmend._core import run_cli

    assert run_cli(["toolmend", "history", "check", str(EXAMPLES / "broken_history.json")]) == 1
    assert run_cli(["toolmend", "no-such-command"]) == 2


@pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")
def test_the_command_is_on_the_venv_path() -> None:
    # What `pip install` promises: the venv's bin/ has it, next to python.
    out = subprocess.run(
        [shutil.which("sh") or "sh", "-c", "command -v toolmend"],
        capture_output=True,
        env={"PATH": str(TOOLMEND.parent)},
        timeout=60,
    )
    assert out.stdout.decode().strip() == str(TOOLMEND)
