// OpenAIClient's options: their checks and the endpoints they describe (openai_options.h).
#include "openai_options.h"

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <string_view>

namespace grag::llm_internal {

Status CheckOpenAIOptions(const OpenAIOptions& o) {
  auto bad = [](std::string m) { return Status::InvalidArgument("LLM client options: " + m); };
  if (!o.base_url.starts_with("http://") && !o.base_url.starts_with("https://")) {
    return bad("base_url must start with http:// or https://, got '" + o.base_url + "'");
  }
  if (o.model.empty() && (o.api_style == ApiStyle::kOpenAI || o.azure_deployment.empty())) {
    return bad("model is empty");
  }
  if (o.api_style == ApiStyle::kAzure) {
    if (o.base_url.find("api.openai.com") != std::string::npos) {
      return bad(
          "Azure needs base_url set to the resource's endpoint "
          "(https://NAME.openai.azure.com)");
    }
    if (o.azure_api_version.empty()) return bad("azure_api_version is empty");
  }
  if (o.max_concurrency < 1) return bad("max_concurrency must be at least 1");
  if (o.requests_per_minute < 0) return bad("requests_per_minute must not be negative");
  if (o.tokens_per_minute < 0) return bad("tokens_per_minute must not be negative");
  if (o.timeout.count() <= 0) return bad("timeout must be positive");
  if (o.connect_timeout.count() <= 0) return bad("connect_timeout must be positive");
  if (o.max_retries < 0) return bad("max_retries must not be negative");
  if (o.backoff_base.count() < 0 || o.backoff_cap < o.backoff_base) {
    return bad("backoff_base must be >= 0 and backoff_cap >= backoff_base");
  }
  if (o.max_retry_after.count() < 0) return bad("max_retry_after must not be negative");
  if (o.embedding_batch_size < 1) return bad("embedding_batch_size must be at least 1");
  if (o.embedding_batch_max_tokens < 1) return bad("embedding_batch_max_tokens must be >= 1");
  if (o.embedding_dimensions && *o.embedding_dimensions < 1) {
    return bad("embedding_dimensions must be at least 1");
  }
  if (o.max_tokens_field.empty()) return bad("max_tokens_field is empty");
  for (size_t i = 0; i < o.endpoints.size(); ++i) {
    const EndpointOptions& e = o.endpoints[i];
    const std::string at = fmt::format("endpoints[{}]", i);
    if (!e.base_url.starts_with("http://") && !e.base_url.starts_with("https://")) {
      return bad(at + ": base_url must start with http:// or https://, got '" + e.base_url + "'");
    }
    if (!(e.weight > 0) || !std::isfinite(e.weight)) return bad(at + ": weight must be positive");
    if (e.max_concurrency < 1) return bad(at + ": max_concurrency must be at least 1");
    if (e.requests_per_minute < 0 || e.tokens_per_minute < 0) {
      return bad(at + ": requests_per_minute and tokens_per_minute must not be negative");
    }
    for (size_t k = 0; k < i; ++k) {
      if (!e.name.empty() && o.endpoints[k].name == e.name) {
        return bad(at + ": the name '" + e.name + "' is taken by endpoints[" + std::to_string(k) +
                   "]");
      }
    }
  }
  if (!o.endpoints.empty() && o.bench_after_failures < 1) {
    return bad("bench_after_failures must be at least 1");
  }
  if (o.bench_base.count() < 0 || o.bench_cap < o.bench_base) {
    return bad("bench_base must be >= 0 and bench_cap >= bench_base");
  }
  return Status::Ok();
}

namespace {

// "host:port" of a URL, the default name of an endpoint.
std::string HostOf(std::string_view url) {
  if (size_t scheme = url.find("://"); scheme != std::string_view::npos) {
    url.remove_prefix(scheme + 3);
  }
  return std::string(url.substr(0, url.find('/')));
}

}  // namespace

// The endpoints a client sends to: the list given, or one made of the single-endpoint fields.
// Names default to host:port, made unique with #2, #3...
std::vector<EndpointOptions> EffectiveEndpoints(const OpenAIOptions& o) {
  std::vector<EndpointOptions> out = o.endpoints;
  if (out.empty()) {
    EndpointOptions e;
    e.base_url = o.base_url;
    e.api_key = o.api_key;
    e.model = o.model;
    e.max_concurrency = o.max_concurrency;
    e.requests_per_minute = o.requests_per_minute;
    e.tokens_per_minute = o.tokens_per_minute;
    out.push_back(std::move(e));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].model.empty()) out[i].model = o.model;
    if (!out[i].name.empty()) continue;
    const std::string host = HostOf(out[i].base_url);
    std::string name = host;
    for (int n = 2;; ++n) {
      bool taken = false;
      for (size_t k = 0; k < out.size(); ++k) taken = taken || (k != i && out[k].name == name);
      if (!taken) break;
      name = host + "#" + std::to_string(n);
    }
    out[i].name = name;
  }
  return out;
}

}  // namespace grag::llm_internal
