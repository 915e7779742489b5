// Extractive local search (no LLM): the context LocalSearch would send, rendered as the answer.
// See grag/extractive.h.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "grag/extractive_search.h"
#include "grag/words.h"
#include "grag/log.h"

namespace grag {
namespace {

constexpr std::string_view kOpenQuote = "\xE2\x80\x9C";   // “
constexpr std::string_view kCloseQuote = "\xE2\x80\x9D";  // ”
constexpr std::string_view kDash = "\xE2\x80\x94";        // —

// How a matched entity is recognised in a sentence: its whole normalised name, or (weaker) a
// distinctive word of it ("marley" for "Jacob Marley").
struct NameForms {
  std::string whole;               // " jacob marley "
  std::vector<std::string> parts;  // " marley ", ...; empty for one-word names
};

std::vector<NameForms> FormsOf(const std::vector<LocalMatch>& matches) {
  std::vector<NameForms> out;
  for (const LocalMatch& m : matches) {
    const std::string key = NormalizeEntityName(m.name);
    if (key.empty()) continue;
    NameForms f;
    f.whole = " " + key + " ";
    if (key.find(' ') != std::string::npos) {
      for (const std::string& w : ContentTerms(key)) {
        if (w.size() >= 4 && key.find(w) != std::string::npos) f.parts.push_back(" " + w + " ");
      }
    }
    out.push_back(std::move(f));
  }
  return out;
}

struct ScoredSentence {
  size_t order = 0;
  int entity_score = 0;  // 3 per whole name, 1 per entity named only in part
  int question_hits = 0;
  bool complete = false;
};

ScoredSentence ScoreSentence(const Sentence& s, size_t order, const std::vector<NameForms>& forms,
                             const std::unordered_set<std::string>& question_terms) {
  ScoredSentence out;
  out.order = order;
  out.complete = s.complete;
  const std::string norm = " " + NormalizeEntityName(s.text) + " ";
  for (const NameForms& f : forms) {
    if (norm.find(f.whole) != std::string::npos) {
      out.entity_score += 3;
      continue;
    }
    const bool part = std::any_of(f.parts.begin(), f.parts.end(), [&](const std::string& p) {
      return norm.find(p) != std::string::npos;
    });
    out.entity_score += part ? 1 : 0;
  }
  for (const std::string& t : ContentTerms(s.text)) {
    out.question_hits += question_terms.count(t) != 0 ? 1 : 0;
  }
  return out;
}

// The relationship's description out of its context line
// "[R40] A (E1) -- B (E2), weight 3: description\n".
std::string RelationshipDescription(const LocalContextItem& item) {
  const size_t weight = item.text.find(", weight ");
  if (weight == std::string::npos) return {};
  const size_t colon = item.text.find(": ", weight);
  if (colon == std::string::npos) return {};
  std::string d = item.text.substr(colon + 2);
  while (!d.empty() && (d.back() == '\n' || d.back() == ' ')) d.pop_back();
  return d;
}

class AnswerWriter {
 public:
  AnswerWriter(Store& store, const LocalContext& ctx, std::string_view question,
               const ExtractiveLocalOptions& options)
      : store_(store), ctx_(ctx), options_(options), forms_(FormsOf(ctx.matches)) {
    for (std::string& t : ContentTerms(question)) question_terms_.insert(std::move(t));
  }

  // Sections in the order a reader wants them: who, how connected, what the text says, the
  // bigger picture. Empty sections are left out.
  Result<std::string> Write() {
    GRAG_ASSIGN_OR_RETURN(std::string entities, Entities());
    GRAG_ASSIGN_OR_RETURN(std::string excerpts, Excerpts());
    GRAG_ASSIGN_OR_RETURN(std::string reports, Reports());
    std::string out;
    for (const std::string& s : {entities, Relationships(), excerpts, reports}) {
      if (!s.empty()) out += (out.empty() ? "" : "\n\n") + s;
    }
    return out;
  }

 private:
  std::vector<const LocalContextItem*> ItemsOf(LocalItemType type) const {
    std::vector<const LocalContextItem*> out;
    for (const LocalContextItem& item : ctx_.items) {
      if (item.type == type) out.push_back(&item);
    }
    return out;
  }

  // The matched entities: the first few with their descriptions, the others named.
  Result<std::string> Entities() {
    std::string out;
    std::string others;
    size_t described = 0;
    for (const LocalContextItem* item : ItemsOf(LocalItemType::kEntity)) {
      if (described == static_cast<size_t>(options_.max_entities)) {
        others += (others.empty() ? "" : ", ") + item->name + " [" + item->id + "]";
        continue;
      }
      auto e = store_.GetEntity(item->entity_id);
      if (!e.ok()) return e.status().WithContext("reading entity " + item->id);
      std::string line = "**" + item->name + "**";
      if (!item->entity_type.empty()) line += " (" + item->entity_type + ")";
      if (e->has_value() && !(*e)->description.empty()) {
        line += ": " + ShortenAtWord((*e)->description, options_.max_description_chars);
      }
      out += (out.empty() ? "" : "\n\n") + line + " [" + item->id + "]";
      ++described;
    }
    if (!others.empty()) out += "\n\nAlso matched: " + others + ".";
    return out;
  }

  std::string Relationships() const {
    std::string out;
    int n = 0;
    for (const LocalContextItem* item : ItemsOf(LocalItemType::kRelationship)) {
      if (n++ == options_.max_relationships) break;
      out += "\n- " + item->source_name + " " + std::string(kDash) + " " + item->target_name;
      if (std::string d = RelationshipDescription(*item); !d.empty()) {
        out += ": " + ShortenAtWord(d, options_.max_relationship_chars);
      }
      out += " [" + item->id + "]";
    }
    return out.empty() ? out : "Relationships:" + out;
  }

  // The sentences of the top chunks that name a matched entity, best first within a chunk's
  // pick but quoted in text order; chunks naming none are passed over.
  Result<std::string> Excerpts() {
    std::string out;
    int shown = 0;
    for (const LocalContextItem* item : ItemsOf(LocalItemType::kChunk)) {
      if (shown == options_.max_chunks) break;
      auto chunk = store_.GetChunk(item->chunk_id);
      if (!chunk.ok()) return chunk.status().WithContext("reading chunk " + item->chunk_id);
      if (!chunk->has_value()) continue;
      const std::vector<Sentence> sentences = SplitSentences((*chunk)->text);
      std::vector<ScoredSentence> scored;
      for (size_t i = 0; i < sentences.size(); ++i) {
        ScoredSentence s = ScoreSentence(sentences[i], i, forms_, question_terms_);
        if (s.entity_score > 0) scored.push_back(s);
      }
      if (scored.empty()) continue;
      std::stable_sort(scored.begin(), scored.end(),
                       [](const ScoredSentence& a, const ScoredSentence& b) {
                         if (a.entity_score != b.entity_score) {
                           return a.entity_score > b.entity_score;
                         }
                         // A piece cut at the chunk's edge is whole in its neighbour.
                         if (a.complete != b.complete) return a.complete;
                         return a.question_hits > b.question_hits;
                       });
      scored.resize(std::min(scored.size(), static_cast<size_t>(options_.sentences_per_chunk)));
      std::sort(scored.begin(), scored.end(),
                [](const ScoredSentence& a, const ScoredSentence& b) { return a.order < b.order; });
      std::string quote;
      for (const ScoredSentence& s : scored) {
        quote += (quote.empty() ? "" : " \xE2\x80\xA6 ") +
                 ShortenAtWord(sentences[s.order].text, options_.max_quote_chars);
      }
      out += fmt::format("\n- {}{}{} ({}, chunk {}) [{}]", kOpenQuote, quote, kCloseQuote,
                         item->document_id, item->chunk_index, item->id);
      ++shown;
    }
    return out.empty() ? out : "From the source text:" + out;
  }

  Result<std::string> Reports() {
    std::string out;
    int n = 0;
    for (const LocalContextItem* item : ItemsOf(LocalItemType::kReport)) {
      if (n++ == options_.max_reports) break;
      auto report = store_.GetReport(item->community_id);
      if (!report.ok()) return report.status().WithContext("reading report " + item->id);
      out += "\n- **" +
             (item->name.empty() ? "Community " + std::to_string(item->community_id) : item->name) +
             "**";
      if (report->has_value() && !(*report)->summary.empty()) {
        out += ": " + ShortenAtWord((*report)->summary, options_.max_quote_chars);
      }
      out += " [" + item->id + "]";
    }
    return out.empty() ? out : "Community reports:" + out;
  }

  Store& store_;
  const LocalContext& ctx_;
  const ExtractiveLocalOptions& options_;
  const std::vector<NameForms> forms_;
  std::unordered_set<std::string> question_terms_;
};

Status CheckOptions(const ExtractiveLocalOptions& o) {
  if (o.max_entities < 1) return Status::InvalidArgument("max_entities must be at least 1");
  if (o.max_relationships < 0 || o.max_chunks < 0 || o.max_reports < 0 ||
      o.sentences_per_chunk < 1) {
    return Status::InvalidArgument(
        "extractive local limits must not be negative, and sentences_per_chunk at least 1");
  }
  if (o.max_quote_chars < 16 || o.max_description_chars < 16 || o.max_relationship_chars < 16) {
    return Status::InvalidArgument(
        "max_quote_chars, max_description_chars and max_relationship_chars must be >= 16");
  }
  return Status::Ok();
}

}  // namespace

Result<LocalSearchResult> ExtractiveLocalSearch(
    Store& store, EmbeddingModel* embedder, const Tokenizer& tokenizer, std::string_view question,
    const LocalSearchOptions& options, const ExtractiveLocalOptions& extractive,
    const VectorIndex* entity_index, const Retriever* retriever) {
  GRAG_RETURN_IF_ERROR(CheckOptions(extractive));
  GRAG_ASSIGN_OR_RETURN(
      LocalContext context,
      BuildLocalContext(store, embedder, tokenizer, question, options, entity_index, retriever));
  LocalSearchResult result;
  if (context.matches.empty()) {  // seed 000's stop rule, as LocalSearch
    Log(LogLevel::kInfo, "local", "no entity matched the question");
    result.nothing_found = true;
    result.answer = options.nothing_found_answer;
  } else {
    GRAG_ASSIGN_OR_RETURN(result.answer,
                          AnswerWriter(store, context, question, extractive).Write());
    result.citations = FindLocalCitations(result.answer, context);
    Log(LogLevel::kDebug, "local",
        fmt::format("extractive answer: {} bytes citing {} of {} context items",
                    result.answer.size(), result.citations.size(), context.items.size()));
  }
  result.context = std::move(context);
  if (options.on_answer_delta) options.on_answer_delta(result.answer);
  return result;
}

}  // namespace grag
