// Extraction spread over processes (extraction.distribute, `grag index --worker`): the wall time
// of a whole book's extraction with 1, 2 and 3 processes, each with a model server of its own
// that answers an extraction call after a fixed latency (the tests' fake GraphRAG model; other
// calls at once, so that the figure is extraction's). Each run indexes A Christmas Carol into a
// fresh PostgreSQL database on a throwaway cluster (or --store-url's server): one `grag index`
// with extraction.distribute, and 0, 1 or 2 `grag index --worker --once` started just before
// it. Extraction's wall time is from the first extraction request any server received to the
// last reply; the figures are medians of --runs runs, the counts rotating so that a noisy
// moment does not fall on one count. The goal (issue 40): >= 2.7x with three processes.
//
//   index_workers [--runs R] [--latency-ms MS] [--concurrency C] [--chunk-size TOKENS]
//                 [--store-url URL]
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/fake_graphrag_llm.h"
#include "support/fake_openai_server.h"
#include "support/pg_server.h"
#include "support/postgres.h"
#include "support/run_command.h"

namespace grag {
namespace {

using Clock = std::chrono::steady_clock;
using testing::FakeOpenAIServer;
using testing::FakeReply;
using testing::FakeRequest;
using testing::ShellQuote;

struct Options {
  int runs = 3;
  int latency_ms = 100;
  int concurrency = 4;
  int chunk_size = 150;
  std::string store_url;
};

// The first extraction request and the last extraction reply, over every server of a run.
struct Span {
  std::mutex mu;
  std::optional<Clock::time_point> first, last;
  int calls = 0;
  void Add(Clock::time_point begin, Clock::time_point end) {
    std::lock_guard lock(mu);
    if (!first || begin < *first) first = begin;
    if (!last || end > *last) last = end;
    ++calls;
  }
  double Seconds() {
    std::lock_guard lock(mu);
    return first && last ? std::chrono::duration<double>(*last - *first).count() : 0;
  }
};

std::unique_ptr<FakeOpenAIServer> ModelServer(Span& span, std::chrono::milliseconds latency) {
  auto reply = testing::FakeGraphRagHandler();
  testing::FakeServerOptions options;
  options.keep_alive_max_count = 1000;  // as a real server keeps its connections
  return std::make_unique<FakeOpenAIServer>(
      [reply, latency, &span](const FakeRequest& r) {
        const bool extract = r.IsChat() && testing::PromptKind(r.LastUserMessage()) == "extract";
        const auto begin = Clock::now();
        FakeReply out = reply(r);
        if (extract) {
          std::this_thread::sleep_for(latency);  // held here, so the end is the reply's
          span.Add(begin, Clock::now());
        }
        return out;
      },
      options);
}

// One run with `processes` processes; its extraction's wall time in seconds.
double RunOnce(const Options& o, const std::string& root, const std::string& admin_url,
               int processes) {
  testing::TestDatabase db;
  if (std::string error = db.Create(admin_url); !error.empty()) {
    throw std::runtime_error("creating a database: " + error);
  }
  Span span;
  std::vector<std::unique_ptr<FakeOpenAIServer>> servers;
  for (int i = 0; i < processes; ++i) {
    servers.push_back(ModelServer(span, std::chrono::milliseconds(o.latency_ms)));
  }
  auto flags = [&](const FakeOpenAIServer& server) {
    return fmt::format(
        "--root {} --set {} --set {} --set llm.model=fake-model --set llm.concurrency={} --set "
        "chunks.size={} --set chunks.overlap=20 --quiet",
        ShellQuote(root), ShellQuote("store.url=" + db.url()),
        ShellQuote("llm.base_url=" + server.base_url()), o.concurrency, o.chunk_size);
  };
  std::vector<pid_t> workers;
  for (int i = 1; i < processes; ++i) {
    workers.push_back(testing::SpawnCommand(
        fmt::format("{} {} index --worker --once --worker-name w{} >/dev/null",
                    ShellQuote(GRAG_BINARY), flags(*servers[i]), i)));
  }
  auto run =
      testing::RunCommand(fmt::format("{} {} --set extraction.distribute=true index "
                                      "--no-progress",
                                      ShellQuote(GRAG_BINARY), flags(*servers[0])));
  for (pid_t w : workers) {
    if (int code = testing::WaitForExit(w, std::chrono::minutes(30)); code != 0) {
      throw std::runtime_error(fmt::format("a worker exited with {}", code));
    }
  }
  if (run.exit_code != 0) throw std::runtime_error("grag index failed: " + run.err);
  return span.Seconds();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--runs") {
      o.runs = std::stoi(value);
    } else if (flag == "--latency-ms") {
      o.latency_ms = std::stoi(value);
    } else if (flag == "--concurrency") {
      o.concurrency = std::stoi(value);
    } else if (flag == "--chunk-size") {
      o.chunk_size = std::stoi(value);
    } else if (flag == "--store-url") {
      o.store_url = value;
    } else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  bench::PgServer pg(o.store_url);
  const std::string root =
      (std::filesystem::temp_directory_path() / fmt::format("grag-index-workers-{}", ::getpid()))
          .string();
  std::filesystem::remove_all(root);
  auto init = testing::RunCommand(ShellQuote(GRAG_BINARY) + " init " + ShellQuote(root));
  if (init.exit_code != 0) throw std::runtime_error("grag init: " + init.err);
  std::filesystem::copy_file(
      std::string(GRAG_SOURCE_DIR) + "/tests/data/christmas_carol/christmas_carol.txt",
      root + "/input/christmas_carol.txt");
  std::map<int, std::vector<double>> seconds;
  for (int r = 0; r < o.runs; ++r) {
    for (int k = 0; k < 3; ++k) {
      const int processes = (k + r) % 3 + 1;  // rotating
      const double s = RunOnce(o, root, pg.admin_url(), processes);
      seconds[processes].push_back(s);
      std::cerr << fmt::format("run {}: {} process(es), extraction {:.2f} s\n", r + 1, processes,
                               s);
    }
  }
  std::filesystem::remove_all(root);
  const double one = Median(seconds[1]);
  std::cout << fmt::format(
      "extraction of the book, {} ms per extraction call, {} calls at once per process, "
      "chunks of {} tokens, medians of {} runs:\n",
      o.latency_ms, o.concurrency, o.chunk_size, o.runs);
  for (int p = 1; p <= 3; ++p) {
    const double m = Median(seconds[p]);
    std::cout << fmt::format("  {} process{}: {:.2f} s, {:.2f}x\n", p, p == 1 ? "" : "es", m,
                             m > 0 ? one / m : 0);
  }
  return 0;
}

}  // namespace
}  // namespace grag

int main(int argc, char** argv) {
  try {
    return grag::Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "index_workers: " << e.what() << "\n";
    return 1;
  }
}
