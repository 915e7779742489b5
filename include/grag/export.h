// Exports of an index for other tools (grag export), and the text forms of read-only SQL
// results (grag sql).
//
// Formats (docs/operations.md, "Exports and SQL", lists the files and columns):
//   graphml  graph.graphml: entities as nodes (name, label, type, description, degree,
//            frequency, community_level_N for each level), relationships as undirected edges
//            (weight, description, frequency); opens in Gephi, networkx, yEd.
//   csv      documents, text_units, entities, relationships, communities, community_reports as
//   json     .csv / .json tables with Microsoft GraphRAG's output column names, so tooling
//            written for its output reads grag's (list columns are JSON arrays in CSV cells).
//   neo4j    entities.csv and relationships.csv with neo4j-admin database import headers, and
//            load.cypher, which loads the same files with LOAD CSV.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "grag/status.h"
#include "grag/records.h"

namespace grag {

enum class ExportFormat { kGraphml, kCsv, kJson, kNeo4j };
std::string_view ExportFormatName(ExportFormat format);  // "graphml", "csv", ...
// kInvalidArgument naming the formats for anything else.
Result<ExportFormat> ParseExportFormat(std::string_view name);

struct ExportOptions {
  ExportFormat format = ExportFormat::kGraphml;
  std::string out_dir;  // created when missing
  bool force = false;   // overwrite files of the same names; else kAlreadyExists, nothing written
};

struct ExportedFile {
  std::string path;
  // What it holds: {"rows": n} for a table, {"nodes": n, "edges": m} for a graph; empty for a
  // script.
  std::map<std::string, int64_t> counts;
};

struct ExportSummary {
  ExportFormat format = ExportFormat::kGraphml;
  std::string out_dir;
  std::vector<ExportedFile> files;  // in the order written
};

// ---- text forms shared by the writers and grag sql

// One CSV field (RFC 4180): quoted when it holds a comma, quote, CR, LF or edge spaces.
std::string CsvField(std::string_view text);
// `text` as valid XML 1.0 character data or attribute value: & < > " ' escaped, invalid UTF-8
// and the characters XML 1.0 forbids (controls other than tab, LF, CR; U+FFFE, U+FFFF)
// dropped.
std::string XmlEscape(std::string_view text);

// A value as text: "" for NULL, integers in decimal, reals shortest round-trip.
std::string SqlValueText(const SqlValue& value);
// An aligned table with a header rule; cells cut to `max_width` characters (0: no cut) with
// newlines shown as spaces. Says "(N rows)" or, when truncated, that more were left out.
std::string FormatSqlTable(const SqlRows& rows, size_t max_width = 60);
// A header line and one line per row; NULL is an empty field.
std::string FormatSqlCsv(const SqlRows& rows);

}  // namespace grag
