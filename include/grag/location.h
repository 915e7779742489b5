// Where an index lives: an SQLite file path or a PostgreSQL URL.
#pragma once

#include <string_view>

namespace grag {

// Whether an index location is a PostgreSQL URL (postgresql:// or postgres://) rather than an
// SQLite file path: what Store::Open dispatches on.
bool IsPostgresUrl(std::string_view location);

}  // namespace grag
