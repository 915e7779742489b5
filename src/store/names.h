// Enum <-> text as stored in the index (the CHECK constraints in schema.cpp list the same names).
#pragma once

#include <string_view>

#include "grag/store_types.h"

namespace grag::store {

std::string_view ExtractionStatusName(ExtractionStatus status);
std::string_view ReportStatusName(ReportStatus status);
std::string_view ReportGeneratorName(ReportGenerator generator);
std::string_view StageStatusName(StageStatus status);

ExtractorKind ParseExtractorKind(std::string_view s);
ExtractionStatus ParseExtractionStatus(std::string_view s);
ReportStatus ParseReportStatus(std::string_view s);
ReportGenerator ParseReportGenerator(std::string_view s);
EmbeddingOwner ParseEmbeddingOwner(std::string_view s);
RunStatus ParseRunStatus(std::string_view s);
StageStatus ParseStageStatus(std::string_view s);

}  // namespace grag::store
