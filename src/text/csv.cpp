#include "csv.h"

namespace grag {

Result<std::vector<std::vector<std::string>>> ParseCsv(std::string_view text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string cell;
  size_t i = 0;
  const size_t n = text.size();
  bool any = false;  // something was read on the current row
  while (i < n) {
    const char c = text[i];
    if (c == '"' && cell.empty()) {
      const size_t open = i++;
      bool closed = false;
      while (i < n) {
        if (text[i] == '"') {
          if (i + 1 < n && text[i + 1] == '"') {
            cell.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          closed = true;
          break;
        }
        cell.push_back(text[i++]);
      }
      if (!closed) {
        return Status::Parse("unterminated quoted CSV field opened at byte offset " +
                             std::to_string(open));
      }
      any = true;
      continue;
    }
    if (c == ',') {
      row.push_back(std::move(cell));
      cell.clear();
      any = true;
      ++i;
      continue;
    }
    if (c == '\r' && i + 1 < n && text[i + 1] == '\n') ++i;
    if (c == '\n' || c == '\r') {
      row.push_back(std::move(cell));
      cell.clear();
      rows.push_back(std::move(row));
      row.clear();
      any = false;
      ++i;
      continue;
    }
    cell.push_back(c);
    any = true;
    ++i;
  }
  if (any || !cell.empty()) {
    row.push_back(std::move(cell));
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace grag
