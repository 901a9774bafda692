#!/usr/bin/env bash
# Old against new, in one run: two `toolmend` binaries as gateways, each in front of a
# scripted provider of its own, measured in turn (old, new, old, new, …) with the same
# load generator, body and concurrency. Per run: the gateway's own CPU per request (all
# its threads, from /proc, over the measured phase), p50 and p99 latency, throughput.
# At the end the medians, and new/old pair by pair (a drift of the machine's speed hits
# both of a pair alike). Everything on 127.0.0.1, bounded in requests and time.
#
# Usage: bench/gateway/vs.sh OLD_BINARY NEW_BINARY [--reps N] [--requests N] [--concurrency N]
#
#   OLD_BINARY, NEW_BINARY   two `toolmend` builds (e.g. one built from a worktree of the
#                            old commit: git worktree add /tmp/old COMMIT; cd /tmp/old;
#                            cargo build --release -p toolmend-cli)
#   --reps N                 pairs (default 5)
#   --requests N             measured requests per run (default 5000)
#   --concurrency N          workers (default 16)
#
# The body is bench/gateway/request.json (tools declared: mending on) and every answer a
# tool call whose arguments need repair and coercion, as in run.sh. Both gateways run on
# their embedded defaults with info logs (a line per request) written to a file.
# Output: one line per run, then the summary; the JSON of every run in
# bench/results/vs-run/ (not committed).
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
[[ $# -ge 2 ]] || { usage >&2; exit 2; }
OLD=$(realpath "$1") NEW=$(realpath "$2")
shift 2
REPS=5 N=5000 C=16
while [[ $# -gt 0 ]]; do
  case "$1" in
    --reps) REPS=${2:?}; shift ;;
    --requests) N=${2:?}; shift ;;
    --concurrency) C=${2:?}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "vs.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
export NO_PROXY="127.0.0.1,localhost" no_proxy="127.0.0.1,localhost"
PYTHON=${PYTHON:-python3}
cargo build --release --locked -q -p toolmend-gateway --example loadgen >&2
LOADGEN="$ROOT/target/release/examples/loadgen"
WORK="$ROOT/bench/results/vs-run"
mkdir -p "$WORK"
BODY="$ROOT/bench/gateway/request.json"

PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

wait_for() { # FILE REGEX PID: the first match of REGEX in FILE (60 s at most)
  local i
  for ((i = 0; i < 1200; i++)); do
    if grep -Eo "$2" "$1" 2>/dev/null | head -n1 | grep .; then return 0; fi
    kill -0 "$3" 2>/dev/null || { tail -n 20 "$1" >&2; return 1; }
    sleep 0.05
  done
  tail -n 20 "$1" >&2
  return 1
}

BROKEN="{'city': 'Paris', 'days': '3',}"
STEP='{"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"'"$BROKEN"'"}}]}'
WARM=$((N / 10 > 2 * C ? N / 10 : 2 * C))
STEPS=$(((N + WARM) * REPS + 100))

start() { # start NAME BINARY -> sets URL and PID of the gateway
  local name=$1 bin=$2 script="$WORK/script-$1.jsonl" ppid purl
  "$PYTHON" -c 'import sys; sys.stdout.write((sys.argv[1] + "\n") * int(sys.argv[2]))' \
    "$STEP" "$STEPS" > "$script"
  "$NEW" scripted-provider "$script" --port 0 > "$WORK/provider-$name.log" 2>&1 &
  ppid=$!
  PIDS+=("$ppid")
  purl=$(wait_for "$WORK/provider-$name.log" 'http://127\.0\.0\.1:[0-9]+/v1' "$ppid")
  env -u RUST_LOG "$bin" serve --listen 127.0.0.1:0 --upstream "$purl" \
    > "$WORK/gateway-$name.out" 2> "$WORK/gateway-$name.log" &
  PID=$!
  PIDS+=("$PID")
  URL=$(wait_for "$WORK/gateway-$name.out" 'http://127\.0\.0\.1:[0-9]+/v1' "$PID")
  rm -f "$script"
}
start old "$OLD"; OLD_URL=$URL OLD_PID=$PID
start new "$NEW"; NEW_URL=$URL NEW_PID=$PID
echo "old: $OLD (pid $OLD_PID)  new: $NEW (pid $NEW_PID)  c$C, $N requests, $REPS pairs" >&2

run() { # run NAME URL PID REP
  "$LOADGEN" --url "$2/chat/completions" --body "$BODY" --concurrency "$C" \
    --requests "$N" --warmup "$WARM" --sample-pid "$3" --expect '\"days\":3' \
    --label "$1" --out "$WORK/$1-$4.json" > /dev/null
  "$PYTHON" - "$WORK/$1-$4.json" "$1" "$4" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
cpu = (r.get("memory") or {}).get("cpu_us_per_request")
print(f"{sys.argv[2]:>3} rep {sys.argv[3]}: cpu/req {cpu} µs, p50 {r['p50_us']} µs, p99 {r['p99_us']} µs, "
      f"{r['throughput_rps']:.0f} req/s, errors {r.get('errors', 0)}, mismatches {r.get('mismatches', 0)}")
EOF
}
for ((rep = 1; rep <= REPS; rep++)); do
  if ((rep % 2)); then run old "$OLD_URL" "$OLD_PID" "$rep"; run new "$NEW_URL" "$NEW_PID" "$rep"
  else run new "$NEW_URL" "$NEW_PID" "$rep"; run old "$OLD_URL" "$OLD_PID" "$rep"; fi
done

"$PYTHON" - "$WORK" "$REPS" <<'EOF'
import json, statistics, sys
work, reps = sys.argv[1], int(sys.argv[2])
def load(name, rep):
    return json.load(open(f"{work}/{name}-{rep}.json"))
def cpu(r):
    return (r.get("memory") or {}).get("cpu_us_per_request")
rows = []
for key, get in [("cpu µs/request", cpu), ("p50 µs", lambda r: r["p50_us"]),
                 ("p99 µs", lambda r: r["p99_us"]), ("req/s", lambda r: r["throughput_rps"])]:
    old = [get(load("old", i)) for i in range(1, reps + 1)]
    new = [get(load("new", i)) for i in range(1, reps + 1)]
    ratios = [n / o for o, n in zip(old, new) if o]
    rows.append((key, statistics.median(old), statistics.median(new), statistics.median(ratios),
                 min(ratios), max(ratios)))
print(f"\n{'median of ' + str(reps) + ' pairs':<18}{'old':>10}{'new':>10}{'new/old':>9}  (min-max)")
for key, o, n, r, lo, hi in rows:
    print(f"{key:<18}{o:>10.1f}{n:>10.1f}{r:>9.3f}  ({lo:.3f}-{hi:.3f})")
EOF
