// Choosing DRIFT follow-ups: tidy, compare, rank.
#include "drift_select.h"

#include <algorithm>
#include <cctype>
#include <numeric>

namespace grag::query {

std::string NormalizeFollowUp(std::string_view text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  // Leading list markers: "1." "2)" "-" "*" "•" (as bytes), repeated ("1. - ").
  for (;;) {
    size_t i = 0;
    while (i < out.size() && std::isdigit(static_cast<unsigned char>(out[i]))) ++i;
    if (i > 0 && i < out.size() && (out[i] == '.' || out[i] == ')')) {
      out.erase(0, i + 1);
    } else if (!out.empty() && (out[0] == '-' || out[0] == '*')) {
      out.erase(0, 1);
    } else if (out.rfind("\xE2\x80\xA2", 0) == 0) {
      out.erase(0, 3);
    } else {
      break;
    }
    while (!out.empty() && out[0] == ' ') out.erase(0, 1);
  }
  auto quote = [](char c) { return c == '"' || c == '\'' || c == '`'; };
  while (out.size() >= 2 && quote(out.front()) && quote(out.back())) {
    out = out.substr(1, out.size() - 2);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

double TermJaccard(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  if (a.empty() && b.empty()) return 0;
  std::vector<std::string> common;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(common));
  const size_t uni = a.size() + b.size() - common.size();
  return uni == 0 ? 0 : static_cast<double>(common.size()) / static_cast<double>(uni);
}

std::vector<size_t> SelectFollowUps(const std::vector<FollowUpCandidate>& open, size_t breadth) {
  std::vector<size_t> idx(open.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](size_t x, size_t y) {
    const FollowUpCandidate& a = open[x];
    const FollowUpCandidate& b = open[y];
    if (a.priority != b.priority) return a.priority > b.priority;
    if (a.similarity != b.similarity) return a.similarity > b.similarity;
    return a.order < b.order;
  });
  if (idx.size() > breadth) idx.resize(breadth);
  return idx;
}

}  // namespace grag::query
