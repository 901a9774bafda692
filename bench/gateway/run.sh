#!/usr/bin/env bash
# The latency `toolmend serve` adds, against calling the scripted upstream directly, and
# the same for LiteLLM's proxy on the same upstream: p50 and p99 at concurrency 1, 16
# and 64, mending on (each request carries `tools`; each upstream answer is a tool call
# whose arguments must be repaired and coerced to that schema), plus the gateway's
# resident memory under the c16 load. Everything on 127.0.0.1, bounded in requests and
# in time (about 4 minutes; --quick about 1).
#
# Usage: bench/gateway/run.sh [--quick] [--reps N] [--no-litellm]
#
#   --quick       fewer requests and one repetition (rough numbers)
#   --reps N      repetitions (default 3; the table gives the medians)
#   --no-litellm  skip LiteLLM (no venv needed; no ratio)
#
# How: three scripted providers (`toolmend scripted-provider`, one per target, each with
# a fresh script long enough for its whole run), the gateway in front of one, LiteLLM's
# proxy (litellm[proxy] from PyPI, its own venv) in front of another. The load generator
# is crates/toolmend-gateway/examples/loadgen.rs (closed loop, one fixed body,
# bench/gateway/request.json). For each repetition and concurrency the three targets
# run back to back (direct and toolmend in alternating order); added latency = the
# target's percentile minus direct's in the same repetition. Before measuring, one
# response of each target is checked (bench/gateway/verify.py): direct and LiteLLM
# return the broken arguments, toolmend the mended ones; every measured response is
# checked for them too (mismatches in the table's notes).
#
# Environment: LITELLM_VERSION (default below), LITELLM_VENV (default
# bench/.venv-litellm), LITELLM_WORKERS (uvicorn workers, default: the cores), PYTHON (the
# interpreter for the venv, default python3), N1 / N16 / N64 and L1 / L16 / L64
# (measured requests per run for direct+toolmend and for LiteLLM), MAX_SECONDS (per run).
# RUST_LOG and TOKIO_WORKER_THREADS, when set, reach the gateway (default: info logs,
# one JSON line per request, to a file; one worker thread per core).
# Output: the table on stdout and bench/results/gateway.md; everything (meta, summary,
# bars, every run) in bench/results/gateway.json; logs in bench/results/gateway-run/.
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

QUICK=0
REPS=""
LITELLM=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --reps) REPS="${2:?--reps needs a number}"; shift ;;
    --no-litellm) LITELLM=0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
export PYO3_BUILD_EXTENSION_MODULE=1
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# The measured traffic stays on 127.0.0.1: never through an HTTP proxy (LiteLLM's client
# reads these; the load generator and the gateway use none). pip still may.
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}"
export no_proxy="127.0.0.1,localhost${no_proxy:+,$no_proxy}"

# 1.108.0: the newest whose `proxy` extra installs from PyPI here (1.109.x and 1.110.x pin
# litellm-proxy-extras / litellm-proxy versions that PyPI does not serve).
LITELLM_VERSION="${LITELLM_VERSION:-1.108.0}"
LITELLM_VENV="${LITELLM_VENV:-$ROOT/bench/.venv-litellm}"
# As many uvicorn workers as cores, LiteLLM's own advice for production (the gateway
# runs one tokio worker thread per core too).
LITELLM_WORKERS="${LITELLM_WORKERS:-$(nproc)}"
PYTHON="${PYTHON:-python3}"

if [[ $QUICK -eq 1 ]]; then
  REPS="${REPS:-1}"
  N1="${N1:-1000}" N16="${N16:-4000}" N64="${N64:-4000}"
  L1="${L1:-200}" L16="${L16:-500}" L64="${L64:-500}"
  MAX_SECONDS="${MAX_SECONDS:-15}"
  MODE="quick"
else
  REPS="${REPS:-3}"
  N1="${N1:-5000}" N16="${N16:-20000}" N64="${N64:-20000}"
  L1="${L1:-300}" L16="${L16:-800}" L64="${L64:-1000}"
  MAX_SECONDS="${MAX_SECONDS:-30}"
  MODE="full"
fi
CONCURRENCIES=(1 16 64)

RESULTS="$ROOT/bench/results"
WORK="$RESULTS/gateway-run"
rm -rf "$WORK"
mkdir -p "$WORK/runs" "$WORK/first"
log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# --- build ------------------------------------------------------------------------------
log "building toolmend and the load generator (release)"
cargo build --release --locked -p toolmend-cli >&2
cargo build --release --locked -p toolmend-gateway --example loadgen >&2
TOOLMEND="$ROOT/target/release/toolmend"
LOADGEN="$ROOT/target/release/examples/loadgen"

# --- LiteLLM's venv ---------------------------------------------------------------------
if [[ $LITELLM -eq 1 ]]; then
  if ! "$LITELLM_VENV/bin/python" - "$LITELLM_VERSION" 2>/dev/null <<'EOF'
import sys, importlib.metadata as m
sys.exit(0 if m.version("litellm") == sys.argv[1] and m.version("uvicorn") else 1)
EOF
  then
    log "installing litellm[proxy]==$LITELLM_VERSION into $LITELLM_VENV"
    "$PYTHON" -m venv "$LITELLM_VENV"
    "$LITELLM_VENV/bin/python" -m pip install -q --upgrade pip >&2
    "$LITELLM_VENV/bin/python" -m pip install -q "litellm[proxy]==$LITELLM_VERSION" >&2
  fi
  # Keep the venv out of git whatever .gitignore says (what `python -m venv` does from 3.13).
  [[ -f "$LITELLM_VENV/.gitignore" ]] || echo '*' > "$LITELLM_VENV/.gitignore"
fi

# --- processes --------------------------------------------------------------------------
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

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

# vm KEY PID: the kB value of KEY (VmRSS, VmHWM) in /proc/PID/status, 0 if gone.
vm() {
  local k v _
  while read -r k v _; do
    if [[ $k == "$1:" ]]; then echo "$v"; return; fi
  done < "/proc/$2/status" 2>/dev/null || true
  echo 0
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

# The upstream's answer: one tool call whose arguments need repair (single quotes, a
# trailing comma) and coercion ("3" for an integer) against request.json's tools.
BROKEN="{'city': 'Paris', 'days': '3',}"
STEP='{"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"'"$BROKEN"'"}}]}'
BODY="$ROOT/bench/gateway/request.json"

warm() { # the loadgen's default warm-up: min(1000, n/10), at least 2 per worker
  local n=$1 c=$2 w=$(($1 / 10))
  if ((w > 1000)); then w=1000; fi
  if ((w < 2 * c)); then w=$((2 * c)); fi
  echo "$w"
}
steps_for() { # steps one target needs: every run's warm-up and requests, the check, margin
  local total=0 i c n
  for i in 0 1 2; do
    c=${CONCURRENCIES[$i]}
    case $i in 0) n=$2 ;; 1) n=$3 ;; *) n=$4 ;; esac
    total=$((total + n + $(warm "$n" "$c")))
  done
  echo $(((total * $1 + 1) * 11 / 10 + 100))
}

start_provider() { # start_provider NAME STEPS -> sets PROVIDER_URL, PROVIDER_PID
  local name=$1 steps=$2 script="$WORK/script-$1.jsonl"
  "$PYTHON" -c 'import sys; sys.stdout.write((sys.argv[1] + "\n") * int(sys.argv[2]))' \
    "$STEP" "$steps" > "$script"
  "$TOOLMEND" scripted-provider "$script" --port 0 > "$WORK/provider-$name.log" 2>&1 &
  PROVIDER_PID=$!
  PIDS+=("$PROVIDER_PID")
  PROVIDER_URL=$(wait_for "$WORK/provider-$name.log" 'http://127\.0\.0\.1:[0-9]+/v1' "$PROVIDER_PID" 120)
  rm -f "$script" # read whole at start; tens of MB
  log "provider ($name): $PROVIDER_URL, $steps steps, pid $PROVIDER_PID, RSS $(($(vm VmRSS "$PROVIDER_PID") / 1024)) MiB"
}

DIRECT_STEPS=$(steps_for "$REPS" "$N1" "$N16" "$N64")
start_provider direct "$DIRECT_STEPS"
P_DIRECT_PID=$PROVIDER_PID P_DIRECT_URL=$PROVIDER_URL
P_DIRECT_RSS0=$(vm VmRSS "$P_DIRECT_PID")
start_provider toolmend "$DIRECT_STEPS"
P_GW_PID=$PROVIDER_PID P_GW_URL=$PROVIDER_URL

# The gateway on its embedded defaults (mending on, history sanitize, invalid calls
# re-asked, info-level JSON logs, one line per request, to a file).
"$TOOLMEND" serve --listen 127.0.0.1:0 --upstream "$P_GW_URL" \
  > "$WORK/gateway.out" 2> "$WORK/gateway.log" &
GW_PID=$!
PIDS+=("$GW_PID")
GW_BASE=$(wait_for "$WORK/gateway.out" 'http://127\.0\.0\.1:[0-9]+/v1' "$GW_PID" 60)
log "gateway: $GW_BASE, pid $GW_PID, RSS $(($(vm VmRSS "$GW_PID") / 1024)) MiB"

declare -A URL=([direct]="$P_DIRECT_URL/chat/completions" [toolmend]="$GW_BASE/chat/completions")
declare -A AUTH=([direct]="" [toolmend]="" [litellm]="")
declare -A EXPECT=([direct]="'days': '3',}" [toolmend]='\"days\":3}' [litellm]="'days': '3',}")
TARGETS=(direct toolmend)

if [[ $LITELLM -eq 1 ]]; then
  start_provider litellm "$(steps_for "$REPS" "$L1" "$L16" "$L64")"
  P_LL_PID=$PROVIDER_PID P_LL_URL=$PROVIDER_URL
  LL_PORT=$(free_port)
  cat > "$WORK/litellm.yaml" <<EOF
model_list:
  - model_name: scripted
    litellm_params:
      model: openai/scripted
      api_base: $P_LL_URL
      api_key: sk-bench-not-a-key
      num_retries: 0
litellm_settings:
  set_verbose: false
  suppress_debug_info: true
  telemetry: false
  num_retries: 0
  request_timeout: 60
general_settings:
  disable_spend_logs: true
EOF
  # No database, no callbacks; a master key made for this run (the proxy refuses to start
  # without one; the load generator sends it); no model cost map fetched from the network;
  # only errors logged.
  LL_KEY="sk-bench-$("$PYTHON" -c 'import secrets; print(secrets.token_hex(32))')"
  LITELLM_MASTER_KEY="$LL_KEY" LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_LOG=ERROR \
    LITELLM_MODE=PRODUCTION \
    "$LITELLM_VENV/bin/litellm" --config "$WORK/litellm.yaml" --host 127.0.0.1 \
    --port "$LL_PORT" --num_workers "$LITELLM_WORKERS" > "$WORK/litellm.log" 2>&1 &
  LL_PID=$!
  PIDS+=("$LL_PID")
  log "litellm: starting on port $LL_PORT (pid $LL_PID)"
  for ((i = 0; i < 1200; i++)); do
    if curl -fs -o /dev/null "http://127.0.0.1:$LL_PORT/health/liveliness"; then break; fi
    if ! kill -0 "$LL_PID" 2>/dev/null; then
      log "litellm exited; its log:"; tail -n 40 "$WORK/litellm.log" >&2; exit 1
    fi
    sleep 0.1
  done
  curl -fs -o /dev/null "http://127.0.0.1:$LL_PORT/health/liveliness" \
    || { log "litellm did not come up"; tail -n 40 "$WORK/litellm.log" >&2; exit 1; }
  # Its other workers may still be starting (uvicorn restarts one that is slow to answer
  # its supervisor): wait until all are there and the proxy is idle (under 5% of a core
  # for two seconds in a row), or it would compete with the other targets for the CPU.
  # (One worker runs in the main process; several are children running spawn_main.)
  want=0
  if ((LITELLM_WORKERS > 1)); then want=$LITELLM_WORKERS; fi
  idle=0
  for ((i = 0; i < 180 && idle < 2; i++)); do
    mapfile -t LL_KIDS < <(pgrep -P "$LL_PID" || true)
    workers=0
    for p in "${LL_KIDS[@]}"; do
      if grep -qa spawn_main "/proc/$p/cmdline" 2>/dev/null; then workers=$((workers + 1)); fi
    done
    a=$(cpu_ns "$LL_PID" "${LL_KIDS[@]}")
    sleep 1
    b=$(cpu_ns "$LL_PID" "${LL_KIDS[@]}")
    if ((workers >= want && b - a < 50000000)); then
      idle=$((idle + 1))
    else
      idle=0
    fi
  done
  mapfile -t LL_KIDS < <(pgrep -P "$LL_PID" || true)
  LL_PIDS=$(IFS=,; echo "$LL_PID${LL_KIDS[*]:+,${LL_KIDS[*]}}")
  URL[litellm]="http://127.0.0.1:$LL_PORT/v1/chat/completions"
  AUTH[litellm]="Authorization: Bearer $LL_KEY"
  TARGETS+=(litellm)
  LL_RSS=0
  for p in "$LL_PID" "${LL_KIDS[@]}"; do LL_RSS=$((LL_RSS + $(vm VmRSS "$p"))); done
  log "litellm: up and idle, $LITELLM_WORKERS worker(s), processes $LL_PIDS, RSS $((LL_RSS / 1024)) MiB"
fi

# --- check what each target returns -----------------------------------------------------
CHECKS=()
for t in "${TARGETS[@]}"; do
  auth=()
  if [[ -n ${AUTH[$t]} ]]; then auth=(--header "${AUTH[$t]}"); fi
  "$LOADGEN" --url "${URL[$t]}" --body "$BODY" --requests 1 --warmup 0 "${auth[@]}" \
    --save-first "$WORK/first/$t.json" --label "check-$t" > /dev/null
  CHECKS+=("$t=$WORK/first/$t.json")
done
"$PYTHON" bench/gateway/verify.py "$BROKEN" "${CHECKS[@]}" >&2

# --- measure ----------------------------------------------------------------------------
RUNS="$WORK/runs.jsonl"
: > "$RUNS"
run_one() { # run_one REP TARGET CONCURRENCY N
  local rep=$1 t=$2 c=$3 n=$4 extra=() out="$WORK/runs/$1-$2-c$3.json"
  # The process whose memory and CPU time are sampled: the gateway, LiteLLM, or for
  # direct the scripted provider itself.
  if [[ -n ${AUTH[$t]} ]]; then extra+=(--header "${AUTH[$t]}"); fi
  case $t in
    direct) extra+=(--sample-pid "$P_DIRECT_PID") ;;
    toolmend) extra+=(--sample-pid "$GW_PID") ;;
    litellm) extra+=(--sample-pid "$LL_PIDS") ;;
  esac
  "$LOADGEN" --url "${URL[$t]}" --body "$BODY" --concurrency "$c" --requests "$n" \
    --warmup "$(warm "$n" "$c")" --max-seconds "$MAX_SECONDS" --expect "${EXPECT[$t]}" \
    --label "$t" "${extra[@]}" > "$out"
  "$PYTHON" - "$out" "$rep" "$t" >> "$RUNS" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
r["rep"], r["target"] = int(sys.argv[2]), sys.argv[3]
print(json.dumps(r))
EOF
  "$PYTHON" - "$out" <<'EOF' >&2
import json, sys
r = json.load(open(sys.argv[1]))
note = f" ERRORS {r['errors']}: {r['first_error']}" if r["errors"] else ""
note += f" MISMATCHES {r['mismatches']}" if r["mismatches"] else ""
note += " (cut by --max-seconds)" if r["truncated_by_time"] else ""
print(f"    {r['label']:8} c{r['concurrency']:<3} n={r['ok']:<6} p50 {r['p50_us']/1000:8.3f} ms"
      f"  p99 {r['p99_us']/1000:8.3f} ms  {r['throughput_rps']:7.0f} req/s{note}")
EOF
}

START=$(date +%s)
for ((rep = 1; rep <= REPS; rep++)); do
  for c in "${CONCURRENCIES[@]}"; do
    case $c in 1) n=$N1 l=$L1 ;; 16) n=$N16 l=$L16 ;; *) n=$N64 l=$L64 ;; esac
    log "rep $rep/$REPS, concurrency $c"
    if ((rep % 2 == 1)); then order=(direct toolmend); else order=(toolmend direct); fi
    for t in "${order[@]}"; do run_one "$rep" "$t" "$c" "$n"; done
    if [[ $LITELLM -eq 1 ]]; then run_one "$rep" litellm "$c" "$l"; fi
  done
done
log "measured in $(($(date +%s) - START)) s"

# --- report -----------------------------------------------------------------------------
GW_HWM=$(vm VmHWM "$GW_PID")
GW_ERRORS=$(grep -c '"level":"ERROR"' "$WORK/gateway.log" || true)
LL_VERSION="" LL_PY=""
if [[ $LITELLM -eq 1 ]]; then
  LL_VERSION=$("$LITELLM_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("litellm"))')
  LL_PY=$("$LITELLM_VENV/bin/python" -c 'import platform; print(platform.python_version())')
fi
"$PYTHON" - "$WORK/meta.json" <<EOF
import json, platform, sys
meta = {
  "date": "$(date -u +%Y-%m-%d)",
  "mode": "$MODE",
  "cores": $(nproc),
  "cpu": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')",
  "kernel": platform.release(),
  "reps": $REPS,
  "requests": {"direct_toolmend": {"1": $N1, "16": $N16, "64": $N64},
               "litellm": {"1": $L1, "16": $L16, "64": $L64}},
  "versions": {
    "toolmend": "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo '+dirty')",
    "rustc": "$(rustc --version | cut -d' ' -f2)",
    "litellm": "$LL_VERSION",
    "python (litellm)": "$LL_PY",
  },
  "litellm_workers": $LITELLM_WORKERS,
  "gateway_env": {k: v for k, v in {"RUST_LOG": "${RUST_LOG:-}",
                  "TOKIO_WORKER_THREADS": "${TOKIO_WORKER_THREADS:-}"}.items() if v},
  "gateway_vmhwm_kb_end": $GW_HWM,
  "gateway_error_log_lines": $GW_ERRORS,
  "provider_direct_rss_kb": {"start": $P_DIRECT_RSS0, "end": $(vm VmRSS "$P_DIRECT_PID")},
  "provider_steps_direct": $DIRECT_STEPS,
  "command": "bench/gateway/run.sh$([[ $QUICK -eq 1 ]] && echo ' --quick')",
}
if not meta["versions"]["litellm"]:
    del meta["versions"]["litellm"], meta["versions"]["python (litellm)"]
json.dump(meta, open(sys.argv[1], "w"), indent=1)
EOF
"$PYTHON" bench/gateway/report.py --runs "$RUNS" --meta "$WORK/meta.json" \
  --json "$RESULTS/gateway.json" --md "$RESULTS/gateway.md"

# --- streaming on kept-alive connections (time to first byte and total) -----------------
# Its own processes (started and stopped by the script), after these have stopped.
cleanup
PIDS=()
log "streaming on kept-alive connections (bench/gateway/stream.sh)"
bench/gateway/stream.sh --reps "$REPS"
