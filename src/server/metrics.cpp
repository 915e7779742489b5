#include "metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

namespace grag::server {
namespace {

// A label value as the text format wants it: backslash, quote and newline escaped.
std::string LabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// A number as the text format wants it: integers without a fraction, others in full precision.
std::string Number(double v) { return fmt::format("{}", v); }

void Header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

// The process's resident memory in bytes (/proc/self/statm), 0 when it cannot be read.
double ResidentBytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0;
  int64_t resident = 0;
  if (!(in >> size >> resident)) return 0;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

double OpenFds() {
  std::error_code ec;
  int64_t n = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++n;
  }
  return static_cast<double>(n);
}

double CpuSeconds() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

const double kStartTime =
    std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();

}  // namespace

void Metrics::ObserveRequest(std::string_view route, std::string_view method, int status,
                             double seconds) {
  std::lock_guard lock(mu_);
  Series& s = requests_[{std::string(route), std::string(method), status}];
  ++s.count;
  s.sum += seconds;
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) {
      ++s.buckets[i];
      break;
    }
  }
}

void Metrics::ObserveQuestion(std::string_view method) {
  std::lock_guard lock(mu_);
  ++questions_[std::string(method)];
}

void Metrics::ObserveJob(std::string_view state) {
  std::lock_guard lock(mu_);
  ++jobs_[std::string(state)];
}

void Metrics::RetireQueryUsage(const LlmUsage& usage) {
  std::lock_guard lock(mu_);
  retired_query_usage_ += usage;
}

std::string Metrics::Render(const LlmUsage& query_usage, const LlmUsage& job_usage,
                            const std::vector<GaugeValue>& gauges) const {
  std::string out;
  std::lock_guard lock(mu_);

  Header(out, "grag_http_requests_total", "counter",
         "HTTP requests answered, by route template, method and status");
  for (const auto& [key, s] : requests_) {
    const auto& [route, method, status] = key;
    out += fmt::format("grag_http_requests_total{{route=\"{}\",method=\"{}\",status=\"{}\"}} {}\n",
                       LabelValue(route), LabelValue(method), status, s.count);
  }
  Header(out, "grag_http_request_duration_seconds", "histogram",
         "Time in the route's handler (a streamed reply: until the handler returned)");
  std::map<std::pair<std::string, std::string>, Series> by_route;  // statuses summed
  for (const auto& [key, s] : requests_) {
    Series& r = by_route[{std::get<0>(key), std::get<1>(key)}];
    r.count += s.count;
    r.sum += s.sum;
    for (size_t i = 0; i < kBuckets.size(); ++i) r.buckets[i] += s.buckets[i];
  }
  for (const auto& [key, s] : by_route) {
    const std::string labels =
        fmt::format("route=\"{}\",method=\"{}\"", LabelValue(key.first), LabelValue(key.second));
    int64_t cumulative = 0;
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      cumulative += s.buckets[i];
      out += fmt::format("grag_http_request_duration_seconds_bucket{{{},le=\"{}\"}} {}\n", labels,
                         Number(kBuckets[i]), cumulative);
    }
    out += fmt::format("grag_http_request_duration_seconds_bucket{{{},le=\"+Inf\"}} {}\n", labels,
                       s.count);
    out += fmt::format("grag_http_request_duration_seconds_sum{{{}}} {}\n", labels, Number(s.sum));
    out += fmt::format("grag_http_request_duration_seconds_count{{{}}} {}\n", labels, s.count);
  }
  Header(out, "grag_http_requests_in_flight", "gauge", "HTTP requests being handled now");
  out += fmt::format("grag_http_requests_in_flight {}\n", in_flight_.load());

  Header(out, "grag_questions_total", "counter",
         "Questions answered (/v1/query, chat completions, MCP over HTTP), by the method that "
         "answered; error: failed before one did");
  for (const auto& [method, n] : questions_) {
    out += fmt::format("grag_questions_total{{method=\"{}\"}} {}\n", LabelValue(method), n);
  }
  Header(out, "grag_index_jobs_total", "counter", "Index jobs that ended, by state");
  for (const auto& [state, n] : jobs_) {
    out += fmt::format("grag_index_jobs_total{{state=\"{}\"}} {}\n", LabelValue(state), n);
  }

  // The models' spend, by what it was for: answering questions, or index jobs.
  LlmUsage query = retired_query_usage_;
  query += query_usage;
  const LlmUsage& index = job_usage;
  struct Figure {
    const char* name;
    const char* help;
    int64_t LlmUsage::*field;
  };
  const Figure figures[] = {
      {"grag_llm_calls_total", "Model calls (chat and embeddings), cache hits included",
       &LlmUsage::calls},
      {"grag_llm_cache_hits_total", "Model calls answered from the reply cache",
       &LlmUsage::cache_hits},
      {"grag_llm_http_requests_total", "HTTP requests sent to model endpoints, retries included",
       &LlmUsage::http_requests},
      {"grag_llm_failures_total", "Model calls that returned an error", &LlmUsage::failures},
      {"grag_llm_prompt_tokens_total", "Prompt tokens sent", &LlmUsage::prompt_tokens},
      {"grag_llm_completion_tokens_total", "Completion tokens received",
       &LlmUsage::completion_tokens},
  };
  for (const Figure& f : figures) {
    Header(out, f.name, "counter", std::string(f.help) + ", by purpose (query or index)");
    out += fmt::format("{}{{purpose=\"query\"}} {}\n", f.name, query.*f.field);
    out += fmt::format("{}{{purpose=\"index\"}} {}\n", f.name, index.*f.field);
  }

  for (const GaugeValue& g : gauges) {
    Header(out, g.name, "gauge", g.help);
    out += fmt::format("{} {}\n", g.name, Number(g.value));
  }

  Header(out, "process_cpu_seconds_total", "counter", "User and system CPU time spent");
  out += fmt::format("process_cpu_seconds_total {}\n", Number(CpuSeconds()));
  Header(out, "process_resident_memory_bytes", "gauge", "Resident memory size");
  out += fmt::format("process_resident_memory_bytes {}\n", Number(ResidentBytes()));
  Header(out, "process_open_fds", "gauge", "Open file descriptors");
  out += fmt::format("process_open_fds {}\n", Number(OpenFds()));
  Header(out, "process_start_time_seconds", "gauge", "Start time since the Unix epoch");
  out += fmt::format("process_start_time_seconds {}\n", Number(kStartTime));
  return out;
}

}  // namespace grag::server
