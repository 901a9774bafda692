#!/usr/bin/env python3
"""Old against new, per request kind: what two `toolmend` gateways cost, interleaved.

Usage: bench/gateway/kinds.py OLD_BINARY NEW_BINARY [--kinds plain,valid,...] [--reps N]
                              [--requests N] [--concurrency N] [--max-growth 0.10]
                              [--loadgen PATH] [--out FILE]
       bench/gateway/kinds.py --instructions OLD_BINARY NEW_BINARY [--kinds ...]
       bench/gateway/kinds.py --instructions BINARY --baseline FILE [--record]

For each request kind below, three scripted providers start (one per target, each
with a script of the kind's answer long enough for its whole run), the two gateways in
front of two of them, and the load generator runs direct, old and new in turn (the
order rotates each repetition), `--reps` times. Per run: the gateway's own CPU per
request (all its threads, kernel included, from /proc over the measured phase), p50
and p99; *added* = the gateway's percentile minus direct's in the same repetition.
Every answer is checked for the kind's expected bytes (a gateway that stopped mending
would fail the run, not look fast).

At the end, per kind: the medians, new/old CPU per request (the median of the
per-repetition ratios: a drift of the machine's speed hits both of a pair alike), and
the exit status: 1 when new/old CPU per request is above 1 + --max-growth (default
0.10) for any kind, 2 on a run error or mismatch.

Kinds (bench/gateway/request.json's conversation and tool):
  plain         no `tools`; the answer is text
  valid         `tools`; the answer is a call whose arguments are valid
  mend          `tools`; the answer's arguments need repair and coercion
  stream        no `tools`, `stream: true`; text deltas
  stream-calls  `tools`, `stream: true`; a call with valid arguments
  guard         `valid` with the guard on, in memory (a global limit no run reaches,
                the repeat rule)
  history       `valid` after 30 earlier rounds of an agent loop (a call and its
                result each, about 40 KB of history)

With --instructions: instructions per request instead of seconds, each gateway under
valgrind's callgrind (user-space instructions, counted: the same figure however loaded
the machine is, so it can gate a change in CI where seconds cannot). Per kind and
binary: one gateway under callgrind (one more for the guard's environment), the kinds
in turn; each: 30 requests to warm up, the counters zeroed, 200 requests one at a time,
the total divided by 200. With two binaries, new/old per kind (exit 1 past --max-growth).
With one binary and --baseline FILE, each kind against the figure FILE holds for it
(exit 1 past --max-growth); --record writes the binary's figures into FILE instead.
Kernel time (syscalls, wake-ups) is not counted: the interleaved CPU runs are the
measure of that.

The load generator is crates/toolmend-gateway/examples/loadgen.rs (closed loop,
kept-alive connections; release build: `cargo build --release -p toolmend-gateway
--example loadgen`). Output: a table on stdout, the JSON of every run under
bench/results/kinds-run/ (not committed), the summary in --out (default
bench/results/kinds.json).
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BODY = json.load(open(os.path.join(ROOT, "bench", "gateway", "request.json")))

VALID_CALL = {"tool_calls": [{"id": "call_1", "type": "function", "function": {
    "name": "get_weather", "arguments": "{\"city\":\"Paris\",\"days\":3}"}}]}
BROKEN_CALL = {"tool_calls": [{"id": "call_1", "type": "function", "function": {
    "name": "get_weather", "arguments": "{'city': 'Paris', 'days': '3',}"}}]}
TEXT = {"content": "It is sunny in Paris, 21 C, for the next three days."}
GUARD_ENV = {
    "TOOLMEND_GUARD__TOOLS__GET_WEATHER__GLOBAL__LIMIT": "100000",
    "TOOLMEND_GUARD__TOOLS__GET_WEATHER__GLOBAL__WINDOW_SECS": "0.5",
    "TOOLMEND_GUARD__REPEAT__BLOCK": "3",
}


def body(tools, stream):
    b = dict(BODY)
    if not tools:
        b.pop("tools", None)
        b.pop("tool_choice", None)
    if stream:
        b["stream"] = True
    return b


def agent_history(turns=30):
    """`valid`'s request after `turns` earlier rounds of an agent loop: each an assistant
    call and its tool result (about 40 KB of history, an agent's request at its 30th
    step)."""
    b = body(True, False)
    messages = list(b["messages"])
    for i in range(turns):
        cid = f"call_{i:03d}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": cid, "type": "function", "function": {
                "name": "get_weather", "arguments": json.dumps({"city": f"City {i}", "days": 3})}}]})
        forecast = [{"day": d, "high_c": 20 + d, "low_c": 10 + d, "sky": "partly cloudy",
                     "wind_kmh": 12 + d, "note": "Light breeze in the afternoon, \"mild\"."}
                    for d in range(1, 8)]
        messages.append({"role": "tool", "tool_call_id": cid,
                         "content": json.dumps({"city": f"City {i}", "forecast": forecast})})
    messages.append({"role": "user", "content": "And Paris?"})
    b["messages"] = messages
    return b


# name: (request body, scripted answer, bytes every answer through a gateway holds,
#        bytes a direct answer holds, gateway environment)
KINDS = {
    "plain": (body(False, False), TEXT, "sunny in Paris", "sunny in Paris", {}),
    "valid": (body(True, False), VALID_CALL, '\\"days\\":3', '\\"days\\":3', {}),
    "mend": (body(True, False), BROKEN_CALL, '\\"days\\":3', "'days'", {}),
    "stream": (body(False, True), TEXT, "[DONE]", "[DONE]", {}),
    "stream-calls": (body(True, True), VALID_CALL, "get_weather", "get_weather", {}),
    "guard": (body(True, False), VALID_CALL, '\\"days\\":3', '\\"days\\":3', GUARD_ENV),
    "history": (agent_history(), VALID_CALL, '\\"days\\":3', '\\"days\\":3', {}),
}


class Procs:
    def __init__(self):
        self.procs = []

    def start(self, args, log, env=None):
        full = dict(os.environ)
        full.pop("RUST_LOG", None)
        full.update(env or {})
        p = subprocess.Popen(args, stdout=open(log + ".out", "w"), stderr=open(log + ".log", "w"),
                             env=full)
        self.procs.append(p)
        return p

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        self.procs = []


def wait_url(p, log, files=(".out", ".log")):
    """The URL the process printed. A gateway's is read from its standard output only:
    under valgrind the standard error repeats the command line, the upstream's URL in it."""
    for _ in range(1200):
        for f in (log + s for s in files):
            try:
                m = re.search(r"http://127\.0\.0\.1:[0-9]+/v1", open(f).read())
            except FileNotFoundError:
                m = None
            if m:
                return m.group(0)
        if p.poll() is not None:
            sys.exit(f"kinds.py: {log} exited early:\n" + open(log + ".log").read()[-2000:])
        time.sleep(0.05)
    sys.exit(f"kinds.py: no URL from {log}")


def ctl(command, pid):
    """callgrind_control COMMAND PID; it exits 0 whether or not it found the process."""
    r = subprocess.run(["callgrind_control", command, str(pid)], capture_output=True, text=True)
    if f"to pid {pid}" not in r.stdout + r.stderr:
        listed = subprocess.run(["vgdb", "-l"], capture_output=True, text=True)
        sys.exit(f"kinds.py: callgrind_control {command} {pid}: {r.stdout}{r.stderr}"
                 f"(vgdb -l: {listed.stdout}{listed.stderr})")


def instructions(binary, kinds, work, loadgen, warm=30, n=200):
    """Instructions per request of `binary` as the gateway, for each of `kinds`: one
    gateway under callgrind per environment (the guard's is its own), the kinds in turn,
    the counters zeroed before and dumped after each kind's measured requests."""
    out_all = {}
    groups = {}
    for kind in kinds:
        groups.setdefault(json.dumps(KINDS[kind][4], sort_keys=True), []).append(kind)
    for env_key, group in groups.items():
        out_all.update(instructions_in_one(binary, group, json.loads(env_key), work, loadgen, warm, n))
    return out_all


def instructions_in_one(binary, kinds, env, work, loadgen, warm, n):
    procs = Procs()
    tag = "-".join(kinds)
    try:
        # The scripted provider answers in order: each kind's answers, in the kinds' order.
        script = os.path.join(work, f"ir-script-{tag}.jsonl")
        with open(script, "w") as f:
            for kind in kinds:
                f.write((json.dumps(KINDS[kind][1]) + "\n") * (warm + n))
        log = os.path.join(work, f"ir-provider-{tag}")
        p = procs.start([binary, "scripted-provider", script, "--port", "0"], log)
        purl = wait_url(p, log)
        out = os.path.join(work, f"ir-{tag}.callgrind")
        for f in os.listdir(work):
            if f.startswith(f"ir-{tag}.callgrind"):
                os.remove(os.path.join(work, f))
        log = os.path.join(work, f"ir-gateway-{tag}")
        g = procs.start(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary,
                         "serve", "--listen", "127.0.0.1:0", "--upstream", purl], log, env)
        url = wait_url(g, log, (".out",))
        result = {}
        for dump, kind in enumerate(kinds, start=1):
            req, _, expect, _, _ = KINDS[kind]
            body_file = os.path.join(work, f"ir-body-{kind}.json")
            json.dump(req, open(body_file, "w"))

            def load(count):
                res = os.path.join(work, f"ir-{kind}.json")
                subprocess.run([loadgen, "--url", url + "/chat/completions", "--body", body_file,
                                "--concurrency", "1", "--requests", str(count), "--warmup", "0",
                                "--timeout", "120", "--expect", expect, "--out", res],
                               check=True, stdout=subprocess.DEVNULL)
                r = json.load(open(res))
                if r.get("errors") or r.get("mismatches"):
                    sys.exit(f"kinds.py: {kind} under callgrind: errors {r.get('errors')}, "
                             f"mismatches {r.get('mismatches')}")

            load(warm)
            ctl("--zero", g.pid)
            load(n)
            ctl("--dump", g.pid)
            path = f"{out}.{dump}"
            for _ in range(600):
                m = os.path.exists(path) and re.search(r"^totals: (\d+)", open(path).read(), re.M)
                if m:
                    result[kind] = int(m.group(1)) / n
                    break
                time.sleep(0.05)
            else:
                sys.exit(f"kinds.py: no callgrind dump for {kind} ({path})")
        return result
    finally:
        procs.stop()


def main_instructions(a, kinds, work):
    if shutil.which("valgrind") is None:
        sys.exit("kinds.py: --instructions needs valgrind (apt-get install valgrind)")
    bins = [os.path.realpath(b) for b in a.binaries]
    rows = {}
    failed = []
    if len(bins) == 1 and a.baseline and not a.record:
        base = json.load(open(a.baseline))
        print(f"{'kind':<13}{'baseline Ir/req':>16}{'Ir/req':>10}{'ratio':>8}")
        measured = instructions(bins[0], kinds, work, a.loadgen, a.ir_warmup, a.ir_requests)
        for kind in kinds:
            now = measured[kind]
            was = base["instructions_per_request"].get(kind)
            ratio = now / was if was else float("nan")
            rows[kind] = {"baseline": was, "now": now, "ratio": ratio}
            print(f"{kind:<13}{was or 0:>16.0f}{now:>10.0f}{ratio:>8.3f}", flush=True)
            if was and ratio > 1 + a.max_growth:
                failed.append(f"{kind}: {now:.0f} instructions per request, {ratio:.3f}x the "
                              f"baseline's {was:.0f} (at most {1 + a.max_growth:.2f}x)")
    elif len(bins) == 1:
        print(f"{'kind':<13}{'Ir/req':>10}")
        measured = instructions(bins[0], kinds, work, a.loadgen, a.ir_warmup, a.ir_requests)
        for kind in kinds:
            rows[kind] = measured[kind]
            print(f"{kind:<13}{rows[kind]:>10.0f}", flush=True)
        if a.record:
            if not a.baseline:
                sys.exit("kinds.py: --record needs --baseline FILE")
            json.dump({"instructions_per_request": {k: round(v) for k, v in rows.items()},
                       "recorded": time.strftime("%Y-%m-%d"),
                       "how": "bench/gateway/kinds.py --instructions BINARY --baseline FILE --record "
                              f"--ir-warmup {a.ir_warmup} --ir-requests {a.ir_requests}"},
                      open(a.baseline, "w"), indent=1)
            print(f"recorded in {a.baseline}")
    else:
        print(f"{'kind':<13}{'old Ir/req':>12}{'new Ir/req':>12}{'new/old':>9}")
        olds = instructions(bins[0], kinds, work, a.loadgen, a.ir_warmup, a.ir_requests)
        news = instructions(bins[1], kinds, work, a.loadgen, a.ir_warmup, a.ir_requests)
        for kind in kinds:
            old, new = olds[kind], news[kind]
            rows[kind] = {"old": old, "new": new, "new_over_old": new / old}
            print(f"{kind:<13}{old:>12.0f}{new:>12.0f}{new / old:>9.3f}", flush=True)
            if new / old > 1 + a.max_growth:
                failed.append(f"{kind}: new/old instructions per request {new / old:.3f}")
    json.dump({"instructions": rows, "failed": failed}, open(a.out, "w"), indent=1)
    for f in failed:
        print("GROWTH:", f)
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binaries", nargs="+", metavar="BINARY")
    ap.add_argument("--instructions", action="store_true")
    ap.add_argument("--baseline")
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--ir-warmup", type=int, default=30, help="--instructions: requests before the count")
    ap.add_argument("--ir-requests", type=int, default=200, help="--instructions: requests counted")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-growth", type=float, default=0.10)
    ap.add_argument("--loadgen", default=os.path.join(ROOT, "target", "release", "examples", "loadgen"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "kinds.json"))
    a = ap.parse_args()
    kinds = [k for k in a.kinds.split(",") if k]
    for k in kinds:
        if k not in KINDS:
            sys.exit(f"kinds.py: unknown kind {k} (the kinds: {', '.join(KINDS)})")
    work = os.path.join(ROOT, "bench", "results", "kinds-run")
    os.makedirs(work, exist_ok=True)
    if not os.path.exists(a.loadgen):
        sys.exit(f"kinds.py: no load generator at {a.loadgen} "
                 "(cargo build --release -p toolmend-gateway --example loadgen)")
    if a.instructions:
        return main_instructions(a, kinds, work)
    if len(a.binaries) != 2:
        sys.exit("kinds.py: OLD_BINARY NEW_BINARY (two gateways to interleave)")
    bins = {"old": os.path.realpath(a.binaries[0]), "new": os.path.realpath(a.binaries[1])}
    warm = max(a.requests // 10, 2 * a.concurrency)
    steps = (a.requests + warm) * a.reps + 200
    summary = {"meta": {"old": bins["old"], "new": bins["new"], "reps": a.reps,
                        "requests": a.requests, "concurrency": a.concurrency,
                        "max_growth": a.max_growth, "date": time.strftime("%Y-%m-%d %H:%M"),
                        "cores": os.cpu_count()}, "kinds": {}}
    failed = []
    bad = []
    print(f"old: {bins['old']}\nnew: {bins['new']}\nc{a.concurrency}, {a.requests} requests a run, "
          f"{a.reps} repetitions\n")
    head = (f"{'kind':<13}{'cpu µs/req old':>15}{'new':>9}{'new/old':>9}  {'(min-max)':<13}"
            f"{'p50 added old':>14}{'new':>8}{'p99 added old':>14}{'new':>8}")
    print(head)
    for kind in kinds:
        req, answer, expect, expect_direct, env = KINDS[kind]
        procs = Procs()
        try:
            body_file = os.path.join(work, f"body-{kind}.json")
            json.dump(req, open(body_file, "w"))
            script = os.path.join(work, f"script-{kind}.jsonl")
            with open(script, "w") as f:
                line = json.dumps(answer) + "\n"
                for _ in range(steps):
                    f.write(line)
            urls, pids = {}, {}
            for target in ("direct", "old", "new"):
                log = os.path.join(work, f"provider-{kind}-{target}")
                p = procs.start([bins["new"], "scripted-provider", script, "--port", "0"], log)
                purl = wait_url(p, log)
                if target == "direct":
                    urls[target], pids[target] = purl, p.pid
                    continue
                log = os.path.join(work, f"gateway-{kind}-{target}")
                g = procs.start([bins[target], "serve", "--listen", "127.0.0.1:0", "--upstream", purl],
                                log, env)
                urls[target], pids[target] = wait_url(g, log, (".out",)), g.pid
            runs = {t: [] for t in ("direct", "old", "new")}
            for rep in range(a.reps):
                order = ["direct", "old", "new"]
                order = order[rep % 3:] + order[:rep % 3]
                for target in order:
                    out = os.path.join(work, f"{kind}-{target}-{rep}.json")
                    subprocess.run(
                        [a.loadgen, "--url", urls[target] + "/chat/completions", "--body", body_file,
                         "--concurrency", str(a.concurrency), "--requests", str(a.requests),
                         "--warmup", str(warm), "--sample-pid", str(pids[target]),
                         "--expect", expect_direct if target == "direct" else expect,
                         "--label", f"{kind}-{target}", "--out", out],
                        check=True, stdout=subprocess.DEVNULL)
                    r = json.load(open(out))
                    if r.get("errors") or r.get("mismatches"):
                        bad.append(f"{kind} {target} rep {rep}: errors {r.get('errors')}, "
                                   f"mismatches {r.get('mismatches')}")
                    runs[target].append(r)
        finally:
            procs.stop()

        def cpu(r):
            return (r.get("memory") or {}).get("cpu_us_per_request") or 0.0

        old_cpu = [cpu(r) for r in runs["old"]]
        new_cpu = [cpu(r) for r in runs["new"]]
        ratios = [n / o for o, n in zip(old_cpu, new_cpu) if o]
        added = {}
        for t in ("old", "new"):
            for p in ("p50_us", "p99_us"):
                added[(t, p)] = statistics.median(
                    r[p] - d[p] for r, d in zip(runs[t], runs["direct"]))
        ratio = statistics.median(ratios) if ratios else float("nan")
        row = {"cpu_us_per_request": {"old": statistics.median(old_cpu), "new": statistics.median(new_cpu),
                                      "direct_provider": statistics.median(cpu(r) for r in runs["direct"])},
               "new_over_old": ratio, "ratios": ratios,
               "p50_added_us": {"old": added[("old", "p50_us")], "new": added[("new", "p50_us")]},
               "p99_added_us": {"old": added[("old", "p99_us")], "new": added[("new", "p99_us")]},
               "throughput_rps": {t: statistics.median(r["throughput_rps"] for r in runs[t])
                                  for t in runs}}
        summary["kinds"][kind] = row
        print(f"{kind:<13}{row['cpu_us_per_request']['old']:>15.1f}{row['cpu_us_per_request']['new']:>9.1f}"
              f"{ratio:>9.3f}  ({min(ratios):.2f}-{max(ratios):.2f}) "
              f"{row['p50_added_us']['old']:>13.0f}{row['p50_added_us']['new']:>8.0f}"
              f"{row['p99_added_us']['old']:>14.0f}{row['p99_added_us']['new']:>8.0f}", flush=True)
        if ratio > 1 + a.max_growth:
            failed.append(f"{kind}: new/old CPU per request {ratio:.3f} > {1 + a.max_growth:.2f}")
    summary["failed"] = failed
    summary["bad_runs"] = bad
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    json.dump(summary, open(a.out, "w"), indent=1)
    for b in bad:
        print("run error:", b)
    for f in failed:
        print("GROWTH:", f)
    if bad:
        return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
