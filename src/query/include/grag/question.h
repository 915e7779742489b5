// Checks every query method applies to a question before any work or model call.
#pragma once

#include <cstdint>
#include <string_view>

#include "grag/status.h"
#include "grag/tokenizer.h"

namespace grag {

// Longest question accepted by default, in tokens: a long paragraph. A question is sent whole in
// every map prompt and in the local answer prompt, so a pasted document would multiply a
// query's cost and crowd out the context the budgets are meant to hold.
inline constexpr int64_t kDefaultMaxQuestionTokens = 2000;

// kInvalidArgument when `question` holds no letter or digit ("", "   ", "?!") or is longer than
// `max_tokens` tokens (<= 0: no limit); the message says what to change.
Status CheckQuestion(std::string_view question, const Tokenizer& tokenizer,
                     int64_t max_tokens = kDefaultMaxQuestionTokens);

// The first half of CheckQuestion, which needs no tokenizer: kInvalidArgument when `question`
// holds no letter or digit.
Status CheckQuestionHasWords(std::string_view question);

// Whether CheckQuestion must count tokens to judge the length: a question of at most
// `max_tokens` bytes cannot have more tokens than that (a token is at least one byte).
inline bool QuestionNeedsCounting(std::string_view question, int64_t max_tokens) {
  return max_tokens > 0 && static_cast<int64_t>(question.size()) > max_tokens;
}

}  // namespace grag
