#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build, test and benchmark grag.
# Idempotent: when everything is present it only checks, in about a second.
#
#   scripts/setup.sh               everything: build, tests, benchmarks, the Python package
#   scripts/setup.sh --build-only  what building the grag binaries and library needs (Dockerfile)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_ONLY=0
case "${1:-}" in
  --build-only) BUILD_ONLY=1 ;;
  "") ;;
  *) echo "usage: scripts/setup.sh [--build-only]" >&2; exit 2 ;;
esac

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config ca-certificates
  libsqlite3-dev libigraph-dev libcurl4-openssl-dev libssl-dev libcpp-httplib-dev
  nlohmann-json3-dev libcli11-dev libhnswlib-dev libtomlplusplus-dev libspdlog-dev libfmt-dev
  libutf8proc-dev libpcre2-dev
  nettle-dev  # SHA-256 (src/core/hash.cpp)
  zlib1g-dev  # the reply cache's compression (src/store/reply_codec.cpp)
  libpq-dev   # the PostgreSQL store backend
)
if ((!BUILD_ONLY)); then
  APT_PACKAGES+=(
    git sqlite3 libgtest-dev libgmock-dev libbenchmark-dev clang-format python3
    postgresql  # the PostgreSQL store's tests (a throwaway cluster)
    chromium fonts-dejavu-core  # the web UI's browser test: headless Chromium, and a font to draw
    python3-dev python3-venv pybind11-dev python3-pytest python3-pandas  # the Python package, its tests
  )
fi
TIKTOKEN_VERSION=1.0.22   # npm package holding the cl100k_base / o200k_base vocabularies
OPENAI_VERSION=5.23.2     # the official OpenAI client, run against `grag serve` by e2e_openai_client_test
                          # (7.x and later declare node >= 22; 5.x runs on node 20)
CYTOSCAPE_VERSION=3.34.4  # the web UI's graph view (MIT); its dist file is embedded in grag
FCOSE_VERSION=2.2.0       # cytoscape-fcose: the fast force-directed layout (MIT), with the two
COSE_BASE_VERSION=2.2.0   # libraries it is built on (MIT), pinned too: all three are embedded
LAYOUT_BASE_VERSION=2.0.1
SWAGGER_UI_VERSION=5.35.0  # swagger-ui-dist (Apache-2.0): the API reference grag serve shows at /docs
PUPPETEER_CORE_VERSION=24.43.1  # drives Debian's chromium in e2e_web_ui_test (Apache-2.0)
                                # (25.x declares node >= 22; 24.x runs on node 18 and 20)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm packages, pinned: the tokenizer vocabularies (and node tiktoken, which the parity test and
# benchmark compare against), the OpenAI client the server's compatibility test drives, the graph
# library and layout the web UI embeds, Swagger UI (embedded too, for /docs), and puppeteer-core
# for the web UI's browser test (it brings no browser of its own: the test uses Debian's
# chromium).
NPM_DIR=.deps/npm
npm_wanted=()
NPM_PACKAGES=("tiktoken@$TIKTOKEN_VERSION" "cytoscape@$CYTOSCAPE_VERSION"
  "cytoscape-fcose@$FCOSE_VERSION" "cose-base@$COSE_BASE_VERSION" "layout-base@$LAYOUT_BASE_VERSION"
  "swagger-ui-dist@$SWAGGER_UI_VERSION")
if ((!BUILD_ONLY)); then
  NPM_PACKAGES+=("openai@$OPENAI_VERSION" "puppeteer-core@$PUPPETEER_CORE_VERSION")
fi
for spec in "${NPM_PACKAGES[@]}"; do
  manifest="$NPM_DIR/node_modules/${spec%@*}/package.json"
  if [ ! -f "$manifest" ] || ! grep -q "\"version\": \"${spec##*@}\"" "$manifest"; then
    npm_wanted+=("$spec")
  fi
done
if ((${#npm_wanted[@]})); then
  echo "setup: fetching ${npm_wanted[*]} from the npm registry" >&2
  mkdir -p "$NPM_DIR"
  npm install --silent --no-audit --no-fund --save-exact --prefix "$NPM_DIR" "${npm_wanted[@]}" >/dev/null
fi
echo "setup: all dependencies present" >&2
