#include "grag/literal_value.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <string>

namespace grag {
namespace {

// Generic English words a stated value is made of (lower case).
constexpr std::string_view kValueWords[] = {
    // months, their abbreviations, weekdays
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
    "sept", "oct", "nov", "dec", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
    "sunday",
    // date words
    "the", "of", "on", "in", "ad", "bc", "bce", "ce", "c", "ca", "circa", "early", "mid", "late",
    "about", "approximately", "around", "from", "to", "and", "until", "since", "century",
    "centuries", "decade", "year", "years", "st", "nd", "rd", "th", "s",
    // scale words
    "hundred", "thousand", "million", "millions", "billion", "billions", "trillion", "dozen", "k",
    "bn", "mn",
    // currencies
    "us", "usd", "eur", "gbp", "dollar", "dollars", "euro", "euros", "pound", "pounds", "yen",
    "francs", "marks", "rupees", "cents",
    // units and counted nouns
    "percent", "per", "cent", "pct", "km", "kilometres", "kilometers", "m", "metres", "meters",
    "cm", "mm", "mi", "miles", "ft", "feet", "inches", "yards", "kg", "g", "grams", "tonnes",
    "tons", "lb", "lbs", "oz", "litres", "liters", "gallons", "acres", "hectares", "ha", "sq",
    "square", "mph", "h", "hours", "minutes", "seconds", "days", "weeks", "months", "degrees",
    "people", "inhabitants", "residents", "members", "employees", "votes", "seats", "copies",
    "units", "points", "times"};

constexpr std::string_view kValueTypes[] = {"date", "number", "quantity", "money",  "percent",
                                            "time", "year",   "duration", "amount", "value"};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// A word of digits and number punctuation, with an ordinal or decade suffix ("1987", "3,200",
// "4.5", "12th", "1980s", "1987-03-12", "45%").
bool IsNumberWord(std::string_view w) {
  size_t i = 0;
  bool digit = false;
  while (i < w.size() && (IsDigit(w[i]) || w[i] == ',' || w[i] == '.' || w[i] == '/' ||
                          w[i] == '-' || w[i] == ':' || w[i] == '%' || w[i] == '+')) {
    digit = digit || IsDigit(w[i]);
    ++i;
  }
  if (!digit) return false;
  const std::string_view rest = w.substr(i);
  return rest.empty() || rest == "st" || rest == "nd" || rest == "rd" || rest == "th" ||
         rest == "s" || rest == "k" || rest == "m" || rest == "bn" || rest == "km" ||
         rest == "kg" || rest == "cm" || rest == "mm";
}

}  // namespace

bool IsLiteralValue(std::string_view name, std::string_view type) {
  if (std::none_of(name.begin(), name.end(), IsDigit)) return false;
  std::string lower_type(type);
  for (char& c : lower_type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int allowed_unknown =
      std::find(std::begin(kValueTypes), std::end(kValueTypes), lower_type) != std::end(kValueTypes)
          ? 1
          : 0;
  // Words: runs of letters, digits and number punctuation; currency symbols and other
  // punctuation separate them (multi-byte symbols such as "€" or "£" too).
  std::string word;
  auto settle = [&]() -> bool {
    if (word.empty()) return true;
    // A dash or a slash alone, or trailing number punctuation, is not a word.
    while (!word.empty() && (word.back() == '.' || word.back() == ',' || word.back() == '-' ||
                             word.back() == ':' || word.back() == '/')) {
      word.pop_back();
    }
    bool ok =
        word.empty() || IsNumberWord(word) ||
        std::find(std::begin(kValueWords), std::end(kValueWords), word) != std::end(kValueWords);
    if (!ok && allowed_unknown > 0) {
      --allowed_unknown;
      ok = true;
    }
    word.clear();
    return ok;
  };
  for (char ch : name) {
    const auto u = static_cast<unsigned char>(ch);
    if (u >= 0x80 || ch == ' ' || ch == '(' || ch == ')' || ch == '$' || ch == '~' || ch == '\'' ||
        ch == '"' || ch == '\t' || ch == '\n') {
      if (!settle()) return false;
      continue;
    }
    if ((ch == '-' || ch == '/') && word.empty()) continue;  // "1987 - 1990", "– "
    word += static_cast<char>(std::tolower(u));
  }
  return settle();
}

}  // namespace grag
