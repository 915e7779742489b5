// grag._grag: the engine for Python, a thin shell over grag::Engine like the CLI and the server.
// Results cross as the JSON the engine's ToJson functions write (grag/engine_json.h, the one
// place results become JSON); python/grag/ turns them into objects. search(), called in loops,
// builds its objects directly (search_objects.h). Every engine call runs with
// the GIL released; long ones (index, query, eval) through a Watch (calls.h), so Ctrl-C,
// Engine.cancel() and progress callbacks work while they run.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "calls.h"
#include "errors.h"
#include "search_objects.h"
#include "grag/config.h"
#include "grag/engine.h"
#include "grag/engine_eval.h"
#include "grag/engine_json.h"
#include "grag/log.h"
#include "grag/project.h"

namespace py = pybind11;

namespace grag::python {
namespace {

// Converts a Python callable's absence (None) to an empty std::optional-like check.
bool Given(const py::object& callback) { return !callback.is_none(); }

class PyEngine {
 public:
  PyEngine(const std::string& root, const std::string& config_file,
           const std::map<std::string, std::string>& settings, bool no_llm,
           const std::string& log_level) {
    Config config = Unwrap(LoadConfig(root, config_file));
    for (const auto& [key, value] : settings) Check(ApplySetting(config, key, value));
    if (no_llm) DisableModels(config);
    Check(ValidateConfig(config));
    SetLogLevel(Unwrap(ParseLogLevel(log_level.empty() ? config.log_level : log_level)));
    config_ = std::move(config);
  }

  const Config& config() const { return config_; }

  // ---- questions
  std::string Query(const std::string& question, const std::string& method,
                    std::optional<int64_t> level, std::optional<int64_t> k,
                    std::optional<int64_t> budget, const py::object& on_delta,
                    const std::optional<std::string>& model) {
    QueryRequest request;
    request.question = question;
    request.method = Unwrap(ParseQueryMethod(method));
    request.level = level;
    request.top_k = k;
    request.budget = budget;
    request.model = model.value_or("");
    std::shared_ptr<Engine> engine = Reader();
    Watch watch(cancel_epoch_);
    request.cancel = watch.cancel_flag();
    if (Given(on_delta)) {
      request.on_answer_delta = [&watch, &on_delta](std::string_view delta) {
        watch.Post([&on_delta, text = std::string(delta)] { on_delta(text); });
      };
    }
    return watch.Run<std::string>([&]() -> Result<std::string> {
      GRAG_ASSIGN_OR_RETURN(QueryResult result, engine->Query(request));
      return QueryResultJson(result, question, false);
    });
  }

  // Ranks the chunks; the result as Python objects (search_objects.h), or as the engine's JSON
  // when `as_json` (what a test compares the objects with).
  py::object Search(const std::string& question, std::optional<int64_t> k,
                    const std::optional<std::string>& method, bool as_json) {
    SearchRequest request;
    request.question = question;
    request.top_k = k;
    if (method) request.method = Unwrap(ParseRetrievalMethod(*method));  // else search.method
    std::shared_ptr<Engine> engine = Reader();
    Result<RetrievalResult> result = Status::Internal("not run");
    {
      py::gil_scoped_release released;
      result = engine->Search(request);
    }
    Check(result.status());
    if (as_json) return py::str(RetrievalResultJson(*result, question, false));
    return SearchObject(*result, question);
  }

  // For bench/python_search_bench.py: `n` calls of Engine::Search in C++, no Python and no JSON in
  // between (what search() adds to them is what the benchmark measures); seconds.
  double SearchLoop(const std::string& question, int64_t k, const std::string& method, int64_t n) {
    SearchRequest request;
    request.question = question;
    request.top_k = k;
    request.method = Unwrap(ParseRetrievalMethod(method));
    std::shared_ptr<Engine> engine = Reader();
    Status failed;
    std::chrono::duration<double> took{};
    {
      py::gil_scoped_release released;
      const auto start = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < n && failed.ok(); ++i) failed = engine->Search(request).status();
      took = std::chrono::steady_clock::now() - start;
    }
    Check(failed);
    return took.count();
  }

  std::string Route(const std::string& question, const std::string& method) {
    const QueryMethod m = Unwrap(ParseQueryMethod(method));
    std::shared_ptr<Engine> engine = Reader();
    return Released([&]() -> Result<std::string> {
      GRAG_ASSIGN_OR_RETURN(QueryRoute route, engine->Route(question, m));
      return QueryRouteJson(route, question, false);
    });
  }

  // questions_jsonl: the questions file's text (grag eval's format, docs/eval.md).
  std::string Eval(const std::string& questions_jsonl, const std::vector<std::string>& methods,
                   int k, int64_t limit, bool details, const py::object& progress) {
    std::vector<EvalQuestion> questions = Unwrap(ParseEvalQuestions(questions_jsonl));
    EvalOptions options;
    if (!methods.empty()) options.methods = methods;
    options.k = k;
    options.limit = limit;
    options.keep_details = details;
    std::shared_ptr<Engine> engine = Reader();
    Watch watch(cancel_epoch_);
    std::function<void(int64_t, int64_t)> on_progress;
    if (Given(progress)) {
      on_progress = [&watch, &progress](int64_t done, int64_t total) {
        watch.Post([&progress, done, total] { progress(done, total); });
      };
    }
    return watch.Run<std::string>([&]() -> Result<std::string> {
      GRAG_ASSIGN_OR_RETURN(EvalReport report,
                            EvaluateRetrieval(*engine, questions, options, on_progress));
      return EvalReportJson(report, false);
    });
  }

  // ---- the index
  // progress(stage, done, total, calls, prompt_tokens, completion_tokens, elapsed_seconds).
  std::string Index(const std::vector<std::string>& paths, const std::vector<std::string>& remove,
                    bool sync_folders, bool refresh_reports, bool dry_run, bool wait,
                    const py::object& progress) {
    IndexRequest request;
    request.paths = paths;
    request.remove = remove;
    request.sync_folders = sync_folders;
    request.refresh_reports = refresh_reports;
    return Update(request, dry_run, wait, progress, {});
  }

  // The correction is recorded, then applied (the graph rebuilt from the stored mentions): the
  // run's summary. Split: "" when the entity has no other name to split off (nothing done).
  std::string Merge(const std::string& a, const std::string& b, bool wait,
                    const py::object& progress) {
    IndexRequest request;
    request.graph_only = true;
    return Update(request, false, wait, progress, [&](Engine& engine) -> Result<bool> {
      GRAG_RETURN_IF_ERROR(engine.MergeEntities(a, b).status());
      return true;
    });
  }
  std::string Split(const std::string& entity, const std::string& alias, bool wait,
                    const py::object& progress) {
    IndexRequest request;
    request.graph_only = true;
    return Update(request, false, wait, progress, [&](Engine& engine) -> Result<bool> {
      GRAG_ASSIGN_OR_RETURN(int64_t n, engine.SplitEntity(entity, alias));
      return n > 0;
    });
  }

  std::string Stats(int64_t top_entities) {
    std::shared_ptr<Engine> engine = Reader();
    return Released([&]() -> Result<std::string> {
      GRAG_ASSIGN_OR_RETURN(IndexStats stats, engine->Stats(top_entities));
      return IndexStatsJson(stats, false);
    });
  }

  std::string CheckIndexJson(int max_per_check) {
    return Released([&]() -> Result<std::string> {
      GRAG_ASSIGN_OR_RETURN(IntegrityReport report, CheckIndex(config_, max_per_check));
      return IntegrityJson(report, config_.IndexLabel(), false);
    });
  }

  std::string Documents() {
    std::shared_ptr<Engine> engine = Reader();
    return Released([&]() -> Result<std::string> {
      GRAG_ASSIGN_OR_RETURN(std::vector<DocumentInfo> documents, engine->Documents());
      return DocumentsJson(documents, false);
    });
  }

  std::string Document(const std::string& id) {
    std::shared_ptr<Engine> engine = Reader();
    return Released([&]() -> Result<std::string> {
      GRAG_ASSIGN_OR_RETURN(std::optional<DocumentDetail> detail, engine->GetDocument(id));
      if (!detail) return Status::NotFound("no document \"" + id + "\" in the index");
      return DocumentDetailJson(*detail, false);
    });
  }

  std::string Entities(const std::string& search, int64_t limit) {
    std::shared_ptr<Engine> engine = Reader();
    return Released([&]() -> Result<std::string> {
      GRAG_ASSIGN_OR_RETURN(std::vector<EntityListing> entities, engine->Entities(search));
      const size_t shown = limit < 0 ? entities.size() : static_cast<size_t>(limit);
      return EntitiesJson(entities, shown, false);
    });
  }

  std::string Aliases(const std::string& search) {
    std::shared_ptr<Engine> engine = Reader();
    return Released([&]() -> Result<std::string> {
      GRAG_ASSIGN_OR_RETURN(AliasListing listing, engine->Aliases(search));
      return AliasesJson(listing, false);
    });
  }

  // By name (any name resolved into it) or id. kNotFound when the index has no such entity.
  std::string Entity(const std::optional<int64_t>& id, const std::string& name,
                     int64_t max_neighbours, int64_t max_chunks) {
    std::shared_ptr<Engine> engine = Reader();
    return Released([&]() -> Result<std::string> {
      std::optional<int64_t> found = id;
      if (!found) {
        GRAG_ASSIGN_OR_RETURN(found, engine->FindEntity(name));
      }
      const std::string what = id ? "id " + std::to_string(*id) : "\"" + name + "\"";
      if (!found) return Status::NotFound("no entity named " + what + " in the index");
      GRAG_ASSIGN_OR_RETURN(std::optional<EntityDetail> detail,
                            engine->GetEntity(*found, max_neighbours, max_chunks));
      if (!detail) return Status::NotFound("no entity with " + what + " in the index");
      return EntityDetailJson(*detail, false);
    });
  }

  std::string Export(const std::string& format, const std::string& out_dir, bool force) {
    ExportOptions options;
    options.format = Unwrap(ParseExportFormat(format));
    options.out_dir = out_dir;
    options.force = force;
    std::shared_ptr<Engine> engine = Reader();
    return Released([&]() -> Result<std::string> {
      GRAG_ASSIGN_OR_RETURN(ExportSummary summary, engine->Export(options));
      return ExportSummaryJson(summary, false);
    });
  }

  std::string Sql(const std::string& sql, int64_t max_rows, double time_limit_seconds) {
    std::shared_ptr<Engine> engine = Reader();
    const auto limit = std::chrono::milliseconds(static_cast<int64_t>(time_limit_seconds * 1000));
    return Released([&]() -> Result<std::string> {
      GRAG_ASSIGN_OR_RETURN(SqlRows rows, engine->Sql(sql, max_rows, limit));
      return SqlRowsJson(rows, false);
    });
  }

  std::string Settings() const { return SettingsJson(ListSettings(config_), false); }

  // Stops the index, query or eval running on this engine (from any thread).
  void Cancel() { cancel_epoch_.fetch_add(1); }

  // Closes the index (the next call opens it again).
  void Close() {
    py::gil_scoped_release released;  // closing joins the engine's threads
    std::shared_ptr<Engine> dropped;
    std::lock_guard lock(mu_);
    dropped = std::move(reader_);
  }

 private:
  // Runs `work` without the GIL and returns its value, or raises its error.
  template <typename F>
  std::string Released(F&& work) {
    Result<std::string> out = Status::Internal("not run");
    {
      py::gil_scoped_release released;
      out = work();
    }
    return Unwrap(std::move(out));
  }

  // The engine questions go to: opened on first use and kept (the graph in memory, as a server
  // keeps it), reopened when the index changed since (another process's `grag index`; checked
  // at most once a second) or after this one's own writes.
  std::shared_ptr<Engine> Reader() {
    Result<std::shared_ptr<Engine>> engine = Status::Internal("not opened");
    {
      // mu_ is only waited for without the GIL: a thread holding it may need the GIL back.
      py::gil_scoped_release released;
      engine = OpenReader();
    }
    return Unwrap(std::move(engine));
  }

  Result<std::shared_ptr<Engine>> OpenReader() {
    constexpr auto kProbeEvery = std::chrono::seconds(1);
    std::lock_guard lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    if (reader_ && now - probed_at_ >= kProbeEvery) {
      probed_at_ = now;
      Result<std::string> version = reader_->IndexVersion();
      if (version.ok() && *version != reader_version_) reader_.reset();
    }
    if (reader_) return reader_;
    EngineOptions options;
    options.keep_graph = true;
    options.log_file = false;
    GRAG_ASSIGN_OR_RETURN(std::unique_ptr<Engine> opened, Engine::Open(config_, options));
    std::shared_ptr<Engine> engine = std::move(opened);
    Result<std::string> version = engine->IndexVersion();
    reader_version_ = version.ok() ? *version : "";
    probed_at_ = now;
    reader_ = engine;
    return engine;
  }

  // Opens the index for writing (the writer lock held for this call only), runs `before` (a
  // correction; false: nothing to do, "" returned), then the update or its dry run.
  std::string Update(const IndexRequest& request, bool dry_run, bool wait,
                     const py::object& progress,
                     const std::function<Result<bool>(Engine&)>& before) {
    EngineOptions options;
    options.writable = true;
    options.take_writer_lock = !dry_run;
    options.wait_for_writer = wait;
    options.lock_holder = "grag (Python)";
    Watch watch(cancel_epoch_);
    IndexCallbacks callbacks;
    callbacks.cancel = watch.cancel_flag();
    if (Given(progress)) {
      callbacks.on_progress = [&watch, &progress](const IndexProgress& p) {
        watch.Post([&progress, p] {
          progress(p.stage, p.done, p.total, p.usage.calls, p.usage.prompt_tokens,
                   p.usage.completion_tokens, p.elapsed_seconds);
        });
      };
    }
    std::string out = watch.Run<std::string>([&]() -> Result<std::string> {
      GRAG_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Open(config_, options));
      if (dry_run) {
        GRAG_ASSIGN_OR_RETURN(IndexPlan plan, engine->Plan(request));
        return IndexPlanJson(plan, false);
      }
      if (before) {
        GRAG_ASSIGN_OR_RETURN(bool go_on, before(*engine));
        if (!go_on) return std::string();
      }
      GRAG_ASSIGN_OR_RETURN(IndexSummary summary, engine->Index(request, callbacks));
      return IndexSummaryJson(summary, &summary.plan, false);
    });
    if (!dry_run) Close();  // questions see the new index
    return out;
  }

  Config config_;
  std::atomic<uint64_t> cancel_epoch_{0};
  std::mutex mu_;
  std::shared_ptr<Engine> reader_;
  std::string reader_version_;
  std::chrono::steady_clock::time_point probed_at_{};
};

std::string InitJsonOf(const std::string& path, bool force) {
  InitResult result = Unwrap(InitProject(path, force));
  return InitJson(result, path, false);
}

}  // namespace
}  // namespace grag::python

PYBIND11_MODULE(_grag, m) {
  using grag::python::PyEngine;
  m.doc() = "grag's engine (the compiled part of the `grag` package; use `import grag`)";
  m.attr("__version__") = GRAG_VERSION;
  grag::python::RegisterErrors(m);
  m.def("init_project", &grag::python::InitJsonOf, py::arg("path"), py::arg("force") = false);
  m.def("settings_reference",
        [] { return grag::SettingsJson(grag::ListSettings(grag::Config{}), false); });
  py::class_<PyEngine>(m, "Engine")
      .def(py::init<const std::string&, const std::string&,
                    const std::map<std::string, std::string>&, bool, const std::string&>(),
           py::arg("root"), py::arg("config_file"), py::arg("settings"), py::arg("no_llm"),
           py::arg("log_level"))
      .def("query", &PyEngine::Query, py::arg("question"), py::arg("method"), py::arg("level"),
           py::arg("k"), py::arg("budget"), py::arg("on_delta"), py::arg("model"))
      .def("search", &PyEngine::Search, py::arg("question"), py::arg("k"), py::arg("method"),
           py::arg("as_json") = false)
      .def("search_loop", &PyEngine::SearchLoop, py::arg("question"), py::arg("k"),
           py::arg("method"), py::arg("n"))
      .def("route", &PyEngine::Route, py::arg("question"), py::arg("method"))
      .def("eval", &PyEngine::Eval, py::arg("questions_jsonl"), py::arg("methods"), py::arg("k"),
           py::arg("limit"), py::arg("details"), py::arg("progress"))
      .def("index", &PyEngine::Index, py::arg("paths"), py::arg("remove"), py::arg("sync_folders"),
           py::arg("refresh_reports"), py::arg("dry_run"), py::arg("wait"), py::arg("progress"))
      .def("merge", &PyEngine::Merge, py::arg("a"), py::arg("b"), py::arg("wait"),
           py::arg("progress"))
      .def("split", &PyEngine::Split, py::arg("entity"), py::arg("alias"), py::arg("wait"),
           py::arg("progress"))
      .def("stats", &PyEngine::Stats, py::arg("top_entities"))
      .def("check", &PyEngine::CheckIndexJson, py::arg("max_per_check"))
      .def("documents", &PyEngine::Documents)
      .def("document", &PyEngine::Document, py::arg("id"))
      .def("entities", &PyEngine::Entities, py::arg("search"), py::arg("limit"))
      .def("aliases", &PyEngine::Aliases, py::arg("search"))
      .def("entity", &PyEngine::Entity, py::arg("id"), py::arg("name"), py::arg("max_neighbours"),
           py::arg("max_chunks"))
      .def("export", &PyEngine::Export, py::arg("format"), py::arg("out_dir"), py::arg("force"))
      .def("sql", &PyEngine::Sql, py::arg("sql"), py::arg("max_rows"),
           py::arg("time_limit_seconds"))
      .def("settings", &PyEngine::Settings)
      .def("cancel", &PyEngine::Cancel)
      .def("close", &PyEngine::Close)
      .def_property_readonly("index_label",
                             [](const PyEngine& e) { return e.config().IndexLabel(); });
}
