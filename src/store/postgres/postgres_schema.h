// The PostgreSQL index schema: a versioned list of forward migrations (postgres_schema.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace grag::store::postgres {

// A forward step: `sql` takes the schema at version - 1 to `version`. Runs in one transaction
// that also records the version in grag_migrations and meta.
struct PgMigration {
  int64_t version;
  std::string_view description;
  std::string_view sql;
};

// The steps of this build, versions 1..N.
std::span<const PgMigration> Migrations();

}  // namespace grag::store::postgres
