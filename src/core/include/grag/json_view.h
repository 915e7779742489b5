// Reading JSON in place, for the replies read on every model call (the chat envelope, an
// extraction's object): one validating pass over the text, then members and elements found by
// scanning it, with no tree of maps and strings built first. What it accepts, and the values it
// gives, are nlohmann's json::parse(text, nullptr, false)'s (tests/json_view_test.cpp compares
// the two), so code moved from nlohmann's tree to a view keeps its behaviour:
//   - strict RFC 8259 (no comments, no trailing commas, nothing after the value but whitespace,
//     or a NUL byte and anything), a leading UTF-8 byte order mark skipped, strings of valid
//     UTF-8 only, surrogates paired;
//   - numbers are unsigned, signed or floating point as nlohmann stores them, and a number that
//     overflows a double makes the text invalid;
//   - of repeated keys, the last one counts (Find).
// Everything here is a view of the caller's text, which must outlive it. Nothing throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace grag {

// Where each container and long string of a parsed text ends, noted by ParseJsonView's
// validating pass, so that reading steps over them at once instead of scanning them again.
// Views made with it point to it: it must outlive them, and not be reused while they live.
class JsonIndex {
 public:
  // The end of the value starting at `begin` when noted, else nullptr.
  const char* EndOf(const char* begin) const;

 private:
  friend std::optional<class JsonView> ParseJsonView(std::string_view, JsonIndex*);
  std::vector<std::pair<const char*, const char*>> ends_;  // by begin, ascending
};

class JsonView {
 public:
  enum class Kind : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };

  // A number as nlohmann stores it: unsigned when it is a non-negative integer that fits,
  // signed when a negative one fits, else floating point.
  struct Number {
    enum class Type : uint8_t { kUnsigned, kInteger, kFloat } type = Type::kUnsigned;
    uint64_t u = 0;
    int64_t i = 0;
    double d = 0;
    double AsDouble() const;  // nlohmann's get<double>()
  };

  JsonView() = default;

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }

  // The value's text, first byte to last (a string's quotes included).
  std::string_view raw() const { return raw_; }

  bool Bool() const { return raw_ == "true"; }  // kBool
  Number GetNumber() const;                     // kNumber
  // kString: the decoded value. `canonical`, when given, says whether the literal is exactly what
  // nlohmann's dump writes for that value (AppendJsonString), so it can be copied as it is.
  std::string String(bool* canonical = nullptr) const;

  // kObject: the value of the last member named `name` (decoded keys compared), or nullopt.
  std::optional<JsonView> Find(std::string_view name) const;
  // The member's value unless it is missing or null (what grag's readers treat alike).
  std::optional<JsonView> Member(std::string_view name) const;
  // kArray: the number of elements, and the first one.
  size_t size() const;
  std::optional<JsonView> Front() const;

  // Members of an object, or elements of an array, in text order.
  class Cursor {
   public:
    explicit Cursor(const JsonView& container);
    // The next member: its decoded key (valid until the next call) and value. false at the end.
    bool NextMember(std::string_view* key, JsonView* value);
    bool NextElement(JsonView* value);

   private:
    std::string_view text_;  // the container's inside
    const JsonIndex* index_ = nullptr;
    size_t pos_ = 0;
    std::string key_;  // a key with escapes, decoded
  };

 private:
  friend std::optional<JsonView> ParseJsonView(std::string_view text, JsonIndex* index);
  static JsonView At(std::string_view text, size_t pos, const JsonIndex* index, size_t* end);

  Kind kind_ = Kind::kNull;
  std::string_view raw_ = "null";
  const JsonIndex* index_ = nullptr;
};

// The value of `text` when nlohmann's json::parse(text) accepts it; nullopt when it does not.
// With an `index` (cleared first), reading the value's members and elements skips what it
// does not read in one step; without, by scanning it.
std::optional<JsonView> ParseJsonView(std::string_view text, JsonIndex* index = nullptr);

}  // namespace grag
