// The engine: one grag project opened for use, the library's composition root. It owns the
// store, the tokenizer, the configured models and the in-memory retrieval indexes (built once,
// on first use, and reused), and answers every kind of question through one call, so the CLI,
// the HTTP server and the MCP server are thin shells that map flags or requests to it and its
// results to output. ToJson (grag/engine_json.h) is the one place results become JSON.
//
// Thread-safety: Query, Search and Route may be called from several threads at once (the store
// and models are thread-safe; the retriever is built once under a lock).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "grag/config.h"
#include "grag/global_search.h"
#include "grag/llm.h"
#include "grag/local_search.h"
#include "grag/passage_search.h"
#include "grag/retrieval.h"
#include "grag/router.h"
#include "grag/status.h"
#include "grag/store.h"
#include "grag/tokenizer.h"

namespace grag {

enum class QueryMethod { kAuto, kGlobal, kLocal, kBasic, kHybrid };
std::string_view QueryMethodName(QueryMethod method);  // "auto", "global", ...
Result<QueryMethod> ParseQueryMethod(std::string_view name);

struct EngineOptions {
  // Reading (query, search, stats): an index on read-only media opens read-only. Writing
  // (index, add, remove): the writer lock is taken, and a missing index is created.
  bool writable = false;
  bool wait_for_writer = false;
  std::function<void(const std::string& holder)> on_wait;
  std::string lock_holder = "grag";
  // Keep the whole graph in memory for many questions (a server). Off: each question reads its
  // seeds' neighbourhood (a command answering one question: fast to open on a large index).
  bool keep_graph = false;
};

struct QueryRequest {
  std::string question;
  QueryMethod method = QueryMethod::kAuto;
  // global: community level (validated against the index); with kAuto it picks global search.
  std::optional<int64_t> level;
  std::optional<int64_t> top_k;  // local: matched entities; basic and hybrid: passages
  // Called with each piece of the answer as it is produced (streaming); empty: no streaming.
  std::function<void(std::string_view delta)> on_answer_delta;
};

// What `--method auto` decided, and what the chosen method should cost.
struct QueryRoute {
  RouteDecision decision;
  QueryMethod method = QueryMethod::kHybrid;
  int64_t estimated_calls = 0;   // LLM calls the method makes (0 without a model)
  int64_t estimated_tokens = 0;  // prompt tokens they send, about
};

struct QueryResult {
  QueryMethod method = QueryMethod::kGlobal;  // the method that answered (never kAuto)
  std::optional<QueryRoute> route;            // set when the request asked for auto
  bool llm = false;                           // a chat model wrote the answer
  std::string answer;
  // Exactly one of these holds the method's full result.
  std::optional<GlobalSearchResult> global;
  std::optional<LocalSearchResult> local;
  std::optional<PassageSearchResult> passages;  // basic and hybrid
};

struct SearchRequest {
  std::string question;
  std::optional<RetrievalMethod> method;  // default: search.method
  std::optional<int64_t> top_k;           // default: search.top_k
};

class Engine {
 public:
  // Opens the project `config` describes: the index (which must exist unless writable), the
  // models, the prompts. Errors: the store's (kNotFound names `grag index`), the models'.
  static Result<std::unique_ptr<Engine>> Open(Config config, const EngineOptions& options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Answers `request` with its method (or the router's choice for kAuto). Errors:
  // kInvalidArgument for a bad question or an out-of-range level / k, the method's.
  Result<QueryResult> Query(const QueryRequest& request);
  // Ranks the chunks for a question, without an answer (grag search).
  Result<RetrievalResult> Search(const SearchRequest& request);
  // What kAuto would do with `question`, and its cost estimate.
  Result<QueryRoute> Route(std::string_view question);

  const Config& config() const;
  Store& store();
  const Tokenizer& tokenizer() const;
  ChatModel* chat();                  // nullptr: no LLM (extractive answers)
  EmbeddingModel* embedder();         // the configured model, or the lexical embedder
  // The retrieval indexes, built on first use and kept. Errors: the store's.
  Result<const Retriever*> retriever();

  // The options each method runs with, from the configuration.
  GlobalSearchOptions GlobalOptions() const;
  LocalSearchOptions LocalOptions() const;
  PassageSearchOptions PassageOptions(RetrievalMethod method) const;
  RetrievalOptions SearchOptions() const;

  struct Impl;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace grag
