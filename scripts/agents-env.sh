#!/usr/bin/env bash
# Install (idempotently) the coding agents the tests run headless against the gateway,
# from the npm registry at pinned versions, into <repo>/.tools/agents (git-ignored):
# Claude Code (`claude`, which speaks Anthropic Messages) and the Codex CLI (`codex`,
# which speaks the OpenAI Responses API). Prints the path of each binary and its version.
#
# Usage: scripts/agents-env.sh
#
# Environment:
#   CLAUDE_CODE_VERSION   @anthropic-ai/claude-code version (default below)
#   CODEX_VERSION         @openai/codex version (default below)
#   AGENTS_DIR            where they go (default: <repo>/.tools/agents)
#
# Needs Node.js and npm (Debian's nodejs and npm packages); only the npm registry is
# contacted.
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
case "${1:-}" in -h|--help) usage; exit 0 ;; '') ;; *) usage >&2; exit 2 ;; esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLAUDE_CODE_VERSION="${CLAUDE_CODE_VERSION:-2.1.332}"
CODEX_VERSION="${CODEX_VERSION:-0.171.0}"
AGENTS_DIR="${AGENTS_DIR:-$ROOT/.tools/agents}"

command -v npm >/dev/null || { echo "agents-env.sh: npm is missing (apt-get install nodejs npm)" >&2; exit 1; }
mkdir -p "$AGENTS_DIR"
have() { # have PACKAGE VERSION: installed at that version
  node -e 'const p=require(process.argv[1]+"/node_modules/"+process.argv[2]+"/package.json");
           process.exit(p.version===process.argv[3]?0:1)' "$AGENTS_DIR" "$1" "$2" 2>/dev/null
}
if ! have @anthropic-ai/claude-code "$CLAUDE_CODE_VERSION" || ! have @openai/codex "$CODEX_VERSION"; then
  npm install --prefix "$AGENTS_DIR" --no-audit --no-fund --loglevel=error --no-save \
    "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION" >&2
fi
echo "claude: $AGENTS_DIR/node_modules/.bin/claude ($("$AGENTS_DIR/node_modules/.bin/claude" --version))"
echo "codex: $AGENTS_DIR/node_modules/.bin/codex ($("$AGENTS_DIR/node_modules/.bin/codex" --version))"
