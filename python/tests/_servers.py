"""What the tests share: the release binary, a clean environment, a subprocess that prints
its base URL on its first stdout line (the scripted provider, `toolmend serve`), and
`wait_until`, the bounded wait on a condition that stands in for every fixed sleep."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The gateway binary: $TOOLMEND_BIN (scripts/test points it at the tests' dev build), else
# the release build, else the dev build.
BIN = Path(
    os.environ.get("TOOLMEND_BIN")
    or next(
        (p for p in (ROOT / "target" / "release" / "toolmend", ROOT / "target" / "debug" / "toolmend") if p.exists()),
        ROOT / "target" / "release" / "toolmend",
    )
)
START_TIMEOUT = 60.0  # seconds for a subprocess to print its URL (a loaded CI box is slow)
WAIT_TIMEOUT = 30.0  # seconds for a condition `wait_until` polls (a load of 8 on 2 cores included)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT_TIMEOUT) -> None:
    """Polls `condition` until it holds; fails the test naming `what` when it still does not
    after `timeout` seconds. What the tests wait for instead of a fixed sleep: the bound
    only matters when the awaited thing never happens, so it is generous."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"still waiting after {timeout:.0f} s for {what}", pytrace=False)
        time.sleep(0.02)


def binary() -> Path:
    if not (BIN.is_file() and os.access(BIN, os.X_OK)):
        pytest.fail(
            f"the toolmend binary is missing: {BIN} is not an executable file. Build it with "
            "`PYO3_BUILD_EXTENSION_MODULE=1 cargo build --release -p toolmend-cli` (from the "
            "repository root), or point TOOLMEND_BIN at one.",
            pytrace=False,
        )
    return BIN


def clean_env() -> dict[str, str]:
    """The environment without TOOLMEND_* (the gateway reads its configuration there) and
    without proxies (every connection here is to 127.0.0.1)."""
    drop = ("TOOLMEND_", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


class Server:
    """A subprocess that prints its base URL on its first stdout line."""

    def __init__(self, name: str, argv: list[str], pattern: str, env: dict[str, str] | None = None):
        self.name = name
        self.stderr = tempfile.TemporaryFile(mode="w+", prefix=f"toolmend-{name}-")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env=clean_env() if env is None else env,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        # Drains stdout for the process's whole life (a full pipe would block it).
        threading.Thread(target=self._drain, daemon=True).start()
        try:
            first = self.lines.get(timeout=START_TIMEOUT)
        except queue.Empty:
            self.stop()
            pytest.fail(f"{name} printed nothing in {START_TIMEOUT}s: {argv}", pytrace=False)
        match = re.search(pattern, first or "")
        if match is None:
            code = self.proc.poll()
            self.stop()
            pytest.fail(
                f"{name} did not start ({argv}; exit {code}); first line {first!r}; "
                f"stderr:\n{self.stderr_text()}",
                pytrace=False,
            )
        self.url = match.group(1)

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.stderr.close()
