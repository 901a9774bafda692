#!/usr/bin/env bash
# Instructions per request, old against new: each `toolmend` binary runs as the gateway
# under valgrind's callgrind (instructions counted, not seconds: the same figure whatever
# else the machine is doing), in front of a scripted provider, for A and then B requests
# (one at a time, bench/gateway/request.json, an answer that needs repair and coercion);
# the difference of the two totals over B - A is what one request costs, start-up and
# shutdown cancelled out. The gateway's own threads only (the provider and the load
# generator are other processes).
#
# Usage: bench/gateway/instructions.sh BINARY [BINARY ...]
#
# Environment: A (default 50), B (default 250): the two request counts; FRONT (default
# chat): the front asked, `chat`, `messages` or `responses` (the same conversation and
# tool in each wire, bench/gateway/*request.json); RUST_LOG for the gateway (default:
# unset, info logs, a line per request, to a file).
set -euo pipefail
[[ $# -ge 1 ]] || { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "instructions.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
A=${A:-50} B=${B:-250}
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
cargo build --release --locked -q -p toolmend-gateway --example loadgen >&2
LOADGEN="$ROOT/target/release/examples/loadgen"
WORK="$ROOT/bench/results/instructions-run"
mkdir -p "$WORK"
FRONT=${FRONT:-chat}
case "$FRONT" in
  chat) BODY="$ROOT/bench/gateway/request.json" ROUTE=/v1/chat/completions ;;
  messages) BODY="$ROOT/bench/gateway/messages-request.json" ROUTE=/v1/messages ;;
  responses) BODY="$ROOT/bench/gateway/responses-request.json" ROUTE=/v1/responses ;;
  *) echo "instructions.sh: FRONT is chat, messages or responses, not $FRONT" >&2; exit 2 ;;
esac
BROKEN="{'city': 'Paris', 'days': '3',}"
STEP='{"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"'"$BROKEN"'"}}]}'

wait_for() { # FILE REGEX PID
  local i
  for ((i = 0; i < 2400; i++)); do
    if grep -Eo "$2" "$1" 2>/dev/null | head -n1 | grep .; then return 0; fi
    kill -0 "$3" 2>/dev/null || { tail -n 20 "$1" >&2; return 1; }
    sleep 0.05
  done
  return 1
}

# instructions BINARY N: the gateway's total instructions over its life with N requests.
instructions() {
  local bin=$1 n=$2 out="$WORK/callgrind.out" ppid purl gpid gurl
  python3 -c 'import sys; sys.stdout.write((sys.argv[1] + "\n") * int(sys.argv[2]))' \
    "$STEP" $((n + 10)) > "$WORK/script.jsonl"
  "$bin" scripted-provider "$WORK/script.jsonl" --port 0 > "$WORK/provider.log" 2>&1 &
  ppid=$!
  purl=$(wait_for "$WORK/provider.log" 'http://127\.0\.0\.1:[0-9]+/v1' "$ppid")
  rm -f "$out"
  valgrind --tool=callgrind --callgrind-out-file="$out" \
    "$bin" serve --listen 127.0.0.1:0 --upstream "$purl" \
    > "$WORK/gateway.out" 2> "$WORK/gateway.log" &
  gpid=$!
  gurl=$(wait_for "$WORK/gateway.out" 'http://127\.0\.0\.1:[0-9]+/v1' "$gpid")
  "$LOADGEN" --url "${gurl%/v1}$ROUTE" --body "$BODY" --concurrency 1 \
    --requests "$n" --warmup 0 --timeout 120 > "$WORK/loadgen.json"
  kill -TERM "$gpid"; wait "$gpid" 2>/dev/null || true
  kill -TERM "$ppid"; wait "$ppid" 2>/dev/null || true
  grep -E '^(summary|totals):' "$out" | head -n1 | awk '{print $2}'
}

echo "front: $FRONT"
printf '%-40s %14s %14s %12s\n' binary "Ir ($A req)" "Ir ($B req)" "Ir/request"
for bin in "$@"; do
  a=$(instructions "$bin" "$A")
  b=$(instructions "$bin" "$B")
  printf '%-40s %14s %14s %12s\n' "$bin" "$a" "$b" $(((b - a) / (B - A)))
done
