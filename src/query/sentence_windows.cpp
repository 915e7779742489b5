// The sentence-window scan (sentence_windows.h).
#include "sentence_windows.h"

#include <algorithm>

#include "grag/words.h"

namespace grag::query {

namespace {

// Byte classes of the scan: letters, digits and every byte of a UTF-8 sequence are word bytes;
// ASCII letters lower-cased.
constexpr std::array<bool, 256> kWordByte = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c) {
    t[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
  }
  return t;
}();
constexpr std::array<unsigned char, 256> kLower = [] {
  std::array<unsigned char, 256> t{};
  for (int c = 0; c < 256; ++c) {
    t[c] = static_cast<unsigned char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  return t;
}();

// Words without a sentence end count as a sentence this long.
constexpr size_t kWindowSentenceWords = 40;

}  // namespace

WindowScanner::WindowScanner(const std::unordered_map<std::string, double>& weights, size_t window)
    : window_(std::max<size_t>(window, 1)) {
  for (const auto& [k, w] : weights) {
    if (k.empty()) continue;
    keys_.push_back(k);
    weights_.push_back(w);
    first_letter_[static_cast<unsigned char>(k[0])] = true;
  }
}

// Most words share no first letters with any term and are not stemmed at all: a text is read in
// one pass, without the sentence splitter's and the normaliser's allocations.
void WindowScanner::Match(const std::string& word, std::vector<uint32_t>& into) const {
  for (uint32_t i = 0; i < keys_.size(); ++i) {
    const size_t n = std::min<size_t>(3, keys_[i].size());
    if (word.size() < n || word.compare(0, n, keys_[i], 0, n) != 0) continue;
    const std::string stem = Stem(word);
    for (uint32_t j = i; j < keys_.size(); ++j) {
      if (keys_[j] == stem && std::find(into.begin(), into.end(), j) == into.end()) {
        into.push_back(j);
      }
    }
    return;
  }
}

WindowScanner::Score WindowScanner::Scan(std::string_view text) const {
  std::vector<std::vector<uint32_t>> held(1);  // by sentence: the terms it holds
  std::string word;
  bool ascii = true;
  size_t sentence_words = 0;  // words of the sentence being read
  auto count_word = [&] {
    if (++sentence_words >= kWindowSentenceWords) {
      held.emplace_back();
      sentence_words = 0;
    }
  };
  auto end_word = [&] {
    if (word.empty()) return;
    if (ascii) {
      Match(word, held.back());
    } else {
      for (const auto& w : SplitNormalizedName(NormalizeEntityName(word))) Match(w, held.back());
    }
    word.clear();
    ascii = true;
    count_word();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const auto ch = static_cast<unsigned char>(text[i]);
    if (kWordByte[ch]) {
      if (word.empty() && ch < 0x80 && !first_letter_[kLower[ch]]) {
        // No term starts with this letter: the word is skipped unread.
        while (i + 1 < text.size() && kWordByte[static_cast<unsigned char>(text[i + 1])]) ++i;
        count_word();
        continue;
      }
      word += static_cast<char>(kLower[ch]);
      ascii = ascii && ch < 0x80;
      continue;
    }
    end_word();
    const bool next_space = i + 1 < text.size() && (text[i + 1] == ' ' || text[i + 1] == '\n' ||
                                                    text[i + 1] == '\t' || text[i + 1] == '\r');
    if (((ch == '.' || ch == '!' || ch == '?') && next_space) ||
        (ch == '\n' && i + 1 < text.size() && text[i + 1] == '\n')) {
      if (sentence_words > 0) held.emplace_back();
      sentence_words = 0;
    }
  }
  end_word();
  // A sliding window of window_ sentences: the distinct terms it holds, weighted.
  std::vector<uint32_t> count(keys_.size(), 0);
  double current = 0;
  std::vector<double> window_score;  // by the window's last sentence
  window_score.reserve(held.size());
  for (size_t i = 0; i < held.size(); ++i) {
    for (uint32_t t : held[i]) {
      if (count[t]++ == 0) current += weights_[t];
    }
    if (i >= window_) {
      for (uint32_t t : held[i - window_]) {
        if (--count[t] == 0) current -= weights_[t];
      }
    }
    window_score.push_back(current);
  }
  size_t at = 0;
  for (size_t i = 1; i < window_score.size(); ++i) {
    if (window_score[i] > window_score[at]) at = i;
  }
  Score out;
  out.best = window_score.empty() ? 0.0 : window_score[at];
  double second = 0;
  for (size_t i = 0; i < window_score.size(); ++i) {
    if (i + window_ <= at || i >= at + window_) second = std::max(second, window_score[i]);
  }
  out.best += second;
  out.sentences = held.size();
  for (const auto& terms : held) out.held.insert(out.held.end(), terms.begin(), terms.end());
  std::sort(out.held.begin(), out.held.end());
  out.held.erase(std::unique(out.held.begin(), out.held.end()), out.held.end());
  return out;
}

}  // namespace grag::query
