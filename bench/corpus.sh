#!/usr/bin/env bash
# Score toolmend and its peers on the tool-call corpus with the shared scorer
# (score_repair.py: exact JSON match per record, per group, plus throughput),
# then print one comparison table (bench/compare.py).
#
# Usage: bench/corpus.sh [--no-build] [--no-inprocess] [--tools "LIST"] [--failures N]
#
#   --no-build     use the existing target/release/toolmend (default: cargo build --release -p toolmend-cli)
#   --tools LIST   which to score (default: json_repair json_repair_schema fast_json_repair
#                  json_repair_engine cmd); "cmd" is our CLI: toolmend mend --lines
#   --failures N   let the scorer print N failing records per category for our CLI (default 0)
#   --no-inprocess skip bench/inprocess.py (the in-process throughput comparison, which runs
#                  the criterion `corpus` group: about a minute)
#
# Environment:
#   TOOLMEND_SHARED   the shared folder (default: <repo>/../shared)
#   CORPUS            corpus JSONL (default: $TOOLMEND_SHARED/corpus/tool_calls_dev.jsonl)
#   VENV              Python venv with the peers (default: <repo>/.venv; created by scripts/python-env.sh)
#
# Output: per tool bench/results/<tool>.json (the scorer's --json-out) and <tool>.txt
# (its report), the table on stdout and in bench/results/corpus.md.
#
# Throughput caveat: the scorer times peers in-process (only the loads() calls),
# but times "cmd" as the whole subprocess: process start-up, decoding each JSON
# record (with its schema), schema compilation, and one flushed write per line
# are included. bench/inprocess.py measures the fair in-process comparison (run by
# default; its table is appended).
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED="${TOOLMEND_SHARED:-$ROOT/../shared}"
CORPUS="${CORPUS:-$SHARED/corpus/tool_calls_dev.jsonl}"
SCORER="$SHARED/tools/score_repair.py"
VENV="${VENV:-$ROOT/.venv}"
RESULTS="$ROOT/bench/results"

BUILD=1
INPROCESS=1
TOOLS="json_repair json_repair_schema fast_json_repair json_repair_engine cmd"
FAILURES=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD=0; shift ;;
    --no-inprocess) INPROCESS=0; shift ;;
    --tools) TOOLS="${2:?--tools needs a list}"; shift 2 ;;
    --failures) FAILURES="${2:?--failures needs a number}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "corpus.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

[[ -f "$SCORER" ]] || { echo "corpus.sh: scorer not found: $SCORER (set TOOLMEND_SHARED)" >&2; exit 1; }
[[ -f "$CORPUS" ]] || { echo "corpus.sh: corpus not found: $CORPUS (set CORPUS)" >&2; exit 1; }

cd "$ROOT"
if [[ " $TOOLS " == *" cmd "* && "$BUILD" == 1 ]]; then
  cargo build --release -p toolmend-cli >&2
fi
CLI="$ROOT/target/release/toolmend"
if [[ " $TOOLS " == *" cmd "* && ! -x "$CLI" ]]; then
  echo "corpus.sh: $CLI missing (run without --no-build)" >&2
  exit 1
fi

VENV="$VENV" scripts/python-env.sh >&2
PY="$VENV/bin/python"
mkdir -p "$RESULTS"

for tool in $TOOLS; do
  echo "corpus.sh: scoring $tool" >&2
  args=(--corpus "$CORPUS" --tool "$tool" --json-out "$RESULTS/$tool.json")
  if [[ "$tool" == cmd ]]; then
    args+=(--cmd "$CLI mend --lines" --cmd-input record --failures "$FAILURES")
  fi
  "$PY" "$SCORER" "${args[@]}" > "$RESULTS/$tool.txt"
  sed -n '1,8p' "$RESULTS/$tool.txt" >&2
done

if [[ "$INPROCESS" == 1 ]]; then
  echo "corpus.sh: in-process throughput (criterion corpus group + Python loops)" >&2
  CORPUS="$CORPUS" "$PY" bench/inprocess.py --corpus "$CORPUS" --json-out "$RESULTS/inprocess.json" >&2
else
  rm -f "$RESULTS/inprocess.json"   # never mix in numbers from an older run
fi

results=()
for tool in $TOOLS; do results+=("$RESULTS/$tool.json"); done
{
  echo "## Corpus scores — $(date -u +%Y-%m-%d), $(nproc) cores, toolmend $(git rev-parse --short HEAD)"
  echo
  "$PY" bench/compare.py "${results[@]}" --inprocess "$RESULTS/inprocess.json"
} | tee "$RESULTS/corpus.md"
