// The request parameters are declared once: grag/engine.h's ranges (kTopKRange, kLevelRange,
// kBudgetRange) and methods (kQueryMethods), grag/retrieval.h's kRetrievalMethods. The HTTP
// schema, the MCP tools' schemas and the CLI's checks are seen here to follow them, through the
// real binary; the engine's own check is in tests/python (Engine.query with k out of range).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "grag/engine.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using nlohmann::json;
using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;

std::string Grag(const std::string& args) { return ShellQuote(GRAG_BINARY) + " " + args; }

json QueryMethodList() {
  json out = json::array();
  for (QueryMethod m : kQueryMethods) out.push_back(std::string(QueryMethodName(m)));
  return out;
}

json RetrievalMethodList() {
  json out = json::array();
  for (RetrievalMethod m : kRetrievalMethods) out.push_back(std::string(RetrievalMethodName(m)));
  return out;
}

void ExpectRange(const json& property, const ParamRange& range, const std::string& where) {
  EXPECT_EQ(property.value("minimum", int64_t{-99}), range.min) << where;
  EXPECT_EQ(property.value("maximum", int64_t{-99}), range.max) << where;
}

TEST(RequestParamsTest, TheHttpSchemaTakesTheEnginesRangesAndMethods) {
  TempDir dir;
  auto api = RunCommand("cd " + ShellQuote(dir.path().string()) + " && " + Grag("serve --openapi"));
  ASSERT_EQ(api.exit_code, 0) << api.err;
  const json doc = json::parse(api.out);
  auto body = [&](const char* path) {
    return doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
              ["properties"];
  };
  const json query = body("/v1/query");
  ExpectRange(query["k"], kTopKRange, "/v1/query k");
  ExpectRange(query["level"], kLevelRange, "/v1/query level");
  ExpectRange(query["budget"], kBudgetRange, "/v1/query budget");
  EXPECT_EQ(query["method"]["enum"], QueryMethodList());
  const json search = body("/v1/search");
  ExpectRange(search["k"], kTopKRange, "/v1/search k");
  EXPECT_EQ(search["method"]["enum"], RetrievalMethodList());
}

TEST(RequestParamsTest, TheMcpToolsTakeTheEnginesRangesAndMethods) {
  TempDir dir;
  const std::string root = dir / "p";
  ASSERT_EQ(RunCommand(Grag("init " + ShellQuote(root))).exit_code, 0);
  const std::string session = dir / "session.jsonl";
  {
    std::ofstream in(session);
    in << json{{"jsonrpc", "2.0"},
               {"id", 1},
               {"method", "initialize"},
               {"params",
                {{"protocolVersion", "2025-06-18"},
                 {"capabilities", json::object()},
                 {"clientInfo", {{"name", "params"}, {"version", "1"}}}}}}
              .dump()
       << "\n"
       << json{{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}}.dump() << "\n";
  }
  auto mcp =
      RunCommand(Grag("--root " + ShellQuote(root) + " --no-llm mcp < " + ShellQuote(session)));
  ASSERT_EQ(mcp.exit_code, 0) << mcp.err;
  std::map<std::string, json> tools;
  std::istringstream lines(mcp.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    const json reply = json::parse(line);
    if (reply.value("id", 0) != 2) continue;
    for (const json& tool : reply["result"]["tools"]) {
      tools[tool["name"].get<std::string>()] = tool["inputSchema"]["properties"];
    }
  }
  ASSERT_TRUE(tools.count("query") && tools.count("search") && tools.count("list_communities"))
      << mcp.out;
  ExpectRange(tools["query"]["top_k"], kTopKRange, "query top_k");
  ExpectRange(tools["query"]["level"], kLevelRange, "query level");
  ExpectRange(tools["query"]["budget"], kBudgetRange, "query budget");
  EXPECT_EQ(tools["query"]["method"]["enum"], QueryMethodList());
  ExpectRange(tools["search"]["top_k"], kTopKRange, "search top_k");
  EXPECT_EQ(tools["search"]["method"]["enum"], RetrievalMethodList());
  ExpectRange(tools["list_communities"]["level"], kLevelRange, "list_communities level");
}

TEST(RequestParamsTest, TheCliRefusesOnePastEachEndOfTheEnginesRanges) {
  TempDir dir;
  const std::string root = dir / "p";
  ASSERT_EQ(RunCommand(Grag("init " + ShellQuote(root))).exit_code, 0);
  struct Case {
    std::string command;
    std::string flag;
    ParamRange range;
  };
  for (const Case& c :
       {Case{"query", "--k", kTopKRange}, Case{"query", "--level", kLevelRange},
        Case{"query", "--budget", kBudgetRange}, Case{"search", "--k", kTopKRange}}) {
    for (int64_t value : {c.range.min - 1, c.range.max + 1}) {
      auto r = RunCommand(Grag("--root " + ShellQuote(root) + " " + c.command + " " + c.flag + " " +
                               std::to_string(value) + " 'Who is Scrooge?'"));
      EXPECT_EQ(r.exit_code, 2) << c.command << " " << c.flag << " " << value;
      EXPECT_NE(r.err.find(std::to_string(c.range.max)), std::string::npos)
          << c.command << " " << c.flag << " " << value << ": " << r.err;
    }
  }
}

}  // namespace
}  // namespace grag
