#!/usr/bin/env bash
# Tool-node overhead per tool call, tool body excluded, for 1, 8 and 64 parallel calls in
# one assistant message: toolmend's ToolNode (criterion bench `node`,
# crates/toolmend/benches/node.rs) against the Python peers measured in the same run
# (LangGraph's stock ToolNode and SAIDEX's SaidexToolNode, bench/node_peers.py, whose
# docstring describes the method). Both sides run the same workload:
# bench/node_workload.json (written by `bench/node_peers.py --dump-workload`).
#
# Usage: bench/node.sh [--quick] [--peers-only]
#
#   --quick       shorter runs on both sides (rough numbers, ~1 min)
#   --peers-only  only the Python peers (their Markdown table)
#
# Environment: VENV, PYTHON and the *_VERSION pins of scripts/python-env.sh.
# Output: the comparison table on stdout and in bench/results/node.md; the raw peer
# figures in bench/results/node_peers.jsonl.
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

QUICK=0
PEERS_ONLY=0
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    --peers-only) PEERS_ONLY=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "node.sh: unknown option $arg" >&2; usage >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
export VENV
cd "$ROOT"
mkdir -p bench/results

"$ROOT/scripts/python-env.sh" >&2
PEER_ARGS=()
CRIT_ARGS=()
if [[ $QUICK -eq 1 ]]; then
  PEER_ARGS+=(--seconds 1 --warmup 0.2)
  CRIT_ARGS+=(--warm-up-time 1 --measurement-time 2)
fi
if [[ $PEERS_ONLY -eq 1 ]]; then
  exec "$VENV/bin/python" bench/node_peers.py "${PEER_ARGS[@]}"
fi

cargo bench -p toolmend --bench node -- "${CRIT_ARGS[@]}" >&2
"$VENV/bin/python" bench/node_peers.py --json "${PEER_ARGS[@]}" > bench/results/node_peers.jsonl
{
  echo "## Tool-node overhead per call — $(date -u +%Y-%m-%d), $(nproc) cores, $(rustc --version)"
  echo
  python3 bench/node_compare.py --peers bench/results/node_peers.jsonl
} | tee bench/results/node.md
