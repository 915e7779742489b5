// The PostgreSQL store: the index in a PostgreSQL database, for several grag processes (servers,
// an indexer) sharing one index. Store::Open picks it for a postgresql:// or postgres:// URL.
//
// Same contracts as the SQLite store (grag/store.h), with these differences:
// - the database must exist (grag creates the tables, not the database); an empty database is
//   initialised when create_if_missing, and its schema migrated forward (grag_migrations);
// - StoreOptions::writer_lock is a session advisory lock of the database, released when the
//   connection ends however the process ends; the holder is named from pg_stat_activity;
// - read_only sessions run with default_transaction_read_only, so writes fail with kIoError;
// - busy_timeout_ms becomes lock_timeout;
// - SearchChunks and RankTexts compute BM25 (k1 1.2, b 0.75, FTS5's IDF) over a tsvector of the
//   text (the grag_text configuration: Porter stems as FTS5, no stop words) with a GIN index;
// - RunReadOnlySql (grag sql) is not offered: kUnimplemented saying to use psql;
// - Check() runs grag's own invariants and checks the tsvectors against the text; PostgreSQL
//   enforces foreign keys itself. `verify` does not apply.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "grag/status.h"
#include "grag/store.h"

namespace grag::store {

// Connects to the database at `url` (a libpq connection URI) and opens the index in it.
// Errors: kUnavailable (server unreachable, with the URL minus its password; or the writer lock
// is taken), kPermissionDenied (login refused), kNotFound (no such database, or no index and
// !create_if_missing), kCorruption (tables that are not a grag index), kInvalidArgument (a
// newer schema).
Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url,
                                                 const StoreOptions& options);

}  // namespace grag::store
