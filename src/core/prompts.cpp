#include "grag/prompts.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace grag {
namespace {

// Seed 000's prompts, verbatim.
constexpr std::string_view k_extract_graph =
    R"GRAGPROMPT(Extract the entities and relationships in the text below.

Entity types: {{entity_types}}

<text>{{chunk}}</text>

Return JSON:
{"entities": [{"name": "...", "type": "...", "description": "..."}],
 "relationships": [{"source": "...", "target": "...", "description": "...", "strength": 1-10}]}
Use the full, canonical name for each entity, so the same entity in
another chunk can be merged with it.
)GRAGPROMPT";
constexpr std::string_view k_community_report =
    R"GRAGPROMPT(Write a report on the community of related entities below.

<entities>{{entities}}</entities>
<relationships>{{relationships}}</relationships>

Return a title, a one-paragraph summary of what ties these entities
together, and 3 to 6 key findings, each with the entities it rests on.
)GRAGPROMPT";
constexpr std::string_view k_global_map =
    R"GRAGPROMPT(Answer the question as far as the community reports below allow.

<question>{{question}}</question>
<reports>{{report_batch}}</reports>

Return JSON: {"points": [{"description": "...", "score": 0-100}]}
Score each point by how helpful it is for answering the question.
If the reports are irrelevant, return one point with score 0.
)GRAGPROMPT";
constexpr std::string_view k_global_reduce =
    R"GRAGPROMPT(Write a complete answer to the question from the analysts' points below,
which are sorted from most to least helpful.

<question>{{question}}</question>
<points>{{ranked_points}}</points>

Merge overlapping points, keep the most important themes first, and do
not add anything the points do not support.
)GRAGPROMPT";
constexpr std::string_view k_local_search =
    R"GRAGPROMPT(Answer the question using the knowledge-graph context below.

<question>{{question}}</question>
<entities>{{entities}}</entities>
<relationships>{{relationships}}</relationships>
<community_reports>{{reports}}</community_reports>
<source_chunks>{{chunks}}</source_chunks>

Prefer the source chunks for specific facts and the reports for the
bigger picture. Cite the entity or chunk ID after each claim.
)GRAGPROMPT";
// grag's own prompts, in the seed's style.
constexpr std::string_view k_basic_search =
    R"GRAGPROMPT(Answer the question using the source passages below.

<question>{{question}}</question>
<sources>{{sources}}</sources>

Use only what the passages say. Cite the passage ID (S1, S2, ...) after
each claim. If the passages do not answer the question, say so.
)GRAGPROMPT";
constexpr std::string_view k_route_question =
    R"GRAGPROMPT(Classify the question below for a search engine over a document collection.

<question>{{question}}</question>

Return JSON: {"kind": "global" | "multi_hop" | "lookup", "reason": "..."}
global: about the collection as a whole (its themes, trends, main actors).
multi_hop: joins facts about several named things, or about something
reached through another ("the director of the film that...").
lookup: one fact about one named thing.
)GRAGPROMPT";
constexpr std::string_view k_resolve_entities =
    R"GRAGPROMPT(You are an entity-resolution judge for a knowledge graph. Each pair below holds two entities
extracted from the same documents. Decide for each pair whether both names refer to the same
real-world entity (the same person, organisation, place, event or thing), using the names, types
and descriptions. Variants of one name (case, articles, titles, abbreviations, acronyms, typos,
former names) are the same entity. Related but different things are not: a parent and its
subsidiary, a product and its maker, different versions or years, relatives who share a surname,
places that share a name, a group and one of its members. When the evidence is insufficient,
answer false.

Reply with one JSON object and nothing else: {"verdicts": [{"pair": <pair number>, "same": true or false, "reason": "<a few words>"}]} with one verdict for every pair.

{{pairs}}
Reply with one JSON object and nothing else: {"verdicts": [{"pair": <pair number>, "same": true or false, "reason": "<a few words>"}]} with one verdict for every pair.
)GRAGPROMPT";
constexpr std::string_view k_drift_hyde =
    R"GRAGPROMPT(Write a short hypothetical answer to the question below, shaped like the example report
(title, summary, findings), as if the collection held the answer.

<question>{{question}}</question>
<example_report>{{report_template}}</example_report>

Name no person, place or organisation the question does not name. Return only the text.
)GRAGPROMPT";
constexpr std::string_view k_drift_primer =
    R"GRAGPROMPT(Answer the question as far as the community reports below allow, then say what to look up next.

<question>{{question}}</question>
<reports>{{reports}}</reports>

Return JSON: {"intermediate_answer": "...", "score": 0-100,
 "follow_up_queries": ["...", ...]}
intermediate_answer: a few paragraphs in markdown; cite report ids as [C12].
score: how fully the reports answer the question (0 = not at all).
follow_up_queries: up to {{max_followups}} specific, single-part questions about named
entities or events in the reports whose answers would complete the answer.
)GRAGPROMPT";
constexpr std::string_view k_drift_local =
    R"GRAGPROMPT(Answer the question using the knowledge-graph context below; it is one step of research into
the overall question.

<overall_question>{{global_question}}</overall_question>
<question>{{question}}</question>
<entities>{{entities}}</entities>
<relationships>{{relationships}}</relationships>
<community_reports>{{reports}}</community_reports>
<source_chunks>{{chunks}}</source_chunks>

Return JSON: {"response": "...", "score": 0-100, "follow_up_queries": ["..."]}
response: the answer to the question (not the overall one), citing entity, relationship, report
or chunk ids (E12, R40, C7, S3) after each claim.
score: how much the response helps answer the overall question.
follow_up_queries: up to {{max_followups}} single-part questions, [] if none.
)GRAGPROMPT";
constexpr std::string_view k_drift_reduce =
    R"GRAGPROMPT(Write a complete answer to the question from the research notes below, sorted from most to
least helpful.

<question>{{question}}</question>
<notes>{{answers}}</notes>

Merge overlapping notes, keep the ids they cite (C7, S3, E12, R40) after each claim, and do not
add anything the notes do not support.
)GRAGPROMPT";
constexpr std::string_view k_lazy_refine =
    R"GRAGPROMPT(Prepare a search of a document collection for the question below.

<question>{{question}}</question>

Return JSON: {"subqueries": ["..."], "terms": ["..."]}
subqueries: up to {{max_subqueries}} short questions, each asking one part of the
question; [] when it has only one part.
terms: up to 10 words or short phrases a passage answering it would likely
contain (names, synonyms, related concepts), not words of the question itself.
)GRAGPROMPT";
constexpr std::string_view k_lazy_relevance =
    R"GRAGPROMPT(Rate how relevant each passage below is to the question.

<question>{{question}}</question>
<passages>{{passages}}</passages>

Return JSON: {"ratings": [{"id": "T1", "score": 0-3}]}
One rating per passage id. 0: unrelated. 1: same topic, no help.
2: relevant to the question. 3: answers part of the question.
)GRAGPROMPT";
constexpr std::string_view k_lazy_claims =
    R"GRAGPROMPT(Draw from the passages below the claims that help answer the question.

<question>{{question}}</question>
<passages>{{passages}}</passages>

Return JSON: {"claims": [{"claim": "...", "score": 0-100, "sources": ["T1"],
 "quote": "..."}]}
claim: one statement the passages support. score: how helpful it is for
answering the question. sources: the ids of the passages it rests on.
quote: a few words copied exactly from one of them. If nothing helps,
return one claim with score 0.
)GRAGPROMPT";
}  // namespace

const std::vector<PromptInfo>& AllPrompts() {
  static const std::vector<PromptInfo> kPrompts = {
      {PromptId::kExtractGraph,
       "extract_graph.md",
       "Entity and relationship extraction, one call per chunk",
       k_extract_graph,
       {"{{entity_types}}", "{{chunk}}"}},
      {PromptId::kCommunityReport,
       "community_report.md",
       "Community report, one call per community",
       k_community_report,
       {"{{entities}}", "{{relationships}}"}},
      {PromptId::kGlobalMap,
       "global_map.md",
       "Global search map step, one call per batch of reports",
       k_global_map,
       {"{{question}}", "{{report_batch}}"}},
      {PromptId::kGlobalReduce,
       "global_reduce.md",
       "Global search reduce step, one call per query",
       k_global_reduce,
       {"{{question}}", "{{ranked_points}}"}},
      {PromptId::kLocalSearch,
       "local_search.md",
       "Local search answer, one call per query",
       k_local_search,
       {"{{question}}", "{{entities}}", "{{relationships}}", "{{reports}}", "{{chunks}}"}},
      {PromptId::kBasicSearch,
       "basic_search.md",
       "Basic and hybrid search answer from ranked passages, one call per query",
       k_basic_search,
       {"{{question}}", "{{sources}}"}},
      {PromptId::kRouteQuestion,
       "route_question.md",
       "Router of --method auto when query.router = \"llm\": one small call per new question",
       k_route_question,
       {"{{question}}"}},
      {PromptId::kResolveEntities,
       "resolve_entities.md",
       "Entity resolution's judge: candidate pairs it cannot settle alone, in batches, when "
       "indexing with an LLM",
       k_resolve_entities,
       {"{{pairs}}"}},
      {PromptId::kDriftHyde,
       "drift_hyde.md",
       "DRIFT search: a hypothetical answer shaped like a report, matched to the reports (one "
       "call per question, drift.hyde)",
       k_drift_hyde,
       {"{{question}}", "{{report_template}}"}},
      {PromptId::kDriftPrimer,
       "drift_primer.md",
       "DRIFT search primer: intermediate answer and follow-up questions from the best-matching "
       "reports, one call per fold",
       k_drift_primer,
       {"{{question}}", "{{reports}}", "{{max_followups}}"}},
      {PromptId::kDriftLocal,
       "drift_local.md",
       "DRIFT search follow-up: one local-search answer with a score and further follow-ups, one "
       "call per follow-up",
       k_drift_local,
       {"{{question}}", "{{global_question}}", "{{entities}}", "{{relationships}}", "{{reports}}",
        "{{chunks}}", "{{max_followups}}"}},
      {PromptId::kDriftReduce,
       "drift_reduce.md",
       "DRIFT search reduce: the answer from the primer's and follow-ups' notes, one call per "
       "question",
       k_drift_reduce,
       {"{{question}}", "{{answers}}"}},
      {PromptId::kLazyRefine,
       "lazy_refine.md",
       "Budgeted search (--method lazy): sub-questions and search terms, one call per question",
       k_lazy_refine,
       {"{{question}}", "{{max_subqueries}}"}},
      {PromptId::kLazyRelevance,
       "lazy_relevance.md",
       "Budgeted search: relevance ratings of a few passages, one call per --budget unit",
       k_lazy_relevance,
       {"{{question}}", "{{passages}}"}},
      {PromptId::kLazyClaims,
       "lazy_claims.md",
       "Budgeted search: claims drawn from the relevant passages, one call per batch (its reduce "
       "is global_reduce.md)",
       k_lazy_claims,
       {"{{question}}", "{{passages}}"}},
  };
  return kPrompts;
}

const PromptInfo& GetPromptInfo(PromptId id) {
  for (const auto& p : AllPrompts()) {
    if (p.id == id) return p;
  }
  return AllPrompts().front();  // unreachable: every PromptId is listed
}

Result<std::string> LoadPrompt(const std::string& prompts_dir, PromptId id) {
  const auto& info = GetPromptInfo(id);
  const auto path = std::filesystem::path(prompts_dir) / info.file_name;
  std::error_code ec;
  if (prompts_dir.empty() || !std::filesystem::exists(path, ec)) {
    return std::string(info.default_text);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError("cannot read prompt file " + path.string());
  std::ostringstream buf;
  buf << in.rdbuf();
  std::string text = buf.str();
  for (auto ph : info.placeholders) {
    if (text.find(ph) == std::string::npos) {
      return Status::InvalidArgument("prompt file " + path.string() + " lacks the placeholder " +
                                     std::string(ph) + " (delete the file to use the default)");
    }
  }
  return text;
}

std::string FillPrompt(std::string_view templ, const std::map<std::string, std::string>& values) {
  std::string out;
  out.reserve(templ.size());
  size_t i = 0;
  while (i < templ.size()) {
    const size_t open = templ.find("{{", i);
    if (open == std::string_view::npos) break;
    const size_t close = templ.find("}}", open + 2);
    if (close == std::string_view::npos) break;
    out.append(templ.substr(i, open - i));
    const std::string name(templ.substr(open + 2, close - open - 2));
    if (auto it = values.find(name); it != values.end()) {
      out += it->second;
    } else {
      out.append(templ.substr(open, close + 2 - open));
    }
    i = close + 2;
  }
  out.append(templ.substr(i));
  return out;
}

}  // namespace grag
