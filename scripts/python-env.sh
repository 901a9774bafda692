#!/usr/bin/env bash
# Create (idempotently) the Python venv the benchmarks use and install the peer
# JSON-repair tools that bench/corpus.sh and bench/inprocess.py compare against,
# the peer tool nodes (LangGraph ToolNode, SAIDEX SaidexToolNode) that
# bench/node.sh compares against, and what the Python package's build and
# tests need (maturin, pytest, langchain, and the openai / langchain-openai clients
# python/tests/test_gateway_clients.py drives the gateway with).
#
# Usage: scripts/python-env.sh [--upgrade]
#
#   --upgrade   reinstall even if the pinned versions are already present
#
# Environment:
#   VENV                  venv path (default: <repo>/.venv)
#   PYTHON                interpreter used to create the venv (default: python3)
#   JSON_REPAIR_VERSION   json-repair version (default below; "latest" = unpinned)
#   FAST_JSON_REPAIR_VERSION, JSON_REPAIR_ENGINE_VERSION   likewise
#   LANGGRAPH_VERSION, LANGGRAPH_PREBUILT_VERSION, LANGCHAIN_CORE_VERSION,
#   SAIDEX_VERSION        likewise, for the tool-node peers
#   OPENAI_VERSION, LANGCHAIN_OPENAI_VERSION, OPENAI_AGENTS_VERSION   likewise, for the
#                         gateway client tests
#   ANTHROPIC_VERSION, LANGCHAIN_ANTHROPIC_VERSION, MCP_VERSION   likewise (the anthropic SDK
#                         and ChatAnthropic; the MCP server the tool tests use)
#
# Only PyPI is contacted (through pip). Prints the installed versions at the end.
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

UPGRADE=0
for arg in "$@"; do
  case "$arg" in
    --upgrade) UPGRADE=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "python-env.sh: unknown argument: $arg" >&2; usage >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"

# Versions the numbers in docs/benchmarks.md were measured with.
JSON_REPAIR_VERSION="${JSON_REPAIR_VERSION:-0.64.6}"
FAST_JSON_REPAIR_VERSION="${FAST_JSON_REPAIR_VERSION:-0.2.3}"
JSON_REPAIR_ENGINE_VERSION="${JSON_REPAIR_ENGINE_VERSION:-0.1.7}"
# Versions the tool-node peers of bench/node.sh were measured with.
LANGGRAPH_VERSION="${LANGGRAPH_VERSION:-1.2.24}"
LANGGRAPH_PREBUILT_VERSION="${LANGGRAPH_PREBUILT_VERSION:-1.1.3}"
LANGCHAIN_CORE_VERSION="${LANGCHAIN_CORE_VERSION:-1.8.3}"
SAIDEX_VERSION="${SAIDEX_VERSION:-0.8.0}"
# The Python package's build and tests (python/): maturin builds it, pytest runs
# python/tests, langchain brings create_agent for the middleware.
LANGCHAIN_VERSION="${LANGCHAIN_VERSION:-1.5.2}"
MATURIN_VERSION="${MATURIN_VERSION:-1.16.0}"
PYTEST_VERSION="${PYTEST_VERSION:-9.2.0}"
PYTEST_ASYNCIO_VERSION="${PYTEST_ASYNCIO_VERSION:-1.4.1.post1}"
# The clients python/tests/test_gateway_clients.py points at `toolmend serve`.
OPENAI_VERSION="${OPENAI_VERSION:-3.57.0}"
LANGCHAIN_OPENAI_VERSION="${LANGCHAIN_OPENAI_VERSION:-1.7.4}"
# The anthropic SDK and LangChain's ChatAnthropic (clients of the Messages front) and the Python MCP SDK,
# whose server is the second, independent MCP implementation the tool tests run against.
ANTHROPIC_VERSION="${ANTHROPIC_VERSION:-2.16.0}"
LANGCHAIN_ANTHROPIC_VERSION="${LANGCHAIN_ANTHROPIC_VERSION:-1.7.10}"
# The OpenAI Agents SDK (a client of the Responses front).
OPENAI_AGENTS_VERSION="${OPENAI_AGENTS_VERSION:-0.24.0}"
MCP_VERSION="${MCP_VERSION:-2.3.0}"

spec() { # spec NAME VERSION -> NAME==VERSION, or NAME when VERSION is "latest"
  if [[ "$2" == latest ]]; then echo "$1"; else echo "$1==$2"; fi
}

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "python-env: creating venv at $VENV" >&2
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"

# json-repair's "schema" extra (jsonschema + pydantic) powers the json_repair_schema adapter;
# saidex's "langgraph" extra pulls langgraph (pinned here with its prebuilt and core parts).
REQS=(
  "$(spec 'json-repair[schema]' "$JSON_REPAIR_VERSION")"
  "$(spec fast-json-repair "$FAST_JSON_REPAIR_VERSION")"
  "$(spec json-repair-engine "$JSON_REPAIR_ENGINE_VERSION")"
  "$(spec langgraph "$LANGGRAPH_VERSION")"
  "$(spec langgraph-prebuilt "$LANGGRAPH_PREBUILT_VERSION")"
  "$(spec langchain-core "$LANGCHAIN_CORE_VERSION")"
  "$(spec 'saidex[langgraph]' "$SAIDEX_VERSION")"
  "$(spec langchain "$LANGCHAIN_VERSION")"
  "$(spec maturin "$MATURIN_VERSION")"
  "$(spec pytest "$PYTEST_VERSION")"
  "$(spec pytest-asyncio "$PYTEST_ASYNCIO_VERSION")"
  "$(spec openai "$OPENAI_VERSION")"
  "$(spec langchain-openai "$LANGCHAIN_OPENAI_VERSION")"
  "$(spec anthropic "$ANTHROPIC_VERSION")"
  "$(spec langchain-anthropic "$LANGCHAIN_ANTHROPIC_VERSION")"
  "$(spec openai-agents "$OPENAI_AGENTS_VERSION")"
  "$(spec mcp "$MCP_VERSION")"
)

installed_ok() {
  "$PY" - <<PYEOF 2>/dev/null
import sys
from importlib.metadata import version, PackageNotFoundError
want = {
    "json-repair": "$JSON_REPAIR_VERSION", "fast-json-repair": "$FAST_JSON_REPAIR_VERSION",
    "json-repair-engine": "$JSON_REPAIR_ENGINE_VERSION", "langgraph": "$LANGGRAPH_VERSION",
    "langgraph-prebuilt": "$LANGGRAPH_PREBUILT_VERSION", "langchain-core": "$LANGCHAIN_CORE_VERSION",
    "saidex": "$SAIDEX_VERSION", "jsonschema": "any", "pydantic": "any",
    "langchain": "$LANGCHAIN_VERSION", "maturin": "$MATURIN_VERSION",
    "pytest": "$PYTEST_VERSION", "pytest-asyncio": "$PYTEST_ASYNCIO_VERSION",
    "openai": "$OPENAI_VERSION", "langchain-openai": "$LANGCHAIN_OPENAI_VERSION",
    "anthropic": "$ANTHROPIC_VERSION", "langchain-anthropic": "$LANGCHAIN_ANTHROPIC_VERSION",
    "openai-agents": "$OPENAI_AGENTS_VERSION",
    "mcp": "$MCP_VERSION",
}
try:
    for dist, v in want.items():
        have = version(dist)
        if v not in ("any", "latest") and have != v:
            sys.exit(1)
except PackageNotFoundError:
    sys.exit(1)
PYEOF
}

if [[ "$UPGRADE" == 1 ]] || ! installed_ok; then
  echo "python-env: installing ${REQS[*]}" >&2
  "$PY" -m pip install --disable-pip-version-check --quiet --upgrade "${REQS[@]}"
fi

"$PY" - <<'PYEOF'
import sys
from importlib.metadata import version
print(f"python {sys.version.split()[0]} ({sys.executable})")
for dist in ["json-repair", "jsonschema", "pydantic", "fast-json-repair", "json-repair-engine",
             "langgraph", "langgraph-prebuilt", "langchain-core", "saidex", "langchain",
             "maturin", "pytest", "pytest-asyncio", "openai", "langchain-openai",
             "anthropic", "langchain-anthropic", "openai-agents", "mcp"]:
    print(f"{dist} {version(dist)}")
PYEOF
