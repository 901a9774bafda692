#!/usr/bin/env bash
# Install (idempotently) the MCP servers and client that tests/mcp/test_proxy.py runs
# `toolmend mcp-proxy` against, from the npm registry at pinned versions, into
# <repo>/.tools/mcp (git-ignored): the reference servers server-everything (every
# protocol feature: progress, sampling, elicitation, roots, resources, prompts,
# completions) and server-filesystem (tools that write files), and the Inspector's CLI
# (`mcp-inspector-cli --cli COMMAND --method ...`). Prints the path of each binary and
# its version; nothing is installed when the pinned versions are already there.
#
# Usage: scripts/mcp-env.sh
#
# Environment:
#   MCP_EVERYTHING_VERSION   @modelcontextprotocol/server-everything version (default below)
#   MCP_FILESYSTEM_VERSION   @modelcontextprotocol/server-filesystem version (default below)
#   MCP_INSPECTOR_VERSION    @modelcontextprotocol/inspector-cli version (default below)
#   MCP_DIR                  where they go (default: <repo>/.tools/mcp; the tests read
#                            TOOLMEND_MCP_DIR)
#
# Needs Node.js and npm (Debian's nodejs and npm packages); only the npm registry is
# contacted. The tests also need the Python venv (scripts/python-env.sh: mcp, pytest,
# anyio) and the binary (cargo build -p toolmend-cli).
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
case "${1:-}" in -h|--help) usage; exit 0 ;; '') ;; *) usage >&2; exit 2 ;; esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MCP_EVERYTHING_VERSION="${MCP_EVERYTHING_VERSION:-2026.8.31}"
MCP_FILESYSTEM_VERSION="${MCP_FILESYSTEM_VERSION:-2026.8.31}"
MCP_INSPECTOR_VERSION="${MCP_INSPECTOR_VERSION:-1.0.3}"
MCP_DIR="${MCP_DIR:-$ROOT/.tools/mcp}"

command -v npm >/dev/null || { echo "mcp-env.sh: npm is missing (apt-get install nodejs npm)" >&2; exit 1; }
mkdir -p "$MCP_DIR"
version() { # version PACKAGE: the installed version, or nothing
  node -e 'try { const p = require(process.argv[1] + "/node_modules/" + process.argv[2] + "/package.json");
                 process.stdout.write(p.version) } catch (e) {}' "$MCP_DIR" "$1" 2>/dev/null || true
}
have() { [ "$(version "$1")" = "$2" ]; } # have PACKAGE VERSION: installed at that version
if ! have @modelcontextprotocol/server-everything "$MCP_EVERYTHING_VERSION" \
  || ! have @modelcontextprotocol/server-filesystem "$MCP_FILESYSTEM_VERSION" \
  || ! have @modelcontextprotocol/inspector-cli "$MCP_INSPECTOR_VERSION"; then
  npm install --prefix "$MCP_DIR" --no-audit --no-fund --loglevel=error --no-save \
    "@modelcontextprotocol/server-everything@$MCP_EVERYTHING_VERSION" \
    "@modelcontextprotocol/server-filesystem@$MCP_FILESYSTEM_VERSION" \
    "@modelcontextprotocol/inspector-cli@$MCP_INSPECTOR_VERSION" >&2
fi
for pair in mcp-server-everything:server-everything mcp-server-filesystem:server-filesystem \
  mcp-inspector-cli:inspector-cli; do
  bin="${pair%%:*}" pkg="@modelcontextprotocol/${pair#*:}"
  [ -x "$MCP_DIR/node_modules/.bin/$bin" ] || { echo "mcp-env.sh: $bin is missing after the install" >&2; exit 1; }
  echo "$bin: $MCP_DIR/node_modules/.bin/$bin ($pkg $(version "$pkg"))"
done
