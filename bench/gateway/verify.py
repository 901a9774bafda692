#!/usr/bin/env python3
"""Checks the responses that loadgen saved (--save-first) before the gateway benchmark
measures anything: direct and LiteLLM return the upstream's broken arguments as they are,
toolmend returns them mended against the request's `tools` (a JSON object, `days` an
integer), with `x-toolmend-calls` saying so. Exits 1 on the first difference.

Usage: verify.py BROKEN_ARGUMENTS TARGET=FILE...
"""

from __future__ import annotations

import json
import sys

MENDED = {"city": "Paris", "days": 3}


def calls_of(saved):
    body = saved["body"]
    if not isinstance(body, dict):
        raise AssertionError(f"the body is not JSON: {str(body)[:200]}")
    choice = body["choices"][0]
    calls = choice["message"].get("tool_calls") or []
    if len(calls) != 1:
        raise AssertionError(f"expected one tool call, got {calls!r}")
    if choice.get("finish_reason") != "tool_calls":
        raise AssertionError(f"finish_reason {choice.get('finish_reason')!r}")
    fn = calls[0]["function"]
    if fn["name"] != "get_weather":
        raise AssertionError(f"tool name {fn['name']!r}")
    return fn["arguments"]


def main(argv):
    broken, pairs = argv[0], argv[1:]
    for pair in pairs:
        target, path = pair.split("=", 1)
        with open(path) as f:
            saved = json.load(f)
        if saved["status"] != 200:
            raise SystemExit(f"verify: {target}: HTTP {saved['status']}")
        try:
            args = calls_of(saved)
            if target == "toolmend":
                parsed = json.loads(args)
                if parsed != MENDED:
                    raise AssertionError(f"mended arguments {args!r}, expected {MENDED!r}")
                summary = saved["headers"].get("x-toolmend-calls", "")
                if "repaired=1" not in summary or "unresolved=0" not in summary:
                    raise AssertionError(f"x-toolmend-calls: {summary!r}")
                note = f"{args}  (x-toolmend-calls: {summary}; x-toolmend-fixes: " \
                       f"{saved['headers'].get('x-toolmend-fixes', '')})"
            else:
                if args != broken:
                    raise AssertionError(f"arguments {args!r}, expected the upstream's {broken!r}")
                note = args
        except (AssertionError, KeyError, IndexError, TypeError, ValueError) as e:
            raise SystemExit(f"verify: {target}: {e}") from None
        print(f"verify: {target:8} arguments {note}")


if __name__ == "__main__":
    main(sys.argv[1:])
