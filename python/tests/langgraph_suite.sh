#!/usr/bin/env bash
# Runs LangGraph's own ToolNode test suite (the tests/ shipped in the PyPI sdist
# of langgraph-prebuilt, at exactly the installed version) against a substitute
# ToolNode class, so a drop-in is judged by the peer's tests and not only ours.
#
# Usage: python/tests/langgraph_suite.sh [--self-check] [PYTEST_ARGS...]
#
#   --self-check   test a trivial subclass of the stock ToolNode instead (defined
#                  in the generated conftest): validates the harness without toolmend;
#                  expected on 1.1.3: 267 passed, 0 failed
#   PYTEST_ARGS    passed to pytest as they are (-x, -k EXPR, -v, ...)
#
# Environment:
#   PYTHON                    interpreter (default: python on PATH, i.e. the active venv)
#   TOOLMEND_TOOLNODE         module:Class under test (default toolmend.langgraph:ToolNode)
#   TOOLMEND_TOOLS_CONDITION  module:func to substitute for tools_condition too (default: unset)
#   LG_TEST_FILES             space-separated test files (or node ids) relative to tests/,
#                             e.g. "test_tool_node.py test_on_tool_call.py" (default: all)
#   LANGGRAPH_TEST_FAST       upstream switch; default 1 = in-memory checkpointer/store only
#   TOOLMEND_CACHE            where the sdist is kept between runs (default ~/.cache/toolmend)
#   LG_PYTEST_VERSION, LG_PYTEST_ASYNCIO_VERSION, LG_PYTEST_MOCK_VERSION, LG_SYRUPY_VERSION
#                             pins used when a test dependency is missing (defaults below)
#
# Exit status: pytest's (0 = all passed, 1 = some failed, 4 = the class or a
# backend setting was refused); 2 = setup error here (pip, sdist, arguments);
# 3 = a test module still holds the stock ToolNode (the swap did not take, so
# the results would be about the stock class).
# Last line: "langgraph ToolNode suite: N passed, M failed (class module:Class)".
# Only PyPI is contacted (pip), and only when a test dependency or the sdist is missing.
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
die() { echo "langgraph_suite: $*" >&2; exit 2; }

SELF_CHECK=0
PYTEST_ARGS=()
for arg in "$@"; do
  case "$arg" in
    --self-check) SELF_CHECK=1 ;;
    -h|--help) usage; exit 0 ;;
    *) PYTEST_ARGS+=("$arg") ;;
  esac
done

PY="${PYTHON:-python}"
command -v "$PY" >/dev/null 2>&1 || die "no Python interpreter '$PY' (activate a venv or set PYTHON)"
# The run happens in a temporary directory: a relative interpreter path must not break.
case "$PY" in */*) PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" ;; esac
CACHE="${TOOLMEND_CACHE:-$HOME/.cache/toolmend}"
# The upstream conftest only touches Postgres/SQLite when this is false; we stub
# those backends when absent, so fast mode is the default that works everywhere.
export LANGGRAPH_TEST_FAST="${LANGGRAPH_TEST_FAST:-1}"

# The suite tests the installed langgraph-prebuilt, so its tests must be the ones
# of that very version: newer tests pin behaviour the installed code lacks.
LG_VERSION=$("$PY" -c 'from importlib.metadata import version; print(version("langgraph-prebuilt"))' 2>/dev/null) \
  || die "langgraph-prebuilt is not installed in $("$PY" -c 'import sys; print(sys.prefix)') (see scripts/python-env.sh)"

# Test dependencies, pinned to what upstream's uv.lock in the 1.1.3 sdist resolves
# (known to pass there). Installed only when missing: a version the caller already
# has is kept, so the harness does not silently up- or downgrade their venv.
TEST_DEPS=(
  "pytest==${LG_PYTEST_VERSION:-9.2.0}"
  "pytest-asyncio==${LG_PYTEST_ASYNCIO_VERSION:-1.4.1.post1}"
  "pytest-mock==${LG_PYTEST_MOCK_VERSION:-3.17.0}"
  "syrupy==${LG_SYRUPY_VERSION:-6.1.1}"
)
mapfile -t missing < <("$PY" - "${TEST_DEPS[@]}" <<'PYEOF'
import sys
from importlib.metadata import PackageNotFoundError, version
for req in sys.argv[1:]:
    try:
        version(req.split("==")[0])
    except PackageNotFoundError:
        print(req)
PYEOF
)
if ((${#missing[@]})); then
  echo "langgraph_suite: installing ${missing[*]}" >&2
  "$PY" -m pip install --disable-pip-version-check --quiet "${missing[@]}" || die "pip install failed"
fi
"$PY" - <<'PYEOF'
import sys
from importlib.metadata import version
deps = ["langgraph", "langgraph-prebuilt", "langchain-core", "pytest", "pytest-asyncio", "pytest-mock", "syrupy"]
print(f"python {sys.version.split()[0]} ({sys.executable}); " + ", ".join(f"{d} {version(d)}" for d in deps))
PYEOF

# The sdist is the only published artefact that carries tests/ (wheels do not).
# --no-binary forces it; pip builds its metadata once, which is slow (~1 min),
# hence the cache. Downloaded into a scratch dir and moved, so an interrupted
# download never leaves a truncated archive that later runs would trust.
SDIST="$CACHE/langgraph_prebuilt-$LG_VERSION.tar.gz"
if [[ ! -s "$SDIST" ]]; then
  mkdir -p "$CACHE"
  dl=$(mktemp -d "$CACHE/download.XXXXXX")
  echo "langgraph_suite: downloading the langgraph-prebuilt $LG_VERSION sdist into $CACHE" >&2
  if ! "$PY" -m pip download --disable-pip-version-check --quiet --no-binary :all: --no-deps \
      -d "$dl" "langgraph-prebuilt==$LG_VERSION"; then
    rm -rf "$dl"; die "pip download of langgraph-prebuilt==$LG_VERSION failed"
  fi
  got=("$dl"/*.tar.gz)
  [[ -s "${got[0]}" ]] || { rm -rf "$dl"; die "pip download produced no .tar.gz"; }
  mv "${got[0]}" "$SDIST"
  rm -rf "$dl"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/lg-toolnode-tests.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Only tests/ is unpacked: the sdist's langgraph/ would land on sys.path (pytest
# prepends the rootdir for the tests package) and shadow the installed code.
# (awk, not head: head would close the pipe early and pipefail turn SIGPIPE into a failure)
top=$(tar -tzf "$SDIST" | awk -F/ 'NR == 1 { print $1 }')
tar -xzf "$SDIST" -C "$work" --strip-components=1 "$top/tests" 2>/dev/null \
  || die "$SDIST has no tests/ directory (did upstream stop shipping it?)"

# pytest.ini beside tests/ makes the temp dir the rootdir, so the root conftest
# below is loaded before tests/conftest.py and before any test module.
# asyncio_mode=auto is upstream's own setting (pyproject); their -vv/--durations
# are left out to keep the output short (pass -v to get them back).
cat > "$work/pytest.ini" <<'EOF'
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
testpaths = tests
addopts = --strict-markers -p no:cacheprovider -rfE --disable-warnings
EOF

# The root conftest does the swap at import time. Its knobs come in through the
# environment so that this file is the same text on every run.
cat > "$work/conftest.py" <<'PYEOF'
"""Generated by python/tests/langgraph_suite.sh: stubs absent DB backends and swaps ToolNode."""

import importlib
import json
import os
import sys
import types

import pytest

# --- DB backends -------------------------------------------------------------
# tests/conftest_checkpointer.py and conftest_store.py import these at module
# level, but only fixtures for LANGGRAPH_TEST_FAST=false use them. A stub lets the
# suite run in a venv with only langgraph; touching a stubbed name fails loudly.
_STUBBED = []


class _MissingMeta(type):
    def __call__(cls, *a, **k):
        raise RuntimeError(f"{cls.__qualname__} is a stub (backend not installed; keep LANGGRAPH_TEST_FAST=1)")

    def __getattr__(cls, attr):
        raise RuntimeError(f"{cls.__qualname__}.{attr} is a stub (backend not installed; keep LANGGRAPH_TEST_FAST=1)")


def _stub(name):
    try:
        importlib.import_module(name)
        return
    except ImportError:  # ModuleNotFoundError, or psycopg without libpq
        pass
    mod = types.ModuleType(name)

    def __getattr__(attr):
        if attr.startswith("__"):  # importlib probes __path__, __spec__, ...
            raise AttributeError(attr)
        return _MissingMeta(attr, (), {"__qualname__": f"{name}.{attr}"})

    mod.__getattr__ = __getattr__
    sys.modules[name] = mod
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, mod)
    _STUBBED.append(name)


for _name in (
    "psycopg",
    "psycopg_pool",
    "langgraph.checkpoint.postgres",
    "langgraph.checkpoint.postgres.aio",
    "langgraph.checkpoint.sqlite",
    "langgraph.checkpoint.sqlite.aio",
    "langgraph.store.postgres",
):
    _stub(_name)

_FAST = os.getenv("LANGGRAPH_TEST_FAST", "true").lower() in ("true", "1", "yes")
if _STUBBED and not _FAST:
    raise pytest.UsageError(
        f"LANGGRAPH_TEST_FAST is false but these backends are missing (stubbed): {', '.join(_STUBBED)}"
    )

# --- the swap ----------------------------------------------------------------
import langgraph.prebuilt.tool_node as _stock_module  # noqa: E402

STOCK_TOOLNODE = _stock_module.ToolNode
STOCK_TOOLS_CONDITION = _stock_module.tools_condition


def _load(spec, what):
    mod_name, sep, attr = spec.partition(":")
    if not sep or not mod_name or not attr:
        raise pytest.UsageError(f"{what}={spec!r}: expected module:Name")
    try:
        obj = importlib.import_module(mod_name)
    except ImportError as e:
        raise pytest.UsageError(f"{what}={spec!r}: cannot import {mod_name}: {e} (is it installed in {sys.prefix}?)")
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise pytest.UsageError(f"{what}={spec!r}: {mod_name} has no {attr}")
    return obj


if os.environ.get("LG_SUITE_SELF_CHECK") == "1":

    class SelfCheckToolNode(STOCK_TOOLNODE):
        """Adds nothing: if the suite passes with it, the harness (swap, stubs) is sound."""

    SUBSTITUTE = SelfCheckToolNode
    SPEC = "conftest:SelfCheckToolNode"
else:
    SPEC = os.environ.get("TOOLMEND_TOOLNODE") or "toolmend.langgraph:ToolNode"
    SUBSTITUTE = _load(SPEC, "TOOLMEND_TOOLNODE")
if SUBSTITUTE is STOCK_TOOLNODE:
    raise pytest.UsageError(f"TOOLMEND_TOOLNODE={SPEC} is the stock ToolNode itself; use --self-check for a baseline")

TC_SPEC = os.environ.get("TOOLMEND_TOOLS_CONDITION") or None
TC_SUBSTITUTE = _load(TC_SPEC, "TOOLMEND_TOOLS_CONDITION") if TC_SPEC else None

# Every module that binds the name at import: the tests import from the first
# two, create_react_agent builds and isinstance-checks through the third, and
# langchain's create_agent (if installed) through the fourth.
_TARGETS = [
    "langgraph.prebuilt",
    "langgraph.prebuilt.tool_node",
    "langgraph.prebuilt.chat_agent_executor",
    "langchain.agents.factory",
]
PATCHED = []
for _name in _TARGETS:
    try:
        _mod = importlib.import_module(_name)
    except ModuleNotFoundError:
        if _name.startswith("langchain."):
            continue  # langchain is optional
        raise
    _mod.ToolNode = SUBSTITUTE
    if TC_SUBSTITUTE is not None and hasattr(_mod, "tools_condition"):
        _mod.tools_condition = TC_SUBSTITUTE
    PATCHED.append(_name)


def _describe(obj):
    return f"{obj.__module__}:{obj.__qualname__}"


def pytest_report_header(config):
    # The resolved name can differ from the spec (a re-export): show both then.
    real = _describe(SUBSTITUTE)
    shown = SPEC if real == SPEC else f"{SPEC} ({real})"
    lines = [f"ToolNode under test: {shown}, swapped in {', '.join(PATCHED)}"]
    if TC_SUBSTITUTE is not None:
        lines.append(f"tools_condition under test: {TC_SPEC}")
    fast = "fast (in-memory only)" if _FAST else "full (SQLite/Postgres)"
    lines.append(f"LANGGRAPH_TEST_FAST: {fast}; stubbed backends: {', '.join(_STUBBED) or 'none'}")
    return lines


def pytest_collection_finish(session):
    # A module that bound the stock class before the swap (a new import path
    # upstream, say) would silently test the stock class: refuse to run then.
    stale = set()
    for item in session.items:
        mod = getattr(item.getparent(pytest.Module), "obj", None)
        if mod is None:
            continue
        for key, value in vars(mod).items():
            if value is STOCK_TOOLNODE or (TC_SUBSTITUTE is not None and value is STOCK_TOOLS_CONDITION):
                stale.add(f"{mod.__name__}.{key}")
    if stale:
        pytest.exit(f"stock ToolNode/tools_condition still bound in: {', '.join(sorted(stale))}", returncode=3)


def pytest_terminal_summary(terminalreporter):
    out = os.environ.get("LG_SUITE_SUMMARY")
    if not out:
        return
    stats = terminalreporter.stats
    counts = {k: len(stats.get(k, [])) for k in ("passed", "failed", "error", "skipped", "xfailed", "xpassed")}
    with open(out, "w") as f:
        json.dump({"class": SPEC, **counts}, f)
PYEOF

targets=()
read -r -a files <<< "${LG_TEST_FILES:-}"
for f in ${files[@]+"${files[@]}"}; do
  f="${f#tests/}"
  [[ -e "$work/tests/${f%%::*}" ]] || die "LG_TEST_FILES: no tests/${f%%::*} in the $LG_VERSION sdist"
  targets+=("tests/$f")
done

export LG_SUITE_SUMMARY="$work/summary.json"
if [[ "$SELF_CHECK" == 1 ]]; then export LG_SUITE_SELF_CHECK=1; else unset LG_SUITE_SELF_CHECK; fi
echo "langgraph_suite: langgraph-prebuilt $LG_VERSION tests in $work" >&2
rc=0
(cd "$work" && "$PY" -m pytest ${targets[@]+"${targets[@]}"} ${PYTEST_ARGS[@]+"${PYTEST_ARGS[@]}"}) || rc=$?

if [[ -s "$LG_SUITE_SUMMARY" ]]; then
  "$PY" - "$LG_SUITE_SUMMARY" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
# Errors (setup/teardown failures) count as failures: the class did not pass them.
extra = "".join(f", {s[k]} {k}" for k in ("skipped", "xfailed", "xpassed") if s[k])
print(f"langgraph ToolNode suite: {s['passed']} passed, {s['failed'] + s['error']} failed{extra} (class {s['class']})")
PYEOF
else
  echo "langgraph ToolNode suite: no result (pytest exit $rc before running tests)"
fi
exit "$rc"
