// grag export: the index as GraphML, Microsoft GraphRAG-style CSV / JSON tables, or Neo4j
// import files.
#include "grag/export_index.h"

#include "grag/utf8_sequence.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

namespace grag {
namespace {

using Json = nlohmann::ordered_json;

// Everything an export writes, read once.
struct IndexData {
  std::vector<DocumentInfo> documents;
  std::map<std::string, std::string> document_text;
  std::vector<ChunkRecord> chunks;                // by document and position
  std::vector<EntityRecord> entities;             // by id
  std::vector<RelationshipRecord> relationships;  // by id
  std::vector<CommunityRecord> communities;       // by level, id
  std::vector<ReportRecord> reports;              // ok ones, by level
  ChunkLinks links;
  std::string period;  // date of the latest clustering, YYYY-MM-DD
};

Result<IndexData> Load(Store& store) {
  IndexData d;
  GRAG_ASSIGN_OR_RETURN(d.documents, store.ListDocuments());
  for (const DocumentInfo& info : d.documents) {
    GRAG_ASSIGN_OR_RETURN(std::optional<Document> doc, store.GetDocument(info.id));
    if (doc) d.document_text[info.id] = doc->text;
    GRAG_ASSIGN_OR_RETURN(std::vector<ChunkRecord> chunks, store.ListChunks(info.id));
    for (auto& c : chunks) d.chunks.push_back(std::move(c));
  }
  GRAG_ASSIGN_OR_RETURN(d.entities, store.ListEntities(-1));
  std::sort(d.entities.begin(), d.entities.end(),
            [](const EntityRecord& a, const EntityRecord& b) { return a.id < b.id; });
  GRAG_ASSIGN_OR_RETURN(d.relationships, store.ListRelationships());
  std::sort(d.relationships.begin(), d.relationships.end(),
            [](const RelationshipRecord& a, const RelationshipRecord& b) { return a.id < b.id; });
  GRAG_ASSIGN_OR_RETURN(d.communities, store.ListCommunities());
  GRAG_ASSIGN_OR_RETURN(std::vector<ReportRecord> reports, store.ListReports());
  for (auto& r : reports) {
    if (r.status == ReportStatus::kOk) d.reports.push_back(std::move(r));
  }
  GRAG_ASSIGN_OR_RETURN(d.links, store.ListChunkLinks());
  GRAG_ASSIGN_OR_RETURN(std::optional<ClusteringRecord> clustering, store.LatestClustering());
  if (clustering) d.period = clustering->created_at.substr(0, 10);
  return d;
}

// ---------------------------------------------------------------- tables

struct Table {
  std::string name;  // file name without extension
  std::vector<std::string> columns;
  std::vector<std::vector<Json>> rows;
};

Json Strings(const std::vector<std::string>& v) {
  Json a = Json::array();
  for (const auto& s : v) a.push_back(s);
  return a;
}

Json Ids(const std::vector<int64_t>& v) {
  Json a = Json::array();
  for (int64_t id : v) a.push_back(std::to_string(id));
  return a;
}

// Microsoft GraphRAG's output tables (see docs/operations.md for what grag leaves empty).
std::vector<Table> MsTables(const IndexData& d) {
  std::unordered_map<int64_t, std::vector<std::string>> entity_chunks, relationship_chunks;
  std::unordered_map<std::string, std::vector<int64_t>> chunk_entities, chunk_relationships;
  for (const auto& [id, chunk] : d.links.entities) {
    entity_chunks[id].push_back(chunk);
    chunk_entities[chunk].push_back(id);
  }
  for (const auto& [id, chunk] : d.links.relationships) {
    relationship_chunks[id].push_back(chunk);
    chunk_relationships[chunk].push_back(id);
  }
  std::unordered_map<int64_t, const EntityRecord*> entity_of;
  for (const auto& e : d.entities) entity_of[e.id] = &e;
  auto name_of = [&](int64_t id) -> std::string {
    auto it = entity_of.find(id);
    return it == entity_of.end() ? std::string() : it->second->name;
  };
  auto list = [](const auto& map, const auto& key) {
    auto it = map.find(key);
    using V = typename std::decay_t<decltype(map)>::mapped_type;
    return it == map.end() ? V{} : it->second;
  };

  std::vector<Table> tables;
  {
    Table t{
        "documents",
        {"id", "human_readable_id", "title", "text", "text_unit_ids", "creation_date", "raw_data"},
        {}};
    std::map<std::string, std::vector<std::string>> units;
    for (const auto& c : d.chunks) units[c.document_id].push_back(c.id);
    int64_t i = 0;
    for (const auto& doc : d.documents) {
      t.rows.push_back({doc.id, i++, doc.title, list(d.document_text, doc.id),
                        Strings(list(units, doc.id)), doc.created_at, nullptr});
    }
    tables.push_back(std::move(t));
  }
  {
    Table t{"text_units",
            {"id", "human_readable_id", "text", "n_tokens", "document_id", "entity_ids",
             "relationship_ids", "covariate_ids"},
            {}};
    int64_t i = 0;
    for (const auto& c : d.chunks) {
      t.rows.push_back({c.id, i++, c.text, c.n_tokens, c.document_id,
                        Ids(list(chunk_entities, c.id)), Ids(list(chunk_relationships, c.id)),
                        Json::array()});
    }
    tables.push_back(std::move(t));
  }
  {
    Table t{"entities",
            {"id", "human_readable_id", "title", "type", "description", "text_unit_ids",
             "frequency", "degree"},
            {}};
    for (const auto& e : d.entities) {
      t.rows.push_back({std::to_string(e.id), e.id, e.name, e.type, e.description,
                        Strings(list(entity_chunks, e.id)), e.frequency, e.degree});
    }
    tables.push_back(std::move(t));
  }
  {
    Table t{"relationships",
            {"id", "human_readable_id", "source", "target", "description", "weight",
             "combined_degree", "text_unit_ids"},
            {}};
    for (const auto& r : d.relationships) {
      t.rows.push_back({std::to_string(r.id), r.id, name_of(r.source_id), name_of(r.target_id),
                        r.description, r.weight, r.combined_degree,
                        Strings(list(relationship_chunks, r.id))});
    }
    tables.push_back(std::move(t));
  }

  // Communities: children, member relationships and their chunks.
  std::map<int64_t, std::vector<int64_t>> children;
  std::map<int64_t, const CommunityRecord*> community_of;
  for (const auto& c : d.communities) {
    community_of[c.id] = &c;
    if (c.parent_id) children[*c.parent_id].push_back(c.id);
  }
  struct Inside {
    std::vector<int64_t> relationships;
    std::vector<std::string> chunks;
  };
  std::map<int64_t, Inside> inside;
  for (const auto& c : d.communities) {
    const std::set<int64_t> members(c.entity_ids.begin(), c.entity_ids.end());
    Inside& in = inside[c.id];
    std::set<std::string> seen;
    for (const auto& r : d.relationships) {
      if (!members.count(r.source_id) || !members.count(r.target_id)) continue;
      in.relationships.push_back(r.id);
      for (const auto& chunk : list(relationship_chunks, r.id)) {
        if (seen.insert(chunk).second) in.chunks.push_back(chunk);
      }
    }
  }
  {
    Table t{"communities",
            {"id", "human_readable_id", "community", "level", "parent", "children", "title",
             "entity_ids", "relationship_ids", "text_unit_ids", "period", "size"},
            {}};
    for (const auto& c : d.communities) {
      const Inside& in = inside[c.id];
      t.rows.push_back({std::to_string(c.id), c.id, c.id, c.level, c.parent_id.value_or(-1),
                        Json(list(children, c.id)), "Community " + std::to_string(c.id),
                        Ids(c.entity_ids), Ids(in.relationships), Strings(in.chunks), d.period,
                        static_cast<int64_t>(c.entity_ids.size())});
    }
    tables.push_back(std::move(t));
  }
  {
    Table t{"community_reports",
            {"id", "human_readable_id", "community", "level", "parent", "children", "title",
             "summary", "full_content", "rank", "rating_explanation", "findings",
             "full_content_json", "period", "size"},
            {}};
    for (const auto& r : d.reports) {
      auto it = community_of.find(r.community_id);
      const CommunityRecord* c = it == community_of.end() ? nullptr : it->second;
      Json findings = Json::array();
      for (const auto& f : r.findings) {
        findings.push_back(Json{{"summary", f.summary}, {"explanation", f.explanation}});
      }
      Json rank = r.rating ? Json(*r.rating) : Json(nullptr);
      Json full{{"title", r.title},
                {"summary", r.summary},
                {"findings", findings},
                {"rating", rank},
                {"rating_explanation", r.rating_explanation}};
      t.rows.push_back({std::to_string(r.community_id), r.community_id, r.community_id, r.level,
                        c && c->parent_id ? *c->parent_id : -1,
                        Json(list(children, r.community_id)), r.title, r.summary, r.full_content,
                        rank, r.rating_explanation, findings, full.dump(4), d.period,
                        c ? static_cast<int64_t>(c->entity_ids.size()) : 0});
    }
    tables.push_back(std::move(t));
  }
  return tables;
}

std::string CsvCell(const Json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return CsvField(v.get<std::string>());
  return CsvField(v.dump());
}

std::string TableCsv(const Table& t) {
  std::string out;
  for (size_t i = 0; i < t.columns.size(); ++i) out += (i ? "," : "") + CsvField(t.columns[i]);
  out += "\n";
  for (const auto& row : t.rows) {
    for (size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + CsvCell(row[i]);
    out += "\n";
  }
  return out;
}

std::string TableJson(const Table& t) {
  Json a = Json::array();
  for (const auto& row : t.rows) {
    Json o = Json::object();
    for (size_t i = 0; i < row.size(); ++i) o[t.columns[i]] = row[i];
    a.push_back(std::move(o));
  }
  // Invalid UTF-8 (never expected; the loader checks input) is replaced, not thrown.
  return a.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

// ---------------------------------------------------------------- GraphML

std::string Number(double v) { return Json(v).dump(); }

// Community id per level, for each entity.
std::map<int64_t, std::map<int64_t, int64_t>> LevelsOf(const IndexData& d,
                                                       std::set<int64_t>& levels) {
  std::map<int64_t, std::map<int64_t, int64_t>> out;
  for (const auto& c : d.communities) {
    levels.insert(c.level);
    for (int64_t e : c.entity_ids) out[e][c.level] = c.id;
  }
  return out;
}

std::string GraphMl(const IndexData& d) {
  std::set<int64_t> levels;
  const auto level_of = LevelsOf(d, levels);
  std::string x =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\" "
      "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
      "xsi:schemaLocation=\"http://graphml.graphdrawing.org/xmlns "
      "http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd\">\n";
  auto key = [&](std::string_view id, std::string_view for_, std::string_view name,
                 std::string_view type) {
    x += "  <key id=\"" + std::string(id) + "\" for=\"" + std::string(for_) + "\" attr.name=\"" +
         std::string(name) + "\" attr.type=\"" + std::string(type) + "\"/>\n";
  };
  key("name", "node", "name", "string");
  key("label", "node", "label", "string");
  key("type", "node", "type", "string");
  key("description", "node", "description", "string");
  key("degree", "node", "degree", "int");
  key("frequency", "node", "frequency", "int");
  for (int64_t l : levels) {
    const std::string n = "community_level_" + std::to_string(l);
    key(n, "node", n, "long");
  }
  key("weight", "edge", "weight", "double");
  key("edge_description", "edge", "description", "string");
  key("edge_frequency", "edge", "frequency", "int");
  x += "  <graph id=\"grag\" edgedefault=\"undirected\">\n";
  auto data = [&](std::string_view k, std::string_view v) {
    x += "      <data key=\"" + std::string(k) + "\">" + XmlEscape(v) + "</data>\n";
  };
  for (const auto& e : d.entities) {
    x += "    <node id=\"n" + std::to_string(e.id) + "\">\n";
    data("name", e.name);
    data("label", e.name);
    data("type", e.type);
    data("description", e.description);
    data("degree", std::to_string(e.degree));
    data("frequency", std::to_string(e.frequency));
    auto it = level_of.find(e.id);
    if (it != level_of.end()) {
      for (const auto& [l, c] : it->second) {
        data("community_level_" + std::to_string(l), std::to_string(c));
      }
    }
    x += "    </node>\n";
  }
  for (const auto& r : d.relationships) {
    x += "    <edge id=\"e" + std::to_string(r.id) + "\" source=\"n" + std::to_string(r.source_id) +
         "\" target=\"n" + std::to_string(r.target_id) + "\">\n";
    data("weight", Number(r.weight));
    data("edge_description", r.description);
    data("edge_frequency", std::to_string(r.frequency));
    x += "    </edge>\n";
  }
  x += "  </graph>\n</graphml>\n";
  return x;
}

// ---------------------------------------------------------------- Neo4j

// A type as a Neo4j label: letters, digits and underscores.
std::string Label(std::string_view type) {
  std::string out;
  for (char c : type) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    out += ok ? c : '_';
  }
  if (!out.empty() && out[0] >= '0' && out[0] <= '9') out = "_" + out;
  return out;
}

constexpr std::string_view kLoadCypher =
    R"cypher(// Loads grag's Neo4j export with LOAD CSV. Copy entities.csv and relationships.csv into the
// database's import folder, then run: cypher-shell -u neo4j -p <password> -f load.cypher
// (Or import them offline: neo4j-admin database import full --nodes=entities.csv
//  --relationships=relationships.csv --multiline-fields=true <database>)
CREATE CONSTRAINT grag_entity_id IF NOT EXISTS FOR (e:Entity) REQUIRE e.id IS UNIQUE;

LOAD CSV WITH HEADERS FROM 'file:///entities.csv' AS row
MERGE (e:Entity {id: row.`id:ID`})
SET e.name = row.name,
    e.type = row.type,
    e.description = row.description,
    e.degree = toInteger(row.`degree:int`),
    e.frequency = toInteger(row.`frequency:int`),
    e.communities = [c IN split(coalesce(row.`communities:long[]`, ''), ';') WHERE c <> '' | toInteger(c)];

LOAD CSV WITH HEADERS FROM 'file:///relationships.csv' AS row
MATCH (a:Entity {id: row.`:START_ID`}), (b:Entity {id: row.`:END_ID`})
MERGE (a)-[r:RELATED]->(b)
SET r.weight = toFloat(row.`weight:double`),
    r.description = row.description,
    r.frequency = toInteger(row.`frequency:int`);
)cypher";

struct OutFile {
  std::string name;
  std::string content;
  std::map<std::string, int64_t> counts;
};

std::vector<OutFile> Neo4j(const IndexData& d) {
  std::map<int64_t, std::vector<int64_t>> communities_of;
  for (const auto& c : d.communities) {
    for (int64_t e : c.entity_ids) communities_of[e].push_back(c.id);
  }
  std::string nodes =
      "id:ID,name,type,description,degree:int,frequency:int,communities:long[],"
      ":LABEL\n";
  for (const auto& e : d.entities) {
    std::string cs;
    for (int64_t c : communities_of[e.id]) cs += (cs.empty() ? "" : ";") + std::to_string(c);
    const std::string label = Label(e.type);
    nodes += std::to_string(e.id) + "," + CsvField(e.name) + "," + CsvField(e.type) + "," +
             CsvField(e.description) + "," + std::to_string(e.degree) + "," +
             std::to_string(e.frequency) + "," + cs + "," +
             (label.empty() ? "Entity" : "Entity;" + label) + "\n";
  }
  std::string edges = ":START_ID,:END_ID,weight:double,description,frequency:int,:TYPE\n";
  for (const auto& r : d.relationships) {
    edges += std::to_string(r.source_id) + "," + std::to_string(r.target_id) + "," +
             Number(r.weight) + "," + CsvField(r.description) + "," + std::to_string(r.frequency) +
             ",RELATED\n";
  }
  return {{"entities.csv", nodes, {{"rows", static_cast<int64_t>(d.entities.size())}}},
          {"relationships.csv", edges, {{"rows", static_cast<int64_t>(d.relationships.size())}}},
          {"load.cypher", std::string(kLoadCypher), {}}};
}

Status WriteFile(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::IoError("cannot write " + tmp.string());
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) return Status::IoError("writing " + tmp.string() + " failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return Status::IoError("renaming " + tmp.string() + " to " + path.string() + " failed");
  }
  return Status::Ok();
}

}  // namespace

std::string_view ExportFormatName(ExportFormat format) {
  switch (format) {
    case ExportFormat::kGraphml:
      return "graphml";
    case ExportFormat::kCsv:
      return "csv";
    case ExportFormat::kJson:
      return "json";
    case ExportFormat::kNeo4j:
      return "neo4j";
  }
  return "graphml";
}

Result<ExportFormat> ParseExportFormat(std::string_view name) {
  for (ExportFormat f :
       {ExportFormat::kGraphml, ExportFormat::kCsv, ExportFormat::kJson, ExportFormat::kNeo4j}) {
    if (name == ExportFormatName(f)) return f;
  }
  return Status::InvalidArgument("unknown export format \"" + std::string(name) +
                                 "\" (graphml, csv, json or neo4j)");
}

std::string CsvField(std::string_view text) {
  const bool quote = text.find_first_of(",\"\r\n") != std::string_view::npos ||
                     (!text.empty() && (text.front() == ' ' || text.back() == ' '));
  if (!quote) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string XmlEscape(std::string_view text) {
  // Well-formed UTF-8 sequences are copied as they are (no decode and re-encode); a byte that
  // starts none is dropped, as are the characters XML 1.0 does not allow.
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = bytes[i];
    if (c >= 0x80) {
      const size_t len = Utf8SequenceLength(bytes, i, text.size());
      // U+FFFE and U+FFFF (EF BF BE, EF BF BF) are not XML characters.
      const bool non_char = len == 3 && c == 0xEF && bytes[i + 1] == 0xBF && bytes[i + 2] >= 0xBE;
      if (len != 0 && !non_char) out.append(text.substr(i, len));
      i += len == 0 ? 1 : len;
      continue;
    }
    ++i;
    if (c < 0x20 && c != 0x9 && c != 0xA && c != 0xD) continue;
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '\r':
        out += "&#13;";
        break;  // a literal CR would be normalised away by parsers
      default:
        out += static_cast<char>(c);
    }
  }
  return out;
}

Result<ExportSummary> ExportIndex(Store& store, const ExportOptions& options) {
  namespace fs = std::filesystem;
  if (options.out_dir.empty()) return Status::InvalidArgument("no output folder given (--out)");
  const fs::path dir(options.out_dir);
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    return Status::InvalidArgument(options.out_dir + " exists and is not a folder");
  }
  GRAG_ASSIGN_OR_RETURN(IndexData data, Load(store));

  std::vector<OutFile> files;
  switch (options.format) {
    case ExportFormat::kGraphml:
      files.push_back({"graph.graphml",
                       GraphMl(data),
                       {{"nodes", static_cast<int64_t>(data.entities.size())},
                        {"edges", static_cast<int64_t>(data.relationships.size())}}});
      break;
    case ExportFormat::kCsv:
    case ExportFormat::kJson: {
      const bool csv = options.format == ExportFormat::kCsv;
      for (const Table& t : MsTables(data)) {
        files.push_back({t.name + (csv ? ".csv" : ".json"),
                         csv ? TableCsv(t) : TableJson(t),
                         {{"rows", static_cast<int64_t>(t.rows.size())}}});
      }
      break;
    }
    case ExportFormat::kNeo4j:
      files = Neo4j(data);
      break;
  }

  if (!options.force) {
    std::string existing;
    for (const auto& f : files) {
      if (fs::exists(dir / f.name, ec)) existing += (existing.empty() ? "" : ", ") + f.name;
    }
    if (!existing.empty()) {
      return Status::AlreadyExists(options.out_dir + " already holds " + existing +
                                   ": pass --force to overwrite");
    }
  }
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError("creating " + options.out_dir + ": " + ec.message());

  ExportSummary summary;
  summary.format = options.format;
  summary.out_dir = options.out_dir;
  for (const auto& f : files) {
    const fs::path path = dir / f.name;
    GRAG_RETURN_IF_ERROR(WriteFile(path, f.content));
    summary.files.push_back({path.string(), f.counts});
  }
  return summary;
}

}  // namespace grag
