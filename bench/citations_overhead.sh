#!/bin/sh
# What character-level citations add to a one-off `grag query` (issue 38, part 3): wall time of
# the same question with citations.max_spans = 0 (the baseline: no passages) and 3 (the
# default), interleaved, 8 runs each, per method, on a no-LLM index of the book.
# Usage: bench/citations_overhead.sh build/grag
set -eu
G=$(realpath "${1:-build/grag}")
DATA=$(realpath "$(dirname "$0")/../tests/data/christmas_carol/christmas_carol.txt")
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
mkdir -p "$DIR/input" && cp "$DATA" "$DIR/input/"
cd "$DIR"
"$G" index > /dev/null 2>&1
Q="What happened to Marley and Scrooge's counting-house?"
for m in local global hybrid; do
  : > t0; : > t3
  for i in 1 2 3 4 5 6 7 8; do
    for set in 0 3; do
      s=$(date +%s%N)
      "$G" --set citations.max_spans=$set query --json --method $m "$Q" > out$set.json
      e=$(date +%s%N)
      echo $(( (e - s) / 1000000 )) >> t$set
    done
  done
  spans=$(python3 -c "import json; print(sum(len(c.get('spans', [])) for c in json.load(open('out3.json'))['citations']))")
  printf "%-7s max_spans=0: median %s ms | max_spans=3: median %s ms (%s spans)\n" $m \
    "$(sort -n t0 | sed -n 4p)" "$(sort -n t3 | sed -n 4p)" "$spans"
done
