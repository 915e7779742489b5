// A person's corrections to entity resolution: overrides on the extracted names.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "grag/extract.h"
#include "grag/indexer.h"
#include "grag/store.h"

namespace grag {
namespace {

struct Names {
  std::vector<EntityAlias> aliases;
  // The entity (canonical key) of `key`, or "" when the index does not know the name.
  std::string EntityOf(const std::string& key) const {
    auto it =
        std::lower_bound(aliases.begin(), aliases.end(), key,
                         [](const EntityAlias& a, const std::string& k) { return a.name_key < k; });
    return it != aliases.end() && it->name_key == key ? it->canonical_key : "";
  }
  std::vector<std::string> MembersOf(const std::string& canonical) const {
    std::vector<std::string> out;
    for (const auto& a : aliases) {
      if (a.canonical_key == canonical) out.push_back(a.name_key);
    }
    return out;
  }
};

Result<Names> LoadNames(Store& store) {
  Names n;
  GRAG_ASSIGN_OR_RETURN(n.aliases, store.ListAliases());
  // An index built before resolution existed has entities but no aliases: each is its own name.
  GRAG_ASSIGN_OR_RETURN(std::vector<EntityRecord> entities, store.ListEntities());
  std::vector<EntityAlias> missing;
  for (const auto& e : entities) {
    if (n.EntityOf(e.name_key).empty())
      missing.push_back({e.name_key, e.name, e.name_key, 1, "", ""});
  }
  n.aliases.insert(n.aliases.end(), missing.begin(), missing.end());
  std::sort(n.aliases.begin(), n.aliases.end(),
            [](const EntityAlias& a, const EntityAlias& b) { return a.name_key < b.name_key; });
  return n;
}

Result<std::string> KnownKey(const Names& names, std::string_view name) {
  std::string key = NormalizeEntityName(name);
  if (key.empty()) return Status::InvalidArgument("an entity name must have letters or digits");
  if (names.EntityOf(key).empty()) {
    return Status::NotFound("no entity or extracted name \"" + std::string(name) +
                            "\" in the index (`grag entities list --search` finds names)");
  }
  return key;
}

}  // namespace

Result<bool> RecordEntityMerge(Store& store, std::string_view a, std::string_view b) {
  GRAG_ASSIGN_OR_RETURN(Names names, LoadNames(store));
  GRAG_ASSIGN_OR_RETURN(std::string ka, KnownKey(names, a));
  GRAG_ASSIGN_OR_RETURN(std::string kb, KnownKey(names, b));
  if (ka == kb) {
    return Status::InvalidArgument("\"" + std::string(a) + "\" and \"" + std::string(b) +
                                   "\" are the same name");
  }
  GRAG_ASSIGN_OR_RETURN(Transaction tx, store.Begin());
  // Whatever kept the two apart before goes: a person's latest word wins.
  const std::string ca = names.EntityOf(ka);
  const std::string cb = names.EntityOf(kb);
  GRAG_ASSIGN_OR_RETURN(std::vector<EntityOverride> overrides, store.ListEntityOverrides());
  const std::vector<std::string> ma = names.MembersOf(ca);
  const std::vector<std::string> mb = names.MembersOf(cb);
  for (const auto& o : overrides) {
    if (o.merge) continue;
    const bool in_a =
        std::count(ma.begin(), ma.end(), o.key_a) || std::count(ma.begin(), ma.end(), o.key_b);
    const bool in_b =
        std::count(mb.begin(), mb.end(), o.key_a) || std::count(mb.begin(), mb.end(), o.key_b);
    if (in_a && in_b) GRAG_RETURN_IF_ERROR(store.DeleteEntityOverride(o.key_a, o.key_b).status());
  }
  GRAG_RETURN_IF_ERROR(store.PutEntityOverride(ka, kb, /*merge=*/true));
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return ca != cb;
}

Result<int64_t> RecordEntitySplit(Store& store, std::string_view entity, std::string_view alias) {
  GRAG_ASSIGN_OR_RETURN(Names names, LoadNames(store));
  GRAG_ASSIGN_OR_RETURN(std::string ke, KnownKey(names, entity));
  const std::string canonical = names.EntityOf(ke);
  const std::vector<std::string> members = names.MembersOf(canonical);
  GRAG_ASSIGN_OR_RETURN(std::vector<EntityOverride> overrides, store.ListEntityOverrides());
  GRAG_ASSIGN_OR_RETURN(Transaction tx, store.Begin());
  auto drop_merges_of = [&](const std::string& key) -> Status {
    for (const auto& o : overrides) {
      if (o.merge && (o.key_a == key || o.key_b == key)) {
        GRAG_RETURN_IF_ERROR(store.DeleteEntityOverride(o.key_a, o.key_b).status());
      }
    }
    return Status::Ok();
  };
  int64_t split = 0;
  if (!alias.empty()) {
    GRAG_ASSIGN_OR_RETURN(std::string ka, KnownKey(names, alias));
    if (std::find(members.begin(), members.end(), ka) == members.end()) {
      return Status::InvalidArgument("\"" + std::string(alias) +
                                     "\" is not a name of the entity \"" + std::string(entity) +
                                     "\" (`grag entities aliases` lists them)");
    }
    GRAG_RETURN_IF_ERROR(drop_merges_of(ka));
    for (const auto& m : members) {
      if (m == ka) continue;
      GRAG_RETURN_IF_ERROR(store.PutEntityOverride(ka, m, /*merge=*/false));
    }
    split = members.size() > 1 ? 1 : 0;
  } else {
    for (const auto& m : members) GRAG_RETURN_IF_ERROR(drop_merges_of(m));
    for (size_t i = 0; i < members.size(); ++i) {
      for (size_t j = i + 1; j < members.size(); ++j) {
        GRAG_RETURN_IF_ERROR(store.PutEntityOverride(members[i], members[j], /*merge=*/false));
      }
    }
    split = members.empty() ? 0 : static_cast<int64_t>(members.size()) - 1;
  }
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return split;
}

}  // namespace grag
