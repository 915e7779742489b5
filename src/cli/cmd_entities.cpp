// grag entities: see and correct entity resolution (list, aliases, merge, split).
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "cli/cli.h"
#include "cli/update.h"
#include "grag/extract.h"
#include "grag/store.h"

namespace grag::cli {
namespace {

Result<std::unique_ptr<Store>> OpenForReading(const GlobalOptions& g) {
  GRAG_ASSIGN_OR_RETURN(Config config, LoadProjectConfig(g));
  StoreOptions so;
  so.read_only = true;
  const std::string db = config.Resolve(config.store.path);
  auto store = Store::Open(db, so);
  if (!store.ok() && store.status().code() == ErrorCode::kNotFound) {
    return Status::NotFound("no index at " + db + ": run `grag index` first");
  }
  return store;
}

// Every extracted name by the entity it resolved to.
std::map<std::string, std::vector<const EntityAlias*>> NamesByEntity(
    const std::vector<EntityAlias>& aliases) {
  std::map<std::string, std::vector<const EntityAlias*>> out;
  for (const auto& a : aliases) out[a.canonical_key].push_back(&a);
  return out;
}

bool Matches(const std::string& needle, std::string_view text) {
  return needle.empty() || NormalizeEntityName(text).find(needle) != std::string::npos;
}

int List(const GlobalOptions& g, const std::string& search, int limit, bool json) {
  auto store = OpenForReading(g);
  if (!store.ok()) return Fail(store.status());
  auto entities = (*store)->ListEntities();
  if (!entities.ok()) return Fail(entities.status());
  auto aliases = (*store)->ListAliases();
  if (!aliases.ok()) return Fail(aliases.status());
  const auto names = NamesByEntity(*aliases);
  const std::string needle = NormalizeEntityName(search);
  nlohmann::json out = nlohmann::json::array();
  int shown = 0;
  int64_t matched = 0;
  for (const auto& e : *entities) {
    std::vector<std::string> other;  // the entity's other names
    bool hit = Matches(needle, e.name);
    if (auto it = names.find(e.name_key); it != names.end()) {
      for (const EntityAlias* a : it->second) {
        if (a->name_key == e.name_key) continue;
        other.push_back(a->name);
        hit = hit || Matches(needle, a->name);
      }
    }
    if (!hit) continue;
    ++matched;
    if (shown >= limit) continue;
    ++shown;
    if (json) {
      out.push_back({{"id", e.id}, {"name", e.name}, {"type", e.type}, {"degree", e.degree},
                     {"frequency", e.frequency}, {"aliases", other}});
      continue;
    }
    std::cout << e.id << "\t" << e.name << " (" << (e.type.empty() ? "?" : e.type) << ", degree "
              << e.degree << ", " << e.frequency << " chunks)";
    if (!other.empty()) {
      std::cout << "\talso: ";
      for (size_t i = 0; i < other.size(); ++i) std::cout << (i ? "; " : "") << other[i];
    }
    std::cout << "\n";
  }
  if (json) {
    PrintJson(out);
  } else if (matched == 0) {
    std::cout << (entities->empty() ? "no entities: run `grag index` first\n"
                                    : "no entity matches \"" + search + "\"\n");
  } else if (matched > shown) {
    std::cout << "(" << matched - shown << " more; --limit shows more)\n";
  }
  return kExitOk;
}

int Aliases(const GlobalOptions& g, const std::string& search, bool json) {
  auto store = OpenForReading(g);
  if (!store.ok()) return Fail(store.status());
  auto aliases = (*store)->ListAliases();
  if (!aliases.ok()) return Fail(aliases.status());
  auto overrides = (*store)->ListEntityOverrides();
  if (!overrides.ok()) return Fail(overrides.status());
  std::map<std::string, std::string> name_of;
  for (const auto& a : *aliases) name_of[a.name_key] = a.name;
  auto display = [&](const std::string& key) {
    auto it = name_of.find(key);
    return it == name_of.end() ? key : it->second;
  };
  const std::string needle = NormalizeEntityName(search);
  nlohmann::json resolved = nlohmann::json::array();
  nlohmann::json decisions = nlohmann::json::array();
  for (const auto& a : *aliases) {
    if (a.name_key == a.canonical_key) continue;
    if (!Matches(needle, a.name) && !Matches(needle, display(a.canonical_key))) continue;
    if (json) {
      resolved.push_back({{"name", a.name}, {"entity", display(a.canonical_key)},
                          {"method", a.method}, {"score", a.score}, {"reason", a.reason}});
    } else {
      std::cout << a.name << "\t-> " << display(a.canonical_key) << "\t" << a.method << " "
                << fmt::format("{:.2f}", a.score) << (a.reason.empty() ? "" : "\t" + a.reason)
                << "\n";
    }
  }
  for (const auto& o : *overrides) {
    if (!Matches(needle, display(o.key_a)) && !Matches(needle, display(o.key_b))) continue;
    if (json) {
      decisions.push_back({{"a", display(o.key_a)}, {"b", display(o.key_b)},
                           {"decision", o.merge ? "merge" : "split"}, {"at", o.created_at}});
    } else {
      std::cout << "person: " << (o.merge ? "merge " : "split ") << display(o.key_a) << " / "
                << display(o.key_b) << "\t" << o.created_at << "\n";
    }
  }
  if (json) {
    PrintJson({{"aliases", resolved}, {"overrides", decisions}});
  } else if (resolved.empty() && decisions.empty() && aliases->empty()) {
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
  auto* list = cmd->add_subcommand("list", "Entities by degree, with the other names resolved into each");
  list->add_option("--search", o->search, "Only entities one of whose names holds this text");
  list->add_option("--limit", o->limit, "Entities shown at most")->default_val(50)->check(CLI::Range(1, 1000000));
  list->add_flag("--json", o->json, "Print as JSON");
  auto* aliases = cmd->add_subcommand(
      "aliases", "Every extracted name resolved into another entity, how (rule, similarity, llm, "
                 "user) and why, then the merges and splits people recorded");
  aliases->add_option("--search", o->search, "Only names holding this text");
  aliases->add_flag("--json", o->json, "Print as JSON");
  auto* merge = cmd->add_subcommand("merge", "Make the things named A and B one entity");
  merge->add_option("A", o->a, "An entity's name or a name resolved into it")->required();
  merge->add_option("B", o->b, "Another")->required();
  AddApplyFlags(merge, o->flags);
  auto* split = cmd->add_subcommand(
      "split", "Undo resolution for an entity: with --alias, that one name stands alone again; "
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
              return RunUpdate(g, "entities merge", request, o->flags,
                               [o](Store& store) -> Result<std::string> {
                                 GRAG_ASSIGN_OR_RETURN(bool changed,
                                                       RecordEntityMerge(store, o->a, o->b));
                                 return std::string(changed ? "recorded: " : "already one entity; recorded: ") +
                                        "\"" + o->a + "\" and \"" + o->b + "\" are one entity";
                               });
            }
            return RunUpdate(g, "entities split", request, o->flags,
                             [o](Store& store) -> Result<std::string> {
                               GRAG_ASSIGN_OR_RETURN(int64_t n, RecordEntitySplit(store, o->a, o->alias));
                               if (n == 0) {
                                 std::cout << "\"" << o->a << "\" has no other name to split off\n";
                                 return std::string();
                               }
                               return "recorded: " +
                                      (o->alias.empty() ? "every name of \"" + o->a + "\" stands alone"
                                                        : "\"" + o->alias + "\" is not \"" + o->a + "\"");
                             });
          }};
}

}  // namespace grag::cli
