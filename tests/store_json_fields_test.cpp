// The store's JSON column readers (src/store/json_fields.cpp) read in place with JsonView; they
// must give exactly what the nlohmann-based readers they replaced gave, on valid, tricky and
// damaged text. The old readers are kept here, verbatim, as the reference.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "store/json_fields.h"

namespace grag::store {
namespace {

using nlohmann::json;

std::string OldCountsToJson(const std::map<std::string, int64_t>& counts) {
  json j = json::object();
  for (const auto& [key, n] : counts) j[key] = n;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string OldFindingsToJson(const std::vector<Finding>& findings) {
  json j = json::array();
  for (const Finding& f : findings) {
    j.push_back({{"summary", f.summary}, {"explanation", f.explanation}, {"entities", f.entities}});
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::map<std::string, int64_t> OldCountsFromJson(std::string_view text) {
  std::map<std::string, int64_t> out;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return out;
  for (const auto& [key, value] : j.items()) {
    if (value.is_number_integer()) out[key] = value.get<int64_t>();
  }
  return out;
}

std::vector<Finding> OldFindingsFromJson(std::string_view text) {
  std::vector<Finding> out;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return out;
  auto str = [](const json& obj, const char* key) {
    auto it = obj.find(key);
    return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  for (const json& item : j) {
    if (!item.is_object()) continue;
    Finding& f = out.emplace_back();
    f.summary = str(item, "summary");
    f.explanation = str(item, "explanation");
    auto ents = item.find("entities");
    if (ents != item.end() && ents->is_array()) {
      for (const json& e : *ents) {
        if (e.is_string()) f.entities.push_back(e.get<std::string>());
      }
    }
  }
  return out;
}

ReportBasis OldReportBasisFromJson(std::string_view text) {
  ReportBasis out;
  if (text.empty()) return out;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return out;
  auto members = j.find("members");
  auto weight = j.find("internal_weight");
  auto params = j.find("params");
  if (members == j.end() || !members->is_array() || weight == j.end() || !weight->is_number() ||
      params == j.end() || !params->is_string()) {
    return out;
  }
  for (const json& m : *members) {
    if (m.is_number_integer()) out.members.push_back(m.get<int64_t>());
  }
  out.internal_weight = weight->get<double>();
  out.params = params->get<std::string>();
  return out;
}

// Compares all three readers on one text (each reader gets every text: a findings text read as
// counts is just another damaged input).
void ExpectSame(std::string_view text) {
  SCOPED_TRACE(testing::Message() << "text: " << testing::PrintToString(std::string(text)));
  EXPECT_EQ(CountsFromJson(text), OldCountsFromJson(text));
  const std::vector<Finding> got = FindingsFromJson(text);
  const std::vector<Finding> want = OldFindingsFromJson(text);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].summary, want[i].summary) << i;
    EXPECT_EQ(got[i].explanation, want[i].explanation) << i;
    EXPECT_EQ(got[i].entities, want[i].entities) << i;
  }
  const ReportBasis b = ReportBasisFromJson(text);
  const ReportBasis ob = OldReportBasisFromJson(text);
  EXPECT_EQ(b.members, ob.members);
  // Bitwise: the same double, NaN never arises (overflow makes the text invalid).
  EXPECT_EQ(std::memcmp(&b.internal_weight, &ob.internal_weight, sizeof(double)), 0)
      << b.internal_weight << " vs " << ob.internal_weight;
  EXPECT_EQ(b.params, ob.params);
}

std::vector<std::string> Corpus() {
  std::vector<std::string> texts = {
      // what the store writes
      CountsToJson({{"PERSON", 3}, {"GEO", 1}, {"bad\xff key", 2}}),
      FindingsToJson({{"A summary", "An \"explanation\"\n\twith \\ escapes \x01 and é", {"X", "Y"}},
                      {"", "", {}},
                      {"bad \xc3 utf8", "ok", {"\xe2\x82\xac"}}}),
      ReportBasisToJson({{3, 7, 11}, 12.5, "params-fingerprint"}),
      ReportBasisToJson({{}, 0, "p"}),
      // tricky but valid
      R"({"PERSON": 3, "PERSON": 4})",
      R"({"PERSON": 3, "PERSON": "x"})",
      R"({"PERSON": "x", "PERSON": 5})",
      R"({"PERSON": 3.0, "GEO": -2, "ORG": 18446744073709551615, "E": 9223372036854775808})",
      R"({"a": 1e2, "b": -0, "c": 0, "d": true, "e": null, "f": [1], "g": {"h": 1}})",
      R"({"P\u0045RSON": 1, "\ud83d\ude00": 2, "": 3})",
      "\xEF\xBB\xBF{\"A\": 1}",
      std::string("{\"A\": 1}\0garbage", 16),
      " \t\r\n{\"A\" : 1 } \n",
      R"([{"summary": "s", "summary": "t", "explanation": 1, "entities": ["a", 2, null, "b"]}])",
      R"([{"summary": "s", "summary": 5}, 1, "x", [], {}, null])",
      R"([{"entities": ["a"], "entities": "no"}, {"entities": "no", "entities": ["b"]}])",
      R"([{"entities": ["a\u0000b", "\u00e9\u20ac", "\/\b\f\n\r\t"]}])",
      R"([{"summary": "\ud800\udc00", "explanation": "x\u001fy", "other": {"summary": "no"}}])",
      R"({"members": [1, 2.5, -3, "4", 18446744073709551615], "internal_weight": 7, "params": "p"})",
      R"({"members": [], "internal_weight": -1.5e-3, "params": ""})",
      R"({"members": [1], "internal_weight": 18446744073709551615, "params": "p"})",
      R"({"members": [1], "internal_weight": -9223372036854775808, "params": "p"})",
      R"({"members": [1], "internal_weight": 0.1, "params": "p", "params": 3})",
      R"({"members": [1], "internal_weight": 0.1, "params": 3, "params": "q"})",
      R"({"members": 1, "internal_weight": 0.1, "params": "p"})",
      R"({"members": [1], "internal_weight": "0.1", "params": "p"})",
      R"({"members": [1], "params": "p"})",
      R"({"members": [[1], {"a": 2}, 3], "internal_weight": 1e308, "params": "p"})",
      // damaged
      "",
      " ",
      "null",
      "[]",
      "{}",
      R"({"A": 1,})",
      R"([{"summary": "s"},])",
      R"({"A": 1} x)",
      R"({"A": 1e400})",
      R"({"members": [1], "internal_weight": 1e999, "params": "p"})",
      R"({"A": 01})",
      R"({"A": .5})",
      R"({'A': 1})",
      R"({"A": 1 /* c */})",
      R"([{"summary": "\ud800"}])",
      R"([{"summary": "\udc00\ud800"}])",
      R"([{"summary": "\x"}])",
      "[{\"summary\": \"a\tb\"}]",
      "[{\"summary\": \"\xc0\xaf\"}]",
      "[{\"summary\": \"\xed\xa0\x80\"}]",
      "[{\"summary\": \"\xf4\x90\x80\x80\"}]",
      "[{\"summary\": \"\xe2\x82\"}]",
      "\xEF\xBB{\"A\": 1}",
      R"({"A": NaN})",
      R"({"A": Infinity})",
      R"({"A": tru})",
  };
  return texts;
}

TEST(StoreJsonFields, SameAsNlohmannOnCorpus) {
  for (const std::string& text : Corpus()) ExpectSame(text);
}

// Every prefix of every text (a row cut short), and random byte changes.
TEST(StoreJsonFields, SameAsNlohmannOnDamagedText) {
  std::mt19937 rng(20261203);
  const std::string alphabet = "{}[]\",:\\ 0123456789.eE+-truefalsnul\x01\x7f\xc3\xa9\xff\xed";
  for (const std::string& text : Corpus()) {
    for (size_t n = 0; n < text.size(); ++n) ExpectSame(std::string_view(text).substr(0, n));
    for (int k = 0; k < 200 && !text.empty(); ++k) {
      std::string t = text;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits; ++e) {
        const size_t pos = rng() % t.size();
        switch (rng() % 3) {
          case 0:
            t[pos] = alphabet[rng() % alphabet.size()];
            break;
          case 1:
            t.erase(pos, 1);
            break;
          default:
            t.insert(pos, 1, alphabet[rng() % alphabet.size()]);
        }
        if (t.empty()) break;
      }
      ExpectSame(t);
    }
  }
}

// The writers write the bytes nlohmann's dump wrote: the stored text must not change.
TEST(StoreJsonFields, WritesWhatNlohmannWrote) {
  std::vector<std::string> strings = {"",
                                      "PERSON",
                                      "a\"b\\c/d",
                                      std::string("nul\0byte", 8),
                                      "\x01\x1f\x7f\b\f\n\r\t",
                                      "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
                                      "bad \xff",
                                      "\xc3",
                                      "\xe2\x82",
                                      "\xed\xa0\x80",
                                      "\xc0\xaf",
                                      "\xf4\x90\x80\x80",
                                      "long text with no escapes at all, 32+ bytes"};
  std::mt19937 rng(7);
  for (int k = 0; k < 300; ++k) {
    std::string t(rng() % 40, ' ');
    for (char& c : t) c = static_cast<char>(rng() % 3 == 0 ? rng() % 256 : 'a' + rng() % 26);
    strings.push_back(t);
  }
  EXPECT_EQ(CountsToJson({}), OldCountsToJson({}));
  EXPECT_EQ(FindingsToJson({}), OldFindingsToJson({}));
  std::map<std::string, int64_t> counts = {{"MIN", INT64_MIN}, {"MAX", INT64_MAX}, {"Z", 0}};
  std::vector<Finding> findings;
  for (size_t i = 0; i < strings.size(); ++i) {
    const std::string& s = strings[i];
    counts[s] = static_cast<int64_t>(i) - 5;
    EXPECT_EQ(CountsToJson({{s, 1}}), OldCountsToJson({{s, 1}})) << testing::PrintToString(s);
    const Finding f{s, strings[(i + 1) % strings.size()], {s, "", strings[i / 2]}};
    EXPECT_EQ(FindingsToJson({f}), OldFindingsToJson({f})) << testing::PrintToString(s);
    findings.push_back(f);
  }
  findings.push_back({"", "", {}});
  EXPECT_EQ(CountsToJson(counts), OldCountsToJson(counts));
  EXPECT_EQ(FindingsToJson(findings), OldFindingsToJson(findings));
}

// The writers' output reads back to what was written (valid UTF-8 in, the same out).
TEST(StoreJsonFields, RoundTrip) {
  const std::vector<Finding> findings = {{"s \"q\"", "e\n\x01", {"a", "b\\"}}, {"", "", {}}};
  const std::vector<Finding> back = FindingsFromJson(FindingsToJson(findings));
  ASSERT_EQ(back.size(), findings.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].summary, findings[i].summary);
    EXPECT_EQ(back[i].explanation, findings[i].explanation);
    EXPECT_EQ(back[i].entities, findings[i].entities);
  }
  const std::map<std::string, int64_t> counts = {{"PERSON", -3}, {"GEO", INT64_MAX}};
  EXPECT_EQ(CountsFromJson(CountsToJson(counts)), counts);
  const ReportBasis basis{{1, 2, 3}, 0.1, "p"};
  const ReportBasis rb = ReportBasisFromJson(ReportBasisToJson(basis));
  EXPECT_EQ(rb.members, basis.members);
  EXPECT_EQ(rb.internal_weight, basis.internal_weight);
  EXPECT_EQ(rb.params, basis.params);
}

}  // namespace
}  // namespace grag::store
