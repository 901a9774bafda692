#!/usr/bin/env bash
# Python tool-node benchmarks: toolmend.langgraph.ToolNode beside LangGraph's stock
# ToolNode and SAIDEX's SaidexToolNode.
#
#   bench/python/node_overhead.py    µs per call, sync and async, valid and malformed calls
#                                    -> bench/results/python_node.json
#   bench/python/corpus_outcomes.py  outcome per record of the external corpus
#                                    (/work/shared/corpus/tool_calls_dev.jsonl by default)
#                                    -> bench/results/python_corpus.json
#
# Usage: bench/python/run.sh [--quick] [--corpus PATH]
#   --quick        shorter timing (rough numbers)
#   --corpus PATH  another corpus file (JSONL, the format of the dev split)
# Python: $PYTHON if set, else the active venv's python, else .venv/bin/python.
# Takes about 90 s on 2 cores.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

if [[ -n "${PYTHON:-}" ]]; then
  PY="$PYTHON"
elif [[ -n "${VIRTUAL_ENV:-}" ]]; then
  PY="$VIRTUAL_ENV/bin/python"
else
  PY="$ROOT/.venv/bin/python"
fi

NODE_ARGS=()
CORPUS_ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) NODE_ARGS+=(--batches 5 --batch-seconds 0.03); shift ;;
    --corpus) CORPUS_ARGS+=(--corpus "$2"); shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

echo "python: $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"
"$PY" - <<'PYEOF'
from importlib.metadata import version
for dist in ("toolmend", "langgraph-prebuilt", "saidex", "langgraph", "langchain-core", "pydantic"):
    try:
        print(f"{dist} {version(dist)}")
    except Exception as e:
        print(f"{dist}: not installed ({e})")
PYEOF
mkdir -p bench/results

echo
echo "### node_overhead"
start=$SECONDS
"$PY" bench/python/node_overhead.py "${NODE_ARGS[@]}"
echo "(node_overhead: $((SECONDS - start)) s)"

echo
echo "### corpus_outcomes"
start=$SECONDS
"$PY" bench/python/corpus_outcomes.py "${CORPUS_ARGS[@]}"
echo "(corpus_outcomes: $((SECONDS - start)) s)"
