// grag doctor: try every configured model endpoint once, before an index spends anything.
#include <unistd.h>

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "cli.h"
#include "grag/engine.h"
#include "grag/engine_json.h"

namespace grag::cli {
namespace {

void PrintProbe(const DoctorProbe& p) {
  std::cout << p.name << ": " << (p.ok ? "ok" : "PROBLEM") << "  (" << p.model
            << (p.base_url.starts_with("http") ? " at " : ", ") << p.base_url << ")\n";
  if (!p.reachable) {
    std::cout << "  not reachable: " << p.error << "\n";
    return;
  }
  if (!p.model_found) {
    std::cout << "  model not found: " << p.error << "\n";
    return;
  }
  if (!p.error.empty() && p.latency_ms == 0) std::cout << "  " << p.error << "\n";
  std::cout << "  latency " << p.latency_ms << " ms";
  if (p.name != "embedding" || p.prompt_tokens > 0) {
    std::cout << ", tokens " << p.prompt_tokens << " in / " << p.completion_tokens << " out";
  }
  if (p.thinking_seen) std::cout << " (" << p.reasoning_tokens << " thinking)";
  std::cout << "\n";
  if (p.name == "extraction") {
    std::cout << "  JSON " << (p.json_valid ? "valid" : "NOT valid") << ", " << p.entities
              << " entities, " << p.relationships << " relationships\n";
  }
  if (p.name == "embedding") std::cout << "  dimension " << p.dimension << "\n";
  if (!p.error.empty() && p.latency_ms > 0) std::cout << "  " << p.error << "\n";
  if (!p.reply_excerpt.empty() && !p.ok) std::cout << "  reply: " << p.reply_excerpt << "\n";
}

}  // namespace

Command AddDoctorCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "doctor",
      "Try the configured models before spending anything: one extraction request on a sample "
      "text, one answer and one embedding request, sent to the endpoints as an index would send "
      "them (never from the reply cache). Reports what came back (reachable, model found, JSON "
      "valid, entities found, thinking seen, context window, latency, tokens, cost per 1,000 "
      "chunks at the configured prices) and what to change. Exits 1 when something would stop "
      "or spoil an index.");
  struct Opts {
    bool json = false;
    std::string sample;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_flag("--json", o->json, "Print the report as JSON");
  cmd->add_option("--sample", o->sample,
                  "A text file whose start extraction is tried on (default: a built-in passage "
                  "full of names, places and dates)");
  return {cmd, [o, &g]() {
            auto config = LoadProjectConfig(g);
            if (!config.ok()) return Fail(config.status());
            DoctorOptions options;
            if (!o->sample.empty()) {
              std::ifstream in(o->sample, std::ios::binary);
              if (!in) return Fail(Status::InvalidArgument("cannot read --sample " + o->sample));
              std::string text(4000, '\0');
              in.read(text.data(), static_cast<std::streamsize>(text.size()));
              text.resize(static_cast<size_t>(in.gcount()));
              options.sample_text = std::move(text);
            }
            auto report = RunDoctor(*config, options);
            if (!report.ok()) return Fail(report.status());
            const DoctorReport& r = *report;
            if (o->json) {
              std::cout << DoctorJson(r, isatty(STDOUT_FILENO) != 0) << "\n";
              return r.ok ? kExitOk : kExitFailure;
            }
            if (!r.llm_configured) {
              std::cout << "chat model: none configured (no-LLM mode: built-in extraction, "
                           "extractive reports and answers)\n";
            } else {
              std::cout << "chat model: " << config->llm.model << " at " << config->llm.base_url
                        << " (api_style " << r.api_style
                        << (r.ollama_detected ? ", an Ollama server" : "") << ")\n";
              if (r.context_window) {
                std::cout << "context window: " << *r.context_window << " tokens (an extraction "
                          << "prompt here: " << r.extraction_prompt_tokens << ")\n";
              }
            }
            for (const DoctorProbe& p : r.probes) PrintProbe(p);
            if (r.cost_per_1000_chunks) {
              std::cout << "cost of extraction: about "
                        << fmt::format("{:.2f}", *r.cost_per_1000_chunks)
                        << " per 1,000 chunks of this size (" << r.calls_per_chunk
                        << " calls a chunk, at the configured prices)\n";
            }
            if (!r.advice.empty()) {
              std::cout << "\nwhat to change:\n";
              for (const std::string& a : r.advice) std::cout << "  - " << a << "\n";
            }
            std::cout << (r.ok ? "\nready to index\n" : "\nnot ready: see above\n");
            return r.ok ? kExitOk : kExitFailure;
          }};
}

}  // namespace grag::cli
