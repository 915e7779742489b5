#!/usr/bin/env bash
# Compares what two builds of grag write on the demo's book: the demo itself, then every query
# and search method as JSON, the index's tables and `grag stats`, with timings and paths masked.
# A refactoring should leave them byte-identical.
# Usage: scripts/compare_builds.sh OLD/grag NEW/grag [WORK_DIR]
set -euo pipefail
old=$1 new=$2 work=${3:-/tmp/grag-compare}
here=$(cd "$(dirname "$0")/.." && pwd)
mask() {
  WORK=$work BIN=$bin python3 -c '
import json, os, re, sys
TIMING = re.compile(r"(time|_ms|_us|seconds|elapsed|duration|_at)$")
def drop(v):
    if isinstance(v, dict):
        return {k: drop(x) for k, x in v.items() if not TIMING.search(k)}
    if isinstance(v, list):
        return [drop(x) for x in v]
    return v
for line in sys.stdin:
    line = line.replace(os.environ["BIN"], "GRAG")
    line = re.sub(re.escape(os.environ["WORK"]) + "/(old|new)", "WORK", line)
    try:
        print(json.dumps(drop(json.loads(line)), sort_keys=True))
    except ValueError:
        print(re.sub(r"\b[0-9]+(\.[0-9]+)? ?(ms|s|us)\b", "N", line), end="")
'
}
run() {
  local grag=$1 out=$2
  bin=$grag
  local demo=$work/$(basename "$out")
  DEMO_DIR=$demo bash "$here/scripts/demo.sh" "$grag" 2>&1 | mask >"$out.demo"
  local g=("$grag" --root "$demo" --no-llm)
  : >"$out.json"
  for q in "What are the main themes of this story?" "Who is Jacob Marley?" "What does Scrooge learn from the Ghost of Christmas Yet to Come?"; do
    for m in global local basic hybrid lazy auto; do
      "${g[@]}" query --json --no-stream --method $m "$q" 2>&1 | mask >>"$out.json" || true
    done
    for m in vector bm25 graph hybrid; do
      "${g[@]}" search --json --method $m --k 10 "$q" 2>&1 | mask >>"$out.json" || true
    done
  done
  "${g[@]}" stats --json 2>&1 | mask >"$out.stats"
  for t in entities relationships entity_communities communities reports chunks documents; do
    "${g[@]}" sql --json --max-rows 0 "SELECT * FROM $t ORDER BY 1" 2>&1 | mask >>"$out.tables" || true
  done
}
rm -rf "$work"; mkdir -p "$work"
run "$old" "$work/old"
run "$new" "$work/new"
status=0
for kind in demo json stats tables; do
  if cmp -s "$work/old.$kind" "$work/new.$kind"; then
    echo "$kind: identical ($(wc -c <"$work/new.$kind") bytes)"
  else
    echo "$kind: DIFFERENT"; diff "$work/old.$kind" "$work/new.$kind" | head -20 || true; status=1
  fi
done
exit $status
