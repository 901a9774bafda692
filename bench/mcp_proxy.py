#!/usr/bin/env python3
"""What `toolmend mcp-proxy` adds to a tools/call over stdio: the same client and the same
server, direct against proxied, interleaved in one run.

The server is a minimal stdio MCP server in plain Python (no SDK: its own time is small
and the same in every arm); the client sends one tools/call at a time and waits for its
answer. Per arm and round: p50 / p99 latency per call, and for the proxied arms the
proxy's own CPU per call (user + system, from /proc). `--old BIN` adds an arm with
another build of the proxy (old against new, same run). `--memory` instead makes
100,000 calls through the proxy and prints its resident memory every 10,000.

Usage:
    bench/mcp_proxy.py [--bin target/release/toolmend] [--calls 20000] [--rounds 3]
                       [--old OLD_BIN] [--kind valid|mended] [--memory]

Figures and how to read them: docs/benchmarks.md, "MCP proxy".
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SERVER = r"""
import json, sys
out = sys.stdout
for line in sys.stdin:
    m = json.loads(line)
    i = m.get("id")
    meth = m.get("method")
    if i is None:
        continue
    if meth == "initialize":
        r = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
             "serverInfo": {"name": "bench", "version": "0"}}
    elif meth == "tools/list":
        r = {"tools": [{"name": "add", "inputSchema": {"type": "object",
             "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                            "note": {"type": "string"}},
             "required": ["a", "b"], "additionalProperties": False}}]}
    elif meth == "tools/call":
        a = m["params"]["arguments"]
        r = {"content": [{"type": "text", "text": str(a.get("a", 0)) + "+" + str(a.get("b", 0))}]}
    else:
        r = {}
    out.write(json.dumps({"jsonrpc": "2.0", "id": i, "result": r}) + "\n")
    out.flush()
"""


def cpu_ticks(pid):
    """User + system CPU of `pid`, in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Session:
    def __init__(self, proxy):
        cmd = [sys.executable, "-c", SERVER]
        if proxy:
            cmd = [proxy, "mcp-proxy", "--"] + cmd
        env = dict(os.environ, RUST_LOG="warn")
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.request("tools/list", {})

    def send(self, m):
        self.p.stdin.write(json.dumps(m).encode() + b"\n")
        self.p.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            m = json.loads(self.p.stdout.readline())
            if m.get("id") == self.next_id:
                return m

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def arguments(kind, n):
    if kind == "mended":
        # A string for an integer: one coercion per call.
        return {"a": str(n), "b": 1, "note": "x" * 64}
    return {"a": n, "b": 1, "note": "x" * 64}


def run_arm(proxy, calls, kind):
    s = Session(proxy)
    lat = []
    ticks0 = cpu_ticks(s.p.pid) if proxy else 0
    for n in range(calls):
        t = time.perf_counter_ns()
        r = s.request("tools/call", {"name": "add", "arguments": arguments(kind, n)})
        lat.append(time.perf_counter_ns() - t)
        if "result" not in r:
            raise SystemExit(f"call {n} failed: {r}")
    cpu = (cpu_ticks(s.p.pid) - ticks0) / os.sysconf("SC_CLK_TCK") / calls * 1e6 if proxy else None
    s.close()
    lat.sort()
    return lat[len(lat) // 2] / 1000, lat[int(len(lat) * 0.99)] / 1000, cpu


def memory(proxy, calls):
    s = Session(proxy)
    print(f"{'calls':>8} {'proxy RSS KiB':>14}")
    for n in range(calls):
        s.request("tools/call", {"name": "add", "arguments": arguments("mended", n)})
        if (n + 1) % 10000 == 0:
            print(f"{n + 1:>8} {rss_kib(s.p.pid):>14}", flush=True)
    s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release/toolmend")
    ap.add_argument("--old")
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kind", choices=["valid", "mended"], default="valid")
    ap.add_argument("--memory", action="store_true")
    a = ap.parse_args()
    if a.memory:
        memory(a.bin, 100000)
        return
    arms = [("direct", None), ("proxied", a.bin)] + ([("proxied (old)", a.old)] if a.old else [])
    results = {name: [] for name, _ in arms}
    for r in range(a.rounds):
        # Interleaved, and the order turned each round.
        order = arms if r % 2 == 0 else list(reversed(arms))
        for name, proxy in order:
            results[name].append(run_arm(proxy, a.calls, a.kind))
    print(f"{a.calls} sequential tools/call per arm and round ({a.kind} arguments), {a.rounds} rounds, medians:")
    print(f"{'arm':<16} {'p50 us':>8} {'p99 us':>8} {'added p50 us':>13} {'proxy CPU us/call':>18}")
    base = statistics.median(x[0] for x in results["direct"])
    for name, _ in arms:
        rs = results[name]
        p50 = statistics.median(x[0] for x in rs)
        p99 = statistics.median(x[1] for x in rs)
        cpu = [x[2] for x in rs if x[2] is not None]
        cpu_s = f"{statistics.median(cpu):.1f}" if cpu else "-"
        print(f"{name:<16} {p50:>8.1f} {p99:>8.1f} {p50 - base:>13.1f} {cpu_s:>18}")


if __name__ == "__main__":
    main()
