#!/usr/bin/env bash
# The long fuzz run: every cargo-fuzz target (or the ones named) for FUZZ_LONG_SECONDS
# each, one after the other, through scripts/fuzz.sh; then a table of what libFuzzer
# reported (-print_final_stats=1): runs executed, exec/s, corpus size, crashes.
#
# Usage: scripts/fuzz-long.sh [TARGET...]
#
#   TARGET    any target scripts/fuzz.sh knows (default: all of them)
#
# Environment:
#   FUZZ_LONG_SECONDS   time per target (default 600: the "no panic in 10 minutes" bar)
#   FUZZ_ARGS, FUZZ_JOBS, CORPUS, CARGO_FUZZ_VERSION   passed on to scripts/fuzz.sh
#
# Each target's log goes to bench/results/fuzz-long/<target>.log and the table to
# bench/results/fuzz-long/summary.md (git-ignored). Exits non-zero when a target crashed;
# the input is in fuzz/artifacts/<target>/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECS="${FUZZ_LONG_SECONDS:-600}"
case "$SECS" in ''|*[!0-9]*) echo "fuzz-long.sh: FUZZ_LONG_SECONDS must be a number" >&2; exit 2 ;; esac
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit 0
fi
TARGETS=("$@")
if [[ ${#TARGETS[@]} -eq 0 ]]; then
  # The list scripts/fuzz.sh keeps (one place to add a target).
  read -r -a TARGETS <<<"$(sed -n '/^ALL_TARGETS=(/,/)/p' "$ROOT/scripts/fuzz.sh" |
    tr '\n' ' ' | sed 's/.*(\(.*\)).*/\1/')"
fi
OUT="$ROOT/bench/results/fuzz-long"
mkdir -p "$OUT"

# The first call to fuzz.sh builds every target (its wall time includes that build);
# the later ones find the build done. -max_total_time counts fuzzing only.
rows=()
failed=()
for t in "${TARGETS[@]}"; do
  log="$OUT/$t.log"
  stamp="$OUT/.$t.start"
  touch "$stamp"
  echo "fuzz-long.sh: $t for ${SECS}s (log: $log)" >&2
  started=$(date +%s)
  status=0
  "$ROOT/scripts/fuzz.sh" "$SECS" "$t" >"$log" 2>&1 || status=$?
  took=$(($(date +%s) - started))
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
  eps=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
  # The last status line ("#N DONE/pulse/NEW ... corp: UNITS/SIZE ...") has the corpus size.
  corp=$(grep -o 'corp: [0-9]*/[0-9a-zA-Z]*' "$log" | tail -1 | sed 's/corp: //' || true)
  crashes=0
  if [[ -d "$ROOT/fuzz/artifacts/$t" ]]; then
    crashes=$(find "$ROOT/fuzz/artifacts/$t" -type f -newer "$stamp" | wc -l)
  fi
  rm -f "$stamp"
  if [[ $status -ne 0 ]]; then
    failed+=("$t")
    [[ $crashes -gt 0 ]] || crashes="? (exit $status)"
  fi
  rows+=("| \`$t\` | $SECS (wall $took) | ${runs:-?} | ${eps:-?} | ${corp:-?} | $crashes |")
done

{
  echo "fuzz-long: $(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), FUZZ_LONG_SECONDS=$SECS, $(nproc 2>/dev/null || echo '?') cores"
  echo
  echo "| target | seconds | runs executed | exec/s | corpus (units/bytes) | crashes |"
  echo "|---|---:|---:|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
} | tee "$OUT/summary.md"

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz-long.sh: crashes in: ${failed[*]} (inputs in fuzz/artifacts/<target>/)" >&2
  exit 1
fi
