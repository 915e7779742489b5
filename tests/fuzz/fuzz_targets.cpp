#include "fuzz/fuzz_targets.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "grag/config.h"
#include "grag/extract.h"
#include "grag/loader.h"
#include "grag/report.h"
#include "grag/tokenizer.h"
#include "llm/wire.h"
#include "query/global_points.h"

namespace grag::fuzz {
namespace {

// A broken invariant: say which, then abort so the fuzzer keeps the input.
void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
    std::abort();
  }
}

bool ValidUtf8(std::string_view s) { return FindInvalidUtf8(s) == std::string_view::npos; }

// A scratch folder for the targets that read files, made once per process.
const std::string& ScratchDir() {
  static const std::string dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "grag-fuzz-XXXXXX").string();
    const char* made = mkdtemp(tmpl.data());
    return std::string(made != nullptr ? made : "/tmp");
  }();
  return dir;
}

void WriteFile(const std::string& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

void ExtractionReply(std::string_view data) {
  auto r = ParseExtractionReply(data);
  if (!r.ok()) return;
  for (const auto& e : r->entities) {
    Require(!e.name_key.empty(), "an entity without a key");
    Require(e.name_key == NormalizeEntityName(e.name_key), "a key that is not normalised");
  }
  for (const auto& rel : r->relationships) {
    Require(rel.strength >= 1 && rel.strength <= 10, "a strength outside 1-10");
  }
}

void ReportReply(std::string_view data) {
  auto r = ParseReportReply(data);
  if (!r.ok()) return;
  if (r->rating) Require(*r->rating >= 0 && *r->rating <= 10, "a rating outside 0-10");
  (void)RenderReportMarkdown(*r);
}

void MapReply(std::string_view data) {
  auto r = query::ParseMapReply(data);
  if (!r.ok()) return;
  for (const auto& p : *r) Require(p.score >= 0 && p.score <= 100, "a score outside 0-100");
}

void ChatWire(std::string_view data) {
  (void)llm_internal::ParseChatReply(data);
  (void)llm_internal::ParseEmbeddingReply(data, 3);
  llm_internal::SseParser parser;
  (void)parser.Feed(data, [](std::string_view, std::string_view) { return Status::Ok(); });
  (void)parser.Finish([](std::string_view, std::string_view) { return Status::Ok(); });
}

// The first byte picks the format, the rest is the file.
void Loader(std::string_view data) {
  static const char* kExt[] = {".json", ".jsonl", ".csv", ".txt"};
  const char* ext = data.empty() ? ".txt" : kExt[static_cast<unsigned char>(data[0]) % 4];
  if (!data.empty()) data.remove_prefix(1);
  const std::string path = ScratchDir() + "/input" + ext;
  WriteFile(path, data);
  for (InvalidUtf8Policy policy : {InvalidUtf8Policy::kSkip, InvalidUtf8Policy::kRepair}) {
    LoadOptions o;
    o.base_dir = ScratchDir();
    o.root_dir = ScratchDir();
    o.invalid_utf8 = policy;
    auto r = LoadDocuments({path}, o);
    if (!r.ok()) continue;
    for (const auto& d : r->documents) {
      Require(ValidUtf8(d.text), "a document whose text is not UTF-8");
      Require(!d.id.empty(), "a document without an id");
    }
  }
}

void ConfigFile(std::string_view data) {
  const std::string path = ScratchDir() + "/grag.toml";
  WriteFile(path, data);
  auto no_env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  auto r = LoadConfig(ScratchDir(), path, no_env);
  if (r.ok()) Require(ValidateConfig(*r).ok(), "a loaded configuration that does not validate");
}

void TokenizerRoundTrip(std::string_view data) {
  for (const char* encoding : {"o200k_base", "cl100k_base"}) {
    auto tok = Tokenizer::Get(encoding);
    Require(tok.ok(), "a tokenizer that does not load");
    const std::vector<uint32_t> ids = (*tok)->Encode(data);
    Require((*tok)->DecodeBytes(ids) == data, "DecodeBytes(Encode(s)) != s");
    Require((*tok)->Count(data) == ids.size(), "Count(s) != Encode(s).size()");
  }
}

constexpr Target kTargets[] = {
    {"extraction_reply", &ExtractionReply},
    {"report_reply", &ReportReply},
    {"map_reply", &MapReply},
    {"chat_wire", &ChatWire},
    {"loader", &Loader},
    {"config", &ConfigFile},
    {"tokenizer", &TokenizerRoundTrip},
};

}  // namespace

std::span<const Target> Targets() { return kTargets; }

const Target* FindTarget(std::string_view name) {
  for (const Target& t : kTargets) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

}  // namespace grag::fuzz
