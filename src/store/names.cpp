// Names of the store's enums, as written in the index file.
#include "names.h"

namespace grag {

std::string_view ExtractorKindName(ExtractorKind kind) {
  switch (kind) {
    case ExtractorKind::kLlm:
      return "llm";
    case ExtractorKind::kNlp:
      return "nlp";
  }
  return "llm";
}

std::string_view EmbeddingOwnerName(EmbeddingOwner owner) {
  switch (owner) {
    case EmbeddingOwner::kEntity:
      return "entity";
    case EmbeddingOwner::kChunk:
      return "chunk";
    case EmbeddingOwner::kReport:
      return "report";
  }
  return "entity";
}

std::string_view VectorEncodingName(VectorEncoding encoding) {
  switch (encoding) {
    case VectorEncoding::kF32:
      return "f32";
    case VectorEncoding::kF16:
      return "f16";
    case VectorEncoding::kInt8:
      return "int8";
  }
  return "f32";
}

std::optional<VectorEncoding> ParseVectorEncoding(std::string_view name) {
  if (name == "f32") return VectorEncoding::kF32;
  if (name == "f16") return VectorEncoding::kF16;
  if (name == "int8") return VectorEncoding::kInt8;
  return std::nullopt;
}

std::string_view RunStatusName(RunStatus status) {
  switch (status) {
    case RunStatus::kRunning:
      return "running";
    case RunStatus::kOk:
      return "ok";
    case RunStatus::kFailed:
      return "failed";
    case RunStatus::kInterrupted:
      return "interrupted";
  }
  return "running";
}

namespace store {

std::string_view ExtractionStatusName(ExtractionStatus status) {
  return status == ExtractionStatus::kOk ? "ok" : "skipped";
}

std::string_view ReportStatusName(ReportStatus status) {
  return status == ReportStatus::kOk ? "ok" : "gap";
}

std::string_view ReportGeneratorName(ReportGenerator generator) {
  return generator == ReportGenerator::kLlm ? "llm" : "extractive";
}

std::string_view StageStatusName(StageStatus status) {
  switch (status) {
    case StageStatus::kRunning:
      return "running";
    case StageStatus::kDone:
      return "done";
    case StageStatus::kFailed:
      return "failed";
  }
  return "running";
}

// The CHECK constraints guarantee one of the known names; anything else falls back to the
// first value rather than failing a read.
ExtractorKind ParseExtractorKind(std::string_view s) {
  return s == "nlp" ? ExtractorKind::kNlp : ExtractorKind::kLlm;
}
ExtractionStatus ParseExtractionStatus(std::string_view s) {
  return s == "skipped" ? ExtractionStatus::kSkipped : ExtractionStatus::kOk;
}
ReportStatus ParseReportStatus(std::string_view s) {
  return s == "gap" ? ReportStatus::kGap : ReportStatus::kOk;
}
ReportGenerator ParseReportGenerator(std::string_view s) {
  return s == "extractive" ? ReportGenerator::kExtractive : ReportGenerator::kLlm;
}
EmbeddingOwner ParseEmbeddingOwner(std::string_view s) {
  if (s == "chunk") return EmbeddingOwner::kChunk;
  if (s == "report") return EmbeddingOwner::kReport;
  return EmbeddingOwner::kEntity;
}
RunStatus ParseRunStatus(std::string_view s) {
  if (s == "ok") return RunStatus::kOk;
  if (s == "failed") return RunStatus::kFailed;
  if (s == "interrupted") return RunStatus::kInterrupted;
  return RunStatus::kRunning;
}
StageStatus ParseStageStatus(std::string_view s) {
  if (s == "done") return StageStatus::kDone;
  if (s == "failed") return StageStatus::kFailed;
  return StageStatus::kRunning;
}

}  // namespace store
}  // namespace grag
