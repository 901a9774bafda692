#!/usr/bin/env bash
# The latency the flood guard adds to `toolmend serve`: the gateway with no guard (off),
# with the guard on the in-memory store (memory) and on Redis (redis), against calling
# the scripted upstream directly (direct), all four in the same run, interleaved: for each
# repetition and concurrency they run back to back, in an order that rotates. Everything
# on 127.0.0.1, bounded in requests and in time (about 3 minutes; --quick about 1).
#
# Usage: bench/gateway/guard.sh [--quick] [--reps N]
#
#   --quick    fewer requests and one repetition (rough numbers)
#   --reps N   repetitions (default 3; the table gives the medians)
#
# How: one redis-server (Debian's, on PATH: --save "" --appendonly no, a free port),
# four scripted providers (`toolmend scripted-provider`, a fresh script each, long enough
# for the whole run) and three gateways, each in front of its own provider and configured
# only through environment variables (any TOOLMEND_* of the caller is dropped):
#   off     no guard keys
#   memory  TOOLMEND_GUARD__TOOLS__GET_WEATHER__GLOBAL__LIMIT=100000 and
#           ..._WINDOW_SECS=0.5 (the store on every request, a refusal only past 200,000
#           calls/s), TOOLMEND_GUARD__REPEAT__BLOCK=3 (the history rules run too),
#           TOOLMEND_GUARD__ON_FLOOD=reject (a refusal would be a 429)
#   redis   the same plus TOOLMEND_GUARD__STORE=redis, TOOLMEND_GUARD__REDIS_URL,
#           TOOLMEND_GUARD__TIMEOUT_MS=1000, TOOLMEND_GUARD__FAIL=closed (a decision
#           Redis did not make is a 429)
# Before measuring, one header-less request to each gateway: `x-toolmend-guard` must be
# absent for off and carry refused=0 for memory and redis. The load generator
# (crates/toolmend-gateway/examples/loadgen.rs, closed loop, the fixed body
# bench/gateway/request.json) runs at concurrency 1, 16 and 64; every measured response
# is checked (--expect), the 429s counted, the first response's `x-toolmend-guard` kept.
# Added latency = the target's percentile minus direct's in the same repetition (and
# memory / redis minus off); the table gives the medians over the repetitions, with the
# CPU time per request of the process in the path (/proc/PID/task/*/schedstat). The guard
# decision itself: the gateway's `toolmend_guard_seconds` histogram (/metrics, per store)
# and, for Redis, INFO commandstats (calls per request, server time per call) and the
# redis-server's CPU per request.
#
# Environment: N1 / N16 / N64 (measured requests per run), MAX_SECONDS (per run),
# CONCURRENCIES (default "1 16 64"), PYTHON, REDIS_SERVER (default redis-server),
# REDIS_CLI (default redis-cli). RUST_LOG and TOKIO_WORKER_THREADS, when set, reach the
# gateways (default: info logs, one JSON line per request, to a file).
# Output: the tables on stdout and bench/results/guard.md; every run in
# bench/results/guard-run/runs.jsonl, logs beside it.
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

QUICK=0
REPS=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --reps) REPS="${2:?--reps needs a number}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "guard.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}"
export no_proxy="127.0.0.1,localhost${no_proxy:+,$no_proxy}"
# The gateways are configured here and only here.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^TOOLMEND_' || true)
PYTHON="${PYTHON:-python3}"
REDIS_SERVER="${REDIS_SERVER:-redis-server}"
REDIS_CLI="${REDIS_CLI:-redis-cli}"

if [[ $QUICK -eq 1 ]]; then
  REPS="${REPS:-1}"
  N1="${N1:-1000}" N16="${N16:-3000}" N64="${N64:-3000}"
  MAX_SECONDS="${MAX_SECONDS:-10}"
  MODE="quick"
else
  REPS="${REPS:-3}"
  N1="${N1:-3000}" N16="${N16:-10000}" N64="${N64:-10000}"
  MAX_SECONDS="${MAX_SECONDS:-20}"
  MODE="full"
fi
read -r -a CONCURRENCIES <<< "${CONCURRENCIES:-1 16 64}"
TARGETS=(direct off memory redis)

RESULTS="$ROOT/bench/results"
WORK="$RESULTS/guard-run"
rm -rf "$WORK"
mkdir -p "$WORK/runs" "$WORK/first"
log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

command -v "$REDIS_SERVER" > /dev/null || { log "$REDIS_SERVER not found (apt-get install redis-server)"; exit 1; }
command -v "$REDIS_CLI" > /dev/null || { log "$REDIS_CLI not found (apt-get install redis-tools)"; exit 1; }

# --- build ------------------------------------------------------------------------------
log "building toolmend and the load generator (release)"
cargo build --release --locked -p toolmend-cli >&2
cargo build --release --locked -p toolmend-gateway --example loadgen >&2
TOOLMEND="$ROOT/target/release/toolmend"
LOADGEN="$ROOT/target/release/examples/loadgen"

# --- processes --------------------------------------------------------------------------
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_for FILE REGEX PID SECONDS: prints the first match of REGEX in FILE.
wait_for() {
  local file=$1 re=$2 pid=$3 secs=$4 i
  for ((i = 0; i < secs * 20; i++)); do
    if grep -Eo "$re" "$file" 2>/dev/null | head -n1 | grep .; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      log "process $pid exited early; its log ($file):"; tail -n 30 "$file" >&2; return 1
    fi
    sleep 0.05
  done
  log "timed out waiting for /$re/ in $file"; tail -n 30 "$file" >&2
  return 1
}

# cpu_ns PID...: CPU time (ns) of the processes' threads so far.
cpu_ns() {
  local total=0 pid f a _
  for pid in "$@"; do
    for f in /proc/"$pid"/task/*/schedstat; do
      [[ -r $f ]] && read -r a _ < "$f" && total=$((total + a))
    done
  done
  echo "$total"
}

free_port() {
  "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The upstream's answer: one get_weather call whose arguments need repair and coercion.
BROKEN="{'city': 'Paris', 'days': '3',}"
STEP='{"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"'"$BROKEN"'"}}]}'
BODY="$ROOT/bench/gateway/request.json"

warm() { # the loadgen's default warm-up: min(1000, n/10), at least 2 per worker
  local n=$1 c=$2 w=$(($1 / 10))
  if ((w > 1000)); then w=1000; fi
  if ((w < 2 * c)); then w=$((2 * c)); fi
  echo "$w"
}
n_for() { case $1 in 1) echo "$N1" ;; 16) echo "$N16" ;; *) echo "$N64" ;; esac; }
STEPS=0 # steps one target needs: every run's warm-up and requests, the checks, margin
for c in "${CONCURRENCIES[@]}"; do
  n=$(n_for "$c")
  STEPS=$((STEPS + n + $(warm "$n" "$c")))
done
STEPS=$(((STEPS * REPS + 1) * 11 / 10 + 200))

start_provider() { # start_provider NAME -> sets PROVIDER_URL, PROVIDER_PID
  local name=$1 script="$WORK/script-$1.jsonl"
  "$PYTHON" -c 'import sys; sys.stdout.write((sys.argv[1] + "\n") * int(sys.argv[2]))' \
    "$STEP" "$STEPS" > "$script"
  "$TOOLMEND" scripted-provider "$script" --port 0 > "$WORK/provider-$name.log" 2>&1 &
  PROVIDER_PID=$!
  PIDS+=("$PROVIDER_PID")
  PROVIDER_URL=$(wait_for "$WORK/provider-$name.log" 'http://127\.0\.0\.1:[0-9]+/v1' "$PROVIDER_PID" 120)
  rm -f "$script" # read whole at start
  log "provider ($name): $PROVIDER_URL, $STEPS steps, pid $PROVIDER_PID"
}

# Redis, no persistence.
REDIS_PORT=$(free_port)
"$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
  > "$WORK/redis.log" 2>&1 &
REDIS_PID=$!
PIDS+=("$REDIS_PID")
rcli() { "$REDIS_CLI" -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }
for ((i = 0; i < 100; i++)); do
  if [[ $(rcli ping 2>/dev/null) == PONG ]]; then break; fi
  kill -0 "$REDIS_PID" 2>/dev/null || { log "redis-server exited:"; tail -n 20 "$WORK/redis.log" >&2; exit 1; }
  sleep 0.05
done
[[ $(rcli ping 2>/dev/null) == PONG ]] || { log "redis-server did not answer"; exit 1; }
REDIS_VERSION=$(rcli info server | tr -d '\r' | awk -F: '$1 == "redis_version" { print $2 }')
log "redis-server $REDIS_VERSION: 127.0.0.1:$REDIS_PORT, pid $REDIS_PID"

declare -A URL PID_OF
for t in "${TARGETS[@]}"; do
  start_provider "$t"
  URL[$t]=$PROVIDER_URL
  PID_OF[$t]=$PROVIDER_PID
done
P_DIRECT_PID=${PID_OF[direct]}

GUARD_MEMORY=(
  TOOLMEND_GUARD__TOOLS__GET_WEATHER__GLOBAL__LIMIT=100000
  TOOLMEND_GUARD__TOOLS__GET_WEATHER__GLOBAL__WINDOW_SECS=0.5
  TOOLMEND_GUARD__REPEAT__BLOCK=3
  TOOLMEND_GUARD__ON_FLOOD=reject
)
GUARD_REDIS=(
  "${GUARD_MEMORY[@]}"
  TOOLMEND_GUARD__STORE=redis
  "TOOLMEND_GUARD__REDIS_URL=redis://127.0.0.1:$REDIS_PORT/"
  TOOLMEND_GUARD__TIMEOUT_MS=1000
  TOOLMEND_GUARD__FAIL=closed
)
declare -A GW_PID METRICS
for t in off memory redis; do
  envs=()
  case $t in
    memory) envs=("${GUARD_MEMORY[@]}") ;;
    redis) envs=("${GUARD_REDIS[@]}") ;;
  esac
  printf '%s\n' "${envs[@]}" > "$WORK/gateway-$t.env"
  env "${envs[@]}" "$TOOLMEND" serve --listen 127.0.0.1:0 --upstream "${URL[$t]}" \
    > "$WORK/gateway-$t.out" 2> "$WORK/gateway-$t.log" &
  GW_PID[$t]=$!
  PIDS+=("${GW_PID[$t]}")
  base=$(wait_for "$WORK/gateway-$t.out" 'http://127\.0\.0\.1:[0-9]+/v1' "${GW_PID[$t]}" 60)
  URL[$t]=$base
  METRICS[$t]="${base%/v1}/metrics"
  log "gateway ($t): $base, pid ${GW_PID[$t]}${envs[*]:+, ${envs[*]}}"
done
# The Redis store connects in the background: wait for it (its info line), so that no
# request meets a store still connecting (fail = closed would refuse it).
if ! wait_for "$WORK/gateway-redis.log" 'guard store connected' "${GW_PID[redis]}" 10 > /dev/null; then
  log "no 'guard store connected' line (RUST_LOG below info?): going on"
fi
for t in "${TARGETS[@]}"; do URL[$t]="${URL[$t]}/chat/completions"; done

# --- check: one header-less request each ------------------------------------------------
check() { # check TARGET: status and x-toolmend-guard of one plain request
  local t=$1 hdr="$WORK/first/check-$t.headers" status guard
  status=$(curl -s -o "$WORK/first/check-$t.body" -D "$hdr" -w '%{http_code}' \
    -H 'content-type: application/json' --data-binary "@$BODY" "${URL[$t]}")
  guard=$(tr -d '\r' < "$hdr" | awk 'tolower($1) == "x-toolmend-guard:" { $1 = ""; sub(/^ /, ""); print }')
  case $t in
    direct|off)
      if [[ $status != 200 || -n $guard ]]; then
        log "check $t: HTTP $status, x-toolmend-guard '${guard}' (want 200 and no header)"; return 1
      fi ;;
    *)
      if [[ $status != 200 || $guard != *refused=0* ]]; then
        log "check $t: HTTP $status, x-toolmend-guard '${guard}' (want 200 and refused=0)"; return 1
      fi ;;
  esac
  log "check $t: HTTP $status, x-toolmend-guard: ${guard:-(absent)}"
}
for t in "${TARGETS[@]}"; do check "$t"; done
for t in off memory redis; do # mended by every gateway; direct as the upstream sent it
  grep -qF '\"days\":3}' "$WORK/first/check-$t.body" || { log "check $t: arguments not mended"; exit 1; }
done
grep -qF "'days': '3',}" "$WORK/first/check-direct.body" || { log "check direct: not the upstream's arguments"; exit 1; }

# --- measure ----------------------------------------------------------------------------
RUNS="$WORK/runs.jsonl"
: > "$RUNS"
declare -A EXPECT=([direct]="'days': '3',}" [off]='\"days\":3}' [memory]='\"days\":3}' [redis]='\"days\":3}')
run_one() { # run_one REP TARGET CONCURRENCY N
  local rep=$1 t=$2 c=$3 n=$4 w tag="$1-$2-c$3" pid r0=0 r1=0
  local out="$WORK/runs/$tag.json" m0="$WORK/runs/$tag.metrics0" m1="$WORK/runs/$tag.metrics1"
  local stats="$WORK/runs/$tag.redis"
  w=$(warm "$n" "$c")
  if [[ $t == direct ]]; then pid=$P_DIRECT_PID; else pid=${GW_PID[$t]}; fi
  : > "$m0"; : > "$m1"; : > "$stats"
  if [[ $t != direct ]]; then curl -s "${METRICS[$t]}" > "$m0" || true; fi
  if [[ $t == redis ]]; then rcli config resetstat > /dev/null; r0=$(cpu_ns "$REDIS_PID"); fi
  "$LOADGEN" --url "${URL[$t]}" --body "$BODY" --concurrency "$c" --requests "$n" \
    --warmup "$w" --max-seconds "$MAX_SECONDS" --expect "${EXPECT[$t]}" --label "$t" \
    --sample-pid "$pid" --save-first "$WORK/first/$tag.json" > "$out"
  if [[ $t == redis ]]; then r1=$(cpu_ns "$REDIS_PID"); rcli info commandstats | tr -d '\r' > "$stats"; fi
  if [[ $t != direct ]]; then curl -s "${METRICS[$t]}" > "$m1" || true; fi
  "$PYTHON" - "$out" "$rep" "$t" "$WORK/first/$tag.json" "$m0" "$m1" "$stats" \
    "$((r1 - r0))" >> "$RUNS" <<'EOF'
import json, re, sys
out, rep, target, first, m0, m1, stats, redis_cpu_ns = sys.argv[1:]
r = json.load(open(out))
r["rep"], r["target"] = int(rep), target
try:
    saved = json.load(open(first))
    r["guard_header"] = saved["headers"].get("x-toolmend-guard")
except (OSError, ValueError):
    r["guard_header"] = None
def hist(path):  # toolmend_guard_seconds: {le: count}, sum, count (all stores)
    b, s, n = {}, 0.0, 0
    for line in open(path):
        m = re.match(r'toolmend_guard_seconds_(bucket|sum|count)\{([^}]*)\} (\S+)', line)
        if not m:
            continue
        kind, labels, v = m.group(1), m.group(2), float(m.group(3))
        if kind == "bucket":
            le = re.search(r'le="([^"]+)"', labels).group(1)
            b[le] = b.get(le, 0) + v
        elif kind == "sum":
            s += v
        else:
            n += int(v)
    return b, s, n
if target != "direct":
    b0, s0, n0 = hist(m0)
    b1, s1, n1 = hist(m1)
    r["guard_hist"] = {"buckets": {k: v - b0.get(k, 0) for k, v in b1.items()},
                       "sum_s": s1 - s0, "count": n1 - n0}
if target == "redis":
    calls = {}
    for line in open(stats):
        m = re.match(r"cmdstat_([^:]+):calls=(\d+),usec=(\d+)", line)
        # Not the bench's own INFO / CONFIG RESETSTAT.
        if m and m.group(1) != "info" and not m.group(1).startswith("config"):
            calls[m.group(1)] = {"calls": int(m.group(2)), "usec": int(m.group(3))}
    r["redis"] = {"commands": calls, "cpu_ns": int(redis_cpu_ns),
                  "requests_incl_warmup": r["requests"] + r["warmup"]}
print(json.dumps(r))
EOF
  "$PYTHON" - "$out" <<'EOF' >&2
import json, sys
r = json.load(open(sys.argv[1]))
note = f" ERRORS {r['errors']}: {r['first_error']}" if r["errors"] else ""
note += f" MISMATCHES {r['mismatches']}" if r["mismatches"] else ""
note += " (cut by --max-seconds)" if r["truncated_by_time"] else ""
cpu = (r.get("memory") or {}).get("cpu_us_per_request")
print(f"    {r['label']:7} c{r['concurrency']:<3} n={r['ok']:<6} p50 {r['p50_us']:8.1f} µs"
      f"  p99 {r['p99_us']:8.1f} µs  {r['throughput_rps']:7.0f} req/s  cpu {cpu} µs/req{note}")
EOF
}

START=$(date +%s)
for ((rep = 1; rep <= REPS; rep++)); do
  for ci in "${!CONCURRENCIES[@]}"; do
    c=${CONCURRENCIES[$ci]}
    n=$(n_for "$c")
    # Rotate the order: each target takes each place in turn over the repetitions.
    k=$(((rep - 1 + ci) % ${#TARGETS[@]}))
    order=("${TARGETS[@]:k}" "${TARGETS[@]:0:k}")
    log "rep $rep/$REPS, concurrency $c: ${order[*]}"
    for t in "${order[@]}"; do run_one "$rep" "$t" "$c" "$n"; done
  done
done
ELAPSED=$(($(date +%s) - START))
log "measured in $ELAPSED s"

# A loopback round trip to this redis-server, for scale (PING, one client).
PING_RTT=$(redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -c 1 -n 20000 -t ping_mbulk --csv 2>/dev/null \
  | tr -d '"\r' | awk -F, '$1 == "PING_MBULK" { print $3 * 1000 }' || true)
PING_P50=$(redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -c 1 -n 20000 -t ping_mbulk --csv 2>/dev/null \
  | tr -d '"\r' | awk -F, '$1 == "PING_MBULK" { print $5 * 1000 }' || true)

GW_ERRORS=$(cat "$WORK"/gateway-*.log | grep -c '"level":"ERROR"' || true)
"$PYTHON" - "$RUNS" "$RESULTS/guard.md" <<EOF
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
meta = {
    "date": "$(date -u +%Y-%m-%dT%H:%MZ)", "mode": "$MODE", "reps": $REPS, "cores": $(nproc),
    "cpu": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')",
    "toolmend": "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo '+dirty')",
    "redis": "$REDIS_VERSION", "requests": {"1": $N1, "16": $N16, "64": $N64},
    "elapsed_s": $ELAPSED, "ping_mean_us": "${PING_RTT}", "ping_p50_us": "${PING_P50}",
    "gateway_error_log_lines": ${GW_ERRORS:-0},
    "command": "bench/gateway/guard.sh$([[ $QUICK -eq 1 ]] && echo ' --quick')",
}
TARGETS = ["direct", "off", "memory", "redis"]
med = lambda xs: statistics.median(xs) if xs else float("nan")
def get(c, t, rep):
    return next((r for r in runs if r["concurrency"] == c and r["target"] == t and r["rep"] == rep), None)
concs = sorted({r["concurrency"] for r in runs})
reps = sorted({r["rep"] for r in runs})
out = [f"# Guard latency: off / memory / Redis ({meta['date']}, {meta['mode']}, "
       f"{meta['reps']} rep(s), {meta['cores']} cores, toolmend {meta['toolmend']}, redis {meta['redis']})",
       "",
       "Medians over repetitions; added = the target's percentile minus direct's (or off's) "
       "in the same repetition. CPU: the process in the path (the provider for direct, "
       "the gateway otherwise), µs per request.",
       "",
       "| c | target | p50 µs | p99 µs | added p50 µs | added p99 µs | vs off p50 µs | vs off p99 µs | CPU µs/req | vs off CPU µs/req | req/s |",
       "|---|---|---|---|---|---|---|---|---|---|---|"]
f = lambda x: "" if x is None or x != x else f"{x:.0f}"
for c in concs:
    for t in TARGETS:
        rs = [get(c, t, rep) for rep in reps]
        rs = [r for r in rs if r]
        if not rs:
            continue
        def added(base, key):
            xs = [get(c, t, rep)[key] - get(c, base, rep)[key] for rep in reps
                  if get(c, t, rep) and get(c, base, rep)]
            return med(xs)
        cpu = lambda r: (r.get("memory") or {}).get("cpu_us_per_request")
        cpus = [cpu(r) for r in rs if cpu(r) is not None]
        vs_off_cpu = med([cpu(get(c, t, rep)) - cpu(get(c, "off", rep)) for rep in reps
                          if get(c, t, rep) and get(c, "off", rep)])
        row = [str(c), t, f(med([r["p50_us"] for r in rs])), f(med([r["p99_us"] for r in rs]))]
        row += ["", ""] if t == "direct" else [f(added("direct", "p50_us")), f(added("direct", "p99_us"))]
        row += ["", ""] if t in ("direct", "off") else [f(added("off", "p50_us")), f(added("off", "p99_us"))]
        row += [f(med(cpus)), "" if t in ("direct", "off") else f"{vs_off_cpu:+.0f}",
                f(med([r["throughput_rps"] for r in rs]))]
        out.append("| " + " | ".join(row) + " |")

# The decision itself.
def pctl(buckets, q):  # from cumulative Prometheus buckets, linear inside a bucket
    items = sorted(((float("inf") if k == "+Inf" else float(k), v) for k, v in buckets.items()))
    total = items[-1][1] if items else 0
    if not total:
        return float("nan")
    want, lo, prev = q * total, 0.0, 0.0
    for le, v in items:
        if v >= want:
            if le == float("inf"):
                return lo * 1e6
            return (lo + (le - lo) * (want - prev) / max(v - prev, 1e-9)) * 1e6
        lo, prev = le, v
    return float("nan")
def frac_le(buckets, le):
    total = buckets.get("+Inf", 0)
    return buckets.get(le, 0) / total * 100 if total else float("nan")
out += ["", "The guard decision (the gateway's toolmend_guard_seconds histogram, warm-up included; "
        "p50/p99 interpolated inside its buckets: 25, 50, 100, 250 µs …; wall time of the awaited "
        "check, so under a saturated runtime it includes waiting to be polled). Redis: INFO "
        "commandstats over the same run (EVALSHA = the client's round trips; the commands its "
        "script runs; the server's time per EVALSHA); redis-server CPU per request.", "",
        "| c | store | decisions / request | p50 µs | p99 µs | mean µs | ≤ 100 µs | EVALSHA / request | commands in the script / call | EVALSHA server µs / call | redis-server CPU µs/req |",
        "|---|---|---|---|---|---|---|---|---|---|---|"]
TOP = ("eval", "evalsha", "eval_ro", "evalsha_ro")  # the client's round trips
SETUP = ("hello", "ping", "select", "auth", "client", "script")  # once per connection
def trips(r):
    return sum(v["calls"] for k, v in r["redis"]["commands"].items() if k in TOP)
def inner(r):
    return sum(v["calls"] for k, v in r["redis"]["commands"].items()
               if k not in TOP and not k.split("|")[0] in SETUP)
def script_usec(r):
    return sum(v["usec"] for k, v in r["redis"]["commands"].items() if k in TOP) / max(trips(r), 1)
for c in concs:
    for t in ("memory", "redis"):
        rs = [r for r in runs if r["concurrency"] == c and r["target"] == t and r.get("guard_hist")]
        if not rs:
            continue
        h = [r["guard_hist"] for r in rs]
        per_req = med([x["count"] / max(r["requests"] + r["warmup"], 1) for x, r in zip(h, rs)])
        row = [str(c), t, f"{per_req:.2f}", f(med([pctl(x["buckets"], 0.5) for x in h])),
               f(med([pctl(x["buckets"], 0.99) for x in h])),
               f(med([x["sum_s"] / x["count"] * 1e6 for x in h if x["count"]])),
               f"{med([frac_le(x['buckets'], '0.0001') for x in h]):.1f}%"]
        if t == "redis":
            calls = med([trips(r) / r["redis"]["requests_incl_warmup"] for r in rs])
            per = med([inner(r) / max(trips(r), 1) for r in rs])
            usec = med([script_usec(r) for r in rs])
            cpu = med([r["redis"]["cpu_ns"] / 1000 / r["redis"]["requests_incl_warmup"] for r in rs])
            row += [f"{calls:.2f}", f"{per:.1f}", f"{usec:.1f}", f"{cpu:.0f}"]
        else:
            row += ["", "", "", ""]
        out.append("| " + " | ".join(row) + " |")

# Checks.
bad = [r for r in runs if r["errors"] or r["mismatches"] or r.get("warmup_errors")]
n429 = {t: sum(int(r["statuses"].get("429", 0)) for r in runs if r["target"] == t) for t in TARGETS}
hdr_bad = [r for r in runs if r["target"] in ("memory", "redis")
           and "refused=0" not in (r.get("guard_header") or "")]
hdr_off = [r for r in runs if r["target"] in ("direct", "off") and r.get("guard_header")]
cut = [r for r in runs if r["truncated_by_time"]]
out += [""]
out.append(f"Checks: 429s (measured) off {n429['off']}, memory {n429['memory']}, redis {n429['redis']}; "
           f"runs with errors/mismatches {len(bad)}; first response of each memory/redis run with "
           f"x-toolmend-guard refused=0: {sum(1 for r in runs if r['target'] in ('memory', 'redis')) - len(hdr_bad)}"
           f"/{sum(1 for r in runs if r['target'] in ('memory', 'redis'))}; off/direct with the header: "
           f"{len(hdr_off)}; runs cut by --max-seconds: {len(cut)}; gateway ERROR log lines: "
           f"{meta['gateway_error_log_lines']}.")
ex = next((r["guard_header"] for r in runs if r["target"] == "redis" and r.get("guard_header")), None)
if ex:
    out.append(f"x-toolmend-guard (redis): \`{ex}\`")
for r in bad:
    out.append(f"- {r['target']} c{r['concurrency']} rep {r['rep']}: errors {r['errors']}, "
               f"mismatches {r['mismatches']}, warm-up errors {r.get('warmup_errors')}: {r['first_error']}")
if meta["ping_p50_us"]:
    out.append(f"Loopback PING to this redis-server (redis-benchmark, 1 client): p50 "
               f"{float(meta['ping_p50_us']):.0f} µs, mean {float(meta['ping_mean_us']):.0f} µs.")
# The bar: the Redis decision one round trip, p50 <= 100 µs on loopback (at c1).
c1 = [r for r in runs if r["concurrency"] == min(concs) and r["target"] == "redis" and r.get("guard_hist")]
if c1:
    p50 = med([pctl(r["guard_hist"]["buckets"], 0.5) for r in c1])
    calls = med([trips(r) / r["redis"]["requests_incl_warmup"] for r in c1])
    one = abs(calls - 1) < 0.01
    out.append(f"Bar (c{min(concs)}): the Redis decision one round trip per request: "
               f"{calls:.2f} EVALSHA per request, {'met' if one else 'NOT met'}; its p50 ≤ 100 µs: "
               f"{p50:.0f} µs, {'met' if p50 <= 100 else 'NOT met'} (of which EVALSHA on the server "
               f"{med([script_usec(r) for r in c1]):.0f} µs).")
out.append(f"Requests per run: c1 {meta['requests']['1']}, c16 {meta['requests']['16']}, "
           f"c64 {meta['requests']['64']} (+ warm-up); measured in {meta['elapsed_s']} s; "
           f"CPU: {meta['cpu']}. Command: \`{meta['command']}\`.")
text = "\n".join(out)
print(text)
open(sys.argv[2], "w").write(text + "\n")
EOF
