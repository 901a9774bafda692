#!/usr/bin/env bash
# Run the cargo-fuzz targets in fuzz/ for a bounded time each (stable toolchain,
# no sanitizer: `-s none`). Exits non-zero when any target found a crash (the
# other targets still run); the crashing input is left under fuzz/artifacts/<target>/.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
#
#   SECONDS   time per target (default 30)
#   TARGET    any of: repair_no_panic repair_matches_serde repair_idempotent history_sanitize
#             sse_assemble gateway_request tool_answers messages_front responses_front
#             mcp_relay (default: all ten)
#
# Environment:
#   CARGO_FUZZ_VERSION  cargo-fuzz to install when `cargo fuzz` is missing (default 0.13.2);
#                       it goes to <repo>/.tools (git-ignored) and is reused next time
#   CORPUS              tool-call corpus JSONL whose raw_arguments also seed the fuzz corpus
#                       when the file exists (default $TOOLMEND_SHARED/corpus/tool_calls_dev.jsonl,
#                       TOOLMEND_SHARED defaulting to <repo>/../shared);
#                       the seeds stay in fuzz/corpus/ (git-ignored), nothing is copied into git
#   FUZZ_JOBS           libFuzzer -jobs/-workers when > 1 (default 1; the machine has 2 cores)
#   FUZZ_ARGS           extra libFuzzer flags (e.g. "-max_len=4096")
#
# Hand-written seeds live in fuzz/seeds/ (repair targets), fuzz/seeds-history/ (history_sanitize),
# fuzz/seeds-sse/ (sse_assemble: JSON-lines chunk streams), fuzz/seeds-messages/
# (messages_front: a mode byte, then a Messages body or cut positions and a chat SSE),
# fuzz/seeds-responses/ (responses_front, alike), fuzz/seeds-mcp/ (mcp_relay: lines, each
# led by a byte whose parity says client or server) and fuzz/seeds-request/
# (gateway_request: request bodies), and are copied into each target's corpus, with the
# inputs of past findings in fuzz/regressions/<target>/.
# scripts/fuzz-long.sh runs every target longer and prints a table of the figures.
set -euo pipefail

ALL_TARGETS=(repair_no_panic repair_matches_serde repair_idempotent history_sanitize sse_assemble
  gateway_request tool_answers messages_front responses_front mcp_relay)

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

SECS=30
if [[ $# -gt 0 ]]; then
  case "$1" in
    -h|--help) usage; exit 0 ;;
    ''|*[!0-9]*) ;;             # not a number: a target name
    *) SECS="$1"; shift ;;
  esac
fi
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=("${ALL_TARGETS[@]}")
for t in "${TARGETS[@]}"; do
  if [[ ! " ${ALL_TARGETS[*]} " == *" $t "* ]]; then
    echo "fuzz.sh: unknown target '$t' (known: ${ALL_TARGETS[*]})" >&2
    usage >&2
    exit 2
  fi
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.tools"
CARGO_FUZZ_VERSION="${CARGO_FUZZ_VERSION:-0.13.2}"
SHARED="${TOOLMEND_SHARED:-$ROOT/../shared}"
CORPUS="${CORPUS:-$SHARED/corpus/tool_calls_dev.jsonl}"
FUZZ_JOBS="${FUZZ_JOBS:-1}"
read -r -a EXTRA <<<"${FUZZ_ARGS:-}"

# cargo-fuzz: use the one on PATH, else the cached one in .tools, else install it there.
export PATH="$TOOLS/bin:$PATH"
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz.sh: installing cargo-fuzz $CARGO_FUZZ_VERSION into $TOOLS" >&2
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked --root "$TOOLS"
fi
echo "fuzz.sh: $(cargo fuzz --version); ${SECS}s per target: ${TARGETS[*]}" >&2

cd "$ROOT/fuzz"

seed_corpus() { # seed_corpus DIR: hand-written seeds + (if present) the dev corpus' raw arguments
  local dir="$1"
  mkdir -p "$dir"
  # Every target starts from the inputs of its past findings.
  cp -n "$ROOT"/fuzz/regressions/"$(basename "$dir")"/* "$dir"/ 2>/dev/null || true
  if [[ "$dir" == */history_* ]]; then
    # Histories: the example conversation and the hand-written ones.
    cp -n "$ROOT"/examples/broken_history.json "$ROOT"/fuzz/seeds-history/* "$dir"/ 2>/dev/null || true
    return
  fi
  if [[ "$dir" == */sse_* ]]; then
    cp -n "$ROOT"/fuzz/seeds-sse/* "$ROOT"/fuzz/regressions/sse_assemble/* "$dir"/ 2>/dev/null || true
    return
  fi
  if [[ "$dir" == */gateway_* ]]; then
    cp -n "$ROOT"/fuzz/seeds-request/* "$dir"/ 2>/dev/null || true
    return
  fi
  if [[ "$dir" == */messages_* ]]; then
    cp -n "$ROOT"/fuzz/seeds-messages/* "$dir"/ 2>/dev/null || true
    return
  fi
  if [[ "$dir" == */mcp_* ]]; then
    cp -n "$ROOT"/fuzz/seeds-mcp/* "$dir"/ 2>/dev/null || true
    return
  fi
  if [[ "$dir" == */responses_* ]]; then
    cp -n "$ROOT"/fuzz/seeds-responses/* "$ROOT"/fuzz/seeds-messages/*stream* "$dir"/ 2>/dev/null || true
    return
  fi
  cp -n "$ROOT"/fuzz/seeds/* "$dir"/ 2>/dev/null || true
  if [[ -f "$CORPUS" ]] && [[ ! -e "$dir.seeded" ]]; then
    python3 - "$CORPUS" "$dir" <<'PYEOF'
import hashlib, json, os, sys
src, out = sys.argv[1], sys.argv[2]
n = 0
with open(src, encoding="utf-8") as f:
    for line in f:
        if line.strip():
            raw = json.loads(line)["raw_arguments"].encode("utf-8")
            name = "corpus-" + hashlib.sha1(raw).hexdigest()[:16]
            with open(os.path.join(out, name), "wb") as g:
                g.write(raw)
            n += 1
print(f"fuzz.sh: seeded {n} inputs from {src}", file=sys.stderr)
PYEOF
    touch "$dir.seeded"
  fi
}

# Build every target first (they share one build), so build time is not taken from fuzz time.
cargo fuzz build -s none
JOBS=()
if [[ "$FUZZ_JOBS" -gt 1 ]]; then JOBS=(-jobs="$FUZZ_JOBS" -workers="$FUZZ_JOBS"); fi
failed=()
for t in "${TARGETS[@]}"; do
  seed_corpus "corpus/$t"
  echo "fuzz.sh: === $t (${SECS}s) ===" >&2
  if ! cargo fuzz run -s none "$t" "corpus/$t" -- \
        -max_total_time="$SECS" -print_final_stats=1 "${JOBS[@]}" "${EXTRA[@]}"; then
    failed+=("$t")
    echo "fuzz.sh: $t FAILED; artifacts in fuzz/artifacts/$t/" >&2
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz.sh: crashes in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: no crash in ${TARGETS[*]} (${SECS}s each)" >&2
