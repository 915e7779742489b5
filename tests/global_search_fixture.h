// Microsoft GraphRAG's 122 community reports for A Christmas Carol (tests/data/ms_christmas_carol,
// see SOURCE.md there) loaded into a grag index, for global search's tests and benchmark.
//
// GraphRAG's communities name their members by entity id; the index gets one placeholder entity
// per GraphRAG entity (name_key = GraphRAG's id, name = its title), linked to placeholder chunks
// named after GraphRAG's text units, so each community's weight is GraphRAG's occurrence weight
// (distinct text units of its members). Reports keep title, summary, full_content and rank.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "grag/status.h"
#include "grag/store.h"

namespace grag::testing {

struct CarolCounts {
  int64_t communities = 0;
  int64_t reports = 0;
  int64_t entities = 0;
};

inline Result<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + path);
  std::ostringstream buf;
  buf << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(buf.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Parse(path + " is not JSON");
  return j;
}

// Loads the fixture folder `data_dir` into `store` (an empty index) in one transaction.
inline Result<CarolCounts> LoadChristmasCarolReports(Store& store, const std::string& data_dir) {
  GRAG_ASSIGN_OR_RETURN(nlohmann::json entities, ReadJsonFile(data_dir + "/entities.json"));
  GRAG_ASSIGN_OR_RETURN(nlohmann::json communities, ReadJsonFile(data_dir + "/communities.json"));
  GRAG_ASSIGN_OR_RETURN(nlohmann::json reports, ReadJsonFile(data_dir + "/community_reports.json"));
  CarolCounts counts;
  try {
    GRAG_ASSIGN_OR_RETURN(Transaction tx, store.Begin());
    Document doc;
    doc.id = "a-christmas-carol.txt";
    doc.title = "A Christmas Carol";
    doc.source_path = "a-christmas-carol.txt";
    doc.text = "(placeholder: the fixture holds reports, not the book)";
    doc.content_hash = "fixture";
    GRAG_RETURN_IF_ERROR(store.UpsertDocument(doc).status());

    std::set<std::string> units;
    for (const auto& e : entities) {
      for (const auto& u : e.at("text_unit_ids")) units.insert(u.get<std::string>());
    }
    std::vector<ChunkRecord> chunks;
    for (const std::string& u : units) {
      ChunkRecord& c = chunks.emplace_back();
      c.id = u;
      c.document_id = doc.id;
      c.index = static_cast<int64_t>(chunks.size() - 1);
      c.text = "text unit " + u.substr(0, 12);
      c.n_tokens = 4;
      c.start_token = c.index * 4;
    }
    GRAG_RETURN_IF_ERROR(store.ReplaceDocumentChunks(doc.id, chunks).status());

    std::map<std::string, int64_t> entity_id;
    for (const auto& e : entities) {
      EntityRecord rec;
      rec.name_key = e.at("id").get<std::string>();
      rec.name = e.at("title").get<std::string>();
      rec.type = e.at("type").get<std::string>();
      GRAG_ASSIGN_OR_RETURN(int64_t id, store.UpsertEntity(rec));
      entity_id[rec.name_key] = id;
      GRAG_RETURN_IF_ERROR(
          store.SetEntityChunks(id, e.at("text_unit_ids").get<std::vector<std::string>>()));
      ++counts.entities;
    }

    std::vector<CommunityRecord> records;
    for (const auto& c : communities) {
      CommunityRecord& rec = records.emplace_back();
      rec.id = c.at("community").get<int64_t>();
      rec.level = c.at("level").get<int64_t>();
      if (const int64_t parent = c.at("parent").get<int64_t>(); parent >= 0) rec.parent_id = parent;
      for (const auto& e : c.at("entity_ids"))
        rec.entity_ids.push_back(entity_id.at(e.get<std::string>()));
    }
    ClusteringRecord clustering;
    clustering.note = "Microsoft GraphRAG's communities for A Christmas Carol (test fixture)";
    GRAG_RETURN_IF_ERROR(store.ReplaceCommunities(clustering, records).status());
    counts.communities = static_cast<int64_t>(records.size());

    for (const auto& r : reports) {
      ReportRecord rec;
      rec.community_id = r.at("community").get<int64_t>();
      rec.title = r.at("title").get<std::string>();
      rec.summary = r.at("summary").get<std::string>();
      rec.full_content = r.at("full_content").get<std::string>();
      rec.rating = r.at("rank").get<double>();
      rec.generator = ReportGenerator::kLlm;
      rec.model = "microsoft-graphrag-reference";
      GRAG_RETURN_IF_ERROR(store.PutReport(rec));
      ++counts.reports;
    }
    GRAG_RETURN_IF_ERROR(tx.Commit());
  } catch (const std::exception& e) {  // a fixture row without an expected field
    return Status::Corruption(std::string("fixture ") + data_dir + ": " + e.what());
  }
  return counts;
}

}  // namespace grag::testing
