// The settings table's types, shared by the table (settings_table.cpp) and what is generated
// from it (config.cpp: loading, --set, validation, `grag config`, the reference). Private to
// the core module.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "grag/config.h"

namespace grag::config_internal {

using ValueRef = std::variant<std::string*, int64_t*, double*, bool*, std::vector<std::string>*,
                              std::vector<EndpointConfig>*>;

// The values a setting takes: a number range or a list of words. ValidateConfig checks every
// setting against its own, and the reference (docs/configuration.md, `grag config --reference`)
// shows it; only checks that relate two settings are written out in ValidateConfig.
struct Allowed {
  std::optional<double> min, max;
  bool min_exclusive = false;
  bool max_exclusive = false;
  std::vector<std::string_view> words;  // a text setting: one of these ("" allowed when listed)

  bool empty() const { return !min && !max && words.empty(); }
};
inline Allowed AtLeast(double min) { return {min, std::nullopt, false, false, {}}; }
inline Allowed Above(double min) { return {min, std::nullopt, true, false, {}}; }
inline Allowed Between(double min, double max) { return {min, max, false, false, {}}; }
inline Allowed OneOf(std::initializer_list<std::string_view> words) {
  return {std::nullopt, std::nullopt, false, false, words};
}

struct Setting {
  const char* key;
  const char* env;
  const char* help;
  ValueRef ref;
  Allowed allowed = {};
};

// The one declaration of every setting, pointing into `c`. Defaults live in the structs in
// config.h.
std::vector<Setting> Settings(Config& c);

}  // namespace grag::config_internal
