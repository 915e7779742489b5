// Runs the npm `tiktoken` package under node (tests/tools/tiktoken_ids.js) to get reference
// token ids and chunks for parity tests. Header-only: it needs the GRAG_SOURCE_DIR definition
// that only test executables get.
#pragma once

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "grag/status.h"
#include "support/temp_dir.h"

namespace grag::testing {

namespace tiktoken_internal {

inline std::string ShellQuoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace tiktoken_internal

// Sends `request` to tests/tools/tiktoken_ids.js (see that file for the request and reply
// format) and returns its reply. Fails with a message that says to run scripts/setup.sh when
// node or the npm package is missing: parity tests must fail then, not skip.
inline Result<nlohmann::json> RunNodeTiktoken(const nlohmann::json& request) {
  using tiktoken_internal::ReadFile;
  using tiktoken_internal::ShellQuoted;
  const std::string source_dir = GRAG_SOURCE_DIR;
  const std::string setup_hint = "run scripts/setup.sh (or `make setup`) to install it";
  if (std::system("command -v node >/dev/null 2>&1") != 0) {
    return Status::Unavailable(
        "node is not installed, and the tokenizer parity tests compare with node tiktoken: " +
        setup_hint);
  }
  const std::string modules = source_dir + "/.deps/npm/node_modules";
  TempDir dir;
  const std::string req = dir / "request.json";
  const std::string rep = dir / "reply.json";
  const std::string err = dir / "stderr.txt";
  // JSON cannot carry invalid UTF-8; parity inputs are valid, and `strict` turns a bug in a
  // test's input into an exception rather than silently replaced text.
  dir.Write("request.json", request.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict));
  const std::string cmd = "NODE_PATH=" + ShellQuoted(modules) + " node " +
                          ShellQuoted(source_dir + "/tests/tools/tiktoken_ids.js") + " " +
                          ShellQuoted(req) + " " + ShellQuoted(rep) + " 2>" + ShellQuoted(err);
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    return Status::Unavailable(
        "node tiktoken failed (status " + std::to_string(rc) + "): " + ReadFile(err) +
        "If the npm package tiktoken is missing from " + modules + ", " + setup_hint + ".");
  }
  try {
    return nlohmann::json::parse(ReadFile(rep));
  } catch (const std::exception& e) {
    return Status::Parse(std::string("node tiktoken reply: ") + e.what());
  }
}

}  // namespace grag::testing
