// Load on `grag serve`: what the HTTP server adds to an engine call, and whether it stays correct
// with 200 clients at once while index jobs rewrite the index underneath.
//
//   build-release/bench/server_load [--grag PATH] [--clients 200] [--seconds 6] [--requests M]
//                                   [--baseline 100] [--workers N] [--keep DIR] [--no-index]
//                                   [--verbose]
//
// 1. A project: A Christmas Carol in input/, indexed with `grag --no-llm index` (extractive
//    everything, no model).
// 2. The engine alone, in this process (Engine::Open with keep_graph, as the server opens it):
//    the question set, local and global, one caller, warm; p50 / p99 of Query, and of
//    Query + QueryResultJson (the body the server sends).
// 3. The real `grag serve --port 0` (server.threads = clients + 56); one keep-alive client, warm:
//    p50 / p99 per method, and the server's overhead = server p50 - engine p50.
// 4. `--clients` keep-alive clients (one thread each) POST /v1/query for --seconds (or
//    --requests each), local questions, then global ones, WHILE a driver thread adds documents
//    (POST /v1/documents) and keeps re-starting index jobs (POST /v1/index; 409 = one is already
//    running). Any non-200 answer to /v1/query is an error: the run must report none.
// 5. SIGTERM: the server must exit 0, promptly, with a job possibly running.
//
// Exit code: 0 when there were no query errors and the server started and stopped cleanly.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <httplib.h>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "grag/config.h"
#include "grag/engine.h"
#include "grag/engine_json.h"
#include "grag/log.h"

namespace grag {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& m) {
  std::fprintf(stderr, "server_load: %s\n", m.c_str());
  std::exit(2);
}

struct Args {
  std::string grag = GRAG_BINARY;
  int clients = 200;
  double seconds = 6;      // per load phase (then the requests in flight finish)
  int64_t requests = 0;    // per client and phase; 0: --seconds decides
  int baseline = 100;      // single-client requests per method (engine and server)
  int64_t workers = 0;     // server.workers; 0: the server's default (one per core)
  std::string keep;        // keep the project here
  bool index_jobs = true;  // --no-index: the load alone, to tell the two costs apart
  bool verbose = false;
};

const std::vector<std::string> kLocalQuestions = {
    "Who is Jacob Marley?",
    "Who is Bob Cratchit?",
    "What happens to Tiny Tim?",
    "Who is Fezziwig?",
    "Who is Scrooge's nephew Fred?",
    "Who is Topper?",
    "What does the Ghost of Christmas Past show Scrooge?",
    "Who is the Ghost of Christmas Yet to Come?",
};
const std::vector<std::string> kGlobalQuestions = {
    "What are the main themes of this story?",
    "How does Scrooge change over the story?",
    "What role do poverty and charity play?",
    "What do the spirits show Scrooge, and why?",
};

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Die("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void Run(const std::string& command) {
  if (std::system(command.c_str()) != 0) Die("failed: " + command);
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// The q-quantile of `v` (sorted here), nearest rank.
double Quantile(std::vector<double>& v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

struct Latencies {
  double p50 = NAN, p99 = NAN, max = NAN;
  size_t n = 0;
};
Latencies Summarise(std::vector<double> v) {
  Latencies l;
  l.n = v.size();
  if (v.empty()) return l;
  l.p50 = Quantile(v, 0.5);
  l.p99 = Quantile(v, 0.99);
  l.max = v.back();
  return l;
}

// A `grag serve` child: stdout on a pipe (for the "listening on" line), stderr to a file.
struct ServerChild {
  pid_t pid = -1;
  int port = 0;
  int out_fd = -1;
  std::string stderr_path;

  void Start(const std::vector<std::string>& argv, const std::string& err_path) {
    stderr_path = err_path;
    int fds[2];
    if (::pipe(fds) != 0) Die("pipe failed");
    pid = ::fork();
    if (pid < 0) Die("fork failed");
    if (pid == 0) {
      ::dup2(fds[1], 1);
      const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (err >= 0) ::dup2(err, 2);
      ::close(fds[0]);
      ::close(fds[1]);
      std::vector<char*> cargv;
      for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
      cargv.push_back(nullptr);
      ::execv(cargv[0], cargv.data());
      std::_Exit(127);
    }
    ::close(fds[1]);
    out_fd = fds[0];
    // Wait for "listening on http://HOST:PORT".
    std::string seen;
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < deadline) {
      pollfd p{out_fd, POLLIN, 0};
      if (::poll(&p, 1, 200) > 0) {
        char buf[512];
        const ssize_t n = ::read(out_fd, buf, sizeof buf);
        if (n <= 0) break;
        seen.append(buf, static_cast<size_t>(n));
        const auto at = seen.find("listening on http://");
        if (at != std::string::npos) {
          const auto colon = seen.find(':', at + 20);
          if (colon != std::string::npos && seen.find('\n', colon) != std::string::npos) {
            port = std::atoi(seen.c_str() + colon + 1);
            return;
          }
        }
      }
    }
    Die("grag serve did not say where it listens; stdout: " + seen +
        "\nstderr: " + ReadFile(stderr_path));
  }

  // SIGTERM, then the exit code (-1: had to be killed after `timeout`) and how long it took.
  std::pair<int, double> Stop(std::chrono::seconds timeout) {
    const auto t0 = Clock::now();
    ::kill(pid, SIGTERM);
    int status = 0;
    while (Clock::now() - t0 < timeout) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return {code, Ms(Clock::now() - t0)};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    pid = -1;
    return {-1, Ms(Clock::now() - t0)};
  }

  // Peak resident memory of the child, from /proc (kB; 0 when unknown).
  int64_t PeakRssKb() const {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6);
    }
    return 0;
  }
};

std::unique_ptr<httplib::Client> NewClient(int port) {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);  // as curl, node, Python's urllib3 do
  c->set_connection_timeout(std::chrono::seconds(30));
  c->set_read_timeout(std::chrono::seconds(300));
  c->set_write_timeout(std::chrono::seconds(60));
  return c;
}

std::string QueryBody(const std::string& question, const char* method) {
  return json{{"question", question}, {"method", method}}.dump();
}

// Errors seen by the clients: counted, the first few kept whole.
struct ErrorLog {
  std::mutex mu;
  int64_t count = 0;
  int64_t on_new_connection =
      0;  // the request that opened a connection (the first, or the one after an error)
  std::vector<std::string> first;
  void Add(const std::string& what, bool new_connection = false) {
    std::lock_guard<std::mutex> lock(mu);
    ++count;
    if (new_connection) ++on_new_connection;
    if (first.size() < 20) first.push_back(what);
  }
};

std::string Describe(const httplib::Result& r) {
  if (!r) return "no response: " + httplib::to_string(r.error());
  return "HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 400);
}

// Index jobs driven through the API while the load runs.
struct IndexDriver {
  int port = 0;
  std::string book;
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<Clock::time_point> finished;  // succeeded jobs
  std::vector<double> job_seconds;
  int64_t failed = 0, conflicts = 0, docs = 0, started = 0;
  std::vector<std::string> problems;
  std::thread thread;

  // Document k: a passage of the book with a heading, a different one each time.
  std::string Doc(int64_t k) const {
    const size_t len = 5000;
    const size_t at = static_cast<size_t>(k * 7919 * 13) % (book.size() - len);
    return "Reading notes " + std::to_string(k) +
           "\n\nA passage of the story, copied for study.\n\n" + book.substr(at, len);
  }

  void Problem(const std::string& p) {
    std::lock_guard<std::mutex> lock(mu);
    if (problems.size() < 10) problems.push_back(p);
  }

  bool PostDoc(httplib::Client& c) {
    const int64_t k = docs;
    const json body = {{"id", "notes-" + std::to_string(k) + ".txt"},
                       {"title", "Reading notes " + std::to_string(k)},
                       {"text", Doc(k)}};
    auto r = c.Post("/v1/documents", body.dump(), "application/json");
    if (!r || (r->status != 201 && r->status != 200)) {
      Problem("POST /v1/documents: " + Describe(r));
      return false;
    }
    ++docs;
    return true;
  }

  void Loop() {
    auto c = NewClient(port);
    // Several new documents for the first job, then one more before each of the next ones.
    for (int i = 0; i < 3; ++i) PostDoc(*c);
    bool need_doc = false;
    while (!stop) {
      if (need_doc && !PostDoc(*c)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        continue;
      }
      auto r = c->Post("/v1/index", "{}", "application/json");
      if (r && r->status == 409) {
        ++conflicts;
        need_doc = false;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      if (!r || r->status != 202) {
        Problem("POST /v1/index: " + Describe(r));
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        continue;
      }
      ++started;
      need_doc = true;
      int64_t id = json::parse(r->body).value("id", int64_t{-1});
      // Poll until it ends (the job goes on if we stop polling: the server cancels it at SIGTERM).
      bool retriggered = false;
      while (!stop) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (!retriggered) {  // once per job, while it runs: 409 expected
          retriggered = true;
          auto again = c->Post("/v1/index", "{}", "application/json");
          if (again && again->status == 409) {
            ++conflicts;
          } else if (again && again->status == 202) {  // the first one had already ended
            ++started;
            id = json::parse(again->body).value("id", int64_t{-1});
          } else {
            Problem("POST /v1/index during a job: " + Describe(again));
          }
        }
        auto j = c->Get("/v1/jobs/" + std::to_string(id));
        if (!j || j->status != 200) {
          Problem("GET /v1/jobs/" + std::to_string(id) + ": " + Describe(j));
          continue;
        }
        const json job = json::parse(j->body);
        const std::string state = job.value("state", "");
        if (state == "running") continue;
        std::lock_guard<std::mutex> lock(mu);
        if (state == "succeeded") {
          finished.push_back(Clock::now());
          job_seconds.push_back(job.value("elapsed_seconds", 0.0));
        } else {
          ++failed;
          if (problems.size() < 10)
            problems.push_back("job " + std::to_string(id) + " " + j->body.substr(0, 400));
        }
        break;
      }
    }
  }

  void Start() {
    thread = std::thread([this] { Loop(); });
  }
  void Join() {
    stop = true;
    if (thread.joinable()) thread.join();
  }
  int64_t FinishedBetween(Clock::time_point a, Clock::time_point b) {
    std::lock_guard<std::mutex> lock(mu);
    return std::count_if(finished.begin(), finished.end(),
                         [&](auto t) { return t >= a && t <= b; });
  }
};

struct PhaseResult {
  std::string method;
  int64_t ok = 0;
  double seconds = 0;
  Latencies lat;
  int64_t errors = 0;
  int64_t jobs_finished = 0;
};

// `clients` threads, each its own keep-alive connection, asking `questions` round robin.
PhaseResult LoadPhase(const Args& args, int port, const char* method,
                      const std::vector<std::string>& questions, IndexDriver& indexer,
                      ErrorLog& errors) {
  std::vector<std::vector<double>> lat(static_cast<size_t>(args.clients));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  Clock::time_point deadline, phase_start;
  const int64_t errors_before = errors.count;
  std::vector<std::thread> threads;
  for (int i = 0; i < args.clients; ++i) {
    threads.emplace_back([&, i] {
      auto c = NewClient(port);
      std::vector<std::string> bodies;
      for (const auto& q : questions) bodies.push_back(QueryBody(q, method));
      auto& mine = lat[static_cast<size_t>(i)];
      mine.reserve(4096);
      bool fresh = true;
      ++ready;
      while (!go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      for (int64_t n = 0;; ++n) {
        if (args.requests > 0 ? n >= args.requests : Clock::now() >= deadline) break;
        const std::string& body = bodies[static_cast<size_t>(i + n) % bodies.size()];
        const auto t0 = Clock::now();
        auto r = c->Post("/v1/query", body, "application/json");
        const double ms = Ms(Clock::now() - t0);
        if (!r || r->status != 200 || r->body.empty() || r->body[0] != '{') {
          errors.Add(fmt::format("{} request {} of client {}, {:.0f} ms after sending, {:.1f} s "
                                 "into the phase: {} -> {}",
                                 method, n + 1, i, ms,
                                 std::chrono::duration<double>(Clock::now() - phase_start).count(),
                                 body, Describe(r)),
                     fresh);
          if (!r) fresh = true;  // httplib reconnects after a failed exchange
          continue;
        }
        fresh = false;
        mine.push_back(ms);
      }
    });
  }
  while (ready < args.clients) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto t0 = Clock::now();
  phase_start = t0;
  deadline =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(args.seconds));
  go = true;
  for (auto& t : threads) t.join();
  const auto t1 = Clock::now();
  PhaseResult p;
  p.method = method;
  p.seconds = std::chrono::duration<double>(t1 - t0).count();
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  p.ok = static_cast<int64_t>(all.size());
  p.lat = Summarise(std::move(all));
  {
    std::lock_guard<std::mutex> lock(errors.mu);
    p.errors = errors.count - errors_before;
  }
  p.jobs_finished = indexer.FinishedBetween(t0, t1);
  return p;
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Die(f + " needs a value");
      return argv[++i];
    };
    if (f == "--grag")
      a.grag = next();
    else if (f == "--clients")
      a.clients = std::stoi(next());
    else if (f == "--seconds")
      a.seconds = std::stod(next());
    else if (f == "--requests")
      a.requests = std::stoll(next());
    else if (f == "--baseline")
      a.baseline = std::stoi(next());
    else if (f == "--workers")
      a.workers = std::stoll(next());
    else if (f == "--keep")
      a.keep = next();
    else if (f == "--verbose")
      a.verbose = true;
    else if (f == "--no-index")
      a.index_jobs = false;
    else if (f == "--help" || f == "-h") {
      std::printf(
          "usage: server_load [--grag PATH] [--clients N] [--seconds S] [--requests M]\n"
          "                   [--baseline N] [--workers N] [--keep DIR] [--no-index] "
          "[--verbose]\n");
      std::exit(0);
    } else {
      Die("unknown argument " + f);
    }
  }
  if (a.clients < 1 || a.baseline < 1) Die("--clients and --baseline must be at least 1");
  return a;
}

int Main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  if (!fs::exists(args.grag)) Die("no grag binary at " + args.grag + " (--grag PATH)");
  ::signal(SIGPIPE, SIG_IGN);

  // ---- 1. the project
  std::string root;
  if (!args.keep.empty()) {
    root = args.keep;
    fs::remove_all(root);
    fs::create_directories(fs::path(root).parent_path().empty() ? "."
                                                                : fs::path(root).parent_path());
  } else {
    std::string tmpl = (fs::temp_directory_path() / "grag-server-load-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) Die("mkdtemp failed");
    root = tmpl + "/carol";
  }
  const std::string grag = Quote(args.grag);
  const std::string quiet = args.verbose ? "" : " >/dev/null";
  Run(grag + " init " + Quote(root) + quiet);
  const std::string book_path =
      std::string(GRAG_SOURCE_DIR) + "/tests/data/christmas_carol/christmas_carol.txt";
  fs::copy_file(book_path, root + "/input/christmas_carol.txt",
                fs::copy_options::overwrite_existing);
  auto t = Clock::now();
  Run(grag + " --root " + Quote(root) + " --no-llm index --no-progress" + quiet +
      (args.verbose ? "" : " 2>/dev/null"));
  const double index_s = std::chrono::duration<double>(Clock::now() - t).count();
  std::printf("index: A Christmas Carol (%zu kB), grag --no-llm index in %.1f s\n",
              static_cast<size_t>(fs::file_size(book_path) / 1024), index_s);

  // ---- 2. the engine alone, in-process, as the server opens it
  if (!args.verbose) SetLogLevel(LogLevel::kWarn);
  auto config = LoadConfig(root);
  if (!config.ok()) Die(config.status().message());
  config->llm.base_url.clear();
  config->llm.model.clear();
  config->embeddings.base_url.clear();
  config->embeddings.model.clear();
  EngineOptions eo;
  eo.keep_graph = true;
  auto engine = Engine::Open(*config, eo);
  if (!engine.ok()) Die("Engine::Open: " + engine.status().message());

  struct MethodSpec {
    const char* name;
    QueryMethod method;
    const std::vector<std::string>* questions;
  };
  const std::vector<MethodSpec> methods = {{"local", QueryMethod::kLocal, &kLocalQuestions},
                                           {"global", QueryMethod::kGlobal, &kGlobalQuestions}};
  std::map<std::string, Latencies> engine_lat, engine_json_lat, server_lat;
  std::map<std::string, size_t> body_bytes;
  for (const auto& m : methods) {
    auto ask = [&](const std::string& q) {
      QueryRequest r;
      r.question = q;
      r.method = m.method;
      auto res = (*engine)->Query(r);
      if (!res.ok())
        Die(std::string("engine ") + m.name + " \"" + q + "\": " + res.status().message());
      return std::move(*res);
    };
    for (const auto& q : *m.questions) {  // warm: the retriever, the graph, the caches
      if (ask(q).answer.size() < 200)
        Die(std::string(m.name) + " \"" + q + "\" finds next to nothing: fix the question set");
    }
    std::vector<double> alone, with_json;
    size_t bytes = 0;
    for (int i = 0; i < args.baseline; ++i) {
      const std::string& q = (*m.questions)[static_cast<size_t>(i) % m.questions->size()];
      const auto t0 = Clock::now();
      QueryResult res = ask(q);
      const auto t1 = Clock::now();
      const std::string body = QueryResultJson(res, q, false);
      const auto t2 = Clock::now();
      alone.push_back(Ms(t1 - t0));
      with_json.push_back(Ms(t2 - t0));
      bytes += body.size();
    }
    engine_lat[m.name] = Summarise(alone);
    engine_json_lat[m.name] = Summarise(with_json);
    body_bytes[m.name] = bytes / static_cast<size_t>(args.baseline);
  }
  engine->reset();

  // ---- 3. the server, one client
  const int64_t threads = args.clients + 56;
  std::vector<std::string> serve_argv = {
      args.grag, "--root", root, "--no-llm", "--set", "server.threads=" + std::to_string(threads)};
  if (args.workers > 0) {
    serve_argv.push_back("--set");
    serve_argv.push_back("server.workers=" + std::to_string(args.workers));
  }
  serve_argv.insert(serve_argv.end(), {"serve", "--port", "0"});
  ServerChild server;
  const std::string tmp_root = fs::path(root).parent_path().string();
  server.Start(serve_argv, tmp_root + "/serve.stderr");
  {
    auto c = NewClient(server.port);
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (true) {
      auto r = c->Get("/health");
      if (r && r->status == 200) break;
      if (Clock::now() > deadline) Die("GET /health never answered 200: " + Describe(r));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::printf("server: grag serve on port %d, server.threads=%lld, server.workers=%s, %u cores\n",
              server.port, static_cast<long long>(threads),
              args.workers > 0 ? std::to_string(args.workers).c_str() : "default",
              std::thread::hardware_concurrency());
  ErrorLog errors;
  {
    auto c = NewClient(server.port);
    for (const auto& m : methods) {
      std::vector<std::string> bodies;
      for (const auto& q : *m.questions) bodies.push_back(QueryBody(q, m.name));
      for (const auto& b : bodies) c->Post("/v1/query", b, "application/json");  // warm
      std::vector<double> v;
      for (int i = 0; i < args.baseline; ++i) {
        const std::string& b = bodies[static_cast<size_t>(i) % bodies.size()];
        const auto t0 = Clock::now();
        auto r = c->Post("/v1/query", b, "application/json");
        const double ms = Ms(Clock::now() - t0);
        if (!r || r->status != 200) {
          errors.Add(std::string("single client ") + b + " -> " + Describe(r));
          continue;
        }
        v.push_back(ms);
      }
      server_lat[m.name] = Summarise(v);
    }
  }
  std::printf("\nsingle client, warm (%d calls per method; ms)\n", args.baseline);
  std::printf("  %-7s %10s %10s %14s %14s %11s %11s %10s %9s\n", "method", "engine p50",
              "engine p99", "engine+json p50", "server p50", "server p99", "overhead",
              "(of which json)", "body");
  for (const auto& m : methods) {
    const auto& e = engine_lat[m.name];
    const auto& ej = engine_json_lat[m.name];
    const auto& s = server_lat[m.name];
    std::printf("  %-7s %10.2f %10.2f %14.2f %14.2f %11.2f %11.2f %10.2f %7zukB\n", m.name, e.p50,
                e.p99, ej.p50, s.p50, s.p99, s.p50 - e.p50, ej.p50 - e.p50,
                body_bytes[m.name] / 1024);
  }

  {
    const double overhead = server_lat["local"].p50 - engine_lat["local"].p50;
    const double overhead_global = server_lat["global"].p50 - engine_lat["global"].p50;
    std::printf(
        "  goal: server adds <= 2 ms p50 over the engine call: %s (local %+.2f ms, global %+.2f "
        "ms)\n",
        std::max(overhead, overhead_global) <= 2 ? "met" : "MISSED", overhead, overhead_global);
    std::printf("  goal: warm extractive local <= 10 ms p50 through the server: %s (%.2f ms)\n",
                server_lat["local"].p50 <= 10 ? "met" : "MISSED", server_lat["local"].p50);
  }

  // ---- 4. many clients while index jobs run
  IndexDriver indexer;
  indexer.port = server.port;
  indexer.book = ReadFile(book_path);
  if (args.index_jobs) indexer.Start();
  std::vector<PhaseResult> phases;
  for (const auto& m : methods) {
    phases.push_back(LoadPhase(args, server.port, m.name, *m.questions, indexer, errors));
  }
  indexer.Join();
  const int64_t peak_rss_mb = server.PeakRssKb() / 1024;

  std::printf("\n%d concurrent keep-alive clients, POST /v1/query, %s (ms)\n", args.clients,
              args.index_jobs ? "index jobs re-started throughout" : "no index job (--no-index)");
  std::printf("  %-7s %9s %8s %10s %9s %9s %9s %7s %15s\n", "method", "requests", "seconds",
              "requests/s", "p50", "p99", "max", "errors", "index jobs done");
  for (const auto& p : phases) {
    std::printf("  %-7s %9lld %8.1f %10.1f %9.1f %9.1f %9.1f %7lld %15lld\n", p.method.c_str(),
                static_cast<long long>(p.ok), p.seconds, static_cast<double>(p.ok) / p.seconds,
                p.lat.p50, p.lat.p99, p.lat.max, static_cast<long long>(p.errors),
                static_cast<long long>(p.jobs_finished));
  }
  {
    std::vector<double> js = indexer.job_seconds;
    const Latencies j = Summarise(js);
    std::printf(
        "index jobs: %lld started, %zu succeeded (p50 %.2f s, max %.2f s), %lld failed, "
        "%lld POST /v1/index answered 409 (one already running), %lld documents added\n",
        static_cast<long long>(indexer.started), indexer.job_seconds.size(), j.p50, j.max,
        static_cast<long long>(indexer.failed), static_cast<long long>(indexer.conflicts),
        static_cast<long long>(indexer.docs));
  }
  std::printf("server peak RSS: %lld MB\n", static_cast<long long>(peak_rss_mb));

  // ---- 5. stop
  const auto [code, stop_ms] = server.Stop(std::chrono::seconds(60));
  std::printf("SIGTERM: exit code %d after %.0f ms\n", code, stop_ms);

  int64_t total_errors = errors.count;
  std::printf("\nquery errors: %lld (%lld of them on a request that opened a connection)\n",
              static_cast<long long>(total_errors),
              static_cast<long long>(errors.on_new_connection));
  for (const auto& e : errors.first) std::printf("  %s\n", e.c_str());
  for (const auto& p : indexer.problems) std::printf("  index driver: %s\n", p.c_str());
  const bool ok = total_errors == 0 && code == 0 && indexer.failed == 0 && indexer.problems.empty();
  if (!ok || args.verbose) {
    std::printf("server stderr (%s):\n%s\n", server.stderr_path.c_str(),
                ReadFile(server.stderr_path).substr(0, 8000).c_str());
  }
  if (args.keep.empty()) fs::remove_all(tmp_root);
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace grag

int main(int argc, char** argv) { return grag::Main(argc, argv); }
