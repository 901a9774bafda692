#!/usr/bin/env bash
# Tool-node overhead per tool call of the Python peers (LangGraph's stock ToolNode,
# SAIDEX's SaidexToolNode), tool body excluded, for 1, 8 and 64 parallel calls in one
# assistant message: sets up the venv (scripts/python-env.sh), then runs
# bench/node_peers.py, whose docstring describes the method.
#
# Usage: bench/node.sh [--json] [--peer P]... [--mode sync|async]... [--calls 1,8,64]
#                      [--seconds S] [--warmup S] [--dump-workload]
#
#   --json    one JSON object per (peer, mode, N) on stdout, for the Rust-side ratios;
#             the Markdown table then goes to stderr
#   other options are passed through to bench/node_peers.py (see its --help)
#
# Environment: VENV, PYTHON and the *_VERSION pins of scripts/python-env.sh.
# Output: a Markdown table on stdout (about 17 s per peer with the defaults).
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

for arg in "$@"; do
  case "$arg" in
    -h|--help) usage; exit 0 ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
export VENV

"$ROOT/scripts/python-env.sh" >&2
exec "$VENV/bin/python" "$ROOT/bench/node_peers.py" "$@"
