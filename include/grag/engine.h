// The engine: one grag project opened for use, the library's composition root. It owns the
// store, the tokenizer, the configured models and the in-memory retrieval indexes (built once,
// on first use, and reused), and answers every kind of question through one call, so the CLI,
// the HTTP server and the MCP server are thin shells that map flags or requests to it and its
// results to output. ToJson (grag/engine_json.h) is the one place results become JSON.
//
// Thread-safety: Query, Search and Route may be called from several threads at once (the store
// and models are thread-safe; the retriever is built once under a lock).
#pragma once

#include <chrono>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grag/config.h"
#include "grag/doctor.h"
#include "grag/export.h"
#include "grag/index_types.h"
#include "grag/llm_types.h"
#include "grag/migrate.h"
#include "grag/records.h"
#include "grag/search_results.h"
#include "grag/status.h"

namespace grag {

// What the engine holds and a library user never touches (private members below, reached by
// the engine module and the tests through EngineInternals).
class ChatModel;
class EmbeddingModel;
class Retriever;
class Store;
class Tokenizer;
struct DriftSearchOptions;
struct GlobalSearchOptions;
struct GlobalSearchPlan;
struct LazySearchOptions;
struct LocalSearchOptions;
struct PassageSearchOptions;
struct RetrievalOptions;

// kDrift: DRIFT search (grag/drift_search.h); kLazy: budgeted search (grag/lazy_search.h), for
// indexes built without a model.
enum class QueryMethod { kAuto, kGlobal, kLocal, kBasic, kHybrid, kDrift, kLazy };
std::string_view QueryMethodName(QueryMethod method);  // "auto", "global", ..., "drift", "lazy"
// Every method, in the order front ends offer them: the CLI's choices, MCP's enum, the
// OpenAI-compatible endpoint's models (grag-<name>).
inline constexpr QueryMethod kQueryMethods[] = {
    QueryMethod::kAuto,   QueryMethod::kGlobal, QueryMethod::kLocal, QueryMethod::kBasic,
    QueryMethod::kHybrid, QueryMethod::kDrift,  QueryMethod::kLazy};
// Their names, joined with `separator` ("auto, global, ...").
std::string QueryMethodNames(std::string_view separator, std::string_view prefix = "");
// Also accepts "budgeted" for kLazy.
Result<QueryMethod> ParseQueryMethod(std::string_view name);

// The range of a numeric request parameter, declared once: the CLI's checks, the HTTP and MCP
// schemas and the engine's own validation (CheckParam) all read it.
struct ParamRange {
  int64_t min;
  int64_t max;
  bool Contains(int64_t v) const { return v >= min && v <= max; }
};
// QueryRequest::top_k and SearchRequest::top_k: local search's entities, passages retrieved.
inline constexpr ParamRange kTopKRange{1, 1000};
// QueryRequest::level: a community level (the index's deepest bounds it too).
inline constexpr ParamRange kLevelRange{0, 1000};
// QueryRequest::budget: lazy search's relevance-test calls.
inline constexpr ParamRange kBudgetRange{1, 1000};
// InvalidArgument naming `name` and the range when `value` is outside it.
Status CheckParam(std::string_view name, const ParamRange& range, int64_t value);

struct EngineOptions {
  // Reading (query, search, stats): an index on read-only media opens read-only. Writing
  // (index, add, remove, entity corrections): the writer lock is taken (unless
  // take_writer_lock is off: a dry run), and a missing index is created.
  bool writable = false;
  bool take_writer_lock = true;
  bool wait_for_writer = false;
  std::function<void(const std::string& holder)> on_wait;
  std::string lock_holder = "grag";
  // Keep the whole graph in memory for many questions (a server). Off: each question reads its
  // seeds' neighbourhood (a command answering one question: fast to open on a large index).
  bool keep_graph = false;
  // A writable engine logs what it does (debug level and above) to grag.log beside the index,
  // besides stderr; each engine to its own file only.
  bool log_file = true;
};

struct QueryRequest {
  std::string question;
  QueryMethod method = QueryMethod::kAuto;
  // global: community level (validated against the index); with kAuto it picks global search.
  std::optional<int64_t> level;
  std::optional<int64_t> top_k;  // local: matched entities; basic and hybrid: passages
  // lazy: relevance-test calls at most (1-1000); default lazy.budget.
  std::optional<int64_t> budget;
  // The model that answers this question (the query role's calls: map, reduce, answers), on the
  // query role's server; empty: llm.query.model (else llm.model). The HTTP server lets a request
  // choose among server.query_models.
  std::string model;
  // Called with each piece of the answer as it is produced (streaming); empty: no streaming.
  std::function<void(std::string_view delta)> on_answer_delta;
  // When set and true, the question stops: no further model call starts, the ones in flight are
  // aborted, and Query returns kCancelled (the HTTP server sets it when the asker disconnects).
  const std::atomic<bool>* cancel = nullptr;
};

// What `--method auto` decided (or the method asked for), and what it should cost.
struct QueryRoute {
  RouteDecision decision;
  QueryMethod method = QueryMethod::kHybrid;
  int64_t estimated_calls = 0;   // LLM calls the method makes (0 without a model)
  int64_t estimated_tokens = 0;  // prompt tokens they send, about
  int64_t max_calls = 0;         // the method's bound on LLM calls (0: no model)
  // The bound spelled out, for methods with several steps ("at most 10 calls: hyde 1 + primer
  // 2 + 2×3 follow-ups + reduce 1"); empty otherwise.
  std::string cost_note;
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
  std::optional<DriftSearchResult> drift;
  std::optional<LazySearchResult> lazy;
  // The answer's citations down to the character: per cited id, the claim citing it and the
  // passages of the original documents it rests on (empty with citations.max_spans = 0).
  std::vector<SourceCitation> source_citations;
};

struct SearchRequest {
  std::string question;
  std::optional<RetrievalMethod> method;  // default: search.method
  std::optional<int64_t> top_k;           // default: search.top_k
};

// What the index holds and what it cost (grag stats).
struct IndexStats {
  StoreStats store;
  std::map<std::string, int64_t> spent;  // run counters summed: llm_calls, tokens_in, ...
  // Per model endpoint, from those counters (runs made with llm.endpoints or
  // embeddings.endpoints): requests, errors, benchings, tokens, mean latency (no median).
  std::vector<EndpointUsage> endpoints;
  std::vector<EntityRecord> top_entities;
  std::vector<std::pair<std::string, EmbeddingSpace>>
      embeddings;                                   // by owner: entity, chunk, report
  int64_t resolved_names = 0;                       // extracted names entity resolution placed
  int64_t merged_names = 0;                         // of which folded into another entity
  std::map<std::string, int64_t> merged_by_method;  // rule, similarity, llm, user
  // Indexing's calls and tokens by model role over all runs (tokens: runs since they were kept
  // by role), costed at the prices configured now (LlmConfig::InputPrice): SpendByRole.
  std::vector<RoleCost> by_role;
  // Extraction shared with workers now (a run with extraction.distribute is extracting): its
  // progress and each worker's; nullopt when none is.
  std::optional<WorkState> work;
};

// One entity with the other extracted names resolved into it (grag entities list).
struct EntityListing {
  EntityRecord entity;
  std::vector<std::string> aliases;  // other names, by key
};

// Entity resolution as people see it (grag entities aliases).
struct AliasListing {
  struct Alias {
    std::string name;
    std::string entity;  // the entity's name
    std::string method;
    double score = 0;
    std::string reason;
  };
  struct Override {
    std::string a, b;  // names
    bool merge = true;
    std::string at;
  };
  std::vector<Alias> aliases;  // names folded into another entity
  std::vector<Override> overrides;
  bool empty_index = false;  // no name resolved at all
};

// ---- reading the graph (the HTTP API, the MCP server and the web UI show it)
struct EntityRef {
  int64_t id = 0;
  std::string name;
  std::string type;
};

struct EntityDetail {
  EntityRecord entity;
  std::vector<std::string> aliases;  // other extracted names resolved into it
  struct Neighbour {
    EntityRef entity;
    RelationshipRecord relationship;
  };
  std::vector<Neighbour> neighbours;  // heaviest relationship first, at most the asked number
  int64_t neighbours_total = 0;
  std::vector<CommunityRecord> communities;  // coarsest level first (members left empty)
  std::vector<ChunkRecord> chunks;           // source passages, at most the asked number
  int64_t chunks_total = 0;
};

struct RelationshipInfo {
  RelationshipRecord relationship;
  EntityRef source, target;
};

// A community with its report (when one was written).
struct CommunityInfo {
  CommunityRecord community;  // members left empty in listings
  std::optional<ReportRecord> report;
};

struct CommunityDetail {
  CommunityInfo info;
  std::vector<EntityRef> members;  // highest degree first
  std::vector<int64_t> children;   // communities one level finer
};

// The graph as a picture of it shows it: the entities of highest degree (or one entity and its
// heaviest neighbours), each with its community at one level, and the relationships among them.
struct GraphViewRequest {
  int64_t limit = 200;            // entities (with `around`: neighbours) at most
  std::optional<int64_t> level;   // the community level nodes are coloured by (default 0)
  std::optional<int64_t> around;  // an entity id: it and its neighbours instead of the top
};

struct GraphView {
  struct Node {
    EntityRef entity;
    int64_t degree = 0;
    std::optional<int64_t> community;  // at `level`; none when clustering has not run
  };
  struct Edge {
    int64_t id = 0;
    int64_t source = 0, target = 0;
    double weight = 0;
  };
  std::vector<Node> nodes;  // highest degree first (with `around`: it, then heaviest first)
  std::vector<Edge> edges;  // every relationship between two of the nodes
  int64_t entities_total = 0;
  int64_t relationships_total = 0;
  int64_t level = 0;
  std::vector<int64_t> levels;  // the community levels the index has
};

struct DocumentDetail {
  DocumentInfo info;
  std::string text;
  std::vector<ChunkRecord> chunks;  // in order
};

// Whether the file a document was read from still holds the text the index has.
enum class SourceFileState {
  kUnchanged,  // the file gives the same text (same content hash): the text is the file's
  kChanged,    // the file (or its record) now gives other text: the indexed text is served
  kMissing,    // the file, or its record, is gone: the indexed text is served
};
std::string_view SourceFileStateName(SourceFileState s);  // "unchanged" | "changed" | "missing"

// A document's text as citation offsets index it (SourceSpan's start/end, byte_start/byte_end):
// the file's text (after a byte-order mark) or, for JSON/CSV records, the record's text field.
struct DocumentText {
  DocumentInfo info;
  std::string text;  // the indexed text: citation offsets always apply to it
  SourceFileState file = SourceFileState::kUnchanged;
  std::string file_path;  // where the file is on disk
};

// Callbacks of a long update: progress (from worker threads too), the plan before any model
// call, and a flag that stops it cleanly (Ctrl-C, a cancelled job).
struct IndexCallbacks {
  std::function<void(const IndexProgress&)> on_progress;
  std::function<void(const IndexPlan&)> on_plan;
  const std::atomic<bool>* cancel = nullptr;
};

// grag check: opens the index as it is (damage reported, not refused; read-only media allowed)
// and runs every check. Errors: only a failure to run the
// checks (a missing index is kNotFound).
Result<IntegrityReport> CheckIndex(const Config& config, int max_per_check);

// grag cache prune --older-than: the cut-off (CachePruneOptions::before, the cache's UTC time
// text) `older_than` before `now`. `older_than` is a count and a unit: "90m", "12h", "30d", "2w".
// kInvalidArgument for anything else.
Result<std::string> CacheCutoff(std::string_view older_than,
                                std::chrono::system_clock::time_point now);

// grag migrate: MigrateIndex (grag/migrate.h) copies config.IndexLocation()'s index, or
// another, to another store.

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
  // What `method` would do with `question` (kAuto: the router's choice), and its cost
  // estimate and bound (the decision's reason says when the method was asked for; lazy's budget
  // is lazy.budget, which the CLI's --budget sets). Errors: kInvalidArgument for a bad
  // question; for kDrift without a chat model, as Query.
  Result<QueryRoute> Route(std::string_view question, QueryMethod method = QueryMethod::kAuto);

  // ---- the index
  // Brings the index in line with `request` (grag index / add / remove; graph_only: apply entity
  // corrections). Needs an engine opened writable. Errors: RunIndex's (kCancelled when stopped).
  Result<IndexSummary> Index(const IndexRequest& request, const IndexCallbacks& callbacks = {});
  // What Index would do, without a model call or a write.
  Result<IndexPlan> Plan(const IndexRequest& request);
  // Takes part as a worker in the extraction a run shares (extraction.distribute; `grag index
  // --worker`): RunExtractionWorker (grag/indexer.h) with this engine's store and models. Open
  // the engine writable without the writer lock (the run holds it).
  Result<WorkerSummary> Work(const WorkerOptions& options);
  Result<IndexStats> Stats(int64_t top_entities);
  // Removes reply cache entries and gives their room back (grag cache prune):
  // Store::PruneReplyCache. Needs an engine opened writable unless options.dry_run.
  Result<CachePruneResult> PruneCache(const CachePruneOptions& options);
  // What identifies the index's last finished write (the newest index run that ended, however
  // it ended: "" before any): it changes when any process (this one, another `grag index`, a
  // server elsewhere on the same PostgreSQL database) finishes updating the index. A reader that
  // keeps the graph in memory compares it to the one it loaded to see that it is stale.
  Result<std::string> IndexVersion();
  Result<std::vector<DocumentInfo>> Documents();
  // Writes the index in another tool's format (grag export): ExportIndex (grag/export.h).
  Result<ExportSummary> Export(const ExportOptions& options);
  // Runs one read-only SELECT over the documented views (grag sql): Store::RunReadOnlySql.
  Result<SqlRows> Sql(std::string_view sql, int64_t max_rows,
                      std::chrono::milliseconds time_limit = std::chrono::seconds(30));

  // ---- entity resolution (a person's corrections take effect at the next Index; run one with
  // request.graph_only to apply them at once)
  Result<std::vector<EntityListing>> Entities(std::string_view search);  // highest degree first
  Result<AliasListing> Aliases(std::string_view search);
  Result<bool> MergeEntities(std::string_view a, std::string_view b);  // RecordEntityMerge
  Result<int64_t> SplitEntity(std::string_view entity,
                              std::string_view alias);  // RecordEntitySplit

  // ---- the graph, for front ends. A missing id is std::nullopt, not an error.
  Result<std::optional<EntityDetail>> GetEntity(int64_t id, int64_t max_neighbours = 50,
                                                int64_t max_chunks = 20);
  // The entity a name (or any extracted name resolved into it) denotes, as the index matches
  // names (case and punctuation folded).
  Result<std::optional<int64_t>> FindEntity(std::string_view name);
  // Heaviest first; with entity_id, only those touching it. limit < 0: all.
  Result<std::vector<RelationshipInfo>> Relationships(std::optional<int64_t> entity_id,
                                                      int64_t limit);
  // Every community (of one level when given), by level then id, with its report.
  Result<std::vector<CommunityInfo>> Communities(std::optional<int64_t> level);
  Result<std::optional<CommunityDetail>> GetCommunity(int64_t id);
  Result<std::optional<ChunkRecord>> GetChunk(std::string_view id);
  Result<std::optional<DocumentDetail>> GetDocument(std::string_view id);
  // A document's text as read again from the file the index recorded, compared with the
  // indexed text (content hash); the indexed text when the file changed or is gone, saying so.
  // Reads the whole file (a file of records: all of it, for one record).
  Result<std::optional<DocumentText>> GetDocumentText(std::string_view id);
  // Errors: kInvalidArgument for a level the index does not have, kNotFound for an unknown
  // `around` entity.
  Result<GraphView> Graph(const GraphViewRequest& request);

  const Config& config() const;
  // Builds the retrieval indexes now (they are otherwise built by the first question): a server
  // opens an engine and warms it before it answers.
  Status Warm();
  // What this engine's models have spent since it was opened: the chat models' calls and
  // tokens, and a configured embedding model's (the built-in lexical embedder spends nothing).
  LlmUsage ModelUsage() const;

  struct Impl;

 private:
  // What the engine holds, for its own methods; the engine module's files and the tests reach
  // them through EngineInternals (src/engine/engine_internal.h). A library user gets none.
  friend struct EngineInternals;
  Store& store();
  const Tokenizer& tokenizer() const;
  ChatModel* chat();  // nullptr: no LLM (extractive answers)
  // The chat model a question asking for `name` (QueryRequest::model) is answered with: chat()
  // itself for "" or the configured query model, else one whose query role is `name` (made on
  // first use, kept). Errors: kInvalidArgument when no chat model is configured at all.
  Result<ChatModel*> QueryModel(const std::string& name);
  EmbeddingModel* embedder();  // the configured model, or the lexical embedder
  // The retrieval indexes, built on first use and kept. Errors: the store's.
  Result<const Retriever*> retriever();
  // The options each method runs with, from the configuration.
  GlobalSearchOptions GlobalOptions() const;
  LocalSearchOptions LocalOptions() const;
  PassageSearchOptions PassageOptions(RetrievalMethod method) const;
  DriftSearchOptions DriftOptions() const;
  LazySearchOptions LazyOptions() const;
  RetrievalOptions SearchOptions() const;

  // Route without checking the question again (Query checked it); with `global_plan`, the plan
  // of a route to global search is kept there for the search itself.
  Result<QueryRoute> RouteChecked(std::string_view question, QueryMethod method,
                                  std::optional<GlobalSearchPlan>* global_plan);

  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace grag
