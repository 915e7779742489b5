// Copying a whole index from one store to another (grag migrate): SQLite to PostgreSQL and
// back, or to another SQLite file, every table (grag/store_tables.h) with its ids, verified by
// row counts and checksums.
//
// The checksum of a table is a SHA-256 over its rows in their fixed order, each value in one
// canonical form whatever the backend stores (integers and booleans as integers, doubles and
// floats bit for bit, JSON re-serialised with sorted keys), so a table read from SQLite and the
// same table read from PostgreSQL checksum alike.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "grag/status.h"
#include "grag/migrate.h"
#include "grag/store.h"

namespace grag {

// Copies every table of `source` into `target`, which must hold no index data yet (a store just
// created holds none): kAlreadyExists naming a table that has rows otherwise. Reads `source` in
// one snapshot (a concurrent writer cannot tear the copy) and writes `target` in one transaction
// that commits only once every table's count and checksum, read back from `target`, equal the
// source's: on any failure, a mismatch included (kCorruption naming the tables), `target` is left
// as it was. Must not be called inside a transaction of either store.
Result<CopyReport> CopyIndex(Store& source, Store& target, const CopyOptions& options = {});

}  // namespace grag
