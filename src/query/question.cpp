#include "grag/question.h"

#include <utf8proc.h>

#include <string>

namespace grag {
namespace {

// Whether `text` holds a letter or a digit in any script.
bool HasWordCharacter(std::string_view text) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  auto left = static_cast<utf8proc_ssize_t>(text.size());
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) {
      n = 1;  // not UTF-8: skip the byte
    } else {
      switch (utf8proc_category(cp)) {
        case UTF8PROC_CATEGORY_LU:
        case UTF8PROC_CATEGORY_LL:
        case UTF8PROC_CATEGORY_LT:
        case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_LO:
        case UTF8PROC_CATEGORY_ND:
        case UTF8PROC_CATEGORY_NL:
        case UTF8PROC_CATEGORY_NO:
          return true;
        default:
          break;
      }
    }
    p += n;
    left -= n;
  }
  return false;
}

}  // namespace

Status CheckQuestionHasWords(std::string_view question) {
  if (!HasWordCharacter(question)) {
    return Status::InvalidArgument("the question is empty: it holds no word to search for");
  }
  return Status::Ok();
}

Status CheckQuestion(std::string_view question, const Tokenizer& tokenizer, int64_t max_tokens) {
  GRAG_RETURN_IF_ERROR(CheckQuestionHasWords(question));
  if (QuestionNeedsCounting(question, max_tokens)) {
    const auto tokens = static_cast<int64_t>(tokenizer.Count(question));
    if (tokens > max_tokens) {
      return Status::InvalidArgument(
          "the question is " + std::to_string(tokens) + " tokens long, more than the " +
          std::to_string(max_tokens) +
          " allowed (query.max_question_tokens): shorten it, or raise the limit knowing that "
          "every map call and the answer prompt carry the whole question");
    }
  }
  return Status::Ok();
}

}  // namespace grag
