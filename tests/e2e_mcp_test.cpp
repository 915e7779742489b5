// End to end, the MCP server: the real grag binary runs `grag --root P --no-llm mcp` with a
// scripted client session on stdin (one JSON-RPC message per line; the server exits at EOF),
// and every line it writes on stdout must be a JSON-RPC reply. Covers the lifecycle and the
// protocol errors, every tool on an indexed copy of A Christmas Carol, and add_document making
// a new text findable within the same session.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "grag/store.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using nlohmann::json;
using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;

// What one session printed.
struct Session {
  int exit_code = -1;
  std::string err;
  std::vector<json> lines;  // each stdout line, parsed

  // The reply to request `id` (inside a batch reply too); null (and a test failure) if none.
  json Reply(const json& id) const {
    for (const auto& line : lines) {
      for (const auto& m : line.is_array() ? line : json::array({line})) {
        if (m.contains("id") && m["id"] == id) return m;
      }
    }
    ADD_FAILURE() << "no reply to request " << id.dump();
    return nullptr;
  }
};

std::string Request(const json& id, const std::string& method, json params = nullptr) {
  json m = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
  if (!params.is_null()) m["params"] = std::move(params);
  return m.dump();
}

std::string Notification(const std::string& method) {
  return json{{"jsonrpc", "2.0"}, {"method", method}}.dump();
}

std::string Call(int id, const std::string& tool, json arguments) {
  return Request(id, "tools/call", {{"name", tool}, {"arguments", std::move(arguments)}});
}

std::string Initialize(int id, const std::string& version = "2025-06-18") {
  return Request(id, "initialize",
                 {{"protocolVersion", version},
                  {"capabilities", json::object()},
                  {"clientInfo", {{"name", "e2e_mcp_test"}, {"version", "1"}}}});
}

// A tool's result, checked for the MCP shape: content items of type text.
struct ToolResult {
  bool is_error = true;
  std::vector<std::string> texts;
  json structured;  // structuredContent, null when absent

  const std::string& Text(size_t i = 0) const {
    static const std::string kNone;
    return i < texts.size() ? texts[i] : kNone;
  }
  // The JSON of the last content item (the tools put their JSON last).
  json Json() const { return texts.empty() ? json() : json::parse(texts.back()); }
};

ToolResult Tool(const json& reply) {
  ToolResult r;
  EXPECT_TRUE(reply.contains("result")) << reply.dump();
  if (!reply.contains("result")) return r;
  const json& result = reply["result"];
  r.is_error = result.value("isError", false);
  EXPECT_TRUE(result.contains("content") && result["content"].is_array()) << reply.dump();
  if (!result.contains("content")) return r;
  for (const auto& item : result["content"]) {
    EXPECT_EQ(item["type"], "text");
    r.texts.push_back(item.value("text", ""));
  }
  if (result.contains("structuredContent")) r.structured = result["structuredContent"];
  return r;
}

int ErrorCode(const json& reply) {
  if (!reply.contains("error")) {
    ADD_FAILURE() << "not an error reply: " << reply.dump();
    return 0;
  }
  return reply["error"]["code"].get<int>();
}

class E2eMcpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "carol";
    auto init = RunCommand(Grag("init " + ShellQuote(root_)));
    ASSERT_EQ(init.exit_code, 0) << init.err;
  }

  void IndexTheBook() {
    std::filesystem::copy_file(
        std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt",
        root_ + "/input/christmas_carol.txt");
    auto index = RunCommand(Offline("index --no-progress"));
    ASSERT_EQ(index.exit_code, 0) << index.err;
  }

  std::string Grag(const std::string& args) const { return ShellQuote(GRAG_BINARY) + " " + args; }
  std::string Offline(const std::string& args) const {
    return Grag("--root " + ShellQuote(root_) + " --no-llm " + args);
  }

  // Runs one MCP session with `messages` on stdin, one per line.
  Session Run(const std::vector<std::string>& messages) {
    std::string script;
    for (const auto& m : messages) script += m + "\n";
    const std::string file =
        dir_.Write("session-" + std::to_string(++sessions_) + ".jsonl", script);
    auto r = RunCommand(Offline("mcp") + " < " + ShellQuote(file));
    Session s;
    s.exit_code = r.exit_code;
    s.err = r.err;
    std::istringstream out(r.out);
    for (std::string line; std::getline(out, line);) {
      // stdout is the protocol channel: every line, and nothing else, is a JSON-RPC message.
      try {
        s.lines.push_back(json::parse(line));
      } catch (const json::parse_error&) {
        ADD_FAILURE() << "a stdout line is not JSON: " << line;
        continue;
      }
      for (const auto& m :
           s.lines.back().is_array() ? s.lines.back() : json::array({s.lines.back()})) {
        EXPECT_EQ(m["jsonrpc"], "2.0") << line;
        EXPECT_TRUE(m.contains("id")) << line;
        EXPECT_NE(m.contains("result"), m.contains("error")) << line;
      }
    }
    return s;
  }

  TempDir dir_;
  std::string root_;
  int sessions_ = 0;
};

TEST_F(E2eMcpTest, SpeaksTheProtocolAndReportsErrorsBeforeAnyIndexExists) {
  const Session s = Run({
      Initialize(1, "2025-03-26"),
      Notification("notifications/initialized"),
      Initialize(2, "1999-01-01"),
      Request(3, "ping"),
      Request(4, "tools/list"),
      Call(5, "query", {{"question", "Who is Jacob Marley?"}}),
      "{\"jsonrpc\": \"2.0\", \"id\": 6, \"method\": ",  // cut short
      Request(7, "resources/read", {{"uri", "x"}}),
      Call(8, "delete_everything", json::object()),
      Call(9, "search", json::object()),
      Call(10, "query", {{"question", "Who?"}, {"top_k", "5"}}),
      Call(11, "query", {{"question", "Who?"}, {"method", "fancy"}}),
      Call(12, "query", {{"questoin", "Who?"}}),
      Call(13, "get_entity", json::object()),
      Request(14, "tools/call", {{"arguments", json::object()}}),
      json{{"jsonrpc", "2.0"},
           {"method", "tools/call"},
           {"params", {{"name", "query"}, {"arguments", {{"question", "x"}}}}}}
          .dump(),
      Notification("notifications/whatever"),
      "{\"id\": 15, \"method\": \"ping\"}",  // no "jsonrpc"
      Request("abc", "ping"),
      "[" + Request(16, "ping") + "," + Notification("notifications/initialized") + "]",
      "",  // blank lines are skipped
      "[1]",
  });
  ASSERT_EQ(s.exit_code, 0) << s.err;

  // initialize: a supported version is echoed, another gets the newest.
  const json init = s.Reply(1);
  ASSERT_TRUE(init.contains("result")) << init.dump();
  EXPECT_EQ(init["result"]["protocolVersion"], "2025-03-26");
  EXPECT_TRUE(init["result"]["capabilities"]["tools"].is_object());
  EXPECT_EQ(init["result"]["serverInfo"]["name"], "grag");
  EXPECT_FALSE(init["result"]["serverInfo"]["version"].get<std::string>().empty());
  EXPECT_EQ(s.Reply(2)["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(s.Reply(3)["result"], json::object());

  // tools/list: every tool, each with a description and an object schema whose required
  // arguments are among its properties.
  const json tools = s.Reply(4)["result"]["tools"];
  std::set<std::string> names;
  for (const auto& t : tools) {
    const std::string name = t["name"];
    names.insert(name);
    EXPECT_GT(t["description"].get<std::string>().size(), 40u) << name;
    const json& schema = t["inputSchema"];
    EXPECT_EQ(schema["type"], "object") << name;
    ASSERT_TRUE(schema["properties"].is_object()) << name;
    for (const auto& [prop, spec] : schema["properties"].items()) {
      EXPECT_TRUE(spec.contains("type")) << name << "." << prop;
      EXPECT_TRUE(spec.contains("description")) << name << "." << prop;
    }
    for (const auto& r : schema.value("required", json::array())) {
      EXPECT_TRUE(schema["properties"].contains(r.get<std::string>())) << name << ": " << r;
    }
    if (name == "query" || name == "search") {
      EXPECT_EQ(schema["required"], json({"question"}));
    }
    if (name == "add_document") {
      EXPECT_EQ(schema["required"], json({"text"}));
    }
    if (name == "get_community_report") {
      EXPECT_EQ(schema["required"], json({"id"}));
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"query", "search", "get_entity", "get_community_report",
                                          "list_communities", "add_document"}));

  // No index yet: a tool error that says what to do.
  const ToolResult no_index = Tool(s.Reply(5));
  EXPECT_TRUE(no_index.is_error);
  EXPECT_NE(no_index.Text().find("grag index"), std::string::npos) << no_index.Text();
  EXPECT_NE(no_index.Text().find("add_document"), std::string::npos) << no_index.Text();

  // Protocol errors.
  const json& parse_error = s.lines.at(5);  // the sixth reply: the cut-short line's
  EXPECT_EQ(ErrorCode(parse_error), -32700) << parse_error.dump();
  EXPECT_TRUE(parse_error["id"].is_null());
  EXPECT_EQ(ErrorCode(s.Reply(7)), -32601);
  const json unknown_tool = s.Reply(8);
  EXPECT_EQ(ErrorCode(unknown_tool), -32602);
  EXPECT_NE(unknown_tool["error"]["message"].get<std::string>().find("delete_everything"),
            std::string::npos);
  EXPECT_EQ(ErrorCode(s.Reply(14)), -32602);  // tools/call without a name
  EXPECT_EQ(ErrorCode(s.Reply(15)), -32600);
  EXPECT_EQ(s.Reply("abc")["result"], json::object());

  // Bad arguments: tool results with isError, naming the argument.
  auto expect_tool_error = [&](int id, const std::string& says) {
    const ToolResult r = Tool(s.Reply(id));
    EXPECT_TRUE(r.is_error) << id;
    EXPECT_NE(r.Text().find(says), std::string::npos) << id << ": " << r.Text();
  };
  expect_tool_error(9, "missing required argument \"question\"");
  expect_tool_error(10, "\"top_k\" must be an integer");
  expect_tool_error(11, "\"method\" must be one of auto, global, local, basic, hybrid");
  expect_tool_error(12, "unknown argument \"questoin\"");
  expect_tool_error(13, "name or its id");

  // Exactly one line per request with an id, the bad JSON line, the invalid batch member, and
  // the batch: the notifications (the tools/call one too) got none.
  ASSERT_EQ(s.lines.size(), 18u) << s.lines.size();
  const json& batch = s.lines.at(16);
  ASSERT_TRUE(batch.is_array()) << batch.dump();
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0]["id"], 16);
  const json& bad_batch = s.lines.at(17);
  ASSERT_TRUE(bad_batch.is_array()) << bad_batch.dump();
  ASSERT_EQ(bad_batch.size(), 1u);
  EXPECT_EQ(ErrorCode(bad_batch[0]), -32600);
  // And the logs went to stderr.
  EXPECT_NE(s.err.find("[mcp]"), std::string::npos) << s.err;
}

TEST_F(E2eMcpTest, ToolsAnswerFromTheIndex) {
  ASSERT_NO_FATAL_FAILURE(IndexTheBook());
  const Session s = Run({
      Initialize(1),
      Notification("notifications/initialized"),
      Call(2, "query", {{"question", "Who is Jacob Marley?"}, {"method", "local"}}),
      Call(3, "query", {{"question", "What are the main themes of this story?"}}),
      Call(4, "search", {{"question", "Who is Jacob Marley?"}, {"top_k", 3}}),
      Call(5, "get_entity", {{"name", "jacob MARLEY"}}),
      Call(6, "get_entity", {{"name", "Jacob Marleyy"}}),
      Call(7, "get_entity", {{"name", "Xyzzy Plugh"}}),
      Call(8, "list_communities", {{"level", 0}}),
      Call(9, "query", {{"question", "What are the main themes?"}, {"level", 99}}),
  });
  ASSERT_EQ(s.exit_code, 0) << s.err;

  // query, local: the answer first, then the full result as JSON (and as structuredContent).
  const ToolResult local = Tool(s.Reply(2));
  ASSERT_FALSE(local.is_error) << local.Text();
  ASSERT_EQ(local.texts.size(), 2u);
  EXPECT_NE(local.Text(0).find("Marley"), std::string::npos) << local.Text(0);
  const json l = local.Json();
  EXPECT_EQ(l["answer"], local.Text(0));
  EXPECT_FALSE(l["citations"].empty()) << l.dump();
  EXPECT_EQ(local.structured, l);

  // query, auto: the router picks global for a corpus-wide question; the answer cites reports.
  const ToolResult global = Tool(s.Reply(3));
  ASSERT_FALSE(global.is_error) << global.Text();
  EXPECT_GT(global.Text(0).size(), 100u);
  const json g = global.Json();
  EXPECT_EQ(g["route"]["method"], "global") << g["route"].dump();
  EXPECT_GE(g["citations"].size(), 1u);

  // search: ranked passages with their text.
  const ToolResult search = Tool(s.Reply(4));
  ASSERT_FALSE(search.is_error) << search.Text();
  const json sr = search.Json();
  ASSERT_EQ(sr["chunks"].size(), 3u) << sr.dump();
  EXPECT_EQ(sr["chunks"][0]["rank"], 1);
  EXPECT_EQ(sr["chunks"][0]["document_id"], "christmas_carol.txt");
  EXPECT_FALSE(sr["chunks"][0]["text"].get<std::string>().empty());

  // get_entity by a name as the index matches names (case folded).
  const ToolResult entity = Tool(s.Reply(5));
  ASSERT_FALSE(entity.is_error) << entity.Text();
  const json e = entity.Json();
  EXPECT_NE(e["name"].get<std::string>().find("Marley"), std::string::npos) << e["name"];
  EXPECT_GT(e["id"].get<int64_t>(), 0);
  EXPECT_FALSE(e["neighbours"].empty());
  EXPECT_FALSE(e["chunks"].empty());

  // Not found: said clearly, with the close names when there are some.
  const ToolResult typo = Tool(s.Reply(6));
  EXPECT_TRUE(typo.is_error);
  EXPECT_NE(typo.Text().find("no entity named \"Jacob Marleyy\""), std::string::npos)
      << typo.Text();
  EXPECT_NE(typo.Text().find("Close names: Jacob Marley"), std::string::npos) << typo.Text();
  const ToolResult unknown = Tool(s.Reply(7));
  EXPECT_TRUE(unknown.is_error);
  EXPECT_NE(unknown.Text().find("no entity named \"Xyzzy Plugh\""), std::string::npos)
      << unknown.Text();

  // list_communities: level 0 only, each with its report's title.
  const ToolResult list = Tool(s.Reply(8));
  ASSERT_FALSE(list.is_error) << list.Text();
  const json communities = list.Json();
  ASSERT_TRUE(communities.is_array());
  ASSERT_FALSE(communities.empty());
  for (const auto& c : communities) EXPECT_EQ(c["level"], 0) << c.dump();
  EXPECT_EQ(list.structured["communities"], communities);
  const int64_t community = communities[0]["id"];

  // An out-of-range level is the engine's kInvalidArgument, as a tool error.
  const ToolResult level = Tool(s.Reply(9));
  EXPECT_TRUE(level.is_error);
  EXPECT_NE(level.Text().find("level"), std::string::npos) << level.Text();

  // A second session: the report of a community listed above, the entity by its id.
  const Session s2 = Run({
      Initialize(1, "2024-11-05"),
      Call(2, "get_community_report", {{"id", community}}),
      Call(3, "get_community_report", {{"id", 987654}}),
      Call(4, "get_entity", {{"id", e["id"]}}),
  });
  ASSERT_EQ(s2.exit_code, 0) << s2.err;
  const ToolResult report = Tool(s2.Reply(2));
  ASSERT_FALSE(report.is_error) << report.Text();
  const json r = report.Json();
  EXPECT_EQ(r["id"], community);
  EXPECT_FALSE(r["report"]["title"].get<std::string>().empty()) << r.dump();
  EXPECT_FALSE(r["report"]["full_content"].get<std::string>().empty());
  EXPECT_FALSE(r["members"].empty());
  // 2024-11-05 predates structuredContent: only the content items.
  EXPECT_TRUE(report.structured.is_null());
  const ToolResult missing = Tool(s2.Reply(3));
  EXPECT_TRUE(missing.is_error);
  EXPECT_NE(missing.Text().find("no community with id 987654"), std::string::npos)
      << missing.Text();
  const ToolResult by_id = Tool(s2.Reply(4));
  ASSERT_FALSE(by_id.is_error) << by_id.Text();
  EXPECT_EQ(by_id.Json()["name"], e["name"]);
}

TEST_F(E2eMcpTest, AddDocumentIsFoundByTheNextQuestions) {
  ASSERT_NO_FATAL_FAILURE(IndexTheBook());
  const std::string text =
      "Zorblax Quindle was the lighthouse keeper of Vesterholm.\n\n"
      "Every winter Zorblax Quindle rowed to Vesterholm harbour with lamp oil, and the "
      "fishermen of Vesterholm called him the Keeper of the Northern Light. Zorblax Quindle "
      "never missed a night in forty years.\n";
  const std::string more =
      "In the spring Zorblax Quindle repaired the great lamp of Vesterholm lighthouse, and the "
      "harbour master of Vesterholm paid him in salted herring.\n";
  const Session s = Run({
      Initialize(1),
      // The index is read before the document arrives, so the session must see the update.
      Call(2, "search", {{"question", "Zorblax Quindle lighthouse keeper"}, {"top_k", 3}}),
      Call(3, "add_document", {{"text", text}, {"title", "Keeper notes"}}),
      Call(4, "search", {{"question", "Zorblax Quindle lighthouse keeper"}, {"top_k", 3}}),
      Call(5, "query", {{"question", "Who was Zorblax Quindle?"}, {"method", "hybrid"}}),
      // The no-LLM extractor keeps names found in two chunks at least: a second document.
      Call(11, "add_document", {{"text", more}, {"id", "notes/spring.md"}}),
      Call(6, "get_entity", {{"name", "Zorblax Quindle"}}),
      Call(7, "add_document", {{"text", "escape"}, {"id", "../x"}}),
      Call(8, "add_document", {{"text", "escape"}, {"id", "/tmp/x.txt"}}),
      Call(9, "add_document",
           {{"text", "Plimsoll Varnacle kept bees."}, {"id", "later/bees.md"}, {"index", false}}),
      Call(10, "search", {{"question", "Plimsoll Varnacle bees"}, {"top_k", 3}}),
  });
  ASSERT_EQ(s.exit_code, 0) << s.err;

  const json before = Tool(s.Reply(2)).Json();
  for (const auto& c : before["chunks"]) EXPECT_EQ(c["document_id"], "christmas_carol.txt");

  const ToolResult added = Tool(s.Reply(3));
  ASSERT_FALSE(added.is_error) << added.Text();
  const json doc = added.Json();
  EXPECT_EQ(doc["id"], "Keeper notes.txt");
  EXPECT_EQ(doc["indexed"], true);
  EXPECT_EQ(doc["summary"]["documents"]["added"], 1) << doc.dump();
  EXPECT_TRUE(std::filesystem::is_regular_file(root_ + "/input/Keeper notes.txt"));

  const json after = Tool(s.Reply(4)).Json();
  ASSERT_FALSE(after["chunks"].empty());
  EXPECT_EQ(after["chunks"][0]["document_id"], "Keeper notes.txt") << after.dump();
  EXPECT_NE(after["chunks"][0]["text"].get<std::string>().find("Zorblax"), std::string::npos);

  const ToolResult answer = Tool(s.Reply(5));
  ASSERT_FALSE(answer.is_error) << answer.Text();
  EXPECT_NE(answer.Text(0).find("Zorblax"), std::string::npos) << answer.Text(0);

  const ToolResult second = Tool(s.Reply(11));
  ASSERT_FALSE(second.is_error) << second.Text();
  EXPECT_EQ(second.Json()["id"], "notes/spring.md");
  EXPECT_TRUE(std::filesystem::is_regular_file(root_ + "/input/notes/spring.md"));
  const ToolResult entity = Tool(s.Reply(6));
  ASSERT_FALSE(entity.is_error) << entity.Text();
  EXPECT_EQ(entity.Json()["name"], "Zorblax Quindle");
  EXPECT_EQ(entity.Json()["chunks_total"], 2);

  // Ids that leave the input folder are refused, and nothing is written.
  for (int id : {7, 8}) {
    const ToolResult refused = Tool(s.Reply(id));
    EXPECT_TRUE(refused.is_error) << id;
    EXPECT_NE(refused.Text().find("document id"), std::string::npos) << refused.Text();
  }
  EXPECT_FALSE(std::filesystem::exists(root_ + "/x"));
  EXPECT_FALSE(std::filesystem::exists(root_ + "/x.txt"));

  // index: false saves the file for the next update and leaves the index alone.
  const ToolResult saved = Tool(s.Reply(9));
  ASSERT_FALSE(saved.is_error) << saved.Text();
  EXPECT_EQ(saved.Json()["indexed"], false);
  EXPECT_TRUE(std::filesystem::is_regular_file(root_ + "/input/later/bees.md"));
  const auto unindexed =
      Tool(s.Reply(10)).Json();  // kept: a loop over a temporary's member dangles
  for (const auto& c : unindexed["chunks"]) {
    EXPECT_NE(c["document_id"], "later/bees.md");
  }

  // The new document is in the index itself, not only in the session's memory.
  auto documents = RunCommand(Offline("stats --documents --json"));
  ASSERT_EQ(documents.exit_code, 0) << documents.err;
  EXPECT_NE(documents.out.find("Keeper notes.txt"), std::string::npos) << documents.out;
  EXPECT_NE(documents.out.find("notes/spring.md"), std::string::npos) << documents.out;
  EXPECT_EQ(documents.out.find("later/bees.md"), std::string::npos) << documents.out;
}

TEST_F(E2eMcpTest, AnUpdateFromAShellIsSeenWithoutARestart) {
  ASSERT_NO_FATAL_FAILURE(IndexTheBook());
  const std::string search = Call(2, "search", {{"question", "Quillon Brabazon"}, {"top_k", 1}});
  const std::string again = Call(3, "search", {{"question", "Quillon Brabazon"}, {"top_k", 1}});
  const std::string file = dir_.Write("quillon.txt", "Quillon Brabazon sailed to Tarvik.\n");
  const std::string out = dir_ / "out.jsonl";
  // The client sends the second search only after the first was answered (the graph is then in
  // the server's memory) and `grag add` has run in another process.
  const std::string script =
      "{ printf '%s\\n%s\\n' " + ShellQuote(Initialize(1)) + " " + ShellQuote(search) + "; " +
      "i=0; while ! grep -q '\"id\":2,' " + ShellQuote(out) + " 2>/dev/null; do " +
      "i=$((i+1)); [ $i -gt 600 ] && break; sleep 0.1; done; " + Offline("add --no-progress ") +
      ShellQuote(file) + " >/dev/null 2>&1; printf '%s\\n' " + ShellQuote(again) + "; } | " +
      Offline("mcp") + " > " + ShellQuote(out);
  auto r = RunCommand(script);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(out);
  Session s;
  for (std::string line; std::getline(in, line);) s.lines.push_back(json::parse(line));
  ASSERT_EQ(s.lines.size(), 3u);
  const json before = Tool(s.Reply(2)).Json();
  ASSERT_EQ(before["chunks"].size(), 1u);
  EXPECT_EQ(before["chunks"][0]["document_id"], "christmas_carol.txt");
  const json after = Tool(s.Reply(3)).Json();
  ASSERT_EQ(after["chunks"].size(), 1u);
  EXPECT_NE(after["chunks"][0]["text"].get<std::string>().find("Quillon Brabazon"),
            std::string::npos)
      << after.dump();
}

TEST_F(E2eMcpTest, AddDocumentWhileAnotherProcessWritesIsAToolError) {
  ASSERT_NO_FATAL_FAILURE(IndexTheBook());
  // This process holds the writer lock, as a running `grag index` would.
  StoreOptions so;
  so.writer_lock = true;
  so.lock_holder = "grag index (the test)";
  auto store = Store::Open(root_ + "/output/index.db", so);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const Session s = Run({
      Initialize(1),
      Call(2, "add_document", {{"text", "Quillon Brabazon sailed."}, {"id", "quillon.txt"}}),
      Call(3, "search", {{"question", "Jacob Marley"}, {"top_k", 1}}),
  });
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const ToolResult refused = Tool(s.Reply(2));
  EXPECT_TRUE(refused.is_error);
  EXPECT_NE(refused.Text().find("grag index (the test)"), std::string::npos) << refused.Text();
  EXPECT_NE(refused.Text().find("nothing was saved"), std::string::npos) << refused.Text();
  EXPECT_FALSE(std::filesystem::exists(root_ + "/input/quillon.txt"));
  // Reading goes on while another process writes.
  EXPECT_FALSE(Tool(s.Reply(3)).is_error);
}

TEST_F(E2eMcpTest, HelpShowsAClientConfiguration) {
  auto help = RunCommand(Grag("mcp --help"));
  ASSERT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("\"mcpServers\""), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("stderr"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace grag
