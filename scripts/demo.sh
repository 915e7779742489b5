#!/usr/bin/env bash
# The demo: a fresh project in a temporary folder, the bundled public-domain book as input,
# and what grag can do with it so far (chunking and cost estimate; indexing and questions
# come with the indexing and search work).
set -euo pipefail
GRAG=${1:-build-release/grag}
here=$(cd "$(dirname "$0")/.." && pwd)
book="$here/tests/data/christmas_carol/christmas_carol.txt"
demo=$(mktemp -d /tmp/grag-demo-XXXXXX)
trap 'rm -rf "$demo"' EXIT

echo "== grag init $demo"
"$GRAG" init "$demo" >/dev/null
cp "$book" "$demo/input/"
echo "== grag config (the settings in force)"
"$GRAG" --root "$demo" config | head -12
echo "   ..."
echo "== grag chunk input/christmas_carol.txt (what indexing would cost)"
(cd "$demo" && "$GRAG" chunk input/christmas_carol.txt | tail -4)
