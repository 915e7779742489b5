// Internal to DRIFT search: which follow-ups to ask. Pure functions, tested on their own.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace grag::query {

// A follow-up as the model wrote it, tidied: list numbering ("1.", "2)", "-", "*"), quotes and
// surrounding spaces removed, runs of spaces collapsed to one.
std::string NormalizeFollowUp(std::string_view text);

// Jaccard similarity of two sorted, distinct term lists (ContentTerms).
double TermJaccard(const std::vector<std::string>& a, const std::vector<std::string>& b);

struct FollowUpCandidate {
  double priority = 0;    // the proposing answer's score, decayed by depth
  double similarity = 0;  // cosine of its embedding to the question (0 when none)
  size_t order = 0;       // when it was proposed: first asked first on a tie
};

// The `breadth` candidates to ask next: highest priority, then most similar to the question,
// then first proposed. Returns indices into `open`, in that order.
std::vector<size_t> SelectFollowUps(const std::vector<FollowUpCandidate>& open, size_t breadth);

}  // namespace grag::query
