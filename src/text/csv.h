// RFC 4180 CSV parsing (internal to the text module).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "grag/status.h"

namespace grag {

// Rows of cells. Quoted cells may hold commas, doubled quotes and line breaks; both \n and \r\n
// end a row. An unterminated quote is a kParse error naming the byte offset where it opened.
Result<std::vector<std::vector<std::string>>> ParseCsv(std::string_view text);

}  // namespace grag
