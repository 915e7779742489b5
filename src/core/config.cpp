// Settings: loading grag.toml, the environment and --set into a Config, validating it, and
// rendering it (`grag config`, `grag init`'s grag.toml, the reference), all from the one table
// in settings_table.cpp.
#include "grag/config.h"

#include "grag/project.h"
#include "grag/location.h"
#include "settings_table.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <toml++/toml.h>
#include <variant>

namespace grag {
namespace {

namespace fs = std::filesystem;
using namespace config_internal;  // NOLINT: the table's types, as when they lived here

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += ch;
    }
  }
  return out + "\"";
}

std::string FormatDouble(double d) {
  std::ostringstream os;
  os << d;
  std::string s = os.str();
  if (s.find_first_of(".eE") == std::string::npos && std::isfinite(d)) s += ".0";
  return s;
}

// An endpoint as a TOML inline table: the fields that differ from the defaults, and never a key.
std::string RenderEndpoint(const EndpointConfig& e) {
  const EndpointConfig d;
  std::string s = "{base_url = " + Quote(e.base_url);
  if (!e.name.empty()) s += ", name = " + Quote(e.name);
  if (!e.api_key.empty()) s += ", api_key = \"***\"";
  if (!e.api_key_env.empty()) s += ", api_key_env = " + Quote(e.api_key_env);
  if (!e.model.empty()) s += ", model = " + Quote(e.model);
  if (e.weight != d.weight) s += ", weight = " + FormatDouble(e.weight);
  if (e.concurrency != d.concurrency) s += ", concurrency = " + std::to_string(e.concurrency);
  if (e.rpm != d.rpm) s += ", rpm = " + std::to_string(e.rpm);
  if (e.tpm != d.tpm) s += ", tpm = " + std::to_string(e.tpm);
  return s + "}";
}

// Reads a TOML array of tables into endpoints; errors name `where`, the setting, the entry and
// the field.
Status EndpointsFromToml(const toml::node& node, const std::string& where, const char* key,
                         std::vector<EndpointConfig>& out) {
  const auto* arr = node.as_array();
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(where + ": " + key + " " + what);
  };
  if (arr == nullptr) {
    return bad("must be a list of tables ([[" + std::string(key) + "]] sections or [{...}, ...])");
  }
  std::vector<EndpointConfig> list;
  for (size_t i = 0; i < arr->size(); ++i) {
    const auto* t = (*arr)[i].as_table();
    const std::string at = "[" + std::to_string(i) + "]";
    if (t == nullptr) return bad(at + " must be a table");
    EndpointConfig e;
    Status st = Status::Ok();
    t->for_each([&](const toml::key& k, const toml::node& v) {
      if (!st.ok()) return;
      const std::string field(k.str());
      auto text = [&](std::string& into) {
        if (!v.is_string())
          st = bad(at + "." + field + " must be a string");
        else
          into = *v.value<std::string>();
      };
      auto integer = [&](int64_t& into) {
        if (!v.is_integer())
          st = bad(at + "." + field + " must be an integer");
        else
          into = *v.value<int64_t>();
      };
      if (field == "name")
        text(e.name);
      else if (field == "base_url")
        text(e.base_url);
      else if (field == "api_key")
        text(e.api_key);
      else if (field == "api_key_env")
        text(e.api_key_env);
      else if (field == "model")
        text(e.model);
      else if (field == "concurrency")
        integer(e.concurrency);
      else if (field == "rpm")
        integer(e.rpm);
      else if (field == "tpm")
        integer(e.tpm);
      else if (field == "weight") {
        if (!v.is_number())
          st = bad(at + ".weight must be a number");
        else
          e.weight = *v.value<double>();
      } else {
        st = bad(at + ": unknown field \"" + field +
                 "\" (known: base_url, api_key, api_key_env, model, weight, concurrency, rpm, "
                 "tpm, name)");
      }
    });
    GRAG_RETURN_IF_ERROR(st);
    list.push_back(std::move(e));
  }
  out = std::move(list);
  return Status::Ok();
}

Status ValidateEndpoints(const std::string& key, const std::string& model,
                         const std::vector<EndpointConfig>& endpoints) {
  for (size_t i = 0; i < endpoints.size(); ++i) {
    const EndpointConfig& e = endpoints[i];
    const std::string at = std::string(key) + "[" + std::to_string(i) + "]";
    auto bad = [&](const std::string& what) { return Status::InvalidArgument(at + ": " + what); };
    if (e.base_url.empty()) return bad("base_url is empty");
    if (!e.base_url.starts_with("http://") && !e.base_url.starts_with("https://")) {
      return bad("base_url must start with http:// or https://, not \"" + e.base_url + "\"");
    }
    if (!(e.weight > 0) || !std::isfinite(e.weight)) {
      return bad("weight must be positive, not " + FormatDouble(e.weight));
    }
    if (e.concurrency < 0) return bad("concurrency must be at least 0 (0: llm.concurrency)");
    if (e.rpm < 0 || e.tpm < 0) return bad("rpm and tpm must be at least 0 (0: unlimited)");
    if (!e.api_key.empty() && !e.api_key_env.empty()) {
      return bad("set api_key or api_key_env, not both");
    }
    for (size_t k = 0; k < i; ++k) {
      if (!e.name.empty() && endpoints[k].name == e.name) {
        return bad("name \"" + e.name + "\" is also endpoint " + std::to_string(k) + "'s");
      }
    }
  }
  if (!endpoints.empty() && LogicalModel(model, endpoints).empty()) {
    const std::string role = key.substr(0, key.rfind('.'));
    return Status::InvalidArgument(
        key + ": set " + role +
        ".model to name the model these endpoints serve (its name keys the reply cache), or give "
        "every endpoint the same model");
  }
  return Status::Ok();
}

std::string Render(const ValueRef& ref) {
  return std::visit(
      [](auto* p) -> std::string {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>) return Quote(*p);
        if constexpr (std::is_same_v<T, int64_t>) return std::to_string(*p);
        if constexpr (std::is_same_v<T, double>) return FormatDouble(*p);
        if constexpr (std::is_same_v<T, bool>) return *p ? "true" : "false";
        if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string s = "[";
          for (size_t i = 0; i < p->size(); ++i) s += (i ? ", " : "") + Quote((*p)[i]);
          return s + "]";
        }
        if constexpr (std::is_same_v<T, std::vector<EndpointConfig>>) {
          std::string s = "[";
          for (size_t i = 0; i < p->size(); ++i) s += (i ? ", " : "") + RenderEndpoint((*p)[i]);
          return s + "]";
        }
      },
      ref);
}

Status ParseText(const Setting& s, const std::string& text) {
  auto bad = [&](const char* what) {
    return Status::InvalidArgument(std::string("setting ") + s.key + " expects " + what +
                                   ", not \"" + text + "\"");
  };
  return std::visit(
      [&](auto* p) -> Status {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>) {
          *p = text;
        } else if constexpr (std::is_same_v<T, int64_t>) {
          char* end = nullptr;
          errno = 0;
          const long long v = std::strtoll(text.c_str(), &end, 0);
          if (text.empty() || *end != '\0' || errno != 0) return bad("an integer");
          *p = v;
        } else if constexpr (std::is_same_v<T, double>) {
          char* end = nullptr;
          errno = 0;
          const double v = std::strtod(text.c_str(), &end);
          if (text.empty() || *end != '\0' || errno != 0) return bad("a number");
          *p = v;
        } else if constexpr (std::is_same_v<T, bool>) {
          if (text == "true" || text == "1" || text == "yes")
            *p = true;
          else if (text == "false" || text == "0" || text == "no")
            *p = false;
          else
            return bad("true or false");
        } else if constexpr (std::is_same_v<T, std::vector<EndpointConfig>>) {
          // TOML's inline form: [{base_url = "http://a:11434/v1"}, {base_url = "..."}]
          try {
            const toml::table t = toml::parse("v = " + text);
            return EndpointsFromToml(*t.get("v"), "setting", s.key, *p);
          } catch (const toml::parse_error& e) {
            return bad("a TOML list of tables, e.g. [{base_url = \"http://host:11434/v1\"}]");
          }
        } else {
          p->clear();
          std::stringstream ss(text);
          std::string item;
          while (std::getline(ss, item, ',')) {
            const auto b = item.find_first_not_of(' ');
            const auto e = item.find_last_not_of(' ');
            if (b != std::string::npos) p->push_back(item.substr(b, e - b + 1));
          }
        }
        return Status::Ok();
      },
      s.ref);
}

Status FromToml(const Setting& s, const toml::node& node, const std::string& where) {
  auto bad = [&](const char* what) {
    return Status::InvalidArgument(where + ": " + s.key + " must be " + what);
  };
  return std::visit(
      [&](auto* p) -> Status {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (!node.is_string()) return bad("a string");
          *p = *node.value<std::string>();
        } else if constexpr (std::is_same_v<T, int64_t>) {
          if (!node.is_integer()) return bad("an integer");
          *p = *node.value<int64_t>();
        } else if constexpr (std::is_same_v<T, double>) {
          if (!node.is_number()) return bad("a number");
          *p = *node.value<double>();
        } else if constexpr (std::is_same_v<T, bool>) {
          if (!node.is_boolean()) return bad("true or false");
          *p = *node.value<bool>();
        } else if constexpr (std::is_same_v<T, std::vector<EndpointConfig>>) {
          return EndpointsFromToml(node, where, s.key, *p);
        } else {
          const auto* arr = node.as_array();
          if (arr == nullptr) return bad("a list of strings");
          p->clear();
          for (const auto& item : *arr) {
            if (!item.is_string()) return bad("a list of strings");
            p->push_back(*item.value<std::string>());
          }
        }
        return Status::Ok();
      },
      s.ref);
}

}  // namespace

void DisableModels(Config& config) {
  config.llm.base_url.clear();
  config.llm.model.clear();
  config.llm.endpoints.clear();
  config.llm.extract = config.llm.summarize = config.llm.resolve = config.llm.query = {};
  config.embeddings.base_url.clear();
  config.embeddings.model.clear();
  config.embeddings.endpoints.clear();
}

namespace {

std::string NumberText(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// "at least 1", "between 0 and 1", "above 0", "one of skip, repair"; empty when anything goes.
std::string AllowedText(const Allowed& a) {
  if (!a.words.empty()) {
    std::string out;
    for (std::string_view w : a.words) {
      out += (out.empty() ? "" : ", ") + (w.empty() ? std::string("\"\"") : std::string(w));
    }
    return "one of " + out;
  }
  if (a.min && a.max) {
    if (!a.min_exclusive && !a.max_exclusive)
      return "between " + NumberText(*a.min) + " and " + NumberText(*a.max);
    return std::string(a.min_exclusive ? "above " : "at least ") + NumberText(*a.min) +
           (a.max_exclusive ? " and below " : " and at most ") + NumberText(*a.max);
  }
  if (a.min) return (a.min_exclusive ? "above " : "at least ") + NumberText(*a.min);
  if (a.max) return (a.max_exclusive ? "below " : "at most ") + NumberText(*a.max);
  return "";
}

Status CheckAllowed(const Setting& s) {
  const Allowed& a = s.allowed;
  if (a.empty()) return Status::Ok();
  auto refuse = [&](const std::string& got) {
    return Status::InvalidArgument(std::string(s.key) + " must be " + AllowedText(a) + ", not " +
                                   got);
  };
  if (const auto* text = std::get_if<std::string*>(&s.ref)) {
    for (std::string_view w : a.words) {
      if (**text == w) return Status::Ok();
    }
    return refuse("\"" + **text + "\"");
  }
  double v = 0;
  if (const auto* i = std::get_if<int64_t*>(&s.ref)) {
    v = static_cast<double>(**i);
  } else if (const auto* d = std::get_if<double*>(&s.ref)) {
    v = **d;
  } else {
    return Status::Ok();
  }
  const bool low = a.min && (a.min_exclusive ? !(v > *a.min) : !(v >= *a.min));
  const bool high = a.max && (a.max_exclusive ? !(v < *a.max) : !(v <= *a.max));
  if (low || high) return refuse(NumberText(v));
  return Status::Ok();
}

}  // namespace

const LlmRoleConfig* LlmConfig::Role(std::string_view role) const {
  if (role == "extract") return &extract;
  if (role == "summarize") return &summarize;
  if (role == "resolve") return &resolve;
  if (role == "query") return &query;
  return nullptr;
}

double LlmConfig::InputPrice(std::string_view role) const {
  const LlmRoleConfig* r = Role(role);
  return r != nullptr && r->price_input_per_million >= 0 ? r->price_input_per_million
                                                         : price_input_per_million;
}

double LlmConfig::OutputPrice(std::string_view role) const {
  const LlmRoleConfig* r = Role(role);
  return r != nullptr && r->price_output_per_million >= 0 ? r->price_output_per_million
                                                          : price_output_per_million;
}

bool LlmConfig::Priced() const {
  if (price_input_per_million > 0 || price_output_per_million > 0) return true;
  for (const LlmRoleConfig* r : {&extract, &summarize, &resolve, &query}) {
    if (r->price_input_per_million > 0 || r->price_output_per_million > 0) return true;
  }
  return false;
}

Status ValidateConfig(const Config& c) {
  for (const auto& [name, role] :
       {std::pair<const char*, const LlmRoleConfig*>{"extract", &c.llm.extract},
        {"summarize", &c.llm.summarize},
        {"resolve", &c.llm.resolve},
        {"query", &c.llm.query}}) {
    if (!role->base_url.empty() && !role->base_url.starts_with("http://") &&
        !role->base_url.starts_with("https://")) {
      return Status::InvalidArgument(std::string("llm.") + name +
                                     ".base_url must start with http:// or https://");
    }
    const std::string key = std::string("llm.") + name;
    if (!role->api_key.empty() && !role->api_key_env.empty()) {
      return Status::InvalidArgument("set " + key + ".api_key or " + key +
                                     ".api_key_env, not both");
    }
    if (!role->endpoints.empty() && !role->base_url.empty()) {
      return Status::InvalidArgument("set " + key + ".base_url or " + key + ".endpoints, not both");
    }
    GRAG_RETURN_IF_ERROR(ValidateEndpoints(
        key + ".endpoints",
        role->model.empty() ? LogicalModel(c.llm.model, c.llm.endpoints) : role->model,
        role->endpoints));
    if (!role->empty() && c.llm.base_url.empty() && c.llm.endpoints.empty()) {
      return Status::InvalidArgument(
          std::string("llm.") + name +
          " is set but llm.base_url is not: the roles without a model of their own use [llm]'s, "
          "so set it too");
    }
  }
  // Each setting against its own range or words (the table's Allowed).
  {
    Config copy = c;  // Settings() needs mutable references
    for (const Setting& s : Settings(copy)) GRAG_RETURN_IF_ERROR(CheckAllowed(s));
  }
  // What relates two settings or more.
  if (c.chunks.overlap < 0 || c.chunks.overlap >= c.chunks.size) {
    return Status::InvalidArgument("chunks.overlap must be at least 0 and less than chunks.size");
  }
  GRAG_RETURN_IF_ERROR(ValidateEndpoints("llm.endpoints", c.llm.model, c.llm.endpoints));
  GRAG_RETURN_IF_ERROR(
      ValidateEndpoints("embeddings.endpoints", c.embeddings.model, c.embeddings.endpoints));
  if (c.llm.bench_max_seconds < c.llm.bench_seconds)
    return Status::InvalidArgument("llm.bench_max_seconds must be at least llm.bench_seconds");
  if (c.extraction.entity_types.empty())
    return Status::InvalidArgument("extraction.entity_types must not be empty");
  {
    const auto& r = c.resolution;
    if (r.name_weight + r.embedding_weight <= 0)
      return Status::InvalidArgument(
          "resolution.name_weight and resolution.embedding_weight must not both be 0");
    if (r.adjudicate_threshold > r.merge_threshold)
      return Status::InvalidArgument(
          "resolution.adjudicate_threshold must not exceed resolution.merge_threshold");
  }
  if (c.llm.max_cost > 0 && !c.llm.Priced())
    return Status::InvalidArgument(
        "llm.max_cost needs llm.price_input_per_million or llm.price_output_per_million (or a "
        "role's)");
  {
    const DriftConfig& d = c.drift;
    if (d.local_chunk_share + d.local_relationship_share + d.local_report_share > 1.0 + 1e-9)
      return Status::InvalidArgument("drift's local shares must sum to at most 1");
    const int64_t least = (d.hyde ? 1 : 0) + 2;
    if (d.max_calls != 0 && d.max_calls < least)
      return Status::InvalidArgument(
          "drift.max_calls must be 0 (the formula's bound) or at least " + std::to_string(least) +
          " (hyde, one primer call, reduce)");
  }
  if (c.extraction.distribute && c.store.url.empty()) {
    return Status::InvalidArgument(
        "extraction.distribute shares extraction with workers through a PostgreSQL index that "
        "every worker reaches: set store.url");
  }
  if (!c.store.read_url.empty() && c.store.url.empty()) {
    return Status::InvalidArgument(
        "store.read_url is a replica of store.url's PostgreSQL database: set store.url too");
  }
  for (const std::string& entry : c.server.workspace_keys) {
    const size_t colon = entry.find(':');
    if (colon == std::string::npos || colon + 1 == entry.size() ||
        !ValidateWorkspaceName(entry.substr(0, colon)).ok()) {
      return Status::InvalidArgument(
          "server.workspace_keys: each entry is WORKSPACE:KEY, a workspace name (lower-case "
          "letters, digits, - and _) and its key");
    }
  }
  if (c.search.fact_seed_share + c.search.passage_seed_share > 1)
    return Status::InvalidArgument(
        "search.fact_seed_share and search.passage_seed_share must sum to at most 1");
  {
    const auto& l = c.local_search;
    if (l.chunk_share + l.relationship_share + l.report_share > 1.0 + 1e-9) {
      return Status::InvalidArgument("local_search's shares must sum to at most 1");
    }
  }
  return Status::Ok();
}

std::string LogicalModel(const std::string& model, const std::vector<EndpointConfig>& endpoints) {
  if (!model.empty() || endpoints.empty()) return model;
  const std::string& first = endpoints.front().model;
  for (const EndpointConfig& e : endpoints) {
    if (e.model != first) return "";
  }
  return first;
}

namespace {
int64_t SumConcurrency(const std::vector<EndpointConfig>& endpoints, int64_t fallback) {
  if (endpoints.empty()) return fallback;
  int64_t total = 0;
  for (const EndpointConfig& e : endpoints) total += e.concurrency > 0 ? e.concurrency : fallback;
  return total;
}
}  // namespace

int64_t LlmConcurrency(const Config& c) {
  return SumConcurrency(c.llm.endpoints, c.llm.concurrency);
}

Status CheckOfferedModel(const Config& c, std::string_view model) {
  const std::vector<std::string>& offered = c.server.query_models;
  if (std::find(offered.begin(), offered.end(), model) != offered.end()) return Status::Ok();
  if (offered.empty()) {
    return Status::InvalidArgument(
        "this server does not let a request choose its model (server.query_models is empty)");
  }
  std::string list;
  for (const std::string& m : offered) list += (list.empty() ? "" : ", ") + m;
  return Status::InvalidArgument("the model \"" + std::string(model) +
                                 "\" is not offered here (server.query_models: " + list + ")");
}

int64_t LlmConcurrency(const Config& c, std::string_view role) {
  const LlmRoleConfig* r = c.llm.Role(role);
  if (r == nullptr || r->empty()) return LlmConcurrency(c);
  const int64_t each = r->concurrency > 0 ? r->concurrency : c.llm.concurrency;
  if (!r->endpoints.empty()) return SumConcurrency(r->endpoints, each);
  if (!r->base_url.empty()) return each;
  return SumConcurrency(c.llm.endpoints, each);
}

int64_t EmbeddingConcurrency(const Config& c) {
  return SumConcurrency(c.embeddings.endpoints, c.llm.concurrency);
}

std::string Config::Resolve(const std::string& path) const {
  if (path.empty()) return path;
  fs::path p(path);
  if (p.is_absolute()) return p.string();
  return (fs::path(root) / p).lexically_normal().string();
}

std::string Config::ReadIndexLocation() const {
  return store.read_url.empty() ? IndexLocation() : store.read_url;
}

std::string Config::IndexLocation() const {
  return store.url.empty() ? Resolve(store.path) : store.url;
}

std::string Config::IndexLabel() const {
  return store.url.empty() ? Resolve(store.path) : RedactUrlPassword(store.url);
}

bool IsPostgresUrl(std::string_view location) {
  return location.starts_with("postgresql://") || location.starts_with("postgres://");
}

std::string RedactUrlPassword(std::string_view url) {
  std::string out(url);
  // scheme://user:secret@host/... -> scheme://user@host/...
  const size_t scheme = out.find("://");
  if (scheme != std::string::npos) {
    const size_t start = scheme + 3;
    const size_t end = out.find_first_of("/?", start);
    const size_t at = out.rfind('@', end == std::string::npos ? out.size() : end);
    if (at != std::string::npos && at >= start) {
      const size_t colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) out.erase(colon, at - colon);
    }
  }
  // ...?password=secret&... -> the parameter dropped
  for (size_t p = out.find("password="); p != std::string::npos; p = out.find("password=", p)) {
    if (p == 0 || (out[p - 1] != '?' && out[p - 1] != '&')) {
      ++p;
      continue;
    }
    const size_t end = out.find('&', p);
    if (end == std::string::npos) {
      out.erase(p - 1);  // with its ? or &
      break;
    }
    out.erase(p, end + 1 - p);
  }
  return out;
}

std::vector<SettingInfo> ListSettings(const Config& config) {
  Config copy = config;  // Settings() needs mutable references; reading a copy keeps this const
  std::vector<SettingInfo> out;
  for (const auto& s : Settings(copy)) {
    out.push_back({s.key, s.env, s.help, Render(s.ref), AllowedText(s.allowed)});
  }
  return out;
}

Status ApplySetting(Config& config, const std::string& key, const std::string& value) {
  for (const auto& s : Settings(config)) {
    if (key == s.key) {
      return ParseText(s, value);
    }
  }
  return Status::InvalidArgument("unknown setting \"" + key + "\" (see `grag config`)");
}

std::optional<std::string> ProcessEnv(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

Status ApplyConfigFile(Config& config, const std::string& file) {
  toml::table table;
  try {
    table = toml::parse_file(file);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    return Status::InvalidArgument(file + ":" + std::to_string(where.line) + ":" +
                                   std::to_string(where.column) + ": " +
                                   std::string(e.description()));
  }
  auto settings = Settings(config);
  // Every key in the file must be known: a typo silently ignored costs a whole index run.
  std::vector<std::string> unknown;
  auto check = [&](const std::string& full, const toml::node& n) {
    bool known = false;
    for (const auto& s : settings) {
      if (full == s.key) {
        known = true;
        auto st = FromToml(s, n, file + ":" + std::to_string(n.source().begin.line));
        if (!st.ok()) unknown.push_back("!" + st.message());
      }
    }
    if (!known) unknown.push_back(full + " (line " + std::to_string(n.source().begin.line) + ")");
  };
  // Tables nest as deep as the keys do ("extraction.nlp.min_node_freq").
  std::function<void(const toml::table&, const std::string&)> walk =
      [&](const toml::table& t, const std::string& prefix) {
        t.for_each([&](const toml::key& k, const toml::node& node) {
          const std::string full = prefix + std::string(k.str());
          if (const auto* sub = node.as_table()) {
            walk(*sub, full + ".");
          } else {
            check(full, node);
          }
        });
      };
  walk(table, "");
  for (const auto& u : unknown) {
    if (u[0] == '!') return Status::InvalidArgument(u.substr(1));
  }
  if (!unknown.empty()) {
    return Status::InvalidArgument(file + ": unknown setting " + unknown[0] +
                                   " (run `grag config` to list the settings)");
  }
  return Status::Ok();
}

Result<Config> LoadConfig(const std::string& root, const std::string& config_file,
                          const EnvLookup& env) {
  Config config;
  config.root = root.empty() ? "." : root;
  std::error_code ec;
  if (!fs::is_directory(config.root, ec)) {
    return Status::NotFound("project folder " + config.root + " does not exist");
  }
  std::string file = config_file;
  if (file.empty()) {
    const auto def = fs::path(config.root) / "grag.toml";
    if (fs::exists(def, ec)) file = def.string();
  } else if (!fs::exists(file, ec)) {
    return Status::NotFound("config file " + file + " does not exist");
  }
  if (!file.empty()) GRAG_RETURN_IF_ERROR(ApplyConfigFile(config, file));
  for (const auto& s : Settings(config)) {
    if (s.env[0] == '\0') continue;
    if (auto v = env(s.env); v && !v->empty()) {
      GRAG_RETURN_IF_ERROR(ParseText(s, *v).WithContext(std::string("environment ") + s.env));
    }
  }
  if (config.llm.api_key.empty()) {
    if (auto v = env("OPENAI_API_KEY"); v) config.llm.api_key = *v;
  }
  GRAG_RETURN_IF_ERROR(ValidateConfig(config).WithContext(file.empty() ? "configuration" : file));
  return config;
}

std::string RenderConfigFile(const Config& config) {
  std::string out =
      "# grag configuration.\n"
      "# Precedence: built-in defaults < this file < environment variables < command-line flags.\n"
      "# Relative paths are relative to the folder holding this file (the project root).\n"
      "# Every setting is listed with its default; uncomment and edit to change one.\n"
      "# `grag config` prints the values in force.\n";
  std::string section;
  for (const auto& s : ListSettings(config)) {
    const auto dot = s.key.find('.');
    const std::string sec = dot == std::string::npos ? "" : s.key.substr(0, dot);
    const std::string name = dot == std::string::npos ? s.key : s.key.substr(dot + 1);
    if (sec != section) {
      out += "\n[" + sec + "]\n";
      section = sec;
    }
    out += "# " + s.help;
    if (!s.env.empty()) out += " (env " + s.env + ")";
    out += "\n";
    out += "# " + name + " = " + s.value_text + "\n";
  }
  return out;
}

std::string RenderSettingsReference() {
  const Config defaults;
  auto cell = [](std::string text) {
    std::string out;
    for (char ch : text) {
      if (ch == '|') {
        out += "\\|";
      } else if (ch == '\n') {
        out += ' ';
      } else {
        out += ch;
      }
    }
    return out;
  };
  std::string out;
  std::string section = "\x01";
  for (const auto& s : ListSettings(defaults)) {
    const auto dot = s.key.find('.');
    const std::string sec = dot == std::string::npos ? "" : s.key.substr(0, dot);
    if (sec != section) {
      out += section == "\x01" ? "" : "\n";
      out += sec.empty() ? "### Top level\n\n" : "### `[" + sec + "]`\n\n";
      out += "| setting | default | allowed | env | meaning |\n|---|---|---|---|---|\n";
      section = sec;
    }
    out += "| `" + s.key + "` | `" + cell(s.value_text) + "` | " + cell(s.allowed) + " | " +
           (s.env.empty() ? "" : "`" + s.env + "`") + " | " + cell(s.help) + " |\n";
  }
  return out;
}

}  // namespace grag
