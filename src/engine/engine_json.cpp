#include "grag/engine_json.h"

#include <map>
#include <nlohmann/json.hpp>

#include "grag/json_write.h"
#include "grag/lexical_embedder.h"
#include "grag/words.h"
#include "engine_internal.h"

namespace grag {
namespace {

using nlohmann::json;

// nlohmann's compact dump, byte for byte, with the strings written by AppendJsonString: results
// carry whole chunk texts, and escaping them was most of the cost of a search's JSON (a third of
// a BM25 search from Python; bench/python_search_bench.py).
void WriteCompact(const json& j, std::string& out) {
  switch (j.type()) {
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) out += ',';
        first = false;
        AppendJsonString(out, it.key());
        out += ':';
        WriteCompact(it.value(), out);
      }
      out += '}';
      return;
    }
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const json& v : j) {
        if (!first) out += ',';
        first = false;
        WriteCompact(v, out);
      }
      out += ']';
      return;
    }
    case json::value_t::string:
      AppendJsonString(out, j.get_ref<const std::string&>());
      return;
    case json::value_t::boolean:
      out += j.get<bool>() ? "true" : "false";
      return;
    case json::value_t::null:
      out += "null";
      return;
    case json::value_t::number_integer:
      out += std::to_string(j.get<int64_t>());
      return;
    case json::value_t::number_unsigned:
      out += std::to_string(j.get<uint64_t>());
      return;
    default:  // floats (nlohmann's shortest form; NaN as null), binary
      out += j.dump(-1, ' ', false, json::error_handler_t::replace);
      return;
  }
}

std::string Dump(const json& j, bool pretty) {
  // Invalid UTF-8 from a document must not make dump() throw: replace it instead.
  if (pretty) return j.dump(2, ' ', false, json::error_handler_t::replace);
  std::string out;
  WriteCompact(j, out);
  return out;
}

json RouteObject(const QueryRoute& r) {
  return {{"kind", QuestionKindName(r.decision.kind)},
          {"method", QueryMethodName(r.method)},
          {"reason", r.decision.reason},
          {"by_llm", r.decision.by_llm},
          {"estimated_llm_calls", r.estimated_calls},
          {"estimated_tokens", r.estimated_tokens},
          {"max_llm_calls", r.max_calls},
          {"cost_note", r.cost_note}};
}

json LazyObject(const LazySearchResult& r, std::string_view question) {
  const auto& s = r.stats;
  json cites = json::array();
  for (size_t i : r.citations) {
    const LazyTest& t = r.tests[i];
    cites.push_back({{"id", t.label},
                     {"chunk_id", t.chunk_id},
                     {"document_id", t.document_id},
                     {"chunk_index", t.chunk_index}});
  }
  json claims = json::array();
  for (const auto& p : r.claims) {
    claims.push_back({{"claim", p.description},
                      {"score", p.score},
                      {"sources", p.source_ids},
                      {"communities", p.community_ids},
                      {"fate", PointFateName(p.fate)}});
  }
  json tests = json::array();
  for (const auto& t : r.tests) {
    tests.push_back({{"id", t.label},
                     {"chunk_id", t.chunk_id},
                     {"document_id", t.document_id},
                     {"community", t.community_id},
                     {"window", {t.window_begin, t.window_end}},
                     {"tokens", t.tokens},
                     {"score", t.score},
                     {"relevant", t.relevant},
                     {"call", t.call}});
  }
  json visits = json::array();
  for (const auto& v : r.visits) {
    visits.push_back({{"community", v.community_id},
                      {"level", v.level},
                      {"rank", v.rank},
                      {"tested", v.tested},
                      {"hits", v.hits},
                      {"wave", v.wave}});
  }
  return {{"method", "lazy"},
          {"question", question},
          {"answer", r.answer},
          {"llm", true},
          {"not_covered", r.not_covered},
          {"budget_exhausted", r.budget_exhausted},
          {"subqueries", r.subqueries},
          {"terms", r.terms},
          {"citations", cites},
          {"claims", claims},
          {"tests", tests},
          {"visits", visits},
          {"stats",
           {{"calls", s.calls()},
            {"refine_calls", s.refine_calls},
            {"relevance_calls", s.relevance_calls},
            {"relevance_failed", s.relevance_failed},
            {"relevance_unparseable", s.relevance_unparseable},
            {"claim_calls", s.claim_calls},
            {"claim_calls_failed", s.claim_calls_failed},
            {"reduce_calls", s.reduce_calls},
            {"passages_tested", s.passages_tested},
            {"passages_relevant", s.passages_relevant},
            {"relevant_left_out", s.relevant_left_out},
            {"communities_visited", s.communities_visited},
            {"deepest_level", s.deepest_level},
            {"chunks_total", s.chunks_total},
            {"generic", s.generic},
            {"stop", LazyStopName(s.stop)},
            {"tokens_in", s.tokens_in},
            {"tokens_out", s.tokens_out},
            {"wall_ms", s.wall_time.count()}}}};
}

json GlobalObject(const GlobalSearchResult& r, std::string_view question, bool llm) {
  const auto& s = r.stats;
  json cites = json::array();
  for (const auto& c : r.citations) {
    cites.push_back({{"id", "C" + std::to_string(c.community_id)},
                     {"community", c.community_id},
                     {"level", c.level},
                     {"title", c.title}});
  }
  json points = json::array();
  for (const auto& p : r.points) {
    points.push_back({{"description", p.description},
                      {"score", p.score},
                      {"communities", p.community_ids},
                      {"fate", PointFateName(p.fate)}});
  }
  json calls = json::array();
  for (const auto& m : r.map_calls) {
    calls.push_back({{"batch", m.batch},
                     {"communities", m.community_ids},
                     {"outcome", MapCallOutcomeName(m.outcome)},
                     {"error", m.error},
                     {"points", m.points},
                     {"latency_ms", m.latency.count()}});
  }
  return {{"method", "global"},
          {"question", question},
          {"answer", r.answer},
          {"llm", llm},
          {"not_covered", r.not_covered},
          {"citations", cites},
          {"points", points},
          {"map_calls", calls},
          {"stats",
           {{"level", s.level},
            {"communities_selected", s.communities_selected},
            {"reports_used", s.reports_used},
            {"reports_left_out", s.reports_left_out},
            {"reports_missing", s.reports_missing},
            {"map_calls", s.map_calls},
            {"plan_from_route", s.plan_from_route},
            {"reports_written", s.reports_written},
            {"report_calls", s.report_calls},
            {"report_tokens_in", s.report_tokens_in},
            {"report_tokens_out", s.report_tokens_out},
            {"reports_pending", s.reports_pending},
            {"map_calls_failed", s.map_calls_failed},
            {"points_kept", s.points_kept},
            {"points_dropped", s.points_zero_score + s.points_over_budget},
            {"reduce_calls", s.reduce_calls},
            {"tokens_in", s.tokens_in},
            {"tokens_out", s.tokens_out},
            {"wall_ms", s.wall_time.count()}}}};
}

// What a local context item stands for, by id, so a front end can open it.
json LocalItemRef(const LocalContextItem& item) {
  switch (item.type) {
    case LocalItemType::kEntity:
      return {{"entity", item.entity_id}};
    case LocalItemType::kRelationship:
      return {{"relationship", item.relationship_id},
              {"source", item.source_id},
              {"target", item.target_id}};
    case LocalItemType::kReport:
      return {{"community", item.community_id}, {"level", item.level}};
    case LocalItemType::kChunk:
      return {{"chunk_id", item.chunk_id},
              {"document_id", item.document_id},
              {"chunk_index", item.chunk_index}};
  }
  return json::object();
}

json LocalObject(const LocalSearchResult& r, std::string_view question, bool llm) {
  const auto& ctx = r.context;
  json matches = json::array();
  for (const auto& m : ctx.matches) {
    matches.push_back({{"entity", m.entity_id},
                       {"name", m.name},
                       {"similarity", m.similarity ? json(*m.similarity) : json()},
                       {"by_name", m.by_name},
                       {"by_embedding", m.by_embedding},
                       {"by_fact", m.by_fact}});
    if (m.by_fact) matches.back()["fact_match"] = m.fact_match;
  }
  json items = json::array();
  for (const auto& it : ctx.items) {
    items.push_back({{"id", it.id},
                     {"type", LocalItemTypeName(it.type)},
                     {"rank", it.rank},
                     {"tokens", it.tokens},
                     {"source", DescribeLocalItem(it)}});
  }
  json cites = json::array();
  for (const auto& c : r.citations) {
    const LocalContextItem& item = ctx.items[c.item];
    cites.push_back({{"id", c.id},
                     {"source", DescribeLocalItem(item)},
                     {"type", LocalItemTypeName(item.type)},
                     {"ref", LocalItemRef(item)}});
  }
  return {{"method", "local"},
          {"question", question},
          {"answer", r.answer},
          {"llm", llm},
          {"nothing_found", r.nothing_found},
          {"matched_entities", matches},
          {"context", items},
          {"citations", cites},
          {"diagnostics", ctx.diagnostics},
          {"stats",
           {{"budget_tokens", ctx.budget_tokens},
            {"used_tokens", ctx.used_tokens},
            {"used_embeddings", ctx.used_embeddings},
            {"prompt_tokens", r.response.prompt_tokens},
            {"completion_tokens", r.response.completion_tokens},
            {"build_ms", static_cast<double>(ctx.build_time.count()) / 1000}}}};
}

json DriftCitationObject(const DriftCitation& c) {
  json ref;
  switch (c.kind) {
    case LocalItemType::kEntity:
      ref = {{"entity", c.entity_id}};
      break;
    case LocalItemType::kRelationship:
      ref = {{"relationship", c.relationship_id}};
      break;
    case LocalItemType::kReport:
      ref = {{"community", c.community_id}};
      break;
    case LocalItemType::kChunk:
      ref = {
          {"chunk_id", c.chunk_id}, {"document_id", c.document_id}, {"chunk_index", c.chunk_index}};
      break;
  }
  std::string source;
  switch (c.kind) {
    case LocalItemType::kEntity:
      source = "entity " + c.title;
      break;
    case LocalItemType::kRelationship:
      source = "relationship " + c.title;
      break;
    case LocalItemType::kReport:
      source = "report of community " + std::to_string(c.community_id) + ": " + c.title;
      break;
    case LocalItemType::kChunk:
      source = "chunk " + std::to_string(c.chunk_index) + " of document " + c.document_id;
      break;
  }
  return {{"id", c.id},
          {"type", LocalItemTypeName(c.kind)},
          {"title", c.title},
          {"source", source},
          {"ref", ref}};
}

json DriftObject(const DriftSearchResult& r, std::string_view question) {
  json reports = json::array();
  for (const auto& m : r.primer_reports) {
    reports.push_back({{"community", m.community_id},
                       {"level", m.level},
                       {"title", m.title},
                       {"score", m.score}});
  }
  json actions = json::array();
  for (size_t i = 0; i < r.actions.size(); ++i) {
    const DriftAction& a = r.actions[i];
    json o = {{"id", i},
              {"parent", a.parent ? json(*a.parent) : json()},
              {"depth", a.depth},
              {"query", a.query},
              {"priority", a.priority},
              {"score", a.score},
              {"outcome", DriftOutcomeName(a.outcome)},
              {"answer", a.answer},
              {"follow_ups", a.follow_ups},
              {"cited", a.cited},
              {"prompt_tokens", a.prompt_tokens},
              {"completion_tokens", a.completion_tokens},
              {"cache_hit", a.cache_hit}};
    if (!a.report_ids.empty()) o["reports"] = a.report_ids;
    if (!a.error.empty()) o["error"] = a.error;
    actions.push_back(std::move(o));
  }
  json cites = json::array();
  for (const auto& c : r.citations) cites.push_back(DriftCitationObject(c));
  const DriftStats& s = r.stats;
  return {{"method", "drift"},
          {"question", question},
          {"answer", r.answer},
          {"llm", true},
          {"hyde", r.hyde_text},
          {"primer", {{"reports", reports}, {"by_words", s.reports_by_words}}},
          {"actions", actions},
          {"citations", cites},
          {"diagnostics", r.diagnostics},
          {"stats",
           {{"calls", s.calls()},
            {"max_calls", s.max_calls},
            {"hyde_calls", s.hyde_calls},
            {"primer_calls", s.primer_calls},
            {"followup_calls", s.local_calls},
            {"reduce_calls", s.reduce_calls},
            {"failed", s.failed},
            {"unparseable", s.unparseable},
            {"duplicates", s.duplicates},
            {"embedding_requests", s.embedding_requests},
            {"tokens_in", s.tokens_in},
            {"tokens_out", s.tokens_out},
            {"cache_hits", s.cache_hits},
            {"primer_ms", s.primer_time.count()},
            {"followup_ms", s.followup_time.count()},
            {"reduce_ms", s.reduce_time.count()},
            {"wall_ms", s.wall_time.count()}}}};
}

json ChunkObject(const RetrievedChunk& c, size_t rank, bool with_text) {
  json ranks = json::object();
  json scores = json::object();
  for (size_t s = 0; s < kSignalCount; ++s) {
    const auto name = std::string(SignalName(static_cast<Signal>(s)));
    ranks[name] = c.ranks[s] ? json(*c.ranks[s]) : json();
    scores[name] = c.ranks[s] ? json(c.signal_scores[s]) : json();
  }
  json j = {{"rank", rank},           {"chunk_id", c.chunk_id}, {"document_id", c.document_id},
            {"chunk_index", c.index}, {"score", c.score},       {"signal_ranks", ranks},
            {"signal_scores", scores}};
  if (c.rerank_score) j["rerank_score"] = *c.rerank_score;
  if (!c.chained_by.empty()) j["chained_by"] = c.chained_by;
  if (with_text) j["text"] = c.text;
  return j;
}

json SeedsArray(const RetrievalResult& r) {
  json seeds = json::array();
  for (const auto& s : r.seeds) {
    json j = {{"entity", s.entity_id},
              {"name_key", s.name_key},
              {"weight", s.weight},
              {"by_name", s.by_name},
              {"by_fact", s.by_fact}};
    if (s.by_name) j["specificity"] = s.specificity;
    if (s.similarity) j["similarity"] = *s.similarity;
    if (s.by_fact) j["fact_match"] = s.fact_match;
    seeds.push_back(std::move(j));
  }
  return seeds;
}

json StatsObject(const RetrievalStats& s) {
  json candidates = json::object();
  json micros = json::object();
  for (size_t i = 0; i < kSignalCount; ++i) {
    const auto name = std::string(SignalName(static_cast<Signal>(i)));
    candidates[name] = s.candidates[i];
    micros[name] = static_cast<double>(s.signal_time[i].count()) / 1000;
  }
  return {{"chunks", s.chunks},
          {"entities", s.entities},
          {"candidates", candidates},
          {"signal_ms", micros},
          {"used_embeddings", s.used_embeddings},
          {"lexical_embeddings", s.lexical_embeddings},
          {"reranked", s.reranked},
          {"graph_weight", s.graph_weight},
          {"window_weight", s.window_weight},
          {"total_ms", static_cast<double>(s.total_time.count()) / 1000}};
}

json PassagesObject(const PassageSearchResult& r, std::string_view question, QueryMethod method) {
  json sources = json::array();
  for (size_t i = 0; i < r.placed; ++i) {
    json c = ChunkObject(r.retrieval.chunks[i], i + 1, false);
    c["id"] = "S" + std::to_string(i + 1);
    sources.push_back(std::move(c));
  }
  json cites = json::array();
  for (const auto& c : r.citations) {
    const auto& chunk = r.retrieval.chunks[c.chunk];
    cites.push_back({{"id", c.id},
                     {"chunk_id", chunk.chunk_id},
                     {"document_id", chunk.document_id},
                     {"chunk_index", chunk.index}});
  }
  return {{"method", QueryMethodName(method)},
          {"question", question},
          {"answer", r.answer},
          {"llm", r.llm},
          {"nothing_found", r.nothing_found},
          {"sources", sources},
          {"citations", cites},
          {"seeds", SeedsArray(r.retrieval)},
          {"diagnostics", r.retrieval.diagnostics},
          {"stats",
           {{"context_tokens", r.context_tokens},
            {"prompt_tokens", r.response.prompt_tokens},
            {"completion_tokens", r.response.completion_tokens},
            {"retrieval", StatsObject(r.retrieval.stats)}}}};
}

json SpanObject(const SourceSpan& s) {
  return {{"document_id", s.document_id},
          {"source_path", s.source_path},
          {"title", s.title},
          {"content_hash", s.content_hash},
          {"chunk_id", s.chunk_id},
          {"start", s.start},
          {"end", s.end},
          {"byte_start", s.byte_start},
          {"byte_end", s.byte_end},
          {"precision", SpanPrecisionName(s.precision)},
          {"overlap", s.overlap},
          {"offsets", s.located ? "located" : "stored"},
          {"text", s.text}};
}

// Each citation object gains the claim citing it and its passages (grag/citations.h), matched
// by id.
void AddSpans(json& j, const std::vector<SourceCitation>& cited) {
  if (!j.contains("citations") || !j["citations"].is_array()) return;
  std::map<std::string, const SourceCitation*> by_id;
  for (const SourceCitation& c : cited) by_id.emplace(c.id, &c);
  for (json& c : j["citations"]) {
    if (!c.contains("id") || !c["id"].is_string()) continue;
    auto it = by_id.find(c["id"].get<std::string>());
    json spans = json::array();
    std::string claim;
    if (it != by_id.end()) {
      claim = it->second->claim;
      for (const SourceSpan& s : it->second->spans) spans.push_back(SpanObject(s));
    }
    c["claim"] = claim;
    c["spans"] = std::move(spans);
  }
}

}  // namespace

namespace {

// A query's result as QueryResultJson writes it, without the router's decision.
json MethodObject(const QueryResult& result, std::string_view question) {
  json j;
  if (result.global) {
    j = GlobalObject(*result.global, question, result.llm);
  } else if (result.local) {
    j = LocalObject(*result.local, question, result.llm);
  } else if (result.passages) {
    j = PassagesObject(*result.passages, question, result.method);
  } else if (result.drift) {
    j = DriftObject(*result.drift, question);
  } else if (result.lazy) {
    j = LazyObject(*result.lazy, question);
  }
  AddSpans(j, result.source_citations);
  return j;
}

}  // namespace

std::string QueryResultJson(const QueryResult& result, std::string_view question, bool pretty) {
  json j = MethodObject(result, question);
  // Only when the router chose: explicit methods keep their shapes.
  if (result.route) j["route"] = RouteObject(*result.route);
  return Dump(j, pretty);
}

namespace {

// "Sources:" lines for a chat answer, from the citations QueryResultJson writes.
std::string SourcesText(const json& citations) {
  if (!citations.is_array() || citations.empty()) return "";
  std::string out = "\n\nSources:";
  for (const auto& c : citations) {
    out += "\n- ";
    if (c.contains("community")) {
      out += "[" + std::to_string(c.value("community", int64_t{0})) + "] " + c.value("title", "") +
             " (community report, level " + std::to_string(c.value("level", int64_t{0})) + ")";
    } else if (c.contains("chunk_id")) {
      out += "[" + c.value("id", "") + "] chunk " +
             std::to_string(c.value("chunk_index", int64_t{0})) + " of " +
             c.value("document_id", "");
    } else {
      out += "[" + c.value("id", "") + "] " + c.value("source", "");
    }
    // The passage, in characters of its document: carol.txt:10234-10391 "Marley was dead: …"
    auto spans = c.find("spans");
    if (spans != c.end() && spans->is_array() && !spans->empty()) {
      const json& sp = spans->front();
      out += ": " + sp.value("document_id", "") + ":" +
             std::to_string(sp.value("start", int64_t{0})) + "-" +
             std::to_string(sp.value("end", int64_t{0})) + " \"" +
             ShortenAtWord(sp.value("text", ""), 60) + "\"";
    }
  }
  return out;
}

}  // namespace

ChatAnswerParts ChatAnswer(const QueryResult& result, std::string_view question) {
  ChatAnswerParts out;
  if (result.global) {
    out.prompt_tokens = result.global->stats.tokens_in;
    out.completion_tokens = result.global->stats.tokens_out;
  } else if (result.local) {
    out.prompt_tokens = result.local->response.prompt_tokens;
    out.completion_tokens = result.local->response.completion_tokens;
  } else if (result.passages) {
    out.prompt_tokens = result.passages->response.prompt_tokens;
    out.completion_tokens = result.passages->response.completion_tokens;
  } else if (result.drift) {
    out.prompt_tokens = result.drift->stats.tokens_in;
    out.completion_tokens = result.drift->stats.tokens_out;
  } else if (result.lazy) {
    out.prompt_tokens = result.lazy->stats.tokens_in;
    out.completion_tokens = result.lazy->stats.tokens_out;
  }
  json j = MethodObject(result, question);
  auto it = j.find("citations");
  if (it != j.end() && it->is_array()) {
    out.sources_text = SourcesText(*it);
    out.citations_json = Dump(*it, false);
  }
  return out;
}

std::string RetrievalResultJson(const RetrievalResult& result, std::string_view question,
                                bool pretty) {
  json chunks = json::array();
  for (size_t i = 0; i < result.chunks.size(); ++i) {
    chunks.push_back(ChunkObject(result.chunks[i], i + 1, true));
  }
  json entities = json::array();
  for (size_t i = 0; i < std::min<size_t>(20, result.entity_scores.size()); ++i) {
    entities.push_back(
        {{"entity", result.entity_scores[i].first}, {"score", result.entity_scores[i].second}});
  }
  json out = {{"method", RetrievalMethodName(result.method)},
              {"question", question},
              {"seeds", SeedsArray(result)},
              {"entities", std::move(entities)},
              {"diagnostics", result.diagnostics},
              {"stats", StatsObject(result.stats)}};
  out["chunks"] = std::move(chunks);  // not copied: the chunks' texts are most of it
  return Dump(out, pretty);
}

std::string QueryRouteJson(const QueryRoute& route, std::string_view question, bool pretty) {
  json j = RouteObject(route);
  j["question"] = question;
  return Dump(j, pretty);
}

namespace {

// Per-endpoint usage; the median only where the latencies' spread is known (a run's summary).
json EndpointsArray(const std::vector<EndpointUsage>& endpoints, bool with_median) {
  json out = json::array();
  for (const EndpointUsage& e : endpoints) {
    json o = {{"role", e.role},
              {"name", e.name},
              {"requests", e.requests},
              {"errors", e.errors},
              {"benched", e.benched},
              {"prompt_tokens", e.prompt_tokens},
              {"completion_tokens", e.completion_tokens},
              {"latency_ms_mean", e.LatencyMeanMs()}};
    if (!e.base_url.empty()) o["base_url"] = e.base_url;
    if (!e.model.empty()) o["model"] = e.model;
    if (with_median) o["latency_ms_p50"] = e.LatencyP50Ms();
    out.push_back(std::move(o));
  }
  return out;
}

// {"extract": {"calls", "prompt_tokens", "completion_tokens", "cost"}, ...}
json RoleCostsObject(const std::vector<RoleCost>& roles) {
  json out = json::object();
  for (const RoleCost& r : roles) {
    out[r.role] = {{"calls", r.calls},
                   {"prompt_tokens", r.prompt_tokens},
                   {"completion_tokens", r.completion_tokens},
                   {"cost", r.cost ? json(*r.cost) : json(nullptr)}};
  }
  return out;
}

json PlanObject(const IndexPlan& p) {
  return {
      {"documents",
       {{"added", p.documents_added},
        {"changed", p.documents_changed},
        {"removed", p.documents_removed},
        {"unchanged", p.documents_unchanged}}},
      {"chunks_to_extract", p.chunks_to_extract},
      {"chunks_removed", p.chunks_removed},
      {"extraction_calls_max", p.extraction_calls_max},
      {"estimate",
       {{"calls",
         {{"extract", p.estimate.calls.extract},
          {"glean", p.estimate.calls.glean},
          {"resolve", p.estimate.calls.resolve},
          {"summarize", p.estimate.calls.summarize},
          {"report", p.estimate.calls.report},
          {"total", p.estimate.calls.Total()}}},
        {"prompt_tokens", p.estimate.prompt_tokens},
        {"completion_tokens", p.estimate.completion_tokens},
        {"cost", p.estimate.cost ? json(*p.estimate.cost) : json(nullptr)},
        {"by_role", RoleCostsObject(p.estimate.by_role)},
        {"deferred_reports", p.estimate.deferred_reports},
        {"history_runs", p.estimate.history_runs},
        {"update", p.estimate.update}}},
  };
}

}  // namespace

std::string IndexPlanJson(const IndexPlan& plan, bool pretty) {
  return Dump(PlanObject(plan), pretty);
}

std::string IndexSummaryJson(const IndexSummary& s, const IndexPlan* plan, bool pretty) {
  json issues = json::array();
  for (const auto& i : s.load_issues) {
    issues.push_back({{"path", i.path}, {"message", i.message}, {"skipped", i.skipped}});
  }
  json levels = json::object();
  for (const auto& [l, n] : s.communities_per_level) levels[std::to_string(l)] = n;
  json j = {
      {"run_id", s.run_id},
      {"no_llm", s.no_llm},
      {"embedding_model", s.embedding_model},
      {"documents",
       {{"added", s.documents_added},
        {"changed", s.documents_changed},
        {"unchanged", s.documents_unchanged},
        {"removed", s.documents_removed}}},
      {"load_issues", issues},
      {"chunks",
       {{"total", s.chunks},
        {"added", s.chunks_added},
        {"removed", s.chunks_removed},
        {"extracted", s.chunks_extracted},
        {"skipped", s.chunks_skipped},
        {"empty", s.chunks_empty}}},
      {"entities", s.entities},
      {"relationships", s.relationships},
      {"graph_unchanged", s.graph_unchanged},
      {"resolution",
       {{"fresh", s.resolution_fresh},
        {"merged", s.resolution_merged},
        {"adjudicated", s.resolution_adjudicated},
        {"llm_calls", s.resolution_llm_calls}}},
      {"descriptions_summarized", s.descriptions_summarized},
      {"descriptions_appended", s.descriptions_appended},
      {"communities_per_level", levels},
      {"modularity", s.modularity},
      {"reports",
       {{"generated", s.reports_generated},
        {"reused", s.reports_reused},
        {"gaps", s.report_gaps},
        {"extractive", s.reports_extractive},
        {"kept_stale", s.reports_kept_stale},
        {"deferred", s.reports_deferred}}},
      {"embeddings_written", s.embeddings_written},
      {"llm",
       {{"calls", s.usage.calls},
        {"cache_hits", s.usage.cache_hits},
        {"http_requests", s.usage.http_requests},
        {"retries", s.usage.retries},
        {"failures", s.usage.failures},
        {"prompt_tokens", s.usage.prompt_tokens},
        {"completion_tokens", s.usage.completion_tokens},
        {"calls_by_kind",
         {{"extract", s.calls.extract},
          {"glean", s.calls.glean},
          {"resolve", s.calls.resolve},
          {"summarize", s.calls.summarize},
          {"report", s.calls.report}}}}},
      {"elapsed_seconds", s.elapsed_seconds},
  };
  if (!s.usage.endpoints.empty()) j["llm"]["endpoints"] = EndpointsArray(s.usage.endpoints, true);
  if (plan != nullptr) j["plan"] = PlanObject(*plan);
  return Dump(j, pretty);
}

namespace {
// Extraction shared with workers (Store::GetWorkState): grag stats and /v1/stats.
json WorkStateObject(const WorkState& w) {
  json workers = json::array();
  for (const WorkerProgress& p : w.workers) {
    workers.push_back({{"name", p.name},
                       {"claimed", p.claimed},
                       {"done", p.done},
                       {"calls", p.spent.calls},
                       {"seconds_since_seen", p.seconds_since_seen}});
  }
  return {{"total", w.total}, {"done", w.done}, {"claimed", w.claimed}, {"workers", workers}};
}
}  // namespace

std::string IndexStatsJson(const IndexStats& st, bool pretty) {
  const StoreStats& s = st.store;
  auto counter = [&](const char* k) -> int64_t {
    auto it = st.spent.find(k);
    return it == st.spent.end() ? 0 : it->second;
  };
  json levels = json::object();
  for (const auto& [l, n] : s.communities_per_level) levels[std::to_string(l)] = n;
  json entities = json::array();
  for (const auto& e : st.top_entities) {
    entities.push_back({{"id", e.id},
                        {"name", e.name},
                        {"type", e.type},
                        {"degree", e.degree},
                        {"frequency", e.frequency}});
  }
  json embeddings = json::object();
  for (const auto& [owner, space] : st.embeddings) {
    embeddings[owner] = {{"count", space.count},
                         {"model", space.model},
                         {"dimension", space.dimension},
                         {"lexical", IsLexicalEmbeddingModel(space.model)}};
  }
  // What takes the room, by table, largest first.
  json space = json::array();
  for (const TableSpace& t : s.space) {
    space.push_back({{"table", t.table}, {"bytes", t.bytes}, {"index_bytes", t.index_bytes}});
  }
  // The reply cache by model and kind ("chat/summarize", "embedding", ...).
  json cache = json::array();
  for (const CacheModelStats& c : s.cache_by_model) {
    cache.push_back(
        {{"model", c.model}, {"kind", c.kind}, {"entries", c.entries}, {"bytes", c.bytes}});
  }
  json out = {{"documents", s.documents},
              {"chunks", s.chunks},
              {"chunks_extracted", s.extractions_ok},
              {"chunks_skipped", s.extractions_skipped},
              {"chunks_empty", s.extractions_empty},
              {"entities", s.entities},
              {"relationships", s.relationships},
              {"resolution",
               {{"names", st.resolved_names},
                {"merged", st.merged_names},
                {"by_method", st.merged_by_method}}},
              {"communities", s.communities},
              {"communities_per_level", levels},
              {"modularity", s.modularity ? json(*s.modularity) : json()},
              {"reports", s.reports_ok},
              {"reports_llm", s.reports_llm},
              {"report_gaps", s.reports_gap},
              {"reports_stale", s.reports_stale},
              {"embeddings", embeddings},
              {"llm_calls", counter("llm_calls")},
              {"llm_cache_hits", counter("llm_cache_hits")},
              {"tokens_in", counter("tokens_in")},
              {"tokens_out", counter("tokens_out")},
              {"cache_entries", s.cache_entries},
              {"cache", cache},
              {"runs", s.runs},
              {"file_bytes", s.file_bytes},
              {"free_bytes", s.free_bytes},
              {"space", space},
              {"top_entities", entities}};
  if (!st.endpoints.empty()) out["llm_endpoints"] = EndpointsArray(st.endpoints, false);
  // Indexing's calls by model role (llm.extract, llm.summarize, llm.resolve), over all runs.
  out["llm_calls_by_role"] = {{"extract", counter("calls_extract") + counter("calls_glean")},
                              {"summarize", counter("calls_summarize") + counter("calls_report")},
                              {"resolve", counter("calls_resolve")}};
  // The same with tokens and, at the prices configured now, costs.
  out["llm_by_role"] = RoleCostsObject(st.by_role);
  out["work"] = st.work ? WorkStateObject(*st.work) : json(nullptr);
  return Dump(out, pretty);
}

std::string CachePruneJson(const CachePruneResult& r, bool pretty) {
  return Dump({{"before", r.before.empty() ? json() : json(r.before)},
               {"entries_removed", r.entries},
               {"entries_kept", r.entries_left},
               {"value_bytes", r.value_bytes},
               {"file_bytes_before", r.file_bytes_before},
               {"file_bytes_after", r.file_bytes_after}},
              pretty);
}

std::string DocumentsJson(const std::vector<DocumentInfo>& documents, bool pretty) {
  json out = json::array();
  for (const auto& d : documents) {
    out.push_back({{"id", d.id},
                   {"title", d.title},
                   {"source_path", d.source_path},
                   {"chunks", d.chunk_count},
                   {"updated_at", d.updated_at}});
  }
  return Dump(out, pretty);
}

std::string EntitiesJson(const std::vector<EntityListing>& entities, size_t limit, bool pretty) {
  json out = json::array();
  for (size_t i = 0; i < entities.size() && i < limit; ++i) {
    const EntityRecord& e = entities[i].entity;
    out.push_back({{"id", e.id},
                   {"name", e.name},
                   {"type", e.type},
                   {"degree", e.degree},
                   {"frequency", e.frequency},
                   {"aliases", entities[i].aliases}});
  }
  return Dump(out, pretty);
}

std::string AliasesJson(const AliasListing& listing, bool pretty) {
  json aliases = json::array();
  for (const auto& a : listing.aliases) {
    aliases.push_back({{"name", a.name},
                       {"entity", a.entity},
                       {"method", a.method},
                       {"score", a.score},
                       {"reason", a.reason}});
  }
  json overrides = json::array();
  for (const auto& o : listing.overrides) {
    overrides.push_back(
        {{"a", o.a}, {"b", o.b}, {"decision", o.merge ? "merge" : "split"}, {"at", o.at}});
  }
  return Dump({{"aliases", aliases}, {"overrides", overrides}}, pretty);
}

std::string DoctorJson(const DoctorReport& r, bool pretty) {
  json probes = json::array();
  for (const DoctorProbe& p : r.probes) {
    json j = {{"name", p.name},
              {"base_url", p.base_url},
              {"model", p.model},
              {"ok", p.ok},
              {"reachable", p.reachable},
              {"model_found", p.model_found},
              {"error", p.error},
              {"latency_ms", p.latency_ms},
              {"prompt_tokens", p.prompt_tokens},
              {"completion_tokens", p.completion_tokens},
              {"reasoning_tokens", p.reasoning_tokens},
              {"thinking_seen", p.thinking_seen},
              {"finish_reason", p.finish_reason},
              {"reply", p.reply_excerpt}};
    if (p.name == "extraction") {
      j["json_valid"] = p.json_valid;
      j["entities"] = p.entities;
      j["relationships"] = p.relationships;
    }
    if (p.name == "embedding") j["dimension"] = p.dimension;
    probes.push_back(std::move(j));
  }
  json out = {
      {"ok", r.ok},
      {"llm_configured", r.llm_configured},
      {"api_style", r.api_style},
      {"ollama_detected", r.ollama_detected},
      {"context_window", r.context_window ? json(*r.context_window) : json()},
      {"extraction_prompt_tokens", r.extraction_prompt_tokens},
      {"sample_names", r.sample_names},
      {"probes", probes},
      {"adaptations", r.adaptations},
      {"calls_per_chunk", r.calls_per_chunk},
      {"cost_per_1000_chunks", r.cost_per_1000_chunks ? json(*r.cost_per_1000_chunks) : json()},
      {"advice", r.advice}};
  return Dump(out, pretty);
}

std::string IntegrityJson(const IntegrityReport& report, std::string_view index, bool pretty) {
  json problems = json::array();
  for (const auto& p : report.problems)
    problems.push_back({{"check", p.check}, {"detail", p.detail}});
  return Dump({{"index", index},
               {"ok", report.ok()},
               {"checks", report.checks_run},
               {"notes", report.notes},
               {"problems", problems}},
              pretty);
}

std::string ChunkPreviewJson(const ChunkPreview& preview, bool pretty) {
  json out = json::array();
  for (const auto& d : preview.documents) {
    json chunks = json::array();
    for (const auto& c : d.chunks) {
      chunks.push_back(
          {{"id", c.id}, {"index", c.index}, {"n_tokens", c.n_tokens}, {"text", c.text}});
    }
    out.push_back({{"document", d.document.id},
                   {"title", d.document.title},
                   {"n_chunks", d.chunks.size()},
                   {"n_tokens", d.tokens},
                   {"chunks", std::move(chunks)}});
  }
  return Dump(out, pretty);
}

std::string SettingsJson(const std::vector<SettingInfo>& settings, bool pretty) {
  json out = json::array();
  for (const auto& s : settings) {
    out.push_back({{"key", s.key},
                   {"value", s.value_text},
                   {"allowed", s.allowed},
                   {"env", s.env},
                   {"help", s.help}});
  }
  return Dump(out, pretty);
}

std::string ExportSummaryJson(const ExportSummary& summary, bool pretty) {
  json files = json::array();
  for (const auto& f : summary.files) files.push_back({{"path", f.path}, {"counts", f.counts}});
  return Dump(
      {{"format", ExportFormatName(summary.format)}, {"out", summary.out_dir}, {"files", files}},
      pretty);
}

std::string SqlRowsJson(const SqlRows& rows, bool pretty) {
  // ordered_json: each object's keys in the query's column order
  using ordered = nlohmann::ordered_json;
  ordered out = ordered::array();
  for (const auto& row : rows.rows) {
    ordered o = ordered::object();
    for (size_t i = 0; i < row.size() && i < rows.columns.size(); ++i) {
      const SqlValue& v = row[i];
      switch (v.kind) {
        case SqlValue::Kind::kNull:
          o[rows.columns[i]] = nullptr;
          break;
        case SqlValue::Kind::kInteger:
          o[rows.columns[i]] = v.integer;
          break;
        case SqlValue::Kind::kReal:
          o[rows.columns[i]] = v.real;
          break;
        case SqlValue::Kind::kText:
          o[rows.columns[i]] = v.text;
          break;
      }
    }
    out.push_back(std::move(o));
  }
  return out.dump(pretty ? 2 : -1, ' ', false, ordered::error_handler_t::replace);
}

std::string InitJson(const InitResult& result, std::string_view root, bool pretty) {
  return Dump({{"root", root}, {"written", result.written}, {"kept", result.kept}}, pretty);
}

std::string WorkspacesJson(const std::vector<WorkspaceInfo>& workspaces, bool pretty) {
  json out = json::array();
  for (const WorkspaceInfo& w : workspaces) {
    json j = {{"name", w.name}, {"dir", w.dir}, {"index", w.index}, {"indexed", w.indexed}};
    j["error"] = w.status.ok() ? json(nullptr) : json(w.status.message());
    out.push_back(std::move(j));
  }
  return Dump(out, pretty);
}

}  // namespace grag

// ---------------------------------------------------------------- the graph, for front ends

namespace grag {
namespace {

json RefObject(const EntityRef& r) { return {{"id", r.id}, {"name", r.name}, {"type", r.type}}; }

json CommunityObject(const CommunityRecord& c) {
  json j = {{"id", c.id}, {"level", c.level}, {"size", c.size}, {"weight", c.weight}};
  j["parent"] = c.parent_id ? json(*c.parent_id) : json(nullptr);
  return j;
}

json ReportObject(const ReportRecord& r, bool full) {
  json j = {{"title", r.title},
            {"summary", r.summary},
            {"status", r.status == ReportStatus::kOk ? "ok" : "gap"},
            {"generator", r.generator == ReportGenerator::kLlm ? "llm" : "extractive"}};
  j["rating"] = r.rating ? json(*r.rating) : json(nullptr);
  if (!r.reason.empty()) j["reason"] = r.reason;
  if (full) {
    j["rating_explanation"] = r.rating_explanation;
    j["full_content"] = r.full_content;
    json findings = json::array();
    for (const auto& f : r.findings) {
      findings.push_back(
          {{"summary", f.summary}, {"explanation", f.explanation}, {"entities", f.entities}});
    }
    j["findings"] = std::move(findings);
    j["model"] = r.model;
    j["updated_at"] = r.updated_at;
  }
  return j;
}

json ChunkRecordObject(const ChunkRecord& c, bool with_text) {
  json j = {
      {"id", c.id}, {"document_id", c.document_id}, {"index", c.index}, {"tokens", c.n_tokens}};
  if (with_text) j["text"] = c.text;
  return j;
}

json RelationshipObject(const RelationshipRecord& r) {
  return {{"id", r.id},
          {"description", r.description},
          {"weight", r.weight},
          {"frequency", r.frequency}};
}

}  // namespace

std::string EntityDetailJson(const EntityDetail& d, bool pretty) {
  const EntityRecord& e = d.entity;
  json j = {{"id", e.id},          {"name", e.name},
            {"type", e.type},      {"description", e.description},
            {"degree", e.degree},  {"frequency", e.frequency},
            {"aliases", d.aliases}};
  json neighbours = json::array();
  for (const auto& n : d.neighbours) {
    json r = RelationshipObject(n.relationship);
    r["entity"] = RefObject(n.entity);
    neighbours.push_back(std::move(r));
  }
  j["neighbours"] = std::move(neighbours);
  j["neighbours_total"] = d.neighbours_total;
  json communities = json::array();
  for (const auto& c : d.communities) communities.push_back(CommunityObject(c));
  j["communities"] = std::move(communities);
  json chunks = json::array();
  for (const auto& c : d.chunks) chunks.push_back(ChunkRecordObject(c, true));
  j["chunks"] = std::move(chunks);
  j["chunks_total"] = d.chunks_total;
  return Dump(j, pretty);
}

std::string RelationshipsJson(const std::vector<RelationshipInfo>& relationships, bool pretty) {
  json out = json::array();
  for (const auto& r : relationships) {
    json j = RelationshipObject(r.relationship);
    j["source"] = RefObject(r.source);
    j["target"] = RefObject(r.target);
    out.push_back(std::move(j));
  }
  return Dump(out, pretty);
}

std::string CommunitiesJson(const std::vector<CommunityInfo>& communities, bool pretty) {
  json out = json::array();
  for (const auto& c : communities) {
    json j = CommunityObject(c.community);
    j["report"] = c.report ? ReportObject(*c.report, false) : json(nullptr);
    out.push_back(std::move(j));
  }
  return Dump(out, pretty);
}

std::string CommunityDetailJson(const CommunityDetail& d, bool pretty) {
  json j = CommunityObject(d.info.community);
  j["report"] = d.info.report ? ReportObject(*d.info.report, true) : json(nullptr);
  json members = json::array();
  for (const auto& m : d.members) members.push_back(RefObject(m));
  j["members"] = std::move(members);
  j["children"] = d.children;
  return Dump(j, pretty);
}

std::string ChunkJson(const ChunkRecord& chunk, bool pretty) {
  return Dump(ChunkRecordObject(chunk, true), pretty);
}

std::string DocumentDetailJson(const DocumentDetail& d, bool pretty) {
  json j = {{"id", d.info.id},
            {"title", d.info.title},
            {"source_path", d.info.source_path},
            {"content_hash", d.info.content_hash},
            {"created_at", d.info.created_at},
            {"updated_at", d.info.updated_at},
            {"text", d.text}};
  json chunks = json::array();
  for (const auto& c : d.chunks) chunks.push_back(ChunkRecordObject(c, false));
  j["chunks"] = std::move(chunks);
  return Dump(j, pretty);
}

std::string DocumentTextJson(const DocumentText& d, bool pretty) {
  int64_t characters = 0;
  for (const char c : d.text) characters += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  std::string note;
  if (d.file == SourceFileState::kChanged) {
    note = "the file " + d.info.source_path +
           " changed since it was indexed: this is the indexed text, which citation offsets "
           "index; run grag index to index the new text";
  } else if (d.file == SourceFileState::kMissing) {
    note = "the file " + d.info.source_path +
           " (or its record) is gone: this is the indexed text, which citation offsets index; "
           "the next grag index drops the document";
  }
  return Dump({{"id", d.info.id},
               {"title", d.info.title},
               {"source_path", d.info.source_path},
               {"content_hash", d.info.content_hash},
               {"updated_at", d.info.updated_at},
               {"file", std::string(SourceFileStateName(d.file))},
               {"note", note.empty() ? json(nullptr) : json(note)},
               {"characters", characters},
               {"bytes", d.text.size()},
               {"text", d.text}},
              pretty);
}

std::string GraphViewJson(const GraphView& v, bool pretty) {
  json nodes = json::array();
  for (const auto& n : v.nodes) {
    json j = RefObject(n.entity);
    j["degree"] = n.degree;
    j["community"] = n.community ? json(*n.community) : json(nullptr);
    nodes.push_back(std::move(j));
  }
  json edges = json::array();
  for (const auto& e : v.edges) {
    edges.push_back(
        {{"id", e.id}, {"source", e.source}, {"target", e.target}, {"weight", e.weight}});
  }
  return Dump({{"nodes", nodes},
               {"edges", edges},
               {"entities_total", v.entities_total},
               {"relationships_total", v.relationships_total},
               {"level", v.level},
               {"levels", v.levels}},
              pretty);
}

}  // namespace grag
