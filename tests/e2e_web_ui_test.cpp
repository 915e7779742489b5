// The web UI in a real browser: Debian's chromium, headless, driven by the pinned puppeteer-core
// (tests/tools/web_ui_browser.js under node) against the real `grag serve` over a --no-llm index
// of A Christmas Carol, with an API key set. The script gives a wrong key then the right one,
// asks questions (auto, global, local) and opens their citations, draws the graph and clicks an
// entity, expands a node, opens a community report, uploads, indexes and deletes a document,
// then switches to another workspace with the picker and asks there; this
// test checks what it saw. Screenshots of each page are kept under the build folder (the path is
// printed). Skips, saying what to install, when node, puppeteer-core or chromium is missing.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/code_points.h"
#include "support/run_command.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using nlohmann::json;
using testing::CodePointSlice;
using testing::RunCommand;
using testing::ServerProcess;
using testing::ShellQuote;
using testing::TempDir;

const std::string kKey = "web-ui-test-key";

std::string NodeModules() { return std::string(GRAG_SOURCE_DIR) + "/.deps/npm/node_modules"; }

std::string Str(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// Whether the side panel `detail` has a section whose heading starts with `prefix`.
bool HasSection(const json& detail, const std::string& prefix) {
  if (!detail.is_object() || !detail.contains("sections")) return false;
  for (const auto& s : detail["sections"]) {
    if (s.is_string() && s.get<std::string>().rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// The text of input/`id` as citation offsets index it (after a byte-order mark).
std::string InputText(const std::string& root, const std::string& id) {
  const std::string text = testing::ReadFile(root + "/input/" + id);
  return text.rfind("\xEF\xBB\xBF", 0) == 0 ? text.substr(3) : text;
}

// The citation marked `cite` of the answer the server gives `question` by `method`: the
// browser's question asked again (answers without a model do not vary).
json AskedCitation(const std::string& base, const std::string& question, const std::string& method,
                   const std::string& cite) {
  const json body = {{"question", question}, {"method", method}};
  auto r = RunCommand("curl -s -H " + ShellQuote("Authorization: Bearer " + kKey) +
                      " -H 'Content-Type: application/json' --data-binary " +
                      ShellQuote(body.dump()) + " " + ShellQuote(base + "/v1/query"));
  json answer = json::parse(r.out, nullptr, false);
  if (!answer.is_object() || !answer.contains("citations")) return json();
  for (const auto& c : answer["citations"]) {
    const std::string key = c.contains("community") && !c.contains("chunk_id") &&
                                    !c["community"].is_null() && !c.contains("ref")
                                ? c["community"].dump()
                                : Str(c, "id");
    if (key == cite || Str(c, "id") == cite) return c;
  }
  return json();
}

// A passage the browser showed (`passage`: the document id and its highlights): each highlight
// is the file's characters at its code point offsets; with `citation` (the JSON answer's), each
// of its spans in that document is inside a highlight, its text included. The highlighted texts.
std::vector<std::string> CheckPassage(const std::string& root, const json& passage,
                                      const json& citation) {
  std::vector<std::string> out;
  const std::string id = Str(passage, "id");
  EXPECT_FALSE(id.empty()) << passage;
  EXPECT_EQ(Str(passage, "error"), "") << passage;
  const std::string text = InputText(root, id);
  EXPECT_FALSE(text.empty()) << id;
  EXPECT_FALSE(passage["marks"].empty()) << passage;
  for (const auto& m : passage["marks"]) {
    const std::string shown = Str(m, "text");
    out.push_back(shown);
    EXPECT_FALSE(shown.empty()) << m;
    EXPECT_EQ(shown, CodePointSlice(text, m["start"].get<int64_t>(), m["end"].get<int64_t>())) << m;
  }
  if (citation.is_null()) return out;
  size_t spans = 0;
  for (const auto& s : citation["spans"]) {
    if (Str(s, "document_id") != id) continue;
    ++spans;
    bool inside = false;
    for (const auto& m : passage["marks"]) {
      inside = inside || (m["start"] <= s["start"] && s["end"] <= m["end"] &&
                          Str(m, "text").find(Str(s, "text")) != std::string::npos);
    }
    EXPECT_TRUE(inside) << "span " << s << "\nhighlights " << passage["marks"];
  }
  EXPECT_GT(spans, 0u) << citation << "\n" << passage;
  return out;
}

// The path of chromium, or "" with `why_not` saying what to install (node, puppeteer-core or
// chromium missing).
std::string Chromium(std::string& why_not) {
  if (RunCommand("command -v node").exit_code != 0) {
    why_not =
        "node is not installed: install Node.js (apt-get install nodejs npm) and run "
        "scripts/setup.sh to fetch puppeteer-core";
    return "";
  }
  if (!std::filesystem::exists(NodeModules() + "/puppeteer-core/package.json")) {
    why_not = "the npm package puppeteer-core is missing from " + NodeModules() +
              ": run scripts/setup.sh (it installs the pinned version there)";
    return "";
  }
  const auto chromium = RunCommand("command -v chromium");
  if (chromium.exit_code != 0 || chromium.out.empty()) {
    why_not =
        "chromium is not installed: the web UI's browser test needs Debian's chromium (apt-get "
        "install chromium; scripts/setup.sh installs it)";
    return "";
  }
  std::string path = chromium.out;
  while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.pop_back();
  return path;
}

// The book, indexed without a model, as a project at `root`: "" when done, else why not.
std::string MakeBookProject(const std::string& grag, const std::string& root) {
  return testing::MakeNoLlmProject(
      grag, root, std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt");
}

// tests/tools/`tool` under node (the pinned npm packages), driving chromium at `base`; it prints
// one JSON object.
testing::CommandResult RunBrowserTool(const std::string& tool, const std::string& base,
                                      const std::string& chromium) {
  return RunCommand("NODE_PATH=" + ShellQuote(NodeModules()) + " node " +
                    ShellQuote(std::string(GRAG_SOURCE_DIR) + "/tests/tools/" + tool) + " " +
                    ShellQuote(base) + " " + ShellQuote(chromium));
}

TEST(E2eWebUiTest, ChromiumAsksGraphsBrowsesCommunitiesAndManagesDocuments) {
  std::string why_not;
  const std::string chromium_path = Chromium(why_not);
  if (chromium_path.empty()) GTEST_SKIP() << why_not;

  // A small project: the book, indexed without a model.
  TempDir dir;
  const std::string root = dir / "carol";
  const std::string grag = ShellQuote(GRAG_BINARY);
  ASSERT_EQ(MakeBookProject(grag, root), "");
  // A note whose cited sentence comes after characters outside the Basic Multilingual Plane:
  // the page must count the offsets in code points, not in its strings' UTF-16 units.
  const std::string sentence =
      "Der Geist der zukünftigen Weihnacht zeigte Scrooge sein eigenes Grab.";
  std::filesystem::create_directories(root + "/input/notes");
  std::ofstream(root + "/input/notes/geister.md", std::ios::binary)
      << "\xEF\xBB\xBF# 🎄 Die Geister 👻\n\n"
      << sentence << " Scrooge weinte.\n";
  auto reindex = RunCommand(grag + " --root " + ShellQuote(root) + " --no-llm index --no-progress");
  ASSERT_EQ(reindex.exit_code, 0) << reindex.err;
  // A workspace of its own, for the picker.
  auto created = RunCommand(grag + " --root " + ShellQuote(root) + " workspace create lighthouse");
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::ofstream(root + "/workspaces/lighthouse/input/keeper.txt", std::ios::binary)
      << "Zephyrine Quall keeps the lighthouse of Merrow and mends its lamp every winter.\n";
  auto ws_index = RunCommand(grag + " --root " + ShellQuote(root) +
                             " -w lighthouse --no-llm index --no-progress");
  ASSERT_EQ(ws_index.exit_code, 0) << ws_index.err;

  ServerProcess serve;
  ASSERT_TRUE(serve.Start(grag + " --root " + ShellQuote(root) +
                          " --no-llm --set server.api_keys=" + kKey + " serve --port 0"))
      << serve.log();

  const std::string shots = std::string(GRAG_TEST_ARTIFACTS_DIR) + "/web_ui";
  std::error_code ec;
  std::filesystem::remove_all(shots, ec);  // no stale screenshot passes for a new one
  const std::string base = "http://127.0.0.1:" + std::to_string(serve.port());
  const auto started = std::chrono::steady_clock::now();
  auto run =
      RunCommand("NODE_PATH=" + ShellQuote(NodeModules()) + " node " +
                 ShellQuote(std::string(GRAG_SOURCE_DIR) + "/tests/tools/web_ui_browser.js") + " " +
                 ShellQuote(base) + " " + ShellQuote(kKey) + " " + ShellQuote(shots) + " " +
                 ShellQuote(chromium_path));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  json out = json::parse(run.out, nullptr, false);
  ASSERT_EQ(run.exit_code, 0) << "the browser script failed at step \""
                              << (out.is_object() ? Str(out, "step") : "?")
                              << "\"\nstdout: " << run.out << "\nstderr: " << run.err
                              << "\nserver: " << serve.log();
  ASSERT_TRUE(out.is_object()) << run.out;
  std::cout << "[ " << Str(out, "browser") << ", the browser steps took " << seconds << " s ]\n"
            << "[ screenshots: " << shots << "/ ]\n";
  for (const auto& s : out["screenshots"]) {
    std::cout << "  " << s.get<std::string>() << "\n";
    EXPECT_GT(std::filesystem::file_size(s.get<std::string>(), ec), 10000u) << s;
  }
  EXPECT_EQ(out["screenshots"].size(), 9u) << out["screenshots"];

  // Nothing went wrong inside the page.
  EXPECT_TRUE(out["page_errors"].empty()) << out["page_errors"];
  EXPECT_TRUE(out["console_errors"].empty()) << out["console_errors"];
  EXPECT_EQ(Str(out, "title"), "grag");

  // The key: asked for, a wrong one refused, the right one taken.
  EXPECT_TRUE(out.value("key_dialog", false));
  EXPECT_TRUE(out.value("wrong_key_refused", false));
  EXPECT_TRUE(out.value("key_dialog_closed", false));

  // Ask: answers about Marley, with citations in the text that open what they cite.
  const json& a = out["auto"];
  EXPECT_EQ(Str(a, "error"), "");
  EXPECT_NE(Str(a, "answer").find("Marley"), std::string::npos) << a;
  EXPECT_GT(a.value("inline_citations", 0), 0) << a;
  EXPECT_FALSE(a["sources"].empty()) << a;
  EXPECT_NE(Str(a, "meta").find("chosen by the router"), std::string::npos) << a;
  EXPECT_EQ(Str(a["detail"], "error"), "") << a["detail"];
  EXPECT_FALSE(Str(a["detail"], "title").empty()) << a["detail"];
  // Issue 38: the citation opened its passage in the book, highlighted: the characters of the
  // file at the offsets of the answer's spans, and scrolled into view.
  ASSERT_TRUE(a["detail"].contains("passage")) << a["detail"];
  EXPECT_EQ(Str(a["detail"]["passage"], "id"), "christmas_carol.txt");
  CheckPassage(root, a["detail"]["passage"],
               AskedCitation(base, "Who is Marley?", "auto", Str(a["detail"], "clicked")));
  const json& gl = out["global"];
  EXPECT_EQ(Str(gl, "method"), "global");
  EXPECT_GT(gl.value("inline_citations", 0), 0) << gl;
  EXPECT_EQ(Str(gl["detail"], "error"), "") << gl["detail"];
  EXPECT_TRUE(HasSection(gl["detail"], "Members")) << gl["detail"];
  ASSERT_TRUE(gl["detail"].contains("passage")) << gl["detail"];
  CheckPassage(root, gl["detail"]["passage"], json());
  const json& l = out["local"];
  EXPECT_EQ(Str(l, "method"), "local");
  EXPECT_NE(Str(l, "answer").find("Marley"), std::string::npos) << l;
  EXPECT_GT(l.value("inline_citations", 0), 0) << l;
  EXPECT_EQ(Str(l["detail"], "kind"), "entity") << l["detail"];
  EXPECT_NE(Str(l["detail"], "title").find("Marley"), std::string::npos) << l["detail"];
  EXPECT_TRUE(HasSection(l["detail"], "Neighbours")) << l["detail"];
  // Its other citations: a relationship (both ends named), a report, a passage.
  EXPECT_EQ(Str(l["relationship"], "error"), "") << l["relationship"];
  EXPECT_NE(Str(l["relationship"], "title").find(" — "), std::string::npos) << l["relationship"];
  EXPECT_EQ(Str(l["community"], "error"), "") << l["community"];
  EXPECT_FALSE(Str(l["community"], "title").empty()) << l["community"];
  EXPECT_EQ(Str(l["chunk"], "error"), "") << l["chunk"];
  EXPECT_NE(Str(l["chunk"], "title").find("christmas_carol.txt"), std::string::npos) << l["chunk"];
  for (const char* kind : {"entity", "relationship", "community", "chunk"}) {
    ASSERT_TRUE(l[kind].contains("passage")) << kind << ": " << l[kind];
    CheckPassage(root, l[kind]["passage"], json());
  }

  // The note's passage, opened from the source list: exactly the cited sentence highlighted,
  // though two emoji come before it; again after going back to it.
  const json& p = out["passage"];
  EXPECT_EQ(Str(p, "method"), "basic") << p;
  ASSERT_TRUE(p["detail"].contains("passage")) << p;
  EXPECT_EQ(Str(p["detail"]["passage"], "id"), "notes/geister.md") << p;
  const json cited = AskedCitation(base, "Was zeigte der Geist der zukünftigen Weihnacht?", "basic",
                                   Str(p["detail"], "clicked"));
  ASSERT_FALSE(cited.is_null()) << p;
  EXPECT_EQ(CheckPassage(root, p["detail"]["passage"], cited), std::vector<std::string>{sentence});
  EXPECT_EQ(CheckPassage(root, p["back"], cited), std::vector<std::string>{sentence});
  EXPECT_EQ(Str(p["detail"], "kind"), "chunk");  // its "Cites" link: the chunk

  // Graph: the top entities drawn, coloured by community, sized by degree; a click opens the
  // entity; expanding a node adds its neighbours.
  const json& g = out["graph"];
  EXPECT_GT(g.value("nodes", 0), 50) << g;
  EXPECT_GT(g.value("edges", 0), 0) << g;
  EXPECT_GT(g.value("colours", 0), 1) << g;
  EXPECT_GT(g.value("sizes", 0), 1) << g;
  ASSERT_TRUE(g["target"].is_object()) << g;
  EXPECT_EQ(Str(g["detail"], "kind"), "entity");
  EXPECT_EQ(Str(g["detail"], "title"), Str(g["target"], "name")) << g;
  EXPECT_TRUE(HasSection(g["detail"], "Neighbours")) << g["detail"];
  EXPECT_TRUE(HasSection(g["detail"], "Communities")) << g["detail"];
  EXPECT_TRUE(HasSection(g["detail"], "Source passages")) << g["detail"];
  EXPECT_EQ(g["selected"], json::array({Str(g["target"], "name")})) << g;
  EXPECT_EQ(g.value("small", 0), 20) << g;
  EXPECT_GT(g.value("expanded", 0), 20) << g;

  // Communities: listed by hierarchy and level; one opens its report.
  const json& c = out["communities"];
  EXPECT_GT(c.value("listed", 0), 0) << c;
  EXPECT_EQ(c["views"][0], "tree") << c;
  EXPECT_GT(c["views"].size(), 1u) << c;
  EXPECT_EQ(Str(c["detail"], "kind"), "community");
  EXPECT_FALSE(Str(c["detail"], "title").empty()) << c["detail"];
  EXPECT_TRUE(HasSection(c["detail"], "Members")) << c["detail"];

  // Documents: the book listed; an upload indexed by a job started from the page, then deleted.
  const json& d = out["documents"];
  EXPECT_EQ(d["before"], json::array({"christmas_carol.txt", "notes/geister.md"})) << d;
  EXPECT_NE(Str(d, "upload_message").find("visit.txt"), std::string::npos) << d;
  EXPECT_EQ(Str(d["job"], "state"), "succeeded") << d;
  EXPECT_EQ(d["after"], json::array({"christmas_carol.txt", "notes/geister.md", "visit.txt"})) << d;
  EXPECT_NE(Str(d, "delete_message").find("Deleted visit.txt"), std::string::npos) << d;
  EXPECT_FALSE(std::filesystem::exists(root + "/input/visit.txt"));

  // The workspace picker: the page on another workspace asks and lists that one's documents.
  const json& w = out["workspace"];
  EXPECT_EQ(w["options"], json::array({"default", "lighthouse"})) << w;
  EXPECT_EQ(Str(w, "chosen"), "lighthouse") << w;
  EXPECT_NE(Str(w["answer"], "answer").find("Quall"), std::string::npos) << w["answer"];
  EXPECT_EQ(w["documents"], json::array({"keeper.txt"})) << w;

  EXPECT_EQ(serve.Stop(SIGTERM, std::chrono::seconds(60)), 0) << serve.log();
}

// Issue 42, R1: a page on another origin planted a document and started an index job on a
// keyless server through the user's browser. Here it tries that, a form upload, a DELETE and a
// JSON POST from chromium; the server must have written nothing.
TEST(E2eWebUiTest, APageOnAnotherOriginCannotWriteThroughTheBrowser) {
  std::string why_not;
  const std::string chromium_path = Chromium(why_not);
  if (chromium_path.empty()) GTEST_SKIP() << why_not;
  TempDir dir;
  const std::string root = dir / "carol";
  const std::string grag = ShellQuote(GRAG_BINARY);
  ASSERT_EQ(MakeBookProject(grag, root), "");
  ServerProcess serve;  // no API keys: the default
  ASSERT_TRUE(serve.Start(grag + " --root " + ShellQuote(root) + " --no-llm serve --port 0"))
      << serve.log();
  const std::string base = "http://127.0.0.1:" + std::to_string(serve.port());
  auto run = RunBrowserTool("cross_origin_browser.js", base, chromium_path);
  json out = json::parse(run.out, nullptr, false);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  ASSERT_TRUE(out.is_object()) << run.out;
  std::cout << "[ " << Str(out, "browser") << " at " << Str(out, "origin") << ": "
            << out["results"].dump() << " ]\n";
  // The page ran: its requests went out (the browser itself stops only the JSON one).
  EXPECT_EQ(Str(out["results"], "text_plain_document"), "sent") << out;
  EXPECT_EQ(Str(out["results"], "index_job"), "sent") << out;
  // ...and the server wrote nothing.
  EXPECT_FALSE(std::filesystem::exists(root + "/input/planted.txt"));
  EXPECT_FALSE(std::filesystem::exists(root + "/input/json-planted.txt"));
  EXPECT_FALSE(std::filesystem::exists(root + "/input/form-planted.txt"));
  EXPECT_TRUE(std::filesystem::exists(root + "/input/christmas_carol.txt"));
  auto jobs = RunCommand("curl -s " + base + "/v1/jobs");
  EXPECT_EQ(jobs.out, "[]") << jobs.out;
  EXPECT_EQ(serve.Stop(SIGTERM, std::chrono::seconds(60)), 0) << serve.log();
}

// Issue 44: the API reference at /docs (the embedded Swagger UI) renders every route of
// /openapi.json in a real browser under the server's Content-Security-Policy, and its "Try it
// out" reaches the server.
TEST(E2eWebUiTest, TheApiReferenceRendersEveryRouteAndTriesOne) {
  std::string why_not;
  const std::string chromium_path = Chromium(why_not);
  if (chromium_path.empty()) GTEST_SKIP() << why_not;
  TempDir dir;
  const std::string root = dir / "carol";
  const std::string grag = ShellQuote(GRAG_BINARY);
  ASSERT_EQ(MakeBookProject(grag, root), "");
  ServerProcess serve;
  ASSERT_TRUE(serve.Start(grag + " --root " + ShellQuote(root) + " --no-llm serve --port 0"))
      << serve.log();
  const std::string base = "http://127.0.0.1:" + std::to_string(serve.port());
  auto run = RunBrowserTool("api_docs_browser.js", base, chromium_path);
  json out = json::parse(run.out, nullptr, false);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  ASSERT_TRUE(out.is_object()) << run.out;
  auto api = json::parse(RunCommand("curl -s " + base + "/openapi.json").out, nullptr, false);
  ASSERT_TRUE(api.is_object());
  size_t routes = 0;
  for (const auto& [path, ops] : api["paths"].items()) routes += ops.size();
  EXPECT_EQ(out["operations"].size(), routes) << out.dump();
  EXPECT_NE(out["operations"].dump().find("POST /v1/query"), std::string::npos) << out.dump();
  EXPECT_TRUE(out["errors"].empty()) << out["errors"].dump();
  ASSERT_TRUE(out["tried"].is_object()) << out.dump();
  EXPECT_EQ(Str(out["tried"], "status"), "200") << out.dump();
  EXPECT_NE(Str(out["tried"], "body").find("\"status\""), std::string::npos) << out.dump();
  EXPECT_EQ(serve.Stop(SIGTERM, std::chrono::seconds(60)), 0) << serve.log();
}

}  // namespace
}  // namespace grag
