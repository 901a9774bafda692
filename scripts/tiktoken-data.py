#!/usr/bin/env python3
"""Writes the compact BPE vocabularies the core embeds (crates/toolmend/data/*.bpe) from
tiktoken's own files (the .tiktoken assets that tiktoken-rs ships: one line per token,
"<base64 bytes> <rank>").

The compact form is the same table without the base64 and the ranks: for each rank from 0,
in order, one byte of length then the token's bytes (ranks are contiguous, tokens at most
255 bytes: both checked here). o200k_base and cl100k_base take 2.3 MB so, against 5.3 MB as
text; the binary and the Python extension no longer carry tiktoken-rs's four files (7 MB).
The core's tests compare its counts with tiktoken-rs's on the same texts.

Usage: scripts/tiktoken-data.py [ASSETS_DIR]
  ASSETS_DIR  tiktoken-rs's assets/ (default: the one in ~/.cargo/registry, version of Cargo.lock)
"""
import base64
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = ["o200k_base", "cl100k_base"]


def assets_dir():
    if len(sys.argv) > 1:
        return sys.argv[1]
    lock = open(os.path.join(ROOT, "Cargo.lock"), encoding="utf-8").read()
    version = re.search(r'name = "tiktoken-rs"\nversion = "([^"]+)"', lock).group(1)
    found = glob.glob(os.path.expanduser(f"~/.cargo/registry/src/*/tiktoken-rs-{version}/assets"))
    if not found:
        sys.exit(f"tiktoken-data: tiktoken-rs {version} is not in ~/.cargo/registry (cargo fetch first)")
    return found[0]


def main():
    src = assets_dir()
    for name in NAMES:
        out = bytearray()
        with open(os.path.join(src, f"{name}.tiktoken"), encoding="ascii") as f:
            for expected, line in enumerate(f):
                token, rank = line.split()
                if int(rank) != expected:
                    sys.exit(f"tiktoken-data: {name}: rank {rank} where {expected} was expected")
                raw = base64.b64decode(token)
                if not 0 < len(raw) < 256:
                    sys.exit(f"tiktoken-data: {name}: a token of {len(raw)} bytes at rank {rank}")
                out.append(len(raw))
                out += raw
        path = os.path.join(ROOT, "crates", "toolmend", "data", f"{name}.bpe")
        with open(path, "wb") as g:
            g.write(out)
        print(f"{path}: {expected + 1} tokens, {len(out)} bytes")


if __name__ == "__main__":
    main()
