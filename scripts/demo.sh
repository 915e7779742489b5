#!/usr/bin/env bash
# The demo: index a bundled public-domain book with no LLM at all (built-in NLP extraction,
# lexical embeddings, extractive reports) and answer a global and a local question from it.
# The project is kept in DEMO_DIR (default: build-release/demo) so it can be explored afterwards.
set -euo pipefail
GRAG=${1:-build-release/grag}
here=$(cd "$(dirname "$0")/.." && pwd)
book="$here/tests/data/christmas_carol/christmas_carol.txt"   # provenance: tests/data/christmas_carol/SOURCE.md
demo=${DEMO_DIR:-$(dirname "$GRAG")/demo}

rm -rf "$demo"
echo "== grag init $demo"
"$GRAG" init "$demo" >/dev/null
# The story without Project Gutenberg's header and licence, which are not part of it.
sed -n '/^\*\*\* START OF/,/^\*\*\* END OF/p' "$book" | sed '1d;$d' >"$demo/input/christmas_carol.txt"

# --no-llm: whatever GRAG_LLM_* the environment holds, the demo calls no model.
g() { "$GRAG" --root "$demo" --no-llm "$@"; }

echo
echo "== grag index   (A Christmas Carol, no LLM)"
start=$(date +%s%N)
g index --no-progress
end=$(date +%s%N)
ms=$(((end - start) / 1000000))
printf 'indexed in %d.%03d s of wall time\n' $((ms / 1000)) $((ms % 1000))

echo
echo "== grag query \"What are the main themes of this story?\"   (global search)"
g query --no-stream "What are the main themes of this story?"

echo
echo "== grag query --method local \"Who is Jacob Marley?\"   (local search)"
g query --no-stream --method local "Who is Jacob Marley?"

echo
echo "== grag search --k 3 \"Who is Jacob Marley?\"   (retrieval only: hybrid vector + BM25 + graph)"
g search --k 3 "Who is Jacob Marley?"

echo
echo "== grag entities list --search marley   (entity resolution: the names of one character are one entity)"
g entities list --search marley --limit 3

echo
echo "The project is in $demo. Try:"
echo "  $GRAG --root $demo stats"
echo "  $GRAG --root $demo query \"Who is Bob Cratchit?\"          (the router picks the method)"
echo "  $GRAG --root $demo search --json \"Tiny Tim\""
echo "  $GRAG --root $demo check"
echo "  $GRAG --root $demo entities aliases              (every name resolution joined, and why)"
echo "  $GRAG --root $demo serve                         (open http://127.0.0.1:8080/ for the web UI; HTTP API and OpenAI-compatible chat; see docs/server.md)"
echo "To use an LLM instead, see docs/local-models.md and docs/configuration.md."
