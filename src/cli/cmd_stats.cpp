// grag stats: what the index holds and what it cost.
#include "cli/cli.h"
#include "cli/progress.h"
#include "grag/lexical_embedder.h"
#include "grag/store.h"

namespace grag::cli {
namespace {

int PrintDocuments(Store& store, bool json) {
  auto docs = store.ListDocuments();
  if (!docs.ok()) return Fail(docs.status());
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& d : *docs) {
      out.push_back({{"id", d.id}, {"title", d.title}, {"source_path", d.source_path},
                     {"chunks", d.chunk_count}, {"updated_at", d.updated_at}});
    }
    PrintJson(out);
    return kExitOk;
  }
  for (const auto& d : *docs) {
    std::cout << d.id << "\t" << d.chunk_count << " chunks\t" << d.title << "\n";
  }
  if (docs->empty()) std::cout << "no documents: run `grag index` first\n";
  return kExitOk;
}

}  // namespace

Command AddStatsCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "stats",
      "Show the index: documents, chunks, entities, relationships, communities per level, "
      "modularity, skipped chunks, reports, LLM calls and tokens spent, top entities by degree");
  struct Opts {
    int top = 10;
    bool json = false;
    bool documents = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--top", o->top, "How many top entities to list")->default_val(10);
  cmd->add_flag("--json", o->json, "Print as JSON");
  cmd->add_flag("--documents", o->documents,
                "List the indexed documents (id, chunks, title) instead: the ids `grag remove` takes");
  return {cmd, [o, &g]() {
            auto config = LoadProjectConfig(g);
            if (!config.ok()) return Fail(config.status());
            StoreOptions so;
            so.read_only = true;
            auto store = Store::Open(config->Resolve(config->store.path), so);
            if (!store.ok()) {
              if (store.status().code() == ErrorCode::kNotFound) {
                return Fail(Status::NotFound("no index at " + config->Resolve(config->store.path) +
                                             ": run `grag index` first"));
              }
              return Fail(store.status());
            }
            if (o->documents) return PrintDocuments(**store, o->json);
            auto stats = (*store)->Stats();
            if (!stats.ok()) return Fail(stats.status());
            auto spent = (*store)->TotalRunCounters();
            if (!spent.ok()) return Fail(spent.status());
            auto top = (*store)->ListEntities(o->top);
            if (!top.ok()) return Fail(top.status());
            auto aliases = (*store)->ListAliases();
            if (!aliases.ok()) return Fail(aliases.status());
            std::map<std::string, int64_t> resolved;  // names folded into another, by method
            int64_t resolved_total = 0;
            for (const auto& a : *aliases) {
              if (a.name_key == a.canonical_key) continue;
              ++resolved[a.method.empty() ? "other" : a.method];
              ++resolved_total;
            }
            const auto& s = *stats;
            struct Space {
              std::string owner;
              EmbeddingSpace space;
            };
            std::vector<Space> spaces;
            for (EmbeddingOwner owner :
                 {EmbeddingOwner::kEntity, EmbeddingOwner::kChunk, EmbeddingOwner::kReport}) {
              auto space = (*store)->GetEmbeddingSpace(owner);
              if (!space.ok()) return Fail(space.status());
              if (*space) spaces.push_back({std::string(EmbeddingOwnerName(owner)), **space});
            }
            auto counter = [&](const char* k) -> int64_t {
              auto it = spent->find(k);
              return it == spent->end() ? 0 : it->second;
            };
            if (o->json) {
              nlohmann::json levels = nlohmann::json::object();
              for (const auto& [l, n] : s.communities_per_level) levels[std::to_string(l)] = n;
              nlohmann::json entities = nlohmann::json::array();
              for (const auto& e : *top) {
                entities.push_back({{"id", e.id}, {"name", e.name}, {"type", e.type},
                                    {"degree", e.degree}, {"frequency", e.frequency}});
              }
              nlohmann::json embeddings = nlohmann::json::object();
              for (const auto& e : spaces) {
                embeddings[e.owner] = {{"count", e.space.count}, {"model", e.space.model},
                                       {"dimension", e.space.dimension},
                                       {"lexical", IsLexicalEmbeddingModel(e.space.model)}};
              }
              PrintJson({{"documents", s.documents},
                         {"chunks", s.chunks},
                         {"chunks_extracted", s.extractions_ok},
                         {"chunks_skipped", s.extractions_skipped},
                         {"entities", s.entities},
                         {"relationships", s.relationships},
                         {"resolution", {{"names", aliases->size()}, {"merged", resolved_total},
                                         {"by_method", resolved}}},
                         {"communities", s.communities},
                         {"communities_per_level", levels},
                         {"modularity", s.modularity ? nlohmann::json(*s.modularity) : nlohmann::json()},
                         {"reports", s.reports_ok},
                         {"report_gaps", s.reports_gap},
                         {"embeddings", embeddings},
                         {"llm_calls", counter("llm_calls")},
                         {"llm_cache_hits", counter("llm_cache_hits")},
                         {"tokens_in", counter("tokens_in")},
                         {"tokens_out", counter("tokens_out")},
                         {"cache_entries", s.cache_entries},
                         {"runs", s.runs},
                         {"file_bytes", s.file_bytes},
                         {"top_entities", entities}});
              return kExitOk;
            }
            std::cout << "documents      " << s.documents << "\nchunks         " << s.chunks
                      << " (" << s.extractions_ok << " extracted, " << s.extractions_skipped
                      << " skipped)\nentities       " << s.entities;
            if (resolved_total > 0) {
              std::cout << " (" << resolved_total << " extracted names resolved into another:";
              for (const auto& [m, n] : resolved) std::cout << " " << m << " " << n;
              std::cout << ")";
            }
            std::cout << "\nrelationships  "
                      << s.relationships << "\ncommunities    " << s.communities;
            if (!s.communities_per_level.empty()) {
              std::cout << " (";
              bool first = true;
              for (const auto& [l, n] : s.communities_per_level) {
                std::cout << (first ? "" : ", ") << "level " << l << ": " << n;
                first = false;
              }
              std::cout << ")";
            }
            std::cout << "\nmodularity     ";
            if (s.modularity) std::cout << *s.modularity; else std::cout << "-";
            std::cout << "\nreports        " << s.reports_ok;
            if (s.reports_gap) std::cout << " (+" << s.reports_gap << " gaps)";
            for (const auto& e : spaces) {
              std::cout << "\nembeddings     " << e.owner << ": " << e.space.count << " ("
                        << e.space.model << ", " << e.space.dimension << " dimensions"
                        << (IsLexicalEmbeddingModel(e.space.model) ? ", lexical: built in, no model"
                                                                   : "")
                        << ")";
            }
            std::cout << "\nLLM spent      " << counter("llm_calls") << " calls ("
                      << counter("llm_cache_hits") << " from cache), "
                      << FormatCount(counter("tokens_in")) << " tokens in, "
                      << FormatCount(counter("tokens_out")) << " out, over " << s.runs
                      << " runs\nreply cache    " << s.cache_entries << " entries\nindex file     "
                      << FormatCount(s.file_bytes) << " bytes\n";
            if (!top->empty()) {
              std::cout << "\ntop entities by degree:\n";
              for (const auto& e : *top) {
                std::cout << "  " << e.degree << "\t" << e.name << " (" << (e.type.empty() ? "?" : e.type)
                          << ")\n";
              }
            }
            return kExitOk;
          }};
}

}  // namespace grag::cli
