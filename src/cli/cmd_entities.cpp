// grag entities: see and correct entity resolution (list, aliases, merge, split).
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include <unistd.h>

#include "cli.h"
#include "update.h"
#include "grag/engine.h"
#include "grag/engine_json.h"

namespace grag::cli {
namespace {

Result<std::unique_ptr<Engine>> OpenForReading(const GlobalOptions& g) {
  GRAG_ASSIGN_OR_RETURN(Config config, LoadProjectConfig(g));
  return Engine::Open(std::move(config));
}

int List(const GlobalOptions& g, const std::string& search, int limit, bool json) {
  auto engine = OpenForReading(g);
  if (!engine.ok()) return Fail(engine.status());
  auto entities = (*engine)->Entities(search);
  if (!entities.ok()) return Fail(entities.status());
  const auto shown = std::min(entities->size(), static_cast<size_t>(limit));
  if (json) {
    std::cout << EntitiesJson(*entities, shown, isatty(STDOUT_FILENO) != 0) << "\n";
    return kExitOk;
  }
  for (size_t i = 0; i < shown; ++i) {
    const EntityRecord& e = (*entities)[i].entity;
    const auto& other = (*entities)[i].aliases;
    std::cout << e.id << "\t" << e.name << " (" << (e.type.empty() ? "?" : e.type) << ", degree "
              << e.degree << ", " << e.frequency << " chunks)";
    if (!other.empty()) {
      std::cout << "\talso: ";
      for (size_t k = 0; k < other.size(); ++k) std::cout << (k ? "; " : "") << other[k];
    }
    std::cout << "\n";
  }
  if (entities->empty()) {
    auto stats = (*engine)->Stats(0);
    const bool none = stats.ok() && stats->store.entities == 0;
    std::cout << (none ? "no entities: run `grag index` first\n"
                       : "no entity matches \"" + search + "\"\n");
  } else if (entities->size() > shown) {
    std::cout << "(" << entities->size() - shown << " more; --limit shows more)\n";
  }
  return kExitOk;
}

int Aliases(const GlobalOptions& g, const std::string& search, bool json) {
  auto engine = OpenForReading(g);
  if (!engine.ok()) return Fail(engine.status());
  auto listing = (*engine)->Aliases(search);
  if (!listing.ok()) return Fail(listing.status());
  if (json) {
    std::cout << AliasesJson(*listing, isatty(STDOUT_FILENO) != 0) << "\n";
    return kExitOk;
  }
  for (const auto& a : listing->aliases) {
    std::cout << a.name << "\t-> " << a.entity << "\t" << a.method << " "
              << fmt::format("{:.2f}", a.score) << (a.reason.empty() ? "" : "\t" + a.reason)
              << "\n";
  }
  for (const auto& o : listing->overrides) {
    std::cout << "person: " << (o.merge ? "merge " : "split ") << o.a << " / " << o.b << "\t"
              << o.at << "\n";
  }
  if (listing->empty_index && listing->overrides.empty()) {
    std::cout << "no resolved names: run `grag index` first\n";
  }
  return kExitOk;
}

void AddApplyFlags(CLI::App* cmd, IndexFlags& f) {
  cmd->add_flag("--json", f.json, "Print the summary of the update as JSON");
  cmd->add_flag("--no-progress", f.no_progress, "No progress display on stderr");
  cmd->add_flag("--wait", f.wait,
                "When another grag process is writing this index, wait for it to finish");
}

}  // namespace

Command AddEntitiesCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "entities",
      "See and correct entity resolution: which extracted names became one entity. A person's "
      "merge and split are kept across re-indexing and win over the automatic decisions; each "
      "applies at once (the graph, communities and reports that change are redone).");
  cmd->require_subcommand(1);
  struct Opts {
    std::string search;
    int limit = 50;
    bool json = false;
    std::string a, b, alias;
    IndexFlags flags;
  };
  auto o = std::make_shared<Opts>();
  auto* list =
      cmd->add_subcommand("list", "Entities by degree, with the other names resolved into each");
  list->add_option("--search", o->search, "Only entities one of whose names holds this text");
  list->add_option("--limit", o->limit, "Entities shown at most")
      ->default_val(50)
      ->check(CLI::Range(1, 1000000));
  list->add_flag("--json", o->json, "Print as JSON");
  auto* aliases = cmd->add_subcommand(
      "aliases",
      "Every extracted name resolved into another entity, how (rule, similarity, llm, "
      "user) and why, then the merges and splits people recorded");
  aliases->add_option("--search", o->search, "Only names holding this text");
  aliases->add_flag("--json", o->json, "Print as JSON");
  auto* merge = cmd->add_subcommand("merge", "Make the things named A and B one entity");
  merge->add_option("A", o->a, "An entity's name or a name resolved into it")->required();
  merge->add_option("B", o->b, "Another")->required();
  AddApplyFlags(merge, o->flags);
  auto* split = cmd->add_subcommand(
      "split",
      "Undo resolution for an entity: with --alias, that one name stands alone again; "
      "without, every name of the entity does");
  split->add_option("ENTITY", o->a, "The entity's name (or one of its names)")->required();
  split->add_option("--alias", o->alias, "The name to split off");
  AddApplyFlags(split, o->flags);
  return {cmd, [o, &g, list, aliases, merge, split]() {
            if (list->parsed()) return List(g, o->search, o->limit, o->json);
            if (aliases->parsed()) return Aliases(g, o->search, o->json);
            IndexRequest request;
            request.graph_only = true;
            if (merge->parsed()) {
              return RunUpdate(
                  g, "entities merge", request, o->flags,
                  [o](Engine& engine) -> Result<std::string> {
                    GRAG_ASSIGN_OR_RETURN(bool changed, engine.MergeEntities(o->a, o->b));
                    return std::string(changed ? "recorded: " : "already one entity; recorded: ") +
                           "\"" + o->a + "\" and \"" + o->b + "\" are one entity";
                  });
            }
            return RunUpdate(
                g, "entities split", request, o->flags, [o](Engine& engine) -> Result<std::string> {
                  GRAG_ASSIGN_OR_RETURN(int64_t n, engine.SplitEntity(o->a, o->alias));
                  if (n == 0) {
                    std::cout << "\"" << o->a << "\" has no other name to split off\n";
                    return std::string();
                  }
                  return "recorded: " + (o->alias.empty()
                                             ? "every name of \"" + o->a + "\" stands alone"
                                             : "\"" + o->alias + "\" is not \"" + o->a + "\"");
                });
          }};
}

}  // namespace grag::cli
