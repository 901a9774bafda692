#!/usr/bin/env bash
# Run the criterion bench `mend` (crates/toolmend/benches/mend.rs) and print the
# medians as Markdown tables with the ratios (fast path vs serde_json+is_valid, ...).
#
# Usage: bench/latency.sh [--quick] [FILTER...]
#
#   --quick   shorter warm-up/measurement (1 s / 2 s): rough numbers, ~2 min
#   FILTER    criterion filters (regex on bench ids), e.g. valid_fast_path corpus;
#             default: every group
#
# Environment: CORPUS / TOOLMEND_SHARED locate the corpus for the `corpus` group
# (default ../shared/corpus/tool_calls_dev.jsonl beside the repo).
# Output: the tables on stdout; bench/results/latency.md and bench/results/criterion.json.
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CRIT_ARGS=()
FILTERS=()
for arg in "$@"; do
  case "$arg" in
    --quick) CRIT_ARGS+=(--warm-up-time 1 --measurement-time 2) ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "latency.sh: unknown option $arg" >&2; usage >&2; exit 2 ;;
    *) FILTERS+=("$arg") ;;
  esac
done

cd "$ROOT"
mkdir -p bench/results
if [[ ${#FILTERS[@]} -eq 0 ]]; then
  cargo bench -p toolmend --bench mend -- "${CRIT_ARGS[@]}"
else
  for f in "${FILTERS[@]}"; do
    cargo bench -p toolmend --bench mend -- "${CRIT_ARGS[@]}" "$f"
  done
fi >&2

{
  echo "## Latency (criterion medians) — $(date -u +%Y-%m-%d), $(nproc) cores, $(rustc --version)"
  echo
  python3 bench/criterion_table.py --json-out bench/results/criterion.json
} | tee bench/results/latency.md
