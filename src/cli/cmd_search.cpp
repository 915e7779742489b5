// grag search QUESTION: the ranked chunks, no answer (what applications embed grag for).
#include <unistd.h>

#include <optional>
#include <sstream>

#include "cli.h"
#include "grag/engine.h"
#include "grag/engine_json.h"

namespace grag::cli {

Command AddSearchCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "search",
      "Retrieve the chunks a question needs, ranked, without writing an answer. vector: the "
      "question's embedding against the chunks'; bm25: full-text BM25; graph: personalised "
      "PageRank over the entity graph from the entities the question names (multi-hop: reaches "
      "passages the question never names); hybrid (default): the three fused by weighted "
      "reciprocal rank fusion. No LLM is called.");
  struct Opts {
    std::string question;
    std::string method;
    std::optional<int64_t> top_k;
    bool json = false;
    bool full = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("QUESTION", o->question, "The question; - reads it from standard input")
      ->required();
  std::vector<std::string> methods;
  for (RetrievalMethod m : kRetrievalMethods) methods.emplace_back(RetrievalMethodName(m));
  cmd->add_option("-m,--method", o->method,
                  RetrievalMethodNames(" | ") + " (default search.method)")
      ->check(CLI::IsMember(methods));
  cmd->add_option("--k", o->top_k,
                  "Chunks returned, " + RangeText(kTopKRange.min, kTopKRange.max) +
                      " (default search.top_k)")
      ->check(CLI::Range(kTopKRange.min, kTopKRange.max));
  cmd->add_flag("--json", o->json,
                "Print the chunks (ids, document, text, fused score, each signal's rank and "
                "score), the graph's seeds and statistics as JSON");
  cmd->add_flag("--text", o->full, "Print each chunk's whole text (default: its first line)");
  return {cmd, [o, &g]() {
            auto config = LoadProjectConfig(g);
            if (!config.ok()) return Fail(config.status());
            if (o->question == "-") {
              std::ostringstream in;
              in << std::cin.rdbuf();
              o->question = in.str();
              while (!o->question.empty() &&
                     (o->question.back() == '\n' || o->question.back() == '\r')) {
                o->question.pop_back();
              }
            }
            auto engine = Engine::Open(*config);
            if (!engine.ok()) return Fail(engine.status());
            SearchRequest request;
            request.question = o->question;
            if (!o->method.empty()) {  // else search.method
              auto method = ParseRetrievalMethod(o->method);
              if (!method.ok()) return Fail(method.status());
              request.method = *method;
            }
            request.top_k = o->top_k;
            auto r = (*engine)->Search(request);
            if (!r.ok()) return Fail(r.status());
            if (o->json) {
              std::cout << RetrievalResultJson(*r, o->question, isatty(STDOUT_FILENO) != 0) << "\n";
              return kExitOk;
            }
            if (r->chunks.empty()) std::cout << "no chunk matches the question\n";
            for (size_t i = 0; i < r->chunks.size(); ++i) {
              const auto& c = r->chunks[i];
              std::cout << i + 1 << ". " << c.document_id << ", chunk " << c.index << "  (score "
                        << c.score;
              for (size_t s = 0; s < kSignalCount; ++s) {
                if (c.ranks[s]) {
                  std::cout << ", " << SignalName(static_cast<Signal>(s)) << " #" << *c.ranks[s];
                }
              }
              if (!c.chained_by.empty()) std::cout << "; named by #1: " << c.chained_by;
              std::cout << ")\n";
              if (o->full) {
                std::cout << c.text << "\n\n";
              } else {
                std::string line = c.text.substr(0, c.text.find('\n'));
                if (line.size() < 40 && c.text.size() > line.size() + 1) {
                  // A title line: show what follows it too.
                  std::string rest = c.text.substr(line.size() + 1);
                  while (!rest.empty() && rest.front() == '\n') rest.erase(0, 1);
                  line += " | " + rest.substr(0, rest.find('\n'));
                }
                if (line.size() > 160) {
                  size_t cut = 157;
                  while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
                  line = line.substr(0, cut) + "...";
                }
                std::cout << "   " << line << "\n";
              }
            }
            for (const auto& d : r->diagnostics) std::cerr << "note: " << d << "\n";
            return kExitOk;
          }};
}

}  // namespace grag::cli
