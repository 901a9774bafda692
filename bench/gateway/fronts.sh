#!/usr/bin/env bash
# The latency each front of `toolmend serve` adds, in one run: the chat-completions front
# (`POST /v1/chat/completions`, bench/gateway/request.json), the Messages front
# (`POST /v1/messages`, bench/gateway/messages-request.json) and the Responses front
# (`POST /v1/responses`, bench/gateway/responses-request.json): the same conversation and
# tool in each wire, translated to the same chat upstream and back, against the
# scripted upstream called directly. Every upstream answer is one tool call whose
# arguments must be repaired and coerced; each measured response is checked to hold the
# mended arguments. About 2 minutes.
#
# Usage: bench/gateway/fronts.sh [--quick]
#
#   --quick   fewer requests (rough numbers)
#
# Added latency = the front's percentile minus direct's in the same repetition (median of
# 3); CPU per request is the gateway's CPU time over its requests. The bar: each
# translating front's added p50 within 1.2x of the chat front's. Output: the table on stdout and
# bench/results/fronts.md; logs in bench/results/fronts-run/.
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
QUICK=0
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "fronts.sh: unknown argument $arg" >&2; usage >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
export PYO3_BUILD_EXTENSION_MODULE=1 NO_PROXY="127.0.0.1,localhost" no_proxy="127.0.0.1,localhost"
REPS=3
if [[ $QUICK -eq 1 ]]; then N1=500 N16=2000; else N1=3000 N16=10000; fi
WORK="$ROOT/bench/results/fronts-run"
rm -rf "$WORK"; mkdir -p "$WORK"
log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

log "building toolmend and the load generator (release)"
cargo build --release --locked -p toolmend-cli >&2
cargo build --release --locked -p toolmend-gateway --example loadgen >&2
TOOLMEND="$ROOT/target/release/toolmend"
LOADGEN="$ROOT/target/release/examples/loadgen"

PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
wait_url() { # wait_url FILE PID: the first base URL the process prints
  local i
  for ((i = 0; i < 1200; i++)); do
    if grep -Eo 'http://127\.0\.0\.1:[0-9]+/v1' "$1" 2>/dev/null | head -n1 | grep .; then return 0; fi
    kill -0 "$2" 2>/dev/null || { tail "$1" >&2; return 1; }
    sleep 0.05
  done
  return 1
}
cpu_ns() { local t=0 f a _; for f in /proc/"$1"/task/*/schedstat; do read -r a _ < "$f" && t=$((t + a)); done; echo "$t"; }

BROKEN="{'city': 'Paris', 'days': '3',}"
STEP='{"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"'"$BROKEN"'"}}]}'
STEPS=$(( (N1 + N16) * 2 * REPS * 3 + 10000 ))
provider() { # provider NAME -> URL on stdout
  python3 -c 'import sys; sys.stdout.write((sys.argv[1] + "\n") * int(sys.argv[2]))' "$STEP" "$STEPS" > "$WORK/script-$1.jsonl"
  "$TOOLMEND" scripted-provider "$WORK/script-$1.jsonl" --port 0 > "$WORK/provider-$1.log" 2>&1 &
  PIDS+=($!)
  wait_url "$WORK/provider-$1.log" $!
}
DIRECT=$(provider direct)
UP=$(provider gateway)
"$TOOLMEND" serve --listen 127.0.0.1:0 --upstream "$UP" > "$WORK/gateway.out" 2> "$WORK/gateway.log" &
GW_PID=$!
PIDS+=("$GW_PID")
GW=$(wait_url "$WORK/gateway.out" "$GW_PID")
GW_ROOT="${GW%/v1}"
log "direct $DIRECT, gateway $GW (pid $GW_PID)"

declare -A URL=([direct]="$DIRECT/chat/completions" [chat]="$GW/chat/completions" [messages]="$GW_ROOT/v1/messages" [responses]="$GW/responses")
declare -A BODY=([direct]=bench/gateway/request.json [chat]=bench/gateway/request.json [messages]=bench/gateway/messages-request.json [responses]=bench/gateway/responses-request.json)
declare -A EXPECT=([direct]="'days': '3',}" [chat]='\"days\":3}' [messages]='"days":3}' [responses]='\"days\":3}')
: > "$WORK/runs.jsonl"
for rep in $(seq 1 "$REPS"); do
  for c in 1 16; do
    n=$N1; [[ $c -eq 16 ]] && n=$N16
    order=(direct chat messages responses); ((rep % 2 == 0)) && order=(responses messages chat direct)
    for t in "${order[@]}"; do
      before=$(cpu_ns "$GW_PID")
      "$LOADGEN" --url "${URL[$t]}" --body "${BODY[$t]}" --concurrency "$c" --requests "$n" \
        --expect "${EXPECT[$t]}" --out "$WORK/run-$t-$c-$rep.json" > /dev/null 2>> "$WORK/loadgen.log"
      after=$(cpu_ns "$GW_PID")
      python3 - "$WORK/run-$t-$c-$rep.json" "$t" "$c" "$rep" "$((after - before))" >> "$WORK/runs.jsonl" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(json.dumps({"target": sys.argv[2], "c": int(sys.argv[3]), "rep": int(sys.argv[4]),
    "p50": r["p50_us"], "p99": r["p99_us"], "ok": r["ok"], "errors": r["errors"],
    "mismatches": r["mismatches"], "cpu_ns": int(sys.argv[5])}))
PY
      log "rep $rep c$c $t done"
    done
  done
done

python3 - "$WORK/runs.jsonl" <<'PY' | tee "$ROOT/bench/results/fronts.md"
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
def med(xs): return statistics.median(xs)
print("| front | c | added p50 (µs) | added p99 (µs) | gateway CPU / request (µs) | errors, mismatches |")
print("| --- | --- | --- | --- | --- | --- |")
bars = {}
for c in (1, 16):
    direct = {r["rep"]: r for r in runs if r["target"] == "direct" and r["c"] == c}
    for t in ("chat", "messages", "responses"):
        rs = [r for r in runs if r["target"] == t and r["c"] == c]
        a50 = med([r["p50"] - direct[r["rep"]]["p50"] for r in rs])
        a99 = med([r["p99"] - direct[r["rep"]]["p99"] for r in rs])
        cpu = med([r["cpu_ns"] / 1000 / max(r["ok"], 1) for r in rs])
        bad = sum(r["errors"] + r["mismatches"] for r in rs)
        bars[(t, c)] = a50
        print(f"| {t} | {c} | {a50:.0f} | {a99:.0f} | {cpu:.0f} | {bad} |")
print()
for front in ("messages", "responses"):
    for c in (1, 16):
        ratio = bars[(front, c)] / max(bars[("chat", c)], 1e-9)
        verdict = "met" if ratio <= 1.2 else "MISSED"
        print(f"{front} / chat added p50 at c{c}: {ratio:.2f}x (bar 1.2x: {verdict})")
PY
