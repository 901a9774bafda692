#!/usr/bin/env bash
# Streaming through the gateway on kept-alive connections: time to first byte (the first
# SSE event) and to the last byte, direct to the scripted upstream and through
# `toolmend serve`, at concurrency 1 and 16, mending on (the upstream streams one tool
# call whose arguments must be repaired and coerced). The load generator keeps its
# connections alive (a pool of one per worker), as SDK clients do: this is the path a
# missing TCP_NODELAY delays by ~40 ms per answer (issue 11), which the one-shot
# benchmark never measured. Everything on 127.0.0.1, bounded (about two minutes).
#
# Two answers: "call" (the tool call above, held back until it is whole and mended) and
# "text" (480 bytes of prose in 60 deltas of 8 bytes, which the gateway forwards as they
# come, unchanged ones as the upstream's own bytes). For "text" the first byte is the
# stream's first event and the added time per chunk is (added total - added first byte) /
# 61 (the text deltas and the finish chunk).
#
# Usage: bench/gateway/stream.sh [--reps N]      (default 3; the table gives the medians)
# Environment: N1 / N16 (requests per run), PYTHON; TOOLMEND and LOADGEN (binaries to use
# instead of building the release profile, e.g. a build without LTO).
# Output: the table on stdout and bench/results/gateway-stream.md; each run in
# bench/results/gateway-stream-run/.
set -euo pipefail
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
REPS=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --reps) REPS="${2:?--reps needs a number}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "stream.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
export NO_PROXY="127.0.0.1,localhost" no_proxy="127.0.0.1,localhost"
PYTHON="${PYTHON:-python3}"
N1="${N1:-2000}" N16="${N16:-8000}"
WORK="$ROOT/bench/results/gateway-stream-run"
rm -rf "$WORK"; mkdir -p "$WORK"
log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

if [[ -z "${TOOLMEND:-}" || -z "${LOADGEN:-}" ]]; then
  cargo build --release --locked -p toolmend-cli >&2
  cargo build --release --locked -p toolmend-gateway --example loadgen >&2
fi
TOOLMEND="${TOOLMEND:-$ROOT/target/release/toolmend}"
LOADGEN="${LOADGEN:-$ROOT/target/release/examples/loadgen}"

PIDS=()
cleanup() { local p; for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
wait_url() { # wait_url FILE PID -> the first http://127.0.0.1:PORT/v1 in FILE
  local i
  for ((i = 0; i < 1200; i++)); do
    if grep -Eo 'http://127\.0\.0\.1:[0-9]+/v1' "$1" 2>/dev/null | head -n1 | grep .; then return 0; fi
    kill -0 "$2" 2>/dev/null || { log "process $2 exited: $(tail -n 20 "$1")"; return 1; }
    sleep 0.05
  done
  return 1
}

# One step, played in a loop (--repeat): a tool call with broken arguments.
STEP='{"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{'"'"'city'"'"': '"'"'Paris'"'"', '"'"'days'"'"': '"'"'3'"'"',}"}}]}'
echo "$STEP" > "$WORK/script-call.jsonl"
# 480 bytes of prose: 60 deltas of 8 bytes.
TEXT=$(printf 'The forecast for Paris is mild and dry this week. %.0s' {1..10} | cut -c1-480)
printf '{"content":"%s"}\n' "$TEXT" > "$WORK/script-text.jsonl"
start_provider() { # start_provider NAME ANSWER
  "$TOOLMEND" scripted-provider "$WORK/script-$2.jsonl" --repeat --port 0 > "$WORK/provider-$1.log" 2>&1 &
  PIDS+=("$!"); PROVIDER_PID=$!
  PROVIDER_URL=$(wait_url "$WORK/provider-$1.log" "$PROVIDER_PID")
}
declare -A P_DIRECT P_DIRECT_PID GW GW_PID
for answer in call text; do
  start_provider "direct-$answer" "$answer"; P_DIRECT[$answer]=$PROVIDER_URL; P_DIRECT_PID[$answer]=$PROVIDER_PID
  start_provider "toolmend-$answer" "$answer"; p_gw=$PROVIDER_URL
  RUST_LOG=warn "$TOOLMEND" serve --listen 127.0.0.1:0 --upstream "$p_gw" > "$WORK/gateway-$answer.out" 2> "$WORK/gateway-$answer.log" &
  PIDS+=("$!"); GW_PID[$answer]=$!
  GW[$answer]=$(wait_url "$WORK/gateway-$answer.out" "${GW_PID[$answer]}")
  log "$answer: direct ${P_DIRECT[$answer]}; gateway ${GW[$answer]} -> $p_gw"
done

BODY="$WORK/request-stream.json"
"$PYTHON" - "$ROOT/bench/gateway/request.json" "$BODY" <<'PY'
import json, sys
body = json.load(open(sys.argv[1]))
body["stream"] = True
json.dump(body, open(sys.argv[2], "w"))
PY

RUNS="$WORK/runs.jsonl"; : > "$RUNS"
for ((rep = 1; rep <= REPS; rep++)); do
  for answer in call text; do
  for c in 1 16; do
    n=$N1; [[ $c -eq 16 ]] && n=$N16
    order=(direct toolmend); ((rep % 2 == 0)) && order=(toolmend direct)
    for t in "${order[@]}"; do
      # Direct, the broken arguments arrive in pieces: only the stream's end is checked.
      if [[ $t == direct ]]; then url="${P_DIRECT[$answer]}/chat/completions" pid=${P_DIRECT_PID[$answer]} expect='data: [DONE]'
      else url="${GW[$answer]}/chat/completions" pid=${GW_PID[$answer]} expect='\"days\":3}'; fi
      [[ $answer == text ]] && expect='data: [DONE]'
      "$LOADGEN" --url "$url" --body "$BODY" --concurrency "$c" --requests "$n" \
        --sample-pid "$pid" --expect "$expect" --label "$t" --max-seconds 30 \
        | "$PYTHON" -c 'import json,sys; r=json.load(sys.stdin); r["rep"]=int(sys.argv[1]); r["answer"]=sys.argv[2]; print(json.dumps(r))' "$rep" "$answer" >> "$RUNS"
    done
  done
  done
done

"$PYTHON" - "$RUNS" "$ROOT/bench/results/gateway-stream.md" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
def med(xs): return statistics.median(xs) if xs else float("nan")
rows = []
bad = [r for r in runs if r["errors"] or r["mismatches"]]
out = ["| answer | concurrency | target | TTFB p50 µs | TTFB p99 µs | total p50 µs | total p99 µs | added p50 µs (TTFB / total) | added per chunk µs | CPU µs/req |",
       "|---|---|---|---|---|---|---|---|---|---|"]
CHUNKS = 61  # the text answer's deltas after the first event: 60 text, 1 finish
for answer, c in [(a, c) for a in ("call", "text") for c in (1, 16)]:
    by = {t: [r for r in runs if r["concurrency"] == c and r["label"] == t and r["answer"] == answer]
          for t in ("direct", "toolmend")}
    d = {k: med([r[k] for r in by["direct"]]) for k in ("ttfb_p50_us", "ttfb_p99_us", "p50_us", "p99_us")}
    for t in ("direct", "toolmend"):
        rs = by[t]
        m = {k: med([r[k] for r in rs]) for k in ("ttfb_p50_us", "ttfb_p99_us", "p50_us", "p99_us")}
        cpu = med([r["memory"]["cpu_us_per_request"] for r in rs if r.get("memory")])
        a_ttfb, a_total = m["ttfb_p50_us"] - d["ttfb_p50_us"], m["p50_us"] - d["p50_us"]
        added = "" if t == "direct" else f'{a_ttfb:.0f} / {a_total:.0f}'
        chunk = "" if t == "direct" or answer != "text" else f'{(a_total - a_ttfb) / CHUNKS:.1f}'
        out.append(f'| {answer} | {c} | {t} | {m["ttfb_p50_us"]:.0f} | {m["ttfb_p99_us"]:.0f} | {m["p50_us"]:.0f} | {m["p99_us"]:.0f} | {added} | {chunk} | {cpu:.0f} |')
tm = [r for r in runs if r["concurrency"] == 1 and r["label"] == "toolmend" and r["answer"] == "call"]
dr = [r for r in runs if r["concurrency"] == 1 and r["label"] == "direct" and r["answer"] == "call"]
added = med([r["p50_us"] for r in tm]) - med([r["p50_us"] for r in dr])
out.append("")
out.append(f"Bar: streaming p50 added on a kept-alive connection at concurrency 1 under 1 ms: "
           f"{added / 1000:.3f} ms, {'met' if added < 1000 else 'NOT met'}.")
if bad:
    out.append(f"{len(bad)} run(s) had errors or mismatches: " + "; ".join(f'{r["label"]} c{r["concurrency"]}: {r["first_error"]}' for r in bad))
text = "\n".join(out)
print(text)
open(sys.argv[2], "w").write(text + "\n")
PY
