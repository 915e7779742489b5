// Text forms of grag sql's results: an aligned table and CSV.
#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include "grag/export.h"

namespace grag {
namespace {

// Code points in a UTF-8 string (continuation bytes not counted).
size_t Width(std::string_view s) {
  size_t n = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

// One line, at most `max_width` code points (the last one "…" when cut).
std::string Cell(std::string_view s, size_t max_width) {
  std::string out;
  size_t width = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    const bool starts = (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    if (starts) {
      if (max_width > 0 && width + 1 > max_width) {
        // Cut: drop the last code point for the ellipsis.
        while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) {
          out.pop_back();
        }
        if (!out.empty()) out.pop_back();
        out += "\xE2\x80\xA6";
        return out;
      }
      ++width;
    }
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    out += c;
  }
  return out;
}

}  // namespace

std::string SqlValueText(const SqlValue& value) {
  switch (value.kind) {
    case SqlValue::Kind::kNull:
      return "";
    case SqlValue::Kind::kInteger:
      return std::to_string(value.integer);
    case SqlValue::Kind::kReal: {
      char buf[64];
      auto res = std::to_chars(buf, buf + sizeof buf, value.real);
      return std::string(buf, res.ptr);
    }
    case SqlValue::Kind::kText:
      return value.text;
  }
  return "";
}

std::string FormatSqlTable(const SqlRows& rows, size_t max_width) {
  const size_t n = rows.columns.size();
  std::vector<std::vector<std::string>> cells;
  std::vector<size_t> width(n, 0);
  for (size_t i = 0; i < n; ++i) width[i] = Width(rows.columns[i]);
  for (const auto& row : rows.rows) {
    auto& line = cells.emplace_back();
    for (size_t i = 0; i < n && i < row.size(); ++i) {
      line.push_back(row[i].kind == SqlValue::Kind::kNull ? "NULL"
                                                          : Cell(SqlValueText(row[i]), max_width));
      width[i] = std::max(width[i], Width(line.back()));
    }
  }
  auto numeric = [&](size_t col) {
    for (const auto& row : rows.rows) {
      if (col < row.size() && row[col].kind == SqlValue::Kind::kText) return false;
    }
    return !rows.rows.empty();
  };
  std::vector<bool> right(n);
  for (size_t i = 0; i < n; ++i) right[i] = numeric(i);
  auto pad = [&](std::string& out, const std::string& s, size_t i) {
    const std::string fill(width[i] - std::min(width[i], Width(s)), ' ');
    out += right[i] ? fill + s : s + (i + 1 < n ? fill : "");
  };
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (i) out += "  ";
    pad(out, rows.columns[i], i);
  }
  out += "\n";
  for (size_t i = 0; i < n; ++i) {
    if (i) out += "  ";
    out += std::string(width[i], '-');
  }
  out += "\n";
  for (const auto& line : cells) {
    for (size_t i = 0; i < line.size(); ++i) {
      if (i) out += "  ";
      pad(out, line[i], i);
    }
    out += "\n";
  }
  const size_t count = rows.rows.size();
  if (rows.truncated) {
    out += "(first " + std::to_string(count) + " rows; more were left out: raise --max-rows)\n";
  } else {
    out += "(" + std::to_string(count) + (count == 1 ? " row)\n" : " rows)\n");
  }
  return out;
}

std::string FormatSqlCsv(const SqlRows& rows) {
  std::string out;
  for (size_t i = 0; i < rows.columns.size(); ++i) {
    out += (i ? "," : "") + CsvField(rows.columns[i]);
  }
  out += "\n";
  for (const auto& row : rows.rows) {
    for (size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + CsvField(SqlValueText(row[i]));
    out += "\n";
  }
  return out;
}

}  // namespace grag
