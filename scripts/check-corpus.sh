#!/usr/bin/env bash
# Scores `toolmend mend --lines` on the external tool-call corpus and fails
# below the bars of issue 2 (overall >= 95%, syntax >= 97%, envelope >= 95%,
# schema >= 93%, every feedback record answered with feedback).
# The corpus lives outside the project (../shared by default); it is never copied in.
set -euo pipefail
cd "$(dirname "$0")/.."
shared="${TOOLMEND_SHARED:-../shared}"
corpus="${CORPUS:-$shared/corpus/tool_calls_dev.jsonl}"
scorer="$shared/tools/score_repair.py"
if [ ! -f "$corpus" ] || [ ! -f "$scorer" ]; then
  echo "corpus or scorer not found ($corpus); skipped"
  exit 0
fi
[ -x target/release/toolmend ] || cargo build --release --locked -p toolmend-cli
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
python3 "$scorer" --corpus "$corpus" --tool cmd --cmd "target/release/toolmend mend --lines" \
  --cmd-input record --json-out "$out/score.json" | sed -n '1,6p'
python3 - "$out/score.json" "$corpus" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
records = {json.loads(l)["id"]: json.loads(l) for l in open(sys.argv[2])}
bars = {"overall": 0.95, "syntax": 0.97, "envelope": 0.95, "schema": 0.93}
rates = {"overall": s["rate"]}
rates.update({g: v["pass"] / v["n"] for g, v in s["groups"].items()})
failed = [f"{k} {rates.get(k, 0):.1%} < {b:.0%}" for k, b in bars.items() if rates.get(k, 0) < b]
# No invented values: every record that needs feedback must get feedback.
invented = [r["id"] for r in s["results"]
            if records[r["id"]]["expected_outcome"] == "feedback" and not r["pass"]]
if invented:
    failed.append(f"feedback records answered with a value: {invented}")
for k in bars:
    print(f"  {k:9s} {rates.get(k, 0):6.1%}  (bar {bars[k]:.0%})")
if failed:
    print("BARS MISSED: " + "; ".join(failed))
    sys.exit(1)
print("corpus bars met")
PY
