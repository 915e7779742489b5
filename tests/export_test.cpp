// grag export at library level: each format is written from a no-LLM index of part of A
// Christmas Carol and parsed back (GraphML by Python's xml.etree and networkx when installed,
// CSV by Python's csv module, JSON by nlohmann), its counts checked against the store and its
// column names against Microsoft GraphRAG's real output (tests/data/ms_christmas_carol).
#include "grag/export.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "grag/engine.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using nlohmann::json;
using testing::ReadFile;
using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;

// Runs a Python script with `arg`; returns its stdout (the test fails on a non-zero exit).
std::string Python(const std::string& script, const std::string& arg) {
  auto r = RunCommand("python3 -c " + ShellQuote(script) + " " + ShellQuote(arg));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

bool HasNetworkx() { return RunCommand("python3 -c 'import networkx'").exit_code == 0; }

// Microsoft GraphRAG's output columns, in its order, as its real output for A Christmas Carol has
// them (/work/shared/data/ms-graphrag-christmas-carol-reference; checked below when present).
const std::map<std::string, std::vector<std::string>>& MsColumns() {
  static const std::map<std::string, std::vector<std::string>> columns = {
      {"documents",
       {"id", "human_readable_id", "title", "text", "text_unit_ids", "creation_date", "raw_data"}},
      {"text_units",
       {"id", "human_readable_id", "text", "n_tokens", "document_id", "entity_ids",
        "relationship_ids", "covariate_ids"}},
      {"entities",
       {"id", "human_readable_id", "title", "type", "description", "text_unit_ids", "frequency",
        "degree"}},
      {"relationships",
       {"id", "human_readable_id", "source", "target", "description", "weight", "combined_degree",
        "text_unit_ids"}},
      {"communities",
       {"id", "human_readable_id", "community", "level", "parent", "children", "title",
        "entity_ids", "relationship_ids", "text_unit_ids", "period", "size"}},
      {"community_reports",
       {"id", "human_readable_id", "community", "level", "parent", "children", "title", "summary",
        "full_content", "rank", "rating_explanation", "findings", "full_content_json", "period",
        "size"}},
  };
  return columns;
}

// The keys of the first record of a JSON table written by Microsoft GraphRAG, in file order.
std::vector<std::string> KeysInOrder(const std::string& path) {
  return json::parse(
             Python("import sys, json; print(json.dumps(list(json.load(open(sys.argv[1]))[0])))",
                    path))
      .get<std::vector<std::string>>();
}

TEST(MsColumnsTest, MatchMicrosoftsRealOutput) {
  // The trimmed copies kept in the repository: every column they keep is one of ours.
  for (const char* table :
       {"text_units", "entities", "relationships", "communities", "community_reports"}) {
    const auto ms =
        KeysInOrder(std::string(GRAG_TEST_DATA_DIR) + "/ms_christmas_carol/" + table + ".json");
    const auto& ours = MsColumns().at(table);
    for (const auto& c : ms) {
      EXPECT_NE(std::find(ours.begin(), ours.end(), c), ours.end()) << table << "." << c;
    }
  }
  const std::string full = "/work/shared/data/ms-graphrag-christmas-carol-reference/json";
  if (!std::filesystem::exists(full)) GTEST_SKIP() << full << " is not on this machine";
  for (const auto& [table, ours] : MsColumns()) {
    EXPECT_EQ(KeysInOrder(full + "/" + table + ".json"), ours) << table;
  }
}

class ExportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const std::string book =
        ReadFile(std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt");
    dir_->Write("proj/input/carol.txt", book.substr(0, 80000));
    Config config;
    config.root = *dir_ / "proj";
    EngineOptions o;
    o.writable = true;
    auto engine = Engine::Open(config, o);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    auto summary = (*engine)->Index({});
    ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    engine_ = std::move(engine).value().release();
    auto stats = engine_->Stats(0);
    ASSERT_TRUE(stats.ok());
    stats_ = new StoreStats(stats->store);
  }
  static void TearDownTestSuite() {
    delete engine_;
    delete stats_;
    delete dir_;
  }

  Result<ExportSummary> Export(ExportFormat format, const std::string& out, bool force = false) {
    ExportOptions o;
    o.format = format;
    o.out_dir = out;
    o.force = force;
    return engine_->Export(o);
  }

  static TempDir* dir_;
  static Engine* engine_;
  static StoreStats* stats_;
  TempDir out_;
};

TempDir* ExportTest::dir_ = nullptr;
Engine* ExportTest::engine_ = nullptr;
StoreStats* ExportTest::stats_ = nullptr;

TEST_F(ExportTest, TheIndexIsBigEnoughToMeanSomething) {
  EXPECT_GT(stats_->entities, 30);
  EXPECT_GT(stats_->relationships, 30);
  EXPECT_GT(stats_->communities_per_level.size(), 1u);
  EXPECT_GT(stats_->reports_ok, 5);
}

TEST_F(ExportTest, GraphmlParsesBackWithEveryNodeEdgeAndDeclaredKey) {
  auto summary = Export(ExportFormat::kGraphml, out_ / "g");
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  ASSERT_EQ(summary->files.size(), 1u);
  EXPECT_EQ(summary->files[0].counts.at("nodes"), stats_->entities);
  EXPECT_EQ(summary->files[0].counts.at("edges"), stats_->relationships);
  const std::string path = out_ / "g/graph.graphml";

  // xml.etree: counts, every <data key> declared, community_level_N per level, attributes set.
  const std::string script = R"py(
import sys, json, xml.etree.ElementTree as ET
ns = {'g': 'http://graphml.graphdrawing.org/xmlns'}
root = ET.parse(sys.argv[1]).getroot()
keys = {k.get('id'): (k.get('for'), k.get('attr.name'), k.get('attr.type')) for k in root.findall('g:key', ns)}
graph = root.find('g:graph', ns)
nodes = graph.findall('g:node', ns)
edges = graph.findall('g:edge', ns)
undeclared = [d.get('key') for el in nodes + edges for d in el.findall('g:data', ns) if d.get('key') not in keys]
node_ids = {n.get('id') for n in nodes}
dangling = [e.get('id') for e in edges if e.get('source') not in node_ids or e.get('target') not in node_ids]
first = {keys[d.get('key')][1]: d.text for d in nodes[0].findall('g:data', ns)}
print(json.dumps({'nodes': len(nodes), 'edges': len(edges), 'undeclared': undeclared,
                  'dangling': dangling, 'edgedefault': graph.get('edgedefault'),
                  'node_attrs': sorted(v[1] for v in keys.values() if v[0] == 'node'),
                  'edge_attrs': sorted(v[1] for v in keys.values() if v[0] == 'edge'),
                  'first': first}))
)py";
  const json r = json::parse(Python(script, path));
  EXPECT_EQ(r["nodes"], stats_->entities);
  EXPECT_EQ(r["edges"], stats_->relationships);
  EXPECT_TRUE(r["undeclared"].empty()) << r["undeclared"];
  EXPECT_TRUE(r["dangling"].empty()) << r["dangling"];
  EXPECT_EQ(r["edgedefault"], "undirected");
  std::set<std::string> node_attrs = r["node_attrs"].get<std::set<std::string>>();
  for (const char* a : {"name", "type", "description", "degree", "frequency"}) {
    EXPECT_TRUE(node_attrs.count(a)) << a;
  }
  for (const auto& [level, n] : stats_->communities_per_level) {
    EXPECT_TRUE(node_attrs.count("community_level_" + std::to_string(level))) << level;
  }
  const std::set<std::string> edge_attrs = r["edge_attrs"].get<std::set<std::string>>();
  EXPECT_TRUE(edge_attrs.count("weight"));
  EXPECT_TRUE(edge_attrs.count("description"));
  EXPECT_FALSE(r["first"]["name"].get<std::string>().empty());

  if (!HasNetworkx()) {
    GTEST_SKIP() << "networkx is not installed: parsed with xml.etree only";
  }
  const std::string nx = R"py(
import sys, json, networkx as nx
g = nx.read_graphml(sys.argv[1])
n, d = max(g.nodes(data=True), key=lambda x: x[1]['degree'])
print(json.dumps({'nodes': g.number_of_nodes(), 'edges': g.number_of_edges(),
                  'directed': g.is_directed(), 'degree_attr': d['degree'], 'degree': g.degree(n),
                  'level0': isinstance(d.get('community_level_0'), int),
                  'weight': isinstance(next(iter(g.edges(data=True)))[2]['weight'], float)}))
)py";
  const json n = json::parse(Python(nx, path));
  EXPECT_EQ(n["nodes"], stats_->entities);
  EXPECT_EQ(n["edges"], stats_->relationships);
  EXPECT_FALSE(n["directed"].get<bool>());
  EXPECT_EQ(n["degree_attr"], n["degree"]);  // the degree attribute is the graph's degree
  EXPECT_TRUE(n["level0"].get<bool>());
  EXPECT_TRUE(n["weight"].get<bool>());
}

// Row counts and header line of each CSV file, by Python's csv module.
json CsvShape(const std::string& dir) {
  const std::string script = R"py(
import sys, csv, glob, json, os
out = {}
for p in sorted(glob.glob(os.path.join(sys.argv[1], '*.csv'))):
    with open(p, newline='', encoding='utf-8') as f:
        rows = list(csv.reader(f))
    widths = sorted({len(r) for r in rows})
    out[os.path.basename(p)[:-4]] = {'header': rows[0], 'rows': len(rows) - 1, 'widths': widths}
print(json.dumps(out))
)py";
  return json::parse(Python(script, dir));
}

TEST_F(ExportTest, CsvTablesHaveMicrosoftColumnsAndTheIndexRowCounts) {
  auto summary = Export(ExportFormat::kCsv, out_ / "csv");
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->files.size(), 6u);
  const json shape = CsvShape(out_ / "csv");
  ASSERT_EQ(shape.size(), 6u) << shape.dump();
  EXPECT_EQ(shape["documents"]["rows"], stats_->documents);
  EXPECT_EQ(shape["text_units"]["rows"], stats_->chunks);
  EXPECT_EQ(shape["entities"]["rows"], stats_->entities);
  EXPECT_EQ(shape["relationships"]["rows"], stats_->relationships);
  EXPECT_EQ(shape["communities"]["rows"], stats_->communities);
  EXPECT_EQ(shape["community_reports"]["rows"], stats_->reports_ok);
  for (const auto& [table, s] : shape.items()) {
    // Every row as wide as the header (quoting of commas, quotes and newlines is right).
    EXPECT_EQ(s["widths"].size(), 1u) << table;
  }
  // Microsoft's column names, in Microsoft's order.
  for (const auto& [table, columns] : MsColumns()) {
    EXPECT_EQ(shape[table]["header"], json(columns)) << table;
  }
}

TEST_F(ExportTest, JsonTablesReferToEachOther) {
  auto summary = Export(ExportFormat::kJson, out_ / "json");
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  std::map<std::string, json> t;
  for (const char* name : {"documents", "text_units", "entities", "relationships", "communities",
                           "community_reports"}) {
    const std::string path = out_ / (std::string("json/") + name + ".json");
    t[name] = json::parse(ReadFile(path));
    ASSERT_TRUE(t[name].is_array()) << name;
  }
  EXPECT_EQ(t["entities"].size(), static_cast<size_t>(stats_->entities));
  EXPECT_EQ(t["relationships"].size(), static_cast<size_t>(stats_->relationships));
  EXPECT_EQ(t["text_units"].size(), static_cast<size_t>(stats_->chunks));
  EXPECT_EQ(t["communities"].size(), static_cast<size_t>(stats_->communities));
  EXPECT_EQ(t["community_reports"].size(), static_cast<size_t>(stats_->reports_ok));

  std::set<std::string> entity_ids, titles, unit_ids, relationship_ids;
  for (const auto& e : t["entities"]) {
    entity_ids.insert(e["id"].get<std::string>());
    titles.insert(e["title"].get<std::string>());
    EXPECT_FALSE(e["text_unit_ids"].empty()) << e["title"];
  }
  for (const auto& u : t["text_units"]) unit_ids.insert(u["id"].get<std::string>());
  for (const auto& r : t["relationships"]) {
    relationship_ids.insert(r["id"].get<std::string>());
    EXPECT_TRUE(titles.count(r["source"].get<std::string>())) << r["source"];
    EXPECT_TRUE(titles.count(r["target"].get<std::string>())) << r["target"];
    for (const auto& u : r["text_unit_ids"]) EXPECT_TRUE(unit_ids.count(u.get<std::string>()));
  }
  size_t links = 0;
  for (const auto& u : t["text_units"]) {
    for (const auto& id : u["entity_ids"]) {
      EXPECT_TRUE(entity_ids.count(id.get<std::string>()));
      ++links;
    }
    for (const auto& id : u["relationship_ids"]) {
      EXPECT_TRUE(relationship_ids.count(id.get<std::string>()));
    }
  }
  EXPECT_GT(links, 0u);
  std::set<int64_t> community_ids;
  for (const auto& c : t["communities"]) community_ids.insert(c["community"].get<int64_t>());
  for (const auto& c : t["communities"]) {
    EXPECT_EQ(c["size"].get<size_t>(), c["entity_ids"].size());
    for (const auto& id : c["entity_ids"]) EXPECT_TRUE(entity_ids.count(id.get<std::string>()));
    const int64_t parent = c["parent"];
    EXPECT_TRUE(parent == -1 ? c["level"] == 0 : community_ids.count(parent) == 1);
  }
  for (const auto& r : t["community_reports"]) {
    EXPECT_TRUE(community_ids.count(r["community"].get<int64_t>()));
    EXPECT_FALSE(r["title"].get<std::string>().empty());
    const json full = json::parse(r["full_content_json"].get<std::string>());
    EXPECT_EQ(full["title"], r["title"]);
  }
  // Keys as Microsoft's JSON records have them, in its order (the files are read in order).
  for (const auto& [table, columns] : MsColumns()) {
    EXPECT_EQ(KeysInOrder(out_ / ("json/" + table + ".json")), columns) << table;
  }
}

TEST_F(ExportTest, Neo4jFilesHaveImportHeadersAndALoadCsvScript) {
  auto summary = Export(ExportFormat::kNeo4j, out_ / "neo");
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  const json shape = CsvShape(out_ / "neo");
  EXPECT_EQ(shape["entities"]["header"], json({"id:ID", "name", "type", "description", "degree:int",
                                               "frequency:int", "communities:long[]", ":LABEL"}));
  EXPECT_EQ(shape["relationships"]["header"], json({":START_ID", ":END_ID", "weight:double",
                                                    "description", "frequency:int", ":TYPE"}));
  EXPECT_EQ(shape["entities"]["rows"], stats_->entities);
  EXPECT_EQ(shape["relationships"]["rows"], stats_->relationships);
  EXPECT_EQ(shape["entities"]["widths"].size(), 1u);
  EXPECT_EQ(shape["relationships"]["widths"].size(), 1u);
  const std::string cypher = ReadFile(out_ / "neo/load.cypher");
  EXPECT_NE(cypher.find("LOAD CSV WITH HEADERS FROM 'file:///entities.csv'"), std::string::npos);
  EXPECT_NE(cypher.find("LOAD CSV WITH HEADERS FROM 'file:///relationships.csv'"),
            std::string::npos);
  EXPECT_NE(cypher.find("row.`id:ID`"), std::string::npos);
}

TEST_F(ExportTest, RefusesToOverwriteUnlessForced) {
  const std::string dir = out_ / "again";
  ASSERT_TRUE(Export(ExportFormat::kNeo4j, dir).ok());
  std::ofstream(dir + "/entities.csv") << "mine\n";
  auto again = Export(ExportFormat::kNeo4j, dir);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), ErrorCode::kAlreadyExists);
  EXPECT_NE(again.status().message().find("--force"), std::string::npos);
  EXPECT_EQ(ReadFile(dir + "/entities.csv"), "mine\n");  // nothing written
  ASSERT_TRUE(Export(ExportFormat::kNeo4j, dir, /*force=*/true).ok());
  EXPECT_NE(ReadFile(dir + "/entities.csv"), "mine\n");
  // Another format into the same folder does not collide with these names.
  EXPECT_TRUE(Export(ExportFormat::kGraphml, dir).ok());
  // A file where the folder should be.
  const std::string file = out_.Write("plain", "x");
  auto onto_file = Export(ExportFormat::kCsv, file);
  ASSERT_FALSE(onto_file.ok());
  EXPECT_EQ(onto_file.status().code(), ErrorCode::kInvalidArgument);
}

TEST(ExportFormatTest, ParsesTheFourNamesOnly) {
  EXPECT_EQ(ParseExportFormat("graphml").value(), ExportFormat::kGraphml);
  EXPECT_EQ(ParseExportFormat("neo4j").value(), ExportFormat::kNeo4j);
  auto bad = ParseExportFormat("xml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
}

TEST(ExportTextTest, XmlEscapeMakesAnyBytesValidXml) {
  EXPECT_EQ(XmlEscape("a & <b> \"c\" 'd'"), "a &amp; &lt;b&gt; &quot;c&quot; &apos;d&apos;");
  // Controls other than tab/LF/CR, U+FFFE/U+FFFF, surrogates and broken UTF-8 are dropped.
  EXPECT_EQ(XmlEscape(std::string("x\x01\x1f\ty\nz", 7)), "x\ty\nz");
  EXPECT_EQ(XmlEscape("a\xEF\xBF\xBE"
                      "b\xEF\xBF\xBF"
                      "c"),
            "abc");
  EXPECT_EQ(XmlEscape("a\xED\xA0\x80"
                      "b\xFF"
                      "c\xC3"),
            "abc");
  EXPECT_EQ(XmlEscape("caf\xC3\xA9 \xF0\x9F\x8E\x84"), "caf\xC3\xA9 \xF0\x9F\x8E\x84");
  EXPECT_EQ(XmlEscape("a\rb"), "a&#13;b");
  // Python's parser agrees.
  TempDir dir;
  const std::string path =
      dir.Write("t.xml", "<r a=\"" + XmlEscape("q\"\x02\xFF<") + "\">" +
                             XmlEscape(std::string("\x00\x0b<&>\xEF\xBF\xBE\r\n", 11)) + "</r>");
  const std::string out = Python(
      "import sys, xml.etree.ElementTree as ET; r = ET.parse(sys.argv[1]).getroot(); "
      "print(repr(r.get('a')), repr(r.text))",
      path);
  EXPECT_EQ(out, "'q\"<' '<&>\\r\\n'\n");
}

TEST(ExportTextTest, CsvFieldQuotesOnlyWhenNeeded) {
  EXPECT_EQ(CsvField("plain"), "plain");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(CsvField(" edge"), "\" edge\"");
  EXPECT_EQ(CsvField(""), "");
}

}  // namespace
}  // namespace grag
