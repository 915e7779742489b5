// A deterministic, varied text corpus for the tokenizer parity test and benchmark: English
// prose, source code, CJK, emoji (ZWJ sequences, flags, skin tones, tags), combining marks, odd
// whitespace, numbers, contractions in every case, long repeated runs, every code point whose
// Unicode category PCRE2 10.42 does not know, a sample of all code points, and the Christmas
// Carol book. Built from fixed pieces and a seeded PRNG (splitmix64, so it is the same with
// every standard library), header-only so bench/ can use it too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/unicode_delta.h"

namespace grag::testing {

struct CorpusSegment {
  std::string label;      // where the text comes from, for failure messages
  std::string text;       // valid UTF-8
  bool long_run = false;  // a pathological repeated run rather than ordinary text
};

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), n > 0 (the tiny modulo bias does not matter here).
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }
  bool Chance(int percent) { return Below(100) < static_cast<size_t>(percent); }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[Below(v.size())];
  }

 private:
  uint64_t state_;
};

inline void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

inline std::string Utf8(uint32_t cp) {
  std::string s;
  AppendUtf8(cp, &s);
  return s;
}

inline std::string Repeat(std::string_view s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

namespace corpus_internal {

inline const std::vector<std::string>& Words() {
  static const std::vector<std::string> w = {"the",
                                             "of",
                                             "and",
                                             "to",
                                             "in",
                                             "a",
                                             "is",
                                             "that",
                                             "for",
                                             "it",
                                             "as",
                                             "was",
                                             "with",
                                             "be",
                                             "by",
                                             "on",
                                             "not",
                                             "he",
                                             "I",
                                             "this",
                                             "are",
                                             "or",
                                             "his",
                                             "from",
                                             "at",
                                             "which",
                                             "but",
                                             "have",
                                             "an",
                                             "had",
                                             "they",
                                             "you",
                                             "were",
                                             "their",
                                             "one",
                                             "all",
                                             "we",
                                             "can",
                                             "her",
                                             "has",
                                             "there",
                                             "been",
                                             "if",
                                             "more",
                                             "when",
                                             "will",
                                             "would",
                                             "who",
                                             "so",
                                             "no",
                                             "Scrooge",
                                             "Marley",
                                             "Christmas",
                                             "ghost",
                                             "London",
                                             "Microsoft",
                                             "GraphRAG",
                                             "tokenizer",
                                             "community",
                                             "entity",
                                             "relationship",
                                             "extraction",
                                             "summarisation",
                                             "hierarchical",
                                             "Leiden",
                                             "algorithm",
                                             "naïve",
                                             "café",
                                             "résumé",
                                             "coöperate",
                                             "façade",
                                             "jalapeño",
                                             "Zürich",
                                             "São",
                                             "Paulo",
                                             "Ångström",
                                             "Øresund",
                                             "Dvořák",
                                             "Łódź",
                                             "İstanbul",
                                             "straße",
                                             "ΑΘΗΝΑ",
                                             "Σίσυφος",
                                             "ὀδυσσεύς",
                                             "Москва",
                                             "ёлка",
                                             "Київ",
                                             "ქართული",
                                             "Հայաստան",
                                             "UPPERCASE",
                                             "CamelCase",
                                             "mixedCASEword",
                                             "iPhone",
                                             "eBay",
                                             "McDonald",
                                             "O'Brien",
                                             "x",
                                             "Q",
                                             "ok",
                                             "OK",
                                             "Ok",
                                             "oK",
                                             "ſtate",
                                             "ﬁne",
                                             "ǅemal",
                                             "ᾈ"};
  return w;
}

inline const std::vector<std::string>& Contractions() {
  static const std::vector<std::string> c = {
      "'s", "'S",  "'t",  "'T",  "'re", "'rE", "'Re", "'RE", "'ve", "'vE", "'Ve", "'VE", "'m",
      "'M", "'ll", "'lL", "'Ll", "'LL", "'d",  "'D",  "'ſ",  "'x",  "'",   "''",  "’s",  "’T"};
  return c;
}

inline const std::vector<std::string>& Punctuation() {
  static const std::vector<std::string> p = {
      ".", ",", ";", ":", "!", "?", "...", " —", "–", "-", "(", ")", "[", "]",  "{",  "}",  "\"",
      "“", "”", "‘", "’", "«", "»", "/",   "\\", "|", "@", "#", "$", "%", "^",  "&",  "*",  "_",
      "+", "=", "<", ">", "~", "`", "¿",   "¡",  "…", "·", "•", "§", "¶", "†",  "©",  "®",  "™",
      "°", "±", "×", "÷", "→", "⇒", "∀",   "∑",  "√", "∞", "≠", "≤", "😀", "、", "。", "「", "」"};
  return p;
}

inline const std::vector<std::string>& Whitespace() {
  static const std::vector<std::string> w = {
      " ",       " ",       " ",      " ",      "  ",       "   ",    "    ",   "\t",     "\t\t",
      "\n",      "\n",      "\n\n",   "\r\n",   "\r\n\r\n", "\r",     "\v",     "\f",     "\u00A0",
      "\u2028",  "\u2029",  "\u3000", "\u0085", "\u2002",   "\u2003", "\u2009", "\u200A", "\u202F",
      "\u205F",  "\u1680",  " \n",    "\n ",    "  \n  ",   " \t ",   "\t\n",   "\n\t",   " \r\n ",
      "\u00A0 ", " \u00A0", "\u200B", "\uFEFF", "\u180E",   "\u2060", "\u00AD"};
  return w;
}

inline const std::vector<std::string>& Emoji() {
  static const std::vector<std::string> e = {"😀",
                                             "😂",
                                             "🥲",
                                             "❤️",
                                             "❤",
                                             "♥️",
                                             "👍",
                                             "👍🏻",
                                             "👍🏼",
                                             "👍🏽",
                                             "👍🏾",
                                             "👍🏿",
                                             "👋🏽",
                                             "👨‍👩‍👧‍👦",
                                             "👩‍❤️‍💋‍👨",
                                             "🧑🏽‍💻",
                                             "👩🏿‍🚀",
                                             "🏳️‍🌈",
                                             "🏳️‍⚧️",
                                             "🏴‍☠️",
                                             "🐻‍❄️",
                                             "😶‍🌫️",
                                             "🇺🇸",
                                             "🇯🇵",
                                             "🇩🇪",
                                             "🇫🇷",
                                             "🇧🇷",
                                             "🇮🇳",
                                             "🇺🇦",
                                             "🇪🇺",
                                             "🏴󠁧󠁢󠁳󠁣󠁴󠁿",
                                             "🏴󠁧󠁢󠁷󠁬󠁳󠁿",
                                             "1️⃣",
                                             "#️⃣",
                                             "*️⃣",
                                             "©️",
                                             "™️",
                                             "☺︎",
                                             "✈️",
                                             "⌚",
                                             "🀄",
                                             "🃏",
                                             "🫠",
                                             "🫶🏼",
                                             "🪿",
                                             "🦀",
                                             "🐍",
                                             "🚀",
                                             "🎄",
                                             "🎅🏼",
                                             "🤶🏾",
                                             "🧑‍🎄",
                                             "⛄",
                                             "❄️",
                                             "🌍",
                                             "🌏",
                                             "🔥",
                                             "💯",
                                             "✅",
                                             "❌"};
  return e;
}

inline const std::vector<std::string>& Sentences() {
  static const std::vector<std::string> s = {
      // Chinese, Japanese, Korean
      "我们今天讨论知识图谱和检索增强生成。", "这是一个测试：中文、日本語、한국어混合。",
      "斯克鲁奇是一个吝啬的老人，他不喜欢圣诞节。", "第１２３条　全角数字と全角スペース。",
      "東京都渋谷区で会議が行われました。", "ひらがなとカタカナとカンジ、そしてｶﾀｶﾅ（半角）。",
      "吾輩は猫である。名前はまだ無い。", "ＡＢＣ　ａｂｃ　１２３！？",
      "안녕하세요, 세계! 그래프 기반 검색입니다.", "대한민국의 수도는 서울이다.",
      "𠀀𠀁𠀂𪚥𩸽𠮷野家", "㐀㐁㐂䶵", "〆〇〻々ゝゞヽヾ", "ㄱㄴㄷ 각 ㅏㅑ",
      // Other scripts
      "Привет, мир! Съешь же ещё этих мягких французских булок.",
      "Ἐν ἀρχῇ ἦν ὁ λόγος, καὶ ὁ λόγος ἦν πρὸς τὸν θεόν.", "Τὴ γλῶσσα μοῦ ἔδωσαν ἑλληνική.",
      "مرحبا بالعالم! هذا نصٌّ عربيٌّ مُشَكَّل.", "שָׁלוֹם עוֹלָם, זֶה טֶקְסְט בְּעִבְרִית.",
      "สวัสดีชาวโลก นี่คือข้อความภาษาไทย", "नमस्ते दुनिया! यह हिन्दी पाठ है।", "வணக்கம் உலகம்", "ሰላም ለዓለም",
      "გამარჯობა მსოფლიო", "Բարեւ աշխարհ", "Xin chào thế giới! Tiếng Việt có dấu.",
      "Ça va? Où est la bibliothèque?", "Ünïcödé têxt wïth dïäcrïtïcs.", "İ ı ǅ ǈ ǋ ǲ ß ẞ ﬀ ﬃ",
      "ꦲꦤꦕꦫꦏ", "ᠮᠣᠩᠭᠣᠯ", "ᏣᎳᎩ", "ᚠᚢᚦᚨᚱᚲ", "𐌰𐌱𐌲", "𓀀𓀁𓀂 hieroglyphs", "ℕ ℤ ℚ ℝ ℂ",
      "𝐁𝐨𝐥𝐝 𝑰𝒕𝒂𝒍𝒊𝒄 𝔉𝔯𝔞𝔨𝔱𝔲𝔯 𝕯𝖔𝖚𝖇𝖑𝖊"};
  return s;
}

inline const std::vector<std::string>& Numbers() {
  static const std::vector<std::string> n = {"0",
                                             "7",
                                             "42",
                                             "123",
                                             "1234",
                                             "12345",
                                             "123456789",
                                             "3.14159",
                                             "-273.15",
                                             "1,234,567.89",
                                             "6.02e23",
                                             "1e-9",
                                             "0xDEADBEEF",
                                             "0b1011",
                                             "0o777",
                                             "2024-01-31",
                                             "12:34:56",
                                             "192.168.0.1",
                                             "+1 (555) 123-4567",
                                             "$1,000",
                                             "€5,50",
                                             "¥100",
                                             "£3",
                                             "50%",
                                             "3/4",
                                             "٠١٢٣٤٥٦٧٨٩",
                                             "۰۱۲۳",
                                             "०१२३४",
                                             "০১২",
                                             "１２３４５",
                                             "²³¹",
                                             "½¼¾⅓",
                                             "ⅠⅡⅢⅫ",
                                             "①②③",
                                             "𝟎𝟏𝟐",
                                             "1st",
                                             "2nd",
                                             "3rd",
                                             "4th",
                                             "v1.2.3",
                                             "x86_64",
                                             "1234567890123456789012345"};
  return n;
}

inline const std::vector<std::string>& CodeSnippets() {
  static const std::vector<std::string> c = {
      "#include <vector>\n\nint main(int argc, char** argv) {\n  std::vector<int> v{1, 2, 3};\n"
      "  for (auto& x : v) x *= 2;  // double\n  return v.size() > 2 ? 0 : 1;\n}\n",
      "def encode(self, text: str) -> list[int]:\n    \"\"\"Encode text.\"\"\"\n    if not text:\n"
      "        return []\n    return [self._ranks[b] for b in text.encode('utf-8')]\n",
      "const f = async (a, b) => {\n\tawait fetch(`/api/${a}?b=${b}`);\n\treturn a ?? b;\n};\n",
      "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n"
      "    println!(\"{:?}\", v);\n}\n",
      "SELECT e.name, COUNT(*) AS n\nFROM entities e\nJOIN relationships r ON r.source = e.id\n"
      "WHERE e.type = 'PERSON'\nGROUP BY e.name\nORDER BY n DESC\nLIMIT 10;\n",
      "<!DOCTYPE html>\n<html lang=\"en\">\n  <head><meta "
      "charset=\"utf-8\"><title>T</title></head>\n"
      "  <body><p class=\"x\">Hello&nbsp;&amp; welcome</p></body>\n</html>\n",
      "{\"id\": 17, \"title\": \"A Christmas Carol\", \"tags\": [\"ghost\", \"xmas\"], "
      "\"score\": -0.25, \"ok\": true, \"next\": null}\n",
      "chunks:\n  size: 1200\n  overlap: 100\n  encoding_model: o200k_base\n# comment\n",
      "#!/usr/bin/env bash\nset -euo pipefail\nfor f in \"$@\"; do\n  echo \"${f%.txt}\" | "
      "tr a-z A-Z >> out.log 2>&1\ndone\n",
      "all: build\n\nbuild:\n\tcmake --build build -j$(nproc)\n\n.PHONY: all build\n",
      "--- a/file.cpp\n+++ b/file.cpp\n@@ -1,3 +1,4 @@\n-int x = 0;\n+int x = 1;\n+int y = 2;\n",
      "    if (x) {\r\n        return y;\r\n    }\r\n",
      "template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>\n"
      "constexpr T gcd(T a, T b) noexcept { return b == 0 ? a : gcd(b, a % b); }\n",
      "regex = r\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}\"\n",
      "a&&b||!c; x<<=2; y>>>=1; z**=3; p->q; r::s; t?.u; v?? w; [...xs]; #[derive(Debug)]\n",
      "   \t  mixed   \t indentation\t\t  \n\t    and trailing spaces   \n"};
  return c;
}

inline const std::vector<std::string>& SpecialTokenTexts() {
  static const std::vector<std::string> s = {"<|endoftext|>",  "<|fim_prefix|>",  "<|fim_middle|>",
                                             "<|fim_suffix|>", "<|endofprompt|>", "<|im_start|>",
                                             "<|endoftext|"};
  return s;
}

// Combining marks from several blocks, for "zalgo" stacks and stray marks.
inline uint32_t RandomMark(SplitMix64& rng) {
  static const uint32_t ranges[][2] = {{0x0300, 0x036F}, {0x1AB0, 0x1ACE}, {0x1DC0, 0x1DFF},
                                       {0x20D0, 0x20F0}, {0xFE20, 0xFE2F}, {0x0591, 0x05BD},
                                       {0x064B, 0x065F}, {0x0900, 0x0903}, {0x093A, 0x094F}};
  const auto& r = ranges[rng.Below(sizeof(ranges) / sizeof(ranges[0]))];
  return r[0] + static_cast<uint32_t>(rng.Below(r[1] - r[0] + 1));
}

inline uint32_t RandomCjk(SplitMix64& rng) {
  static const uint32_t ranges[][2] = {{0x4E00, 0x9FFF},   {0x3400, 0x4DBF},   {0x20000, 0x2A6DF},
                                       {0x2A700, 0x2B739}, {0x30000, 0x3134A}, {0x31350, 0x323AF},
                                       {0xAC00, 0xD7A3},   {0x3040, 0x309F},   {0x30A0, 0x30FF},
                                       {0xF900, 0xFAFF},   {0xFF01, 0xFF9F}};
  const auto& r = ranges[rng.Below(sizeof(ranges) / sizeof(ranges[0]))];
  return r[0] + static_cast<uint32_t>(rng.Below(r[1] - r[0] + 1));
}

inline uint32_t RandomScalar(SplitMix64& rng) {
  while (true) {
    // Half from the BMP, where most assigned characters are.
    const uint32_t cp =
        static_cast<uint32_t>(rng.Chance(50) ? rng.Below(0x10000) : rng.Below(0x110000));
    if (cp < 0xD800 || cp > 0xDFFF) return cp;
  }
}

inline std::string RandomIdentifier(SplitMix64& rng) {
  static const std::vector<std::string> parts = {"get", "set", "token", "rank", "merge", "piece",
                                                 "x",   "i",   "HTTP",  "Url",  "id",    "2",
                                                 "v8",  "_",   "ptr",   "Max",  "len",   "utf8"};
  std::string s;
  const size_t n = 1 + rng.Below(4);
  const int style = static_cast<int>(rng.Below(3));
  for (size_t i = 0; i < n; ++i) {
    std::string p = rng.Pick(parts);
    if (style == 1 && i > 0 && !p.empty() && p[0] >= 'a' && p[0] <= 'z')
      p[0] = static_cast<char>(p[0] - 32);
    if (style == 0 && i > 0) s += '_';
    s += p;
  }
  return s;
}

// One "word-like" item of some kind, chosen at random.
inline std::string RandomItem(SplitMix64& rng) {
  switch (rng.Below(14)) {
    case 0:
    case 1:
    case 2:
      return rng.Pick(Words());
    case 3:
      return rng.Pick(Words()) + rng.Pick(Contractions());
    case 4:
      return rng.Pick(Punctuation());
    case 5:
      return rng.Pick(Numbers());
    case 6:
      return rng.Pick(Emoji());
    case 7:
      return rng.Pick(Sentences());
    case 8: {  // a letter or a space followed by a stack of combining marks
      std::string s = rng.Chance(80) ? rng.Pick(Words()) : std::string(rng.Chance(50) ? " " : "");
      const size_t marks = 1 + rng.Below(rng.Chance(10) ? 30 : 4);
      for (size_t i = 0; i < marks; ++i) AppendUtf8(RandomMark(rng), &s);
      return s;
    }
    case 9: {
      std::string s;
      const size_t n = 1 + rng.Below(12);
      for (size_t i = 0; i < n; ++i) AppendUtf8(RandomCjk(rng), &s);
      return s;
    }
    case 10:
      return RandomIdentifier(rng);
    case 11:
      return rng.Pick(SpecialTokenTexts());
    case 12: {
      std::string s;
      AppendUtf8(RandomScalar(rng), &s);
      return s;
    }
    default:
      return std::to_string(rng.Next() >> rng.Below(64));
  }
}

// Random items joined by random separators (mostly single spaces), about `bytes` long.
inline std::string RandomMix(SplitMix64& rng, size_t bytes) {
  std::string s;
  while (s.size() < bytes) {
    s += RandomItem(rng);
    const size_t r = rng.Below(100);
    if (r < 70) {
      s += ' ';
    } else if (r < 90) {
      s += rng.Pick(Whitespace());
    } else if (r < 95) {
      s += rng.Pick(Punctuation());
    }  // else: no separator at all
  }
  return s;
}

// English-like prose with contractions, quotes and paragraph breaks.
inline std::string RandomProse(SplitMix64& rng, size_t bytes) {
  std::string s;
  bool capital = true;
  while (s.size() < bytes) {
    std::string w = rng.Pick(Words());
    if (capital && !w.empty() && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 32);
    capital = false;
    s += w;
    if (rng.Chance(8)) s += rng.Pick(Contractions());
    const size_t r = rng.Below(100);
    if (r < 6) {
      s += ". ";
      capital = true;
    } else if (r < 9) {
      s += ", ";
    } else if (r < 10) {
      s += rng.Chance(50) ? ".\n\n" : "?\n";
      capital = true;
    } else if (r < 11) {
      s += "; ";
    } else if (r < 12) {
      s += " \"" + rng.Pick(Words()) + "\" ";
    } else {
      s += ' ';
    }
  }
  return s;
}

}  // namespace corpus_internal

// The corpus, as labelled segments. `book` is the Christmas Carol text (split into segments at
// paragraph breaks). About 1.9 MB in all.
inline std::vector<CorpusSegment> BuildTokenizerCorpus(std::string_view book) {
  using namespace corpus_internal;
  std::vector<CorpusSegment> out;
  SplitMix64 rng(20240917);

  // 1. The book, in paragraphs-aligned segments of about 6 KB.
  for (size_t pos = 0, k = 0; pos < book.size(); ++k) {
    size_t end = book.find("\n\n", std::min(book.size(), pos + 6000));
    end = end == std::string_view::npos ? book.size() : end + 2;
    out.push_back(
        {"christmas carol part " + std::to_string(k), std::string(book.substr(pos, end - pos))});
    pos = end;
  }
  // 2. Prose, code, whole-corpus mixes.
  for (int i = 0; i < 40; ++i)
    out.push_back({"prose " + std::to_string(i), RandomProse(rng, 4000)});
  for (int i = 0; i < 20; ++i) {
    std::string code;
    while (code.size() < 4000) {
      std::string snippet = rng.Pick(CodeSnippets());
      if (rng.Chance(20)) {  // the same code with Windows line ends
        std::string crlf;
        for (char ch : snippet) {
          if (ch == '\n') crlf += '\r';
          crlf += ch;
        }
        snippet = crlf;
      }
      code += snippet;
      if (rng.Chance(50))
        code += RandomIdentifier(rng) + " = " + RandomIdentifier(rng) + "(" +
                std::to_string(rng.Below(100000)) + ");\n";
    }
    out.push_back({"code " + std::to_string(i), code});
  }
  for (int i = 0; i < 160; ++i) out.push_back({"mix " + std::to_string(i), RandomMix(rng, 4000)});

  // 3. Focused segments.
  {
    std::string s;
    for (const auto& w : {"it", "IT", "don", "DON", "we", "We", "you", "I", "he", "x",
                          "1",  " ",  "",    "\n",  "é",  "Σ",  "中",  "😀", "-",  "ǅ"}) {
      for (const auto& c : Contractions()) {
        s += w;
        s += c;
        s += rng.Chance(50) ? " " : "a ";
        s += c;
        s += rng.Chance(50) ? "\n" : "s ";
      }
    }
    out.push_back({"contractions", s});
  }
  {
    std::string s;
    for (int i = 0; i < 3000; ++i) {
      s += rng.Pick(Whitespace());
      if (rng.Chance(60)) s += rng.Chance(50) ? rng.Pick(Words()) : rng.Pick(Punctuation());
      if (rng.Chance(10)) s += rng.Pick(Numbers());
    }
    out.push_back({"whitespace", s});
  }
  {
    std::string s;
    for (int i = 0; i < 2000; ++i) {
      s += rng.Pick(Emoji());
      if (rng.Chance(30)) s += rng.Pick(Words());
      if (rng.Chance(50)) s += rng.Chance(80) ? " " : rng.Pick(Whitespace());
    }
    out.push_back({"emoji", s});
  }
  {
    std::string s;
    for (int i = 0; i < 3000; ++i) {
      s += rng.Pick(Numbers());
      s += rng.Chance(70) ? " " : rng.Pick(Punctuation());
    }
    out.push_back({"numbers", s});
  }
  {
    std::string s;
    for (int i = 0; i < 1500; ++i) {
      s += rng.Pick(Sentences());
      s += rng.Chance(60) ? "" : rng.Pick(Whitespace());
      for (size_t j = rng.Below(20); j > 0; --j) AppendUtf8(RandomCjk(rng), &s);
    }
    out.push_back({"cjk and other scripts", s});
  }
  {
    std::string s;
    for (int i = 0; i < 4000; ++i) {
      if (rng.Chance(70)) s += rng.Pick(Words());
      for (size_t j = 1 + rng.Below(rng.Chance(5) ? 60 : 3); j > 0; --j)
        AppendUtf8(RandomMark(rng), &s);
      s += rng.Chance(70) ? " " : rng.Pick(Punctuation());
    }
    out.push_back({"combining marks", s});
  }
  // 4. Every code point whose category PCRE2 10.42 does not know, in contexts that tell letters,
  //    marks, numbers and others apart.
  {
    std::string s;
    size_t part = 0;
    for (const auto& addition : kUnicodeCategoryAdditions) {
      std::string_view r = addition.ranges;
      while (!r.empty()) {  // items: \x{HEX} or \x{HEX}-\x{HEX}
        auto read = [&r]() {
          const size_t close = r.find('}');
          const uint32_t v =
              static_cast<uint32_t>(std::stoul(std::string(r.substr(3, close - 3)), nullptr, 16));
          r.remove_prefix(close + 1);
          return v;
        };
        const uint32_t lo = read();
        uint32_t hi = lo;
        if (!r.empty() && r[0] == '-') {
          r.remove_prefix(1);
          hi = read();
        }
        for (uint32_t cp = lo; cp <= hi; ++cp) {
          const std::string c = Utf8(cp);
          s += "x" + c + "A" + c + "a " + c + "1" + c + ". " + c + "'s\n";
          if (s.size() > 8000) {
            out.push_back({"new unicode " + std::string(addition.property) + " part " +
                               std::to_string(part++),
                           s});
            s.clear();
          }
        }
      }
    }
    if (!s.empty()) out.push_back({"new unicode part " + std::to_string(part), s});
  }
  // 5. A random sample of all code points.
  for (int k = 0; k < 40; ++k) {
    std::string s;
    for (int i = 0; i < 400; ++i) {
      const std::string c = Utf8(RandomScalar(rng));
      s += rng.Chance(50) ? "a" + c + " " : c + c + "A" + c + "1 ";
    }
    out.push_back({"code point sample " + std::to_string(k), s});
  }
  // 6. Long runs. Node tiktoken's merge is quadratic in the piece length, so they stay around
  //    10 k characters to keep the reference fast; bench/ and the unit tests go much longer.
  std::string b64;
  {
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 16000; ++i) b64 += kAlphabet[rng.Below(64)];
    b64 += "==";
  }
  std::string cjk_run;
  for (int i = 0; i < 3000; ++i) AppendUtf8(RandomCjk(rng), &cjk_run);
  std::string hex;
  for (int i = 0; i < 12000; ++i) hex += "0123456789abcdef"[rng.Below(16)];
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"10k spaces", Repeat(" ", 10000)},
      {"spaces then a word", Repeat(" ", 6000) + "word" + Repeat(" ", 3000) + "\n"},
      {"6k letters", Repeat("a", 6000)},
      {"6k capitals", Repeat("A", 6000)},
      {"ab run", Repeat("ab", 3000)},
      {"Ab run", Repeat("Ab", 3000)},
      {"12k digits", Repeat("7", 12000)},
      {"punctuation run", Repeat("!", 6000) + Repeat("?!", 2000)},
      {"newline run", Repeat("\n", 6000)},
      {"crlf run", Repeat("\r\n", 3000)},
      {"tab run", Repeat("\t", 6000)},
      {"nbsp run", Repeat("\u00A0", 3000)},
      {"space tab run", Repeat(" \t", 3000)},
      {"space newline run", Repeat(" \n", 3000)},
      {"dots", Repeat(".", 8000)},
      {"dashes", Repeat("-", 8000)},
      {"'s run", Repeat("'s", 3000)},
      {"long word", Repeat("Supercalifragilistic", 300)},
      {"base64", b64},
      {"hex", hex},
      {"cjk run", cjk_run},
      {"emoji run", Repeat("👍", 2000)},
      {"mark run", "a" + Repeat("\u0301", 3000)},
      {"ideographic space run", Repeat("\u3000", 3000)}};
  for (const auto& [label, text] : runs) out.push_back({label, text, true});
  return out;
}

}  // namespace grag::testing
