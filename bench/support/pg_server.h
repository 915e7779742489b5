// A PostgreSQL server for the benchmarks that index into one (scale_bench, index_workers).
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>

namespace grag::bench {

// The PostgreSQL server a benchmark's runs use: the one at `url`, else (empty) a throwaway
// cluster started now (scripts/pg_test_cluster.sh, found through GRAG_SOURCE_DIR) and stopped
// when this goes.
class PgServer {
 public:
  explicit PgServer(const std::string& url) {
    if (!url.empty()) {
      admin_url_ = url;
      return;
    }
    dir_ = fmt::format("/tmp/grag-bench-pg-{}", getpid());
    const std::string cmd =
        fmt::format("'{}/scripts/pg_test_cluster.sh' start '{}'", GRAG_SOURCE_DIR, dir_);
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) throw std::runtime_error("cannot run scripts/pg_test_cluster.sh");
    char buf[4096];
    std::string out;
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    if (pclose(p) != 0) {
      Stop();
      throw std::runtime_error("no PostgreSQL server: scripts/pg_test_cluster.sh start failed");
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    admin_url_ = out;
    std::ifstream pid(dir_ + "/data/postmaster.pid");
    pid >> postmaster_;
  }
  ~PgServer() { Stop(); }
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  const std::string& admin_url() const { return admin_url_; }
  // The postmaster's pid when the cluster is this program's, else 0.
  int64_t postmaster() const { return postmaster_; }

 private:
  void Stop() {
    if (dir_.empty()) return;
    const std::string cmd =
        fmt::format("'{}/scripts/pg_test_cluster.sh' stop '{}' >/dev/null", GRAG_SOURCE_DIR, dir_);
    if (std::system(cmd.c_str()) != 0)
      std::cerr << "could not stop the PostgreSQL cluster in " << dir_ << "\n";
    dir_.clear();
  }
  std::string dir_;  // the throwaway cluster's folder; empty: not ours
  std::string admin_url_;
  int64_t postmaster_ = 0;
};

}  // namespace grag::bench
