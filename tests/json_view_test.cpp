// JsonView against nlohmann's json::parse, and ParseExtractionReply against the nlohmann-based
// parser it replaced: the same texts accepted, the same values, the same mentions, on the stored
// fuzz inputs, hand-written tricky texts and random replies with their mutations.
#include "grag/json_view.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "grag/extract.h"
#include "llm/model_common.h"
#include "llm/wire.h"

namespace grag {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// ---- the references ----

// The view as nlohmann's tree, numbers of the same type (dump tells 1 from 1.0).
json ToJson(const JsonView& v) {
  switch (v.kind()) {
    case JsonView::Kind::kNull:
      return nullptr;
    case JsonView::Kind::kBool:
      return v.Bool();
    case JsonView::Kind::kNumber: {
      const JsonView::Number n = v.GetNumber();
      if (n.type == JsonView::Number::Type::kUnsigned) return n.u;
      if (n.type == JsonView::Number::Type::kInteger) return n.i;
      return n.d;
    }
    case JsonView::Kind::kString:
      return v.String();
    case JsonView::Kind::kArray: {
      json a = json::array();
      JsonView::Cursor c(v);
      JsonView e;
      while (c.NextElement(&e)) a.push_back(ToJson(e));
      EXPECT_EQ(a.size(), v.size());
      return a;
    }
    case JsonView::Kind::kObject: {
      json o = json::object();
      JsonView::Cursor c(v);
      std::string_view key;
      JsonView m;
      while (c.NextMember(&key, &m)) o[std::string(key)] = ToJson(m);  // the last one wins
      for (const auto& [k, value] : o.items()) {
        EXPECT_EQ(ToJson(*v.Find(k)).dump(), value.dump()) << k;
      }
      return o;
    }
  }
  return nullptr;
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Every string literal's `canonical` answer must be right when it says yes.
size_t CheckCanonical(const JsonView& v) {
  size_t canonical_seen = 0;
  if (v.is_string()) {
    bool canonical = true;
    const std::string value = v.String(&canonical);
    if (canonical) {
      std::string written;
      llm_internal::AppendJsonString(written, value);
      EXPECT_EQ(written, v.raw());
      ++canonical_seen;
    }
  }
  JsonView::Cursor c(v);
  JsonView e;
  std::string_view key;
  if (v.is_array()) {
    while (c.NextElement(&e)) canonical_seen += CheckCanonical(e);
  } else if (v.is_object()) {
    while (c.NextMember(&key, &e)) canonical_seen += CheckCanonical(e);
  }
  return canonical_seen;
}

// Whether the view reads `text` as nlohmann does. Returns whether it is valid JSON.
bool SameAsNlohmann(std::string_view text) {
  const json expected = json::parse(text, nullptr, false);
  const std::optional<JsonView> view = ParseJsonView(text);
  EXPECT_EQ(view.has_value(), !expected.is_discarded()) << "text: " << text;
  if (!view || expected.is_discarded()) return false;
  EXPECT_EQ(Dump(ToJson(*view)), Dump(expected)) << "text: " << text;
  CheckCanonical(*view);
  JsonIndex index;  // the same, stepping over values through the index
  const std::optional<JsonView> indexed = ParseJsonView(text, &index);
  EXPECT_TRUE(indexed.has_value()) << "text: " << text;
  if (indexed) {
    EXPECT_EQ(Dump(ToJson(*indexed)), Dump(expected)) << "text: " << text;
  }
  return true;
}

// ParseExtractionReply as it was, on nlohmann's tree.
namespace reference {

std::string Trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string Text(const json& obj, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    auto it = obj.find(n);
    if (it == obj.end() || it->is_null()) continue;
    if (it->is_string()) return Trim(it->get<std::string>());
    if (it->is_number()) return it->dump();
  }
  return {};
}

double Strength(const json& obj) {
  for (const char* n : {"strength", "weight", "relationship_strength"}) {
    auto it = obj.find(n);
    if (it == obj.end()) continue;
    double v = 1;
    if (it->is_number()) {
      v = it->get<double>();
    } else if (it->is_string()) {
      v = std::strtod(it->get<std::string>().c_str(), nullptr);
    } else {
      continue;
    }
    if (!std::isfinite(v) || v <= 0) return 1;
    return std::clamp(v, 1.0, 10.0);
  }
  return 1;
}

std::optional<json> FindObject(std::string_view reply) {
  auto try_parse = [](std::string_view text) -> std::optional<json> {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    return j;
  };
  if (auto j = try_parse(reply)) return j;
  if (auto fence = reply.find("```"); fence != std::string_view::npos) {
    auto start = reply.find('\n', fence);
    auto end = start == std::string_view::npos ? start : reply.find("```", start);
    if (end != std::string_view::npos) {
      if (auto j = try_parse(reply.substr(start + 1, end - start - 1))) return j;
    }
  }
  const auto open = reply.find('{');
  const auto close = reply.rfind('}');
  if (open != std::string_view::npos && close != std::string_view::npos && close > open) {
    if (auto j = try_parse(reply.substr(open, close - open + 1))) return j;
  }
  return std::nullopt;
}

Result<ParsedExtraction> ParseExtractionReply(std::string_view reply) {
  auto obj = FindObject(reply);
  if (!obj || (!obj->contains("entities") && !obj->contains("relationships"))) {
    return Status::Parse("the reply holds no JSON object with \"entities\" or \"relationships\"");
  }
  ParsedExtraction out;
  if (auto it = obj->find("entities"); it != obj->end() && it->is_array()) {
    for (const auto& e : *it) {
      if (!e.is_object()) continue;
      EntityMention m;
      m.name = Text(e, {"name", "entity_name", "entity", "title"});
      m.name_key = NormalizeEntityName(m.name);
      if (m.name_key.empty()) continue;
      m.type = Lower(Text(e, {"type", "entity_type", "category"}));
      m.description = Text(e, {"description", "entity_description", "summary"});
      out.entities.push_back(std::move(m));
    }
  }
  if (auto it = obj->find("relationships"); it != obj->end() && it->is_array()) {
    for (const auto& r : *it) {
      if (!r.is_object()) continue;
      RelationshipMention m;
      m.source = Text(r, {"source", "source_entity", "from", "head"});
      m.target = Text(r, {"target", "target_entity", "to", "tail"});
      m.source_key = NormalizeEntityName(m.source);
      m.target_key = NormalizeEntityName(m.target);
      if (m.source_key.empty() || m.target_key.empty() || m.source_key == m.target_key) continue;
      m.description = Text(r, {"description", "relationship_description", "relationship"});
      m.strength = Strength(r);
      out.relationships.push_back(std::move(m));
    }
  }
  return out;
}

}  // namespace reference

std::string Describe(const Result<ParsedExtraction>& r) {
  if (!r.ok()) return "error " + r.status().ToString();
  std::ostringstream s;
  for (const EntityMention& e : r->entities) {
    s << "E[" << e.name << "|" << e.name_key << "|" << e.type << "|" << e.description << "]\n";
  }
  for (const RelationshipMention& m : r->relationships) {
    s << "R[" << m.source << "|" << m.target << "|" << m.source_key << "|" << m.target_key << "|"
      << m.description << "|" << fmt::format("{}", m.strength) << "]\n";
  }
  return s.str();
}

// Whether the new parser reads `reply` as the old one did. Returns whether the reply parsed.
bool SameExtraction(std::string_view reply) {
  const Result<ParsedExtraction> expected = reference::ParseExtractionReply(reply);
  const Result<ParsedExtraction> got = ParseExtractionReply(reply);
  EXPECT_EQ(Describe(got), Describe(expected)) << "reply: " << reply;
  return expected.ok();
}

std::vector<std::string> Corpus(const std::string& target) {
  std::vector<std::string> out;
  const fs::path dir = fs::path(GRAG_SOURCE_DIR) / "tests/fuzz/corpus" / target;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    out.push_back(bytes.str());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Texts that probe one rule each.
const std::vector<std::string>& TrickyTexts() {
  static const std::vector<std::string> texts = {
      "",
      " ",
      "{}",
      "[]",
      "  {} ",
      "{} x",
      "{}{}",
      "{,}",
      "{\"a\":1,}",
      "[1,]",
      "[,1]",
      "[1 2]",
      "{\"a\" 1}",
      "{\"a\":}",
      "{1:2}",
      "{'a':1}",
      "null",
      "true",
      "false",
      "nul",
      "tru",
      "truex",
      "[true,false,null]",
      "\"just a string\"",
      "0",
      "-0",
      "-",
      "01",
      "1.",
      ".5",
      "1.5",
      "1e5",
      "1E+5",
      "1e-5",
      "1e",
      "1e+",
      "-1.5e-3",
      "1e400",
      "-1e400",
      "1e-400",
      "0.0000001e-320",
      "18446744073709551615",
      "18446744073709551616",
      "-9223372036854775808",
      "-9223372036854775809",
      "123456789012345678901234567890",
      std::string("1").append(400, '0'),
      std::string("0.").append(400, '0').append("1"),
      "1.7976931348623157e308",
      "1.7976931348623159e308",
      "4.9e-324",
      "2.4e-324",
      "[1,-0,-0.0,0e0,1E2,2.50]",
      "{\"a\":\"\\u0000\"}",
      "\"\\u00e9\\u00E9\"",
      "\"\\ud83d\\ude00\"",
      "\"\\ud83d\"",
      "\"\\ude00\"",
      "\"\\ud83dx\"",
      "\"\\ud83d\\u0041\"",
      "\"\\u12\"",
      "\"\\x41\"",
      "\"\\/\"",
      "\"a\\\"b\\\\c\\bd\\fe\\nf\\rg\\th\"",
      "\"\\u001f\\u001F\\u0008\\u000a\\u0020\\u0022\\u005c\"",
      "\"tab\there\"",
      "\"nl\nhere\"",
      "\"\x7f\"",
      "\"caf\xc3\xa9\"",
      "\"\xc3\"",
      "\"\xc0\xaf\"",
      "\"\xe0\x80\xaf\"",
      "\"\xed\xa0\x80\"",
      "\"\xf4\x90\x80\x80\"",
      "\"\xf0\x9f\x98\x80\"",
      "\"\xff\"",
      "\xef\xbb\xbf{}",
      "\xef\xbb{}",
      "\xef{}",
      " \xef\xbb\xbf{}",
      "\xef\xbb\xbf",
      "{\"a\":1,\"a\":2}",
      "{\"a\":{\"b\":[1,{\"c\":\"}\"}]},\"a\":[]}",
      "[[[[[[[[[[]]]]]]]]]]",
      // Deep, but not so deep that nlohmann's recursive dump and destructor (the reference)
      // overflow the stack of a sanitizer build (5,000 levels did).
      std::string(500, '[') + std::string(500, ']'),
      std::string(500, '[') + std::string(499, ']'),
      "{\"k\\u0065y\":1,\"key\":2}",
      "{\"key\":1,\"k\\u0065y\":2}",
      "{\"\":0}",
      "[\"\\\\\"]",
      "{\"a\":\"x\\\\\",\"b\":\"}\"}",
      "{\"a\":1}\n",
      "\t{\"a\":1}\r\n",
      "{\"a\":1}\v",
      std::string("{\"a\":1}\0", 8),
      std::string("\"a\0b\"", 5),
      "[1,2,3]x",
      "{\"a\":1 \"b\":2}",
  };
  return texts;
}

TEST(JsonViewTest, TrickyTextsReadAsNlohmannReadsThem) {
  size_t valid = 0;
  for (const std::string& t : TrickyTexts()) valid += SameAsNlohmann(t);
  EXPECT_GT(valid, 30u);
}

TEST(JsonViewTest, StoredFuzzInputsReadAsNlohmannReadsThem) {
  size_t valid = 0;
  size_t texts = 0;
  for (const char* target : {"extraction_reply", "chat_wire", "map_reply", "report_reply"}) {
    for (const std::string& t : Corpus(target)) {
      valid += SameAsNlohmann(t);
      ++texts;
      // Also the object inside, where the reply has prose around it.
      const size_t open = t.find('{');
      const size_t close = t.rfind('}');
      if (open != std::string::npos && close != std::string::npos && close > open) {
        valid += SameAsNlohmann(std::string_view(t).substr(open, close - open + 1));
        ++texts;
      }
    }
  }
  EXPECT_GT(valid, texts / 10) << valid << " of " << texts;
}

TEST(JsonViewTest, EveryCutAndByteFlipOfAReplyReadsAsNlohmannReadsIt) {
  const std::string reply =
      R"({"entities":[{"name":"A \"q\" \u00e9\ud83d\ude00","type":"person","n":-1.5e3}],)"
      R"("relationships":[{"source":"A","target":"B","strength":"7"},null,[1,{}]],"x":[true,false]})";
  for (size_t cut = 0; cut <= reply.size(); ++cut) SameAsNlohmann(reply.substr(0, cut));
  for (size_t i = 0; i < reply.size(); ++i) {
    for (char c : {'"', '\\', '{', '}', '[', ']', ',', ':', ' ', '0', 'e', '-', '\x01', '\xc3'}) {
      std::string t = reply;
      t[i] = c;
      SameAsNlohmann(t);
      t = reply;
      t.insert(i, 1, c);
      SameAsNlohmann(t);
    }
    std::string t = reply;
    t.erase(i, 1);
    SameAsNlohmann(t);
  }
}

// On random JSON (long and short strings of printable ASCII, escapes written two ways, \u
// escapes, control and non-ASCII bytes, keys and values, nested objects and arrays, whitespace)
// and on corrupted copies of it, the view gives what nlohmann gives: the same value, or nothing
// for both.
TEST(JsonViewTest, RandomJsonReadsAsNlohmannReadsIt) {
  std::mt19937 rng(11);
  const std::vector<std::string> pieces = {"a",
                                           "word ",
                                           "\\\"",
                                           "\\\\",
                                           "\\/",
                                           "\\n",
                                           "\\r",
                                           "\\t",
                                           "\\b",
                                           "\\f",
                                           "\\u0041",
                                           "\\u00e9",
                                           "\\ud83d\\ude00",
                                           "é",
                                           "\x7f",
                                           "\x01",
                                           "\t",
                                           "\\x",
                                           "\\",
                                           "\\u12",
                                           "{",
                                           "}",
                                           ":",
                                           ",",
                                           "[",
                                           "\xFF",
                                           "\xC3"};
  // A string literal: printable text, with the two-character escapes (the strings the fast path
  // takes) or with any piece; sometimes long.
  const std::vector<std::string> plain = {"\\\"", "\\\\", "\\/", "\\n",  "\\r",
                                          "\\t",  "\\b",  "\\f", "\x7f", " "};
  auto literal = [&] {
    const std::vector<std::string>& extra = rng() % 2 ? plain : pieces;
    std::string s = "\"";
    const size_t n = rng() % 3 == 0 ? 200 + rng() % 400 : rng() % 40;
    while (s.size() < n) {
      if (rng() % (&extra == &plain ? 8 : 60) == 0) {
        s += extra[rng() % extra.size()];
      } else {
        s += static_cast<char>(0x20 + rng() % 0x5F);
        if (s.back() == '"' || s.back() == '\\') s.back() = 'q';
      }
    }
    if (&extra == &plain && s.size() > 1 && rng() % 6 == 0) {  // one byte it must not take
      const std::string bad[] = {"\x01", "\x1f", "\t", "\xC3\xA9", "\\u0041", "\\x"};
      s.insert(1 + rng() % (s.size() - 1), bad[rng() % std::size(bad)]);
    }
    return s + "\"";
  };
  auto space = [&] { return std::string(rng() % 4 == 0 ? " \n\t\r" : "").substr(0, rng() % 5); };
  std::function<std::string(int)> value = [&](int depth) -> std::string {
    const int kind = depth > 3 ? static_cast<int>(rng() % 3) : static_cast<int>(rng() % 5);
    if (kind == 0) return literal();
    if (kind == 1) return std::to_string(static_cast<int>(rng() % 1000) - 500);
    if (kind == 2) return rng() % 2 ? "true" : "null";
    std::string out = kind == 3 ? "{" : "[";
    const size_t n = rng() % 5;
    for (size_t i = 0; i < n; ++i) {
      if (i > 0) out += "," + space();
      if (kind == 3) out += literal() + space() + ":" + space();
      out += value(depth + 1) + space();
    }
    return out + (kind == 3 ? "}" : "]");
  };
  size_t parsed = 0;
  size_t discarded = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string text = space() + value(0) + space();
    if (i % 3 == 2 && !text.empty()) {  // corrupt a byte
      const std::string junk = "\"\\:,{}[] x\x01";
      text[rng() % text.size()] = junk[rng() % junk.size()];
    }
    if (!SameAsNlohmann(text)) {
      ++discarded;
      continue;
    }
    ++parsed;
  }
  EXPECT_GT(parsed, 1000u);
  EXPECT_GT(discarded, 500u);
}

TEST(JsonViewTest, CanonicalStringsAreSeen) {
  auto v = ParseJsonView(R"(["plain \"quoted\" \\ \n\t\u001f", "\/", "\u00e9", "\u0008"])");
  ASSERT_TRUE(v);
  JsonView::Cursor c(*v);
  JsonView s;
  std::vector<bool> canonical;
  while (c.NextElement(&s)) {
    bool k = true;
    s.String(&k);
    canonical.push_back(k);
  }
  EXPECT_EQ(canonical, (std::vector<bool>{true, false, false, false}));
}

// ---- ParseExtractionReply against the old parser ----

TEST(ExtractionReplyDifferentialTest, TrickyReplies) {
  const std::vector<std::string> replies = {
      R"({"entities":[{"name":"Scrooge","type":"PERSON","description":"miser"}]})",
      "Here you go:\n```json\n{\"entities\":[{\"name\":\"A\"}]}\n```\nDone.",
      "```\n{\"entities\":[{\"name\":\"A\"}]}\n```",
      "```json {\"entities\":[]}```",
      "```json\n{\"entities\":[{\"name\":\"A\"}]",
      "Sure! {\"relationships\":[{\"source\":\"A\",\"target\":\"B\"}]} Hope this helps.",
      "{\"entities\": [{\"name\": \"{not a brace}\"}]} and {\"x\": 1}",
      "{\"a\":1} {\"entities\":[]}",
      R"({"entities":[{"name":"A \"B\" C","description":"x \\ y \u00e9 \ud83d\ude00 \/"}]})",
      R"({"entities":[{"name":"  padded\t","type":" Geo ","description":"\n d \n"}]})",
      R"({"entities":[{"name":42,"type":7.50,"description":1e2},{"name":-0},{"name":1.0}]})",
      R"({"entities":[{"name":18446744073709551616,"description":123456789012345678901}]})",
      R"({"entities":[{"name":null,"entity_name":"B"},{"name":true,"entity":"C"},{"title":"D"}]})",
      R"({"entities":[{"name":["x"],"entity_name":{"a":1},"entity":"E","type":null,"category":"c"}]})",
      R"({"entities":[{"entity_type":"t","name":"F","summary":"s","entity_description":"ed"}]})",
      R"({"entities":[{"name":"G","name":"H"}],"entities":[{"name":"I"}]})",
      R"({"entities":[{"name":"J"},{"name":"J"},{"name":"j."},"K",5,null,[],{"name":""}]})",
      R"({"entities":{"name":"L"},"relationships":"none"})",
      R"({"entities":null})",
      R"({"relationships":null})",
      R"({"Entities":[{"name":"M"}]})",
      R"({"relationships":[{"source":"A","target":"B","strength":"7"},
          {"source":"A","target":"B","strength":" 8.5xyz"},{"source":"A","target":"B","strength":"x"},
          {"source":"A","target":"B","strength":0},{"source":"A","target":"B","strength":-3},
          {"source":"A","target":"B","strength":99},{"source":"A","target":"B","strength":1e300},
          {"source":"A","target":"B","strength":null,"weight":4},
          {"source":"A","target":"B","strength":true,"weight":"5"},
          {"source":"A","target":"B","strength":[],"relationship_strength":6.25},
          {"source":"A","target":"B","strength":"inf"},{"source":"A","target":"B","strength":"nan"},
          {"source":"A","target":"B","strength":"1e999"},{"source":"A","target":"B","strength":"0x1A"},
          {"source":"A","target":"B","strength":"\u0000 9"},{"source":"A","target":"B","strength":2.5e-320},
          {"source":"A","target":"B","strength":18446744073709551615},
          {"source":"A","target":"B","strength":-9223372036854775808}]})",
      R"({"relationships":[{"source_entity":"A","target_entity":"B","relationship_description":"d"},
          {"from":"A","to":"B","relationship":"r"},{"head":"A","tail":"B"},{"source":"A","target":"a."},
          {"source":"A"},{"target":"B"},{"source":"","target":"B"},{"source":"A","target":"B","description":5}]})",
      "{\"entities\":[{\"name\":\"bad \xff utf8\"}]}",
      "{\"entities\":[{\"name\":\"A\"}]} trailing } brace",
      "{\"entities\":[{\"name\":\"A\"}],}",
      "{\"entities\":[{\"name\":\"A\"}]",
      "\xef\xbb\xbf{\"entities\":[{\"name\":\"BOM\"}]}",
      "I cannot do that",
      "",
      "{}",
      "{\"foo\": 1}",
      "[{\"entities\":[]}]",
      "{\"entities\": [",
  };
  for (const std::string& r : replies) SameExtraction(r);
}

TEST(ExtractionReplyDifferentialTest, StoredFuzzInputs) {
  size_t parsed = 0;
  const std::vector<std::string> corpus = Corpus("extraction_reply");
  for (const std::string& r : corpus) parsed += SameExtraction(r);
  EXPECT_GT(parsed, 100u) << parsed << " of " << corpus.size();
}

// Random replies in the shapes models write, then cut and mangled.
std::string RandomReply(std::mt19937& rng) {
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  const std::vector<std::string> names = {"\"Scrooge\"",
                                          "\"Bob Cratchit\"",
                                          "\" Tiny Tim \"",
                                          "\"Marley\\u2019s Ghost\"",
                                          "\"\\\"Fezziwig\\\"\"",
                                          "\"Lon{don}\"",
                                          "\"\"",
                                          "null",
                                          "42",
                                          "\"caf\xc3\xa9\"",
                                          "\"a\\\\b\"",
                                          "\"\\ud83d\\ude00\"",
                                          "true",
                                          "[]"};
  const std::vector<std::string> name_keys = {"name", "entity_name", "entity", "title", "label"};
  const std::vector<std::string> type_keys = {"type", "entity_type", "category", "kind"};
  const std::vector<std::string> desc_keys = {"description", "entity_description", "summary",
                                              "relationship_description", "relationship"};
  const std::vector<std::string> src_keys = {"source", "source_entity", "from", "head", "src"};
  const std::vector<std::string> dst_keys = {"target", "target_entity", "to", "tail", "dst"};
  const std::vector<std::string> str_keys = {"strength", "weight", "relationship_strength"};
  const std::vector<std::string> strengths = {
      "7",      "\"8\"", "10.5", "-1",   "0",       "\"x\"", "null", "2.25",       "1e2",
      "\" 3\"", "true",  "[1]",  "1E-2", "\"4.5\"", "9",     "-0.0", "\"\\u0036\""};
  const std::vector<std::string> texts = {"\"lives in London\"",
                                          "\"a \\\"quoted\\\" word\"",
                                          "\"tab\\there\"",
                                          "\"\"",
                                          "\"  \"",
                                          "7",
                                          "null",
                                          "\"{ } [ ] , :\"",
                                          "\"\\/slash\"",
                                          "\"caf\\u00e9\""};
  const std::vector<std::string> spaces = {"", " ", "\n", "\n  ", "\t"};
  auto member = [&](const std::string& key, const std::string& value) {
    std::string m = "\"";
    m.append(key).append("\"").append(pick(spaces)).append(":").append(pick(spaces)).append(value);
    return m;
  };
  std::string out = "{";
  const int sections = 1 + static_cast<int>(rng() % 3);
  for (int s = 0; s < sections; ++s) {
    if (s > 0) out.append(",").append(pick(spaces));
    const int kind = static_cast<int>(rng() % 4);
    if (kind == 3) {
      out += member(pick({"notes", "entities", "relationships"}), pick(texts));
      continue;
    }
    const bool entities = kind == 0 || (kind == 2 && rng() % 2);
    out.append(entities ? "\"entities\":" : "\"relationships\":").append(pick(spaces)).append("[");
    const int items = static_cast<int>(rng() % 5);
    for (int i = 0; i < items; ++i) {
      if (i > 0) out.append(",").append(pick(spaces));
      if (rng() % 10 == 0) {
        out += pick({"5", "\"x\"", "null", "[]"});
        continue;
      }
      out += "{";
      std::vector<std::string> members;
      if (entities) {
        members.push_back(member(pick(name_keys), pick(names)));
        if (rng() % 4)
          members.push_back(member(pick(type_keys), pick({"\"PERSON\"", "\"geo\"", "3", "null"})));
        if (rng() % 4) members.push_back(member(pick(desc_keys), pick(texts)));
      } else {
        members.push_back(member(pick(src_keys), pick(names)));
        members.push_back(member(pick(dst_keys), pick(names)));
        if (rng() % 4) members.push_back(member(pick(desc_keys), pick(texts)));
        if (rng() % 3) members.push_back(member(pick(str_keys), pick(strengths)));
      }
      if (rng() % 6 == 0) members.push_back(member(pick(name_keys), pick(names)));  // a repeat
      std::shuffle(members.begin(), members.end(), rng);
      for (size_t m = 0; m < members.size(); ++m) out += (m ? "," : "") + members[m];
      out += "}";
    }
    out += "]";
  }
  out += "}";
  switch (rng() % 5) {
    case 0:
      return "```json\n" + out + "\n```";
    case 1:
      return "Here is the JSON: " + out + "\nLet me know {if} you need more.";
    default:
      return out;
  }
}

TEST(ExtractionReplyDifferentialTest, RandomRepliesAndTheirMutations) {
  std::mt19937 rng(20261203);
  size_t parsed = 0;
  size_t replies = 0;
  for (int n = 0; n < 3000; ++n) {
    std::string reply = RandomReply(rng);
    parsed += SameExtraction(reply);
    SameAsNlohmann(reply);
    ++replies;
    for (int m = 0; m < 3; ++m) {
      std::string t = reply;
      const size_t at = rng() % (t.size() + 1);
      switch (rng() % 4) {  // (rng() % 16 below picks the string's NUL too)
        case 0:
          t.resize(at);
          break;
        case 1:
          if (at < t.size()) t.erase(at, 1);
          break;
        case 2:
          t.insert(at, 1, "\"\\{}[],: 0e-\x01\xc3u"[rng() % 16]);
          break;
        default:
          if (at < t.size()) t[at] = "\"\\{}[],: 0e-\x01\xc3u"[rng() % 16];
      }
      parsed += SameExtraction(t);
      SameAsNlohmann(t);
      ++replies;
    }
  }
  EXPECT_GT(parsed, replies / 3) << parsed << " of " << replies;
}

// ---- ParseChatReply against the nlohmann-based one it replaced ----

namespace reference {

const json* Member(const json& object, const char* name) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string StringMember(const json& object, const char* name) {
  const json* m = Member(object, name);
  return m != nullptr && m->is_string() ? m->get<std::string>() : std::string();
}

std::optional<int64_t> CountMember(const json& object, const char* name) {
  const json* m = Member(object, name);
  if (m == nullptr || !m->is_number()) return std::nullopt;
  if (m->is_number_float()) {
    double d = m->get<double>();
    if (!std::isfinite(d) || d < 0) return std::nullopt;
    return static_cast<int64_t>(std::llround(d));
  }
  if (m->is_number_unsigned()) return static_cast<int64_t>(m->get<uint64_t>());
  return m->get<int64_t>();
}

void ReadUsage(const json& reply, std::optional<int64_t>* prompt,
               std::optional<int64_t>* completion) {
  const json* usage = Member(reply, "usage");
  if (usage == nullptr || !usage->is_object()) return;
  auto p = CountMember(*usage, "prompt_tokens");
  auto c = CountMember(*usage, "completion_tokens");
  if (!c) {
    auto total = CountMember(*usage, "total_tokens");
    if (total && p) c = std::max<int64_t>(0, *total - *p);
  }
  if (p) *prompt = p;
  if (c) *completion = c;
}

std::optional<std::string> ContentText(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_array()) {
    std::string text;
    for (const json& part : content) {
      if (part.is_string()) {
        text += part.get<std::string>();
      } else {
        text += StringMember(part, "text");
      }
    }
    return text;
  }
  return std::nullopt;
}

Result<llm_internal::ChatReply> ParseChatReply(std::string_view body) {
  using llm_internal::ErrorMessageFromBody;
  using llm_internal::Shorten;
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return Status::Parse("reply is not JSON: " + Shorten(body, 200));
  if (!j.is_object()) return Status::Parse("reply is not a JSON object: " + Shorten(body, 200));
  const json* choices = Member(j, "choices");
  if (choices == nullptr || !choices->is_array() || choices->empty()) {
    if (Member(j, "error") != nullptr) {
      return Status::Unavailable("server replied with an error: " + ErrorMessageFromBody(body));
    }
    return Status::Parse("reply has no choices: " + Shorten(body, 200));
  }
  const json& choice = (*choices)[0];
  llm_internal::ChatReply reply;
  reply.finish_reason = StringMember(choice, "finish_reason");
  reply.model = StringMember(j, "model");
  ReadUsage(j, &reply.prompt_tokens, &reply.completion_tokens);
  std::optional<std::string> content;
  const json* message = Member(choice, "message");
  if (message != nullptr) {
    if (const json* c = Member(*message, "content")) content = ContentText(*c);
  } else if (const json* text = Member(choice, "text")) {
    content = ContentText(*text);
  }
  if (!content) {
    std::string why;
    if (message != nullptr) {
      if (std::string refusal = StringMember(*message, "refusal"); !refusal.empty()) {
        return Status::Parse("model refused: " + Shorten(refusal, 300));
      }
      if (Member(*message, "tool_calls") != nullptr) why = ", tool calls instead";
    }
    if (!reply.finish_reason.empty()) why += ", finish_reason=" + reply.finish_reason;
    return Status::Parse("reply's content is missing or null" + why);
  }
  reply.content = std::move(*content);
  return reply;
}

}  // namespace reference

std::string Describe(const Result<llm_internal::ChatReply>& r) {
  if (!r.ok()) return "error " + r.status().ToString();
  auto count = [](const std::optional<int64_t>& c) { return c ? std::to_string(*c) : "none"; };
  return fmt::format("content={:?} prompt={} completion={} model={:?} finish={:?}", r->content,
                     count(r->prompt_tokens), count(r->completion_tokens), r->model,
                     r->finish_reason);
}

// Whether the new ParseChatReply reads `body` as the old one did, and the cache entry made from
// the content's literal is the one made by escaping the content. Returns whether it parsed.
bool SameChatReply(std::string_view body) {
  const auto expected = reference::ParseChatReply(body);
  const auto got = llm_internal::ParseChatReply(body);
  EXPECT_EQ(Describe(got), Describe(expected)) << "body: " << body;
  if (!got.ok()) return false;
  ChatResponse response;
  response.content = got->content;
  response.model = got->model;
  response.finish_reason = got->finish_reason;
  EXPECT_EQ(llm_internal::EncodeChatReply(response, got->content_json),
            llm_internal::EncodeChatReply(response))
      << "body: " << body;
  return !got->content_json.empty();
}

TEST(ChatReplyDifferentialTest, TrickyBodies) {
  const std::vector<std::string> bodies = {
      R"({"id":"x","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi \"there\"\n\u0001"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}})",
      R"({"choices":[{"message":{"content":"\u00e9 \/ \u0041 \b\f\r\t \u0008"}}]})",
      R"({"choices":[{"message":{"content":[{"type":"text","text":"a"},"b",{"text":5},7]}}]})",
      R"({"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":3.6,"completion_tokens":-1,"total_tokens":10}})",
      R"({"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":18446744073709551615,"total_tokens":1e300}})",
      R"({"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":-5,"total_tokens":"7"}})",
      R"({"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":2,"total_tokens":1}})",
      R"({"choices":[{"message":{"content":"x"}}],"usage":[1]})",
      R"({"choices":[{"text":"old style","finish_reason":"stop"}]})",
      R"({"choices":[{"message":null,"text":"t"}]})",
      R"({"choices":[{"message":"str","text":"t","finish_reason":3}]})",
      R"({"choices":[{"message":{"refusal":"no"}}]})",
      R"({"choices":[{"message":{"content":null,"tool_calls":[{}]},"finish_reason":"tool_calls"}]})",
      R"({"choices":[{"message":{"content":1}}]})",
      R"({"choices":[],"error":{"message":"upstream failed","code":502}})",
      R"({"choices":null,"error":"boom"})",
      R"({"choices":{},"error":null})",
      R"({"choices":[5]})",
      R"({"choices":[{"message":{"content":"a"}},{"message":{"content":"b"}}]})",
      R"({"choices":[{"message":{"content":"a","content":"b"}}],"model":"x","model":"y"})",
      R"({"error":{"message":"bad key","type":"invalid_request_error"}})",
      "{}",
      "[]",
      "\"s\"",
      "",
      "<html>oops</html>",
      R"({"choices":[{"message":{"content":"x"}}]} x)",
  };
  for (const std::string& b : bodies) SameChatReply(b);
}

TEST(ChatReplyDifferentialTest, StoredFuzzInputsAndLongContents) {
  for (const std::string& b : Corpus("chat_wire")) SameChatReply(b);
  std::mt19937 rng(7);
  size_t literal_kept = 0;
  for (int i = 0; i < 300; ++i) {
    const std::string content = RandomReply(rng);
    json body = {{"id", "c"},
                 {"model", "m"},
                 {"choices",
                  {{{"index", 0},
                    {"message", {{"role", "assistant"}, {"content", content}}},
                    {"finish_reason", "stop"}}}},
                 {"usage", {{"prompt_tokens", 100}, {"completion_tokens", 50}}}};
    const std::string text =
        i % 2 ? body.dump() : body.dump(2, ' ', true);  // ASCII-only: \u escapes
    literal_kept += SameChatReply(text);
    for (int m = 0; m < 3; ++m) {
      std::string t = text;
      const size_t at = rng() % t.size();
      t[at] = "\"\\{}[],: 0u\x01"[rng() % 12];
      SameChatReply(t);
    }
  }
  EXPECT_GT(literal_kept, 100u);
}

}  // namespace
}  // namespace grag
