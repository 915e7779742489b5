// grag chunk FILE...: the chunks and token counts the input would give, to estimate cost.
#include <unistd.h>

#include "cli.h"
#include "grag/engine_json.h"
#include "grag/index_types.h"

namespace grag::cli {
namespace {

std::string Preview(const std::string& text, size_t max_bytes) {
  std::string s;
  for (char c : text) {
    if (s.size() >= max_bytes && (static_cast<unsigned char>(c) & 0xC0) != 0x80) {
      s += "…";
      break;
    }
    s += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  }
  return s;
}

}  // namespace

Command AddChunkCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "chunk",
      "Show the chunks and token counts files would give (one extraction call per chunk), "
      "without indexing anything");
  struct Opts {
    std::vector<std::string> paths;
    int64_t size = 0;
    int64_t overlap = -1;
    std::string encoding;
    bool title = false;
    bool no_title = false;
    bool text = false;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("FILE", o->paths, "Files or folders (.txt .md .json .jsonl .csv)")->required();
  cmd->add_option("--size", o->size, "Tokens per chunk (default: chunks.size, 1200)");
  cmd->add_option("--overlap", o->overlap, "Tokens of overlap (default: chunks.overlap, 100)");
  cmd->add_option("--encoding", o->encoding, "o200k_base | cl100k_base (default: chunks.encoding)");
  cmd->add_flag("--title", o->title,
                "Prefix each chunk with \"title: <title>.\\n\" (Microsoft style)");
  cmd->add_flag("--no-title", o->no_title, "No title prefix");
  cmd->add_flag("--text", o->text, "Print each chunk's full text");
  cmd->add_flag("--json", o->json, "Print documents and chunks as JSON (with text)");
  return {
      cmd, [o, &g]() {
        auto config = LoadProjectConfig(g);
        if (!config.ok()) return Fail(config.status());
        // Flags go through the settings so they are checked like any other value.
        Status st;
        if (o->size > 0) st = ApplySetting(*config, "chunks.size", std::to_string(o->size));
        if (st.ok() && o->overlap >= 0) {
          st = ApplySetting(*config, "chunks.overlap", std::to_string(o->overlap));
        }
        if (st.ok() && !o->encoding.empty()) {
          st = ApplySetting(*config, "chunks.encoding", o->encoding);
        }
        if (st.ok()) st = ValidateConfig(*config);
        if (!st.ok()) return Fail(st);
        config->chunks.prepend_title = (config->chunks.prepend_title || o->title) && !o->no_title;

        // Document ids relative to where the user stands.
        auto preview = ChunkFiles(o->paths, *config, ".");
        if (!preview.ok()) return Fail(preview.status());
        for (const auto& issue : preview->issues) {
          std::cerr << (issue.skipped ? "warning: " : "note: ") << issue.path << ": "
                    << issue.message << "\n";
        }
        if (o->json) {
          std::cout << ChunkPreviewJson(*preview, isatty(STDOUT_FILENO) != 0) << "\n";
        } else {
          for (const auto& d : preview->documents) {
            std::cout << d.document.id << ": " << d.chunks.size() << " chunks, " << d.tokens
                      << " tokens\n";
            for (const auto& c : d.chunks) {
              std::cout << "  #" << c.index << "  " << c.n_tokens << " tokens  "
                        << c.id.substr(0, 12) << "  ";
              if (o->text) {
                std::cout << "\n" << c.text << "\n";
              } else {
                std::cout << Preview(c.text, 60) << "\n";
              }
            }
          }
          std::cout << "total: " << preview->documents.size() << " documents, " << preview->chunks
                    << " chunks, " << preview->tokens << " tokens (" << config->chunks.encoding
                    << ", size " << config->chunks.size << ", overlap " << config->chunks.overlap
                    << "). Indexing with an LLM makes one extraction call per chunk, plus "
                       "gleaning rounds.\n";
        }
        return preview->documents.empty() && !preview->issues.empty() ? kExitFailure : kExitOk;
      }};
}

}  // namespace grag::cli
