// The sentence-window scan behind hybrid's window list (RetrievalTuning::passage_weight),
// internal to the query module: a text scored by the question's terms its best windows of a few
// sentences hold.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace grag::query {

class WindowScanner {
 public:
  // `weights`: the question's terms (stems, lower case) and what each is worth; `window`:
  // sentences per window (at least 1).
  WindowScanner(const std::unordered_map<std::string, double>& weights, size_t window);

  struct Score {
    // The best window's worth (the weights of the distinct terms it holds) plus the best
    // window's apart from it: an answer often takes two places of a passage, the definition,
    // then the detail asked for. 0: no term.
    double best = 0;
    size_t sentences = 0;  // in the text
    // The terms the whole text holds (indices into weights()), ascending.
    std::vector<uint32_t> held;
  };
  // One pass over `text`. Words without a sentence end (a table of contents, a list, a
  // transcript without stops) count as a sentence every 40 words, so that a window stays a few
  // sentences' worth of text.
  Score Scan(std::string_view text) const;

  // What each of the question's terms is worth, in the order Score::held indexes them.
  const std::vector<double>& weights() const { return weights_; }

 private:
  // The terms a word stems to, added to `into` once each.
  void Match(const std::string& word, std::vector<uint32_t>& into) const;

  std::vector<std::string> keys_;
  std::vector<double> weights_;
  size_t window_;
  std::array<bool, 256> first_letter_{};  // some term starts with this (lower-case) byte
};

}  // namespace grag::query
