// Basic and hybrid search: ranked passages in a budget, then one answer call or an extractive
// answer (see grag/passage_search.h).
#include "grag/passage_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <unordered_set>

#include "grag/words.h"
#include "grag/log.h"

namespace grag {
namespace {

constexpr std::string_view kLog = "passages";

// The ids ("S3") the answer cites that stand for placed passages, in order of first mention.
std::vector<PassageCitation> FindCitations(std::string_view answer, size_t placed) {
  std::vector<PassageCitation> out;
  std::set<size_t> seen;
  for (size_t i = 0; i + 1 < answer.size(); ++i) {
    if (answer[i] != 'S' || (i > 0 && std::isalnum(static_cast<unsigned char>(answer[i - 1])))) {
      continue;
    }
    size_t j = i + 1;
    size_t n = 0;
    while (j < answer.size() && std::isdigit(static_cast<unsigned char>(answer[j])) && j - i <= 6) {
      n = n * 10 + static_cast<size_t>(answer[j] - '0');
      ++j;
    }
    if (j == i + 1 || (j < answer.size() && std::isalnum(static_cast<unsigned char>(answer[j])))) {
      continue;
    }
    if (n >= 1 && n <= placed && seen.insert(n).second) {
      out.push_back({"S" + std::to_string(n), n - 1});
    }
  }
  return out;
}

std::vector<std::string> Words(std::string_view text) {
  return SplitNormalizedName(NormalizeEntityName(text));
}

// Sentences split after . ! ? followed by white space and at blank lines, trimmed.
std::vector<std::string> Sentences(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  auto push = [&](size_t end) {
    std::string s(text.substr(start, end - start));
    std::string collapsed;
    bool space = false;
    for (char c : s) {
      if (std::isspace(static_cast<unsigned char>(c)) != 0) {
        space = !collapsed.empty();
      } else {
        if (space) collapsed += ' ';
        space = false;
        collapsed += c;
      }
    }
    if (!collapsed.empty()) out.push_back(std::move(collapsed));
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool end_mark = (c == '.' || c == '!' || c == '?') && i + 1 < text.size() &&
                          std::isspace(static_cast<unsigned char>(text[i + 1])) != 0;
    const bool blank = c == '\n' && i + 1 < text.size() && text[i + 1] == '\n';
    if (end_mark || blank) {
      push(i + 1);
      start = i + 1;
    }
  }
  if (start < text.size()) push(text.size());
  return out;
}

// The extractive answer: the sentences of the placed passages that share the most words with
// the question (rarer question words count more: they appear in fewer of the passages), in
// rank order of their passages, each with its passage's id.
std::string ExtractiveAnswer(std::string_view question, const std::vector<RetrievedChunk>& chunks,
                             size_t placed, int max_sentences) {
  std::vector<std::string> q = Words(question);
  std::unordered_set<std::string> terms(q.begin(), q.end());
  // A question word in every passage says little.
  std::unordered_map<std::string, int> in_passages;
  for (size_t i = 0; i < placed; ++i) {
    std::unordered_set<std::string> w;
    for (auto& x : Words(chunks[i].text)) w.insert(std::move(x));
    for (const auto& t : terms) in_passages[t] += w.count(t) ? 1 : 0;
  }
  struct Pick {
    double score;
    size_t chunk;
    size_t order;
    std::string text;
  };
  std::vector<Pick> picks;
  size_t order = 0;
  for (size_t i = 0; i < placed; ++i) {
    for (auto& s : Sentences(chunks[i].text)) {
      std::unordered_set<std::string> w;
      for (auto& x : Words(s)) w.insert(std::move(x));
      double score = 0;
      for (const auto& t : terms) {
        if (w.count(t)) score += 1.0 / static_cast<double>(std::max(1, in_passages[t]));
      }
      if (score <= 0) continue;
      score /= 1.0 + 0.15 * static_cast<double>(i);  // earlier passages rank higher
      picks.push_back({score, i, order++, std::move(s)});
    }
  }
  std::stable_sort(picks.begin(), picks.end(),
                   [](const Pick& a, const Pick& b) { return a.score > b.score; });
  if (picks.size() > static_cast<size_t>(std::max(1, max_sentences))) {
    picks.resize(static_cast<size_t>(std::max(1, max_sentences)));
  }
  std::stable_sort(picks.begin(), picks.end(), [](const Pick& a, const Pick& b) {
    return a.chunk != b.chunk ? a.chunk < b.chunk : a.order < b.order;
  });
  std::string answer;
  for (const auto& p : picks) {
    if (!answer.empty()) answer += "\n";
    answer += "- " + p.text + " [S" + std::to_string(p.chunk + 1) + "]";
  }
  if (answer.empty() && placed > 0) {
    // Nothing shares a word with the question: the best passage's opening stands for it.
    const auto s = Sentences(chunks[0].text);
    if (!s.empty()) answer = "- " + s[0] + " [S1]";
  }
  return answer;
}

}  // namespace

Result<PassageSearchResult> PassageSearch(Store& store, const Retriever& retriever, ChatModel* chat,
                                          const Tokenizer& tokenizer, std::string_view question,
                                          const PassageSearchOptions& options) {
  (void)store;
  GRAG_RETURN_IF_ERROR(CheckQuestion(question, tokenizer, options.max_question_tokens));
  if (options.context_budget_tokens < 1) {
    return Status::InvalidArgument("context_budget_tokens must be at least 1");
  }
  for (std::string_view ph : {"{{question}}", "{{sources}}"}) {
    if (options.prompt.find(ph) == std::string::npos) {
      return Status::InvalidArgument("the basic search prompt lacks the placeholder " +
                                     std::string(ph));
    }
  }
  PassageSearchResult result;
  GRAG_ASSIGN_OR_RETURN(result.retrieval, retriever.Retrieve(question, options.retrieval));
  if (result.retrieval.chunks.empty()) {
    result.nothing_found = true;
    result.answer = options.nothing_found_answer;
    if (options.on_answer_delta) options.on_answer_delta(result.answer);
    return result;
  }
  // Passages in rank order while they fit; the first that does not ends the context.
  std::string sources;
  for (size_t i = 0; i < result.retrieval.chunks.size(); ++i) {
    const RetrievedChunk& c = result.retrieval.chunks[i];
    const std::string item =
        fmt::format("[S{}] {}, chunk {}:\n{}\n\n", i + 1, c.document_id, c.index, c.text);
    const auto tokens = static_cast<int64_t>(tokenizer.Count(item));
    if (result.context_tokens + tokens > options.context_budget_tokens && result.placed > 0) break;
    result.context_tokens += tokens;
    sources += item;
    ++result.placed;
    Log(LogLevel::kDebug, kLog,
        fmt::format("placed S{}: chunk {} of {} ({} tokens)", i + 1, c.index, c.document_id,
                    tokens));
  }
  if (chat == nullptr) {
    result.answer = ExtractiveAnswer(question, result.retrieval.chunks, result.placed,
                                     options.extractive_sentences);
    if (options.on_answer_delta) options.on_answer_delta(result.answer);
  } else {
    result.llm = true;
    result.prompt =
        FillPrompt(options.prompt, {{"question", std::string(question)}, {"sources", sources}});
    ChatRequest request;
    request.role = ChatRole::kQuery;
    request.messages.push_back({"user", result.prompt});
    request.temperature = options.temperature;
    request.max_tokens = options.answer_max_tokens;
    request.on_delta = options.on_answer_delta;
    auto reply = chat->Chat(request);
    if (!reply.ok()) return reply.status().WithContext("passage search answer");
    result.response = *reply;
    result.answer = reply->content;
  }
  result.citations = FindCitations(result.answer, result.placed);
  return result;
}

}  // namespace grag
