// What a full index costs as the corpus grows (issue 17): wall time against the bound the model's
// latency sets, the engine's own CPU per chunk, peak memory, bytes written and LLM calls by kind.
//
// The corpus is generated (bench/support/transcripts.h: podcast-like transcripts sharing a Zipf
// cast, as bench/incremental_cost) or read from a folder (--input). The model is a loopback
// OpenAI-compatible mock (tests/support/fake_openai_server.h) answering like a model that follows
// grag's prompts (the cast names a chunk mentions for generated corpora, the fake GraphRAG model's
// capitalised names for --input), each call held --latency-ms. Each run indexes into a fresh
// project through the real path: Engine::Open and Engine::Index, with the HTTP client at
// llm.concurrency, in a child process of its own (this program run with --worker), so the CPU
// time, peak RSS and I/O it reports are the engine's alone, not the mock server's.
//
// Figures per run and their median over --runs:
//   wall          seconds of Engine::Open + Index + closing the index
//   cpu           user + system CPU seconds of the indexing process (getrusage)
//   cpu/chunk     cpu in ms per chunk
//   peak RSS      VmHWM of the indexing process; by stage too (the mark is reset as each begins)
//   written       /proc/self/io write_bytes (reached the disk) and wchar (passed to write())
//   index size    the project's output folder afterwards
//   calls         LLM calls by kind (the pipeline's count), per chunk
//   bound         ceil(calls / concurrency) x latency, and wall / bound
//
//   scale_bench [--docs N | --input DIR] [--latency-ms MS] [--concurrency C] [--gleanings G]
//               [--no-llm] [--runs R] [--query] [--rerun] [--set key=value]... [--json] [--verbose]
//               [--backend sqlite|postgresql|both] [--store-url URL] [--keep DIR]
//               [--keep-alive-requests N]
//
// --keep-alive-requests N: how many requests the mock serves on one connection before closing
// it (default 5, cpp-httplib's own default, so the client reconnects every fifth call). Hosted
// and local servers (OpenAI, vLLM, Ollama, llama.cpp) keep a busy connection open; a large N
// models them, and the difference is the client's cost of reconnecting.
//
// --backend postgresql puts each run's index in a PostgreSQL database of its own (created before
// the run, dropped after it) on the server --store-url names (a URL whose user may create
// databases), else on a throwaway cluster this program starts (scripts/pg_test_cluster.sh, in a
// folder of its own) and stops at the end. --backend both runs the two alternately, run for run,
// on the same corpus and mock, and prints each one's table, then the medians side by side with
// the PostgreSQL / SQLite ratio. For PostgreSQL, "index size" is pg_database_size and, on a
// cluster of its own, "server cpu" is the CPU the PostgreSQL processes spent during the run
// (the indexing process's cpu does not include it).
//
// --query also times a one-off global and local query on the index (Engine::Open + Query, with an
// instant model), as `grag query` would. --keep DIR moves the last SQLite run's project to DIR
// (same file system as the temp folder), a generated corpus to DIR/corpus, for profiling queries.
// --rerun indexes the unchanged input once more after each run, in a process of its own, and
// prints that re-run's wall, CPU, peak RSS and bytes written.
#include <fmt/format.h>
#include <libpq-fe.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "grag/engine.h"
#include "grag/indexer.h"
#include "grag/log.h"
#include "support/postgres.h"
#include "support/fake_graphrag_llm.h"
#include "support/fake_openai_server.h"
#include "support/pg_server.h"
#include "support/transcripts.h"

namespace grag {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;
using bench::PgServer;

struct Options {
  int docs = 400;
  std::string input;  // a folder to index instead of the generated corpus
  std::string keep;   // a folder to move the last SQLite run's project (and the corpus) to
  int latency_ms = 0;
  int concurrency = 16;
  int gleanings = 1;
  int keep_alive_requests = 5;
  bool no_llm = false;
  int runs = 1;
  bool query = false;
  bool rerun = false;  // index the unchanged input again, in a process of its own
  bool json_out = false;
  bool verbose = false;  // the stages' log lines on stderr
  std::vector<std::string> backends = {"sqlite"};
  std::string store_url;  // a PostgreSQL server for the postgresql backend; empty: a throwaway one
  std::vector<std::pair<std::string, std::string>> settings;
};

double Seconds(SteadyClock::time_point since) {
  return std::chrono::duration<double>(SteadyClock::now() - since).count();
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return s(u.ru_utime) + s(u.ru_stime);
}

// A field of a "key: value" /proc file (value in its own unit), -1 when absent.
int64_t ProcField(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1));
  }
  return -1;
}

int64_t FolderBytes(const fs::path& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file()) total += static_cast<int64_t>(e.file_size());
  }
  return total;
}

// The size of the database `url` names (pg_database_size), -1 when it cannot be read.
int64_t DatabaseBytes(const std::string& url) {
  PGconn* conn = PQconnectdb(url.c_str());
  int64_t bytes = -1;
  if (PQstatus(conn) == CONNECTION_OK) {
    PGresult* res = PQexec(conn, "SELECT pg_database_size(current_database())");
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
      bytes = std::stoll(PQgetvalue(res, 0, 0));
    }
    PQclear(res);
  }
  PQfinish(conn);
  return bytes;
}

// CPU seconds (user + system) a PostgreSQL cluster has spent so far: its postmaster's own and
// its exited children's (cutime, cstime) and its live children's. The difference across a run
// is what the server spent on it (the cluster serves nothing else).
double ClusterCpuSeconds(int64_t postmaster) {
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  // Fields after the command's closing parenthesis: state is field 3, ppid 4, utime 14, stime
  // 15, cutime 16, cstime 17.
  auto fields = [](const fs::path& stat) {
    std::ifstream in(stat);
    std::string line;
    std::getline(in, line);
    std::vector<std::string> f;
    const size_t paren = line.rfind(')');
    if (paren == std::string::npos) return f;
    std::istringstream rest(line.substr(paren + 1));
    f.resize(3);  // pid, comm: unused; state is f[3] after the push below
    for (std::string x; rest >> x;) f.push_back(x);
    return f;
  };
  double total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    const auto f = fields(e.path() / "stat");
    if (f.size() < 18) continue;
    const int64_t pid = std::stoll(name);
    const int64_t ppid = std::stoll(f[4]);
    if (pid == postmaster) {
      total += (std::stod(f[14]) + std::stod(f[15]) + std::stod(f[16]) + std::stod(f[17])) / tick;
    } else if (ppid == postmaster) {
      total += (std::stod(f[14]) + std::stod(f[15])) / tick;
    }
  }
  return total;
}

// ---- the worker: one index run in a process of its own, figures as one JSON line

Config WorkerConfig(const json& args) {
  Config config;
  config.root = args["root"].get<std::string>();
  config.input.dir = args["corpus"].get<std::string>();
  const std::string url = args["base_url"].get<std::string>();
  if (!url.empty()) {
    config.llm.base_url = url;
    config.llm.model = "bench-model";
    config.llm.api_key = "bench";
  }
  config.llm.concurrency = args["concurrency"].get<int>();
  config.extraction.gleanings = args["gleanings"].get<int>();
  config.store.url = args["store_url"].get<std::string>();  // empty: SQLite
  for (const auto& kv : args["settings"]) {
    const Status st = ApplySetting(config, kv[0].get<std::string>(), kv[1].get<std::string>());
    if (!st.ok()) throw std::runtime_error(st.ToString());
  }
  return config;
}

json TimeQuery(Config config, const std::string& instant_url, QueryMethod method) {
  config.llm.base_url = instant_url;
  config.llm.model = "bench-model";
  config.llm.api_key = "bench";
  const auto start = SteadyClock::now();
  auto engine = Engine::Open(config);
  if (!engine.ok()) throw std::runtime_error(engine.status().ToString());
  const double open = Seconds(start);
  QueryRequest q;
  q.method = method;
  q.question = method == QueryMethod::kGlobal ? "What are the main themes of the show?"
                                              : "What does Maya Lindqvist talk about?";
  auto answer = (*engine)->Query(q);
  if (!answer.ok()) throw std::runtime_error(answer.status().ToString());
  const double total = Seconds(start);
  engine->reset();
  return {{"open", open}, {"total", total}};
}

int Worker(const std::string& arg) {
  const json args = json::parse(arg);
  // The stages' info lines (what each did, how long it took) would drown the table.
  if (!args["verbose"].get<bool>()) SetLogLevel(LogLevel::kWarn);
  const Config config = WorkerConfig(args);
  const int64_t wchar0 = ProcField("/proc/self/io", "wchar");
  const int64_t written0 = ProcField("/proc/self/io", "write_bytes");
  const double cpu0 = CpuSeconds();
  const auto start = SteadyClock::now();
  IndexSummary s;
  struct Mark {
    std::string stage;
    double cpu = 0, wall = 0;
    int64_t wchar = 0;
  };
  std::vector<Mark> stages;  // where each stage began
  // Peak RSS by stage: the high-water mark is read and reset (clear_refs 5) where each stage
  // begins, so each reading is the peak of the stage before; the run's peak is the largest.
  std::vector<int64_t> stage_peaks;
  const auto end_stage_peak = [&] {
    stage_peaks.push_back(ProcField("/proc/self/status", "VmHWM") * 1024);
    std::ofstream("/proc/self/clear_refs") << "5";
  };
  {
    EngineOptions eo;
    eo.writable = true;
    auto engine = Engine::Open(config, eo);
    if (!engine.ok()) throw std::runtime_error(engine.status().ToString());
    // CPU and wall time by stage, from the first progress event of each to that of the next.
    IndexCallbacks callbacks;
    callbacks.on_progress = [&](const IndexProgress& p) {
      if (!stages.empty() && stages.back().stage == p.stage) return;
      end_stage_peak();
      stages.push_back(
          {p.stage, CpuSeconds(), Seconds(start), ProcField("/proc/self/io", "wchar")});
    };
    auto summary = (*engine)->Index({}, callbacks);
    if (!summary.ok()) throw std::runtime_error(summary.status().ToString());
    s = *summary;
  }  // closed: the last checkpoint is part of the cost
  end_stage_peak();
  json out;
  out["wall"] = Seconds(start);
  out["cpu"] = CpuSeconds() - cpu0;
  stages.push_back({"end", cpu0 + out["cpu"].get<double>(), out["wall"].get<double>(),
                    ProcField("/proc/self/io", "wchar")});
  // Before the first stage: opening the index and reading the input.
  stages.insert(stages.begin(), {"open", cpu0, 0, wchar0});
  out["stages"] = json::array();
  for (size_t i = 0; i + 1 < stages.size(); ++i) {
    out["stages"].push_back({stages[i].stage, stages[i + 1].cpu - stages[i].cpu,
                             stages[i + 1].wall - stages[i].wall,
                             stages[i + 1].wchar - stages[i].wchar, stage_peaks.at(i)});
  }
  out["peak_rss"] = *std::max_element(stage_peaks.begin(), stage_peaks.end());
  out["write_bytes"] = ProcField("/proc/self/io", "write_bytes") - written0;
  out["wchar"] = ProcField("/proc/self/io", "wchar") - wchar0;
  out["index_bytes"] = config.store.url.empty() ? FolderBytes(fs::path(config.root) / "output")
                                                : DatabaseBytes(config.store.url);
  out["documents"] = s.documents_added + s.documents_changed + s.documents_unchanged;
  out["chunks"] = s.chunks;
  out["entities"] = s.entities;
  out["relationships"] = s.relationships;
  out["calls"] = {{"extract", s.calls.extract},      {"glean", s.calls.glean},
                  {"resolve", s.calls.resolve},      {"summarize", s.calls.summarize},
                  {"report", s.calls.report},        {"all", s.usage.calls},
                  {"cache_hits", s.usage.cache_hits}};
  out["reports"] = {{"llm", s.reports_generated - s.reports_extractive},
                    {"extractive", s.reports_extractive}};
  if (args["query"].get<bool>()) {
    const std::string instant = args["instant_url"].get<std::string>();
    out["query_global"] = TimeQuery(config, instant, QueryMethod::kGlobal);
    out["query_local"] = TimeQuery(config, instant, QueryMethod::kLocal);
  }
  std::cout << out.dump() << std::endl;
  return 0;
}

// ---- the driver

std::string LastUser(const testing::FakeRequest& r) { return r.LastUserMessage(); }

testing::FakeHandler MockModel(const bench::Cast* cast, std::chrono::milliseconds latency) {
  return [cast, latency](const testing::FakeRequest& r) {
    testing::FakeReply reply;
    if (r.IsEmbeddings()) {
      std::vector<std::vector<float>> vectors;
      for (const auto& in : r.EmbeddingInputs()) vectors.push_back(testing::FakeEmbedding(in, 8));
      reply = testing::Embeddings(vectors);
    } else {
      const std::string prompt = LastUser(r);
      const bool extract = cast && testing::PromptKind(prompt) == "extract";
      reply = testing::ChatCompletion(extract ? bench::CastExtraction(*cast, prompt)
                                              : testing::FakeGraphRagReply(prompt));
    }
    // A content type httplib does not compress: brotli at its default quality costs the mock
    // milliseconds of CPU per reply, taken from the engine on a small machine.
    reply.content_type = "application/json; charset=utf-8";
    reply.delay = latency;
    return reply;
  };
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.empty() ? 0 : v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

json RunWorker(const json& args) {
  // SCALE_BENCH_WORKER_WRAP runs the worker under a profiler, e.g. "valgrind --tool=callgrind"
  // (which cannot follow the re-execution of /proc/self/exe itself).
  const char* wrap = std::getenv("SCALE_BENCH_WORKER_WRAP");
  std::string exe = "/proc/" + std::to_string(getpid()) + "/exe";
  if (wrap != nullptr && *wrap != '\0')
    exe = std::string(wrap) + " " + fs::read_symlink(exe).string();
  const std::string cmd = exe + " --worker '" + args.dump() + "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot start the worker");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int rc = pclose(p);
  if (rc != 0)
    throw std::runtime_error("the worker failed (exit status " + std::to_string(rc) + ")");
  return json::parse(out);
}

std::string Mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / 1048576.0); }

// Prints one backend's runs (or, with --json, returns them) and their medians by figure.
json Report(const Options& o, const std::vector<json>& runs, int64_t corpus_bytes,
            const std::string& label) {
  // Each figure: per run, then the median.
  auto figure = [&](const std::function<double(const json&)>& f) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(f(r));
    return v;
  };
  const json& first = runs.front();
  const double chunks = first["chunks"].get<double>();
  const double calls = first["calls"]["all"].get<double>();
  const double bound =
      std::ceil(calls / static_cast<double>(o.concurrency)) * o.latency_ms / 1000.0;
  struct Row {
    std::string name;
    std::vector<double> values;
    std::function<std::string(double)> format;
  };
  auto secs = [](double x) { return fmt::format("{:.2f} s", x); };
  auto ms = [](double x) { return fmt::format("{:.2f} ms", x); };
  auto ratio = [](double x) { return fmt::format("{:.2f}x", x); };
  std::vector<Row> rows = {
      {"wall", figure([](const json& r) { return r["wall"].get<double>(); }), secs},
      {"cpu (user+sys)", figure([](const json& r) { return r["cpu"].get<double>(); }), secs},
      {"cpu per chunk",
       figure([&](const json& r) { return 1000 * r["cpu"].get<double>() / chunks; }), ms},
      {"peak RSS", figure([](const json& r) { return r["peak_rss"].get<double>(); }), Mib},
      {"write_bytes", figure([](const json& r) { return r["write_bytes"].get<double>(); }), Mib},
      {"wchar", figure([](const json& r) { return r["wchar"].get<double>(); }), Mib},
      {"index size", figure([](const json& r) { return r["index_bytes"].get<double>(); }), Mib},
  };
  if (first.contains("server_cpu")) {
    rows.push_back(
        {"server cpu", figure([](const json& r) { return r["server_cpu"].get<double>(); }), secs});
  }
  if (!o.no_llm && o.latency_ms > 0) {
    rows.push_back({"wall / bound",
                    figure([&](const json& r) { return r["wall"].get<double>() / bound; }), ratio});
  }
  if (o.rerun) {
    rows.push_back({"re-run wall",
                    figure([](const json& r) { return r["rerun"]["wall"].get<double>(); }), secs});
    rows.push_back({"re-run cpu",
                    figure([](const json& r) { return r["rerun"]["cpu"].get<double>(); }), secs});
    rows.push_back({"re-run peak RSS",
                    figure([](const json& r) { return r["rerun"]["peak_rss"].get<double>(); }),
                    Mib});
    rows.push_back({"re-run write_bytes",
                    figure([](const json& r) { return r["rerun"]["write_bytes"].get<double>(); }),
                    Mib});
  }
  if (o.query) {
    for (const char* q : {"query_global", "query_local"}) {
      rows.push_back(
          {std::string(q == std::string("query_global") ? "global" : "local") + " query (open)",
           figure([q](const json& r) { return 1000 * r[q]["total"].get<double>(); }),
           [](double x) { return fmt::format("{:.1f} ms", x); }});
    }
  }
  if (o.json_out) {
    json out = {{"documents", first["documents"]}, {"chunks", first["chunks"]},
                {"latency_ms", o.latency_ms},      {"concurrency", o.concurrency},
                {"bound_seconds", bound},          {"runs", runs}};
    for (const auto& row : rows) out["median"][row.name] = Median(row.values);
    return out;
  }

  std::cout << fmt::format(
      "{}{} documents ({}, {}), {} chunks; {} entities, {} relationships\n"
      "model: {}\n\n",
      label.empty() ? "" : "== " + label + ": ", first["documents"].get<int64_t>(),
      o.input.empty() ? "generated transcripts" : o.input, Mib(static_cast<double>(corpus_bytes)),
      first["chunks"].get<int64_t>(), first["entities"].get<int64_t>(),
      first["relationships"].get<int64_t>(),
      o.no_llm
          ? std::string("none (no-LLM mode)")
          : fmt::format("loopback mock, {} ms per call, llm.concurrency {}, {} gleaning "
                        "round{}",
                        o.latency_ms, o.concurrency, o.gleanings, o.gleanings == 1 ? "" : "s"));
  std::cout << fmt::format("{:<22}", "");
  for (size_t r = 0; r < runs.size(); ++r)
    std::cout << fmt::format("{:>12}", fmt::format("run {}", r + 1));
  std::cout << fmt::format("{:>12}\n", "median");
  for (const auto& row : rows) {
    std::cout << fmt::format("{:<22}", row.name);
    for (double v : row.values) std::cout << fmt::format("{:>12}", row.format(v));
    std::cout << fmt::format("{:>12}\n", row.format(Median(row.values)));
  }
  std::cout << "\nby stage (median of the runs; a stage's time runs from its first progress event "
               "to the next stage's):\n";
  std::cout << fmt::format("{:<22}{:>12}{:>12}{:>14}{:>14}{:>14}\n", "stage", "cpu", "wall",
                           "cpu/chunk", "wchar", "peak RSS");
  for (size_t i = 0; i < first["stages"].size(); ++i) {
    std::vector<double> cpu, wall, wchar, peak;
    for (const auto& r : runs) {
      if (i >= r["stages"].size()) continue;
      cpu.push_back(r["stages"][i][1].get<double>());
      wall.push_back(r["stages"][i][2].get<double>());
      wchar.push_back(r["stages"][i][3].get<double>());
      peak.push_back(r["stages"][i][4].get<double>());
    }
    std::cout << fmt::format("{:<22}{:>12}{:>12}{:>14}{:>14}{:>14}\n",
                             first["stages"][i][0].get<std::string>(), secs(Median(cpu)),
                             secs(Median(wall)), ms(1000 * Median(cpu) / chunks),
                             Mib(Median(wchar)), Mib(Median(peak)));
  }
  if (!o.no_llm) {
    const json& c = first["calls"];
    std::cout << fmt::format(
        "\nLLM calls: {} ({:.2f} per chunk): {} extraction, {} gleaning, {} resolution, {} "
        "summaries, {} reports ({} communities reported extractively, no call); {} from cache\n",
        c["all"].get<int64_t>(), calls / chunks, c["extract"].get<int64_t>(),
        c["glean"].get<int64_t>(), c["resolve"].get<int64_t>(), c["summarize"].get<int64_t>(),
        c["report"].get<int64_t>(), first["reports"]["extractive"].get<int64_t>(),
        c["cache_hits"].get<int64_t>());
    if (o.latency_ms > 0) {
      std::cout << fmt::format("bound: ceil({} / {}) x {} ms = {:.2f} s\n", c["all"].get<int64_t>(),
                               o.concurrency, o.latency_ms, bound);
    }
  }
  json medians = json::object();
  for (const auto& row : rows) medians[row.name] = Median(row.values);
  return {{"median", medians}};
}

int Driver(const Options& o) {
  setenv("no_proxy", "127.0.0.1,localhost", 1);
  const fs::path base = fs::temp_directory_path() / fmt::format("grag-scale-bench-{}", getpid());
  fs::remove_all(base);
  fs::create_directories(base);
  std::unique_ptr<bench::Cast> cast;
  std::string corpus = o.input;
  if (corpus.empty()) {
    cast = std::make_unique<bench::Cast>(bench::MakeCast());
    corpus = (base / "corpus").string();
    bench::WriteEpisodes(*cast, corpus, 0, o.docs);
  } else {
    corpus = fs::absolute(corpus).string();
  }
  const int64_t corpus_bytes = FolderBytes(corpus);
  testing::FakeServerOptions so;
  so.threads = std::max(48, 2 * o.concurrency + 8);
  so.keep_alive_max_count = o.keep_alive_requests;
  std::unique_ptr<testing::FakeOpenAIServer> model, instant;
  if (!o.no_llm) {
    model = std::make_unique<testing::FakeOpenAIServer>(
        MockModel(cast.get(), std::chrono::milliseconds(o.latency_ms)), so);
  }
  if (o.query) {
    instant = std::make_unique<testing::FakeOpenAIServer>(
        MockModel(cast.get(), std::chrono::milliseconds(0)), so);
  }
  json settings = json::array();
  for (const auto& [k, v] : o.settings) settings.push_back({k, v});
  std::unique_ptr<PgServer> pg;
  for (const auto& b : o.backends) {
    if (b == "postgresql") pg = std::make_unique<PgServer>(o.store_url);
  }
  std::map<std::string, std::vector<json>> runs;  // by backend
  for (int r = 0; r < o.runs; ++r) {
    for (const auto& backend : o.backends) {  // alternately, run for run
      const fs::path root = base / fmt::format("run{}-{}", r, backend);
      fs::create_directories(root);
      json args = {{"root", root.string()},
                   {"corpus", corpus},
                   {"base_url", model ? model->base_url() : ""},
                   {"instant_url", instant ? instant->base_url() : ""},
                   {"concurrency", o.concurrency},
                   {"gleanings", o.gleanings},
                   {"settings", settings},
                   {"query", o.query},
                   {"verbose", o.verbose},
                   {"store_url", ""}};
      testing::TestDatabase db;  // dropped after the run
      double server_cpu0 = 0;
      if (backend == "postgresql") {
        const std::string error = db.Create(pg->admin_url());
        if (!error.empty()) throw std::runtime_error(error);
        args["store_url"] = db.url();
        if (pg->postmaster() > 0) server_cpu0 = ClusterCpuSeconds(pg->postmaster());
      }
      json run = RunWorker(args);
      if (o.rerun) {
        json again = args;
        again["query"] = false;
        run["rerun"] = RunWorker(again);
      }
      if (backend == "postgresql" && pg->postmaster() > 0) {
        // The worker's connections are closed: let the postmaster reap their processes.
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        run["server_cpu"] = ClusterCpuSeconds(pg->postmaster()) - server_cpu0;
      }
      runs[backend].push_back(run);
      if (!o.keep.empty() && backend == "sqlite" && r + 1 == o.runs) {
        // The project as the last run left it, for profiling queries on it; a generated corpus
        // goes beside it (input.dir is then keep/corpus).
        fs::remove_all(o.keep);
        fs::create_directories(fs::path(o.keep).parent_path());
        fs::rename(root, o.keep);
        if (cast) fs::copy(corpus, fs::path(o.keep) / "corpus", fs::copy_options::recursive);
      }
      fs::remove_all(root);
      std::cerr << fmt::format("run {}/{} ({}): {:.2f} s wall, {:.2f} s CPU\n", r + 1, o.runs,
                               backend, run["wall"].get<double>(), run["cpu"].get<double>());
    }
  }
  fs::remove_all(base);
  pg.reset();

  const bool both = o.backends.size() > 1;
  json out = json::object();
  for (const auto& backend : o.backends) {
    out[backend] = Report(o, runs[backend], corpus_bytes, both ? backend : "");
    if (!o.json_out && both) std::cout << "\n";
  }
  if (!both) {
    if (o.json_out) std::cout << out[o.backends[0]].dump(1) << "\n";
    return 0;
  }
  // Side by side: each figure's median on both backends, and the ratio.
  const json& a = out[o.backends[0]]["median"];
  const json& b = out[o.backends[1]]["median"];
  json ratios = json::object();
  for (auto it = a.begin(); it != a.end(); ++it) {
    if (!b.contains(it.key()) || it.value().get<double>() == 0) continue;
    ratios[it.key()] = b[it.key()].get<double>() / it.value().get<double>();
  }
  if (o.json_out) {
    out["ratio"] = ratios;
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  std::cout << fmt::format("medians of {} run{}, side by side:\n{:<22}{:>14}{:>14}{:>24}\n", o.runs,
                           o.runs == 1 ? "" : "s", "", o.backends[0], o.backends[1],
                           o.backends[1] + " / " + o.backends[0]);
  for (auto it = b.begin(); it != b.end(); ++it) {
    const bool bytes = it.key().find("RSS") != std::string::npos || it.key() == "write_bytes" ||
                       it.key() == "wchar" || it.key() == "index size";
    auto show = [&](const json& v) {
      if (v.is_null()) return std::string("");
      return bytes ? Mib(v.get<double>()) : fmt::format("{:.3f}", v.get<double>());
    };
    std::cout << fmt::format("{:<22}{:>14}{:>14}{:>24}\n", it.key(),
                             show(a.contains(it.key()) ? a[it.key()] : json()), show(it.value()),
                             ratios.contains(it.key())
                                 ? fmt::format("{:.2f}x", ratios[it.key()].get<double>())
                                 : std::string(""));
  }
  return 0;
}

Options Parse(int argc, char** argv) {
  Options o;
  auto need = [&](int& i) -> std::string {
    if (i + 1 >= argc) throw std::runtime_error(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--docs") {
      o.docs = std::stoi(need(i));
    } else if (a == "--input") {
      o.input = need(i);
    } else if (a == "--latency-ms") {
      o.latency_ms = std::stoi(need(i));
    } else if (a == "--concurrency") {
      o.concurrency = std::stoi(need(i));
    } else if (a == "--keep-alive-requests") {
      o.keep_alive_requests = std::stoi(need(i));
    } else if (a == "--gleanings") {
      o.gleanings = std::stoi(need(i));
    } else if (a == "--runs") {
      o.runs = std::stoi(need(i));
    } else if (a == "--no-llm") {
      o.no_llm = true;
    } else if (a == "--query") {
      o.query = true;
    } else if (a == "--rerun") {
      o.rerun = true;
    } else if (a == "--keep") {
      o.keep = need(i);
    } else if (a == "--verbose") {
      o.verbose = true;
    } else if (a == "--backend") {
      const std::string b = need(i);
      if (b == "both") {
        o.backends = {"sqlite", "postgresql"};
      } else if (b == "sqlite" || b == "postgresql") {
        o.backends = {b};
      } else {
        throw std::runtime_error("--backend is sqlite, postgresql or both");
      }
    } else if (a == "--store-url") {
      o.store_url = need(i);
    } else if (a == "--json") {
      o.json_out = true;
    } else if (a == "--set") {
      const std::string kv = need(i);
      const auto eq = kv.find('=');
      if (eq == std::string::npos) throw std::runtime_error("--set expects key=value");
      o.settings.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else {
      throw std::runtime_error(
          "usage: scale_bench [--docs N | --input DIR] [--latency-ms MS] [--concurrency C] "
          "[--gleanings G] [--no-llm] [--runs R] [--query] [--rerun] [--set key=value]... [--json] "
          "[--verbose] [--backend sqlite|postgresql|both] [--store-url URL] [--keep DIR] "
          "[--keep-alive-requests N]");
    }
  }
  if (o.docs < 1 || o.latency_ms < 0 || o.concurrency < 1 || o.runs < 1 || o.gleanings < 0 ||
      o.keep_alive_requests < 1) {
    throw std::runtime_error(
        "--docs, --concurrency, --runs and --keep-alive-requests must be positive");
  }
  return o;
}

}  // namespace
}  // namespace grag

int main(int argc, char** argv) {
  try {
    if (argc == 3 && std::string(argv[1]) == "--worker") return grag::Worker(argv[2]);
    return grag::Driver(grag::Parse(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "scale_bench: " << e.what() << "\n";
    return 1;
  }
}
