// grag eval: every retrieval method scored beside BM25 on a user's questions (see
// grag/engine_eval.h).
#include "grag/engine_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "grag/local_search.h"
#include "grag/retrieval_eval.h"
#include "grag/words.h"
#include "engine_internal.h"

namespace grag {
namespace {

using nlohmann::json;

constexpr std::string_view kMethods[] = {"bm25", "vector", "graph", "hybrid", "local"};

// One method's ranking for one question: passages best first, with what --explain shows.
struct Ranked {
  std::vector<const EvalPassage*> passages;
  std::vector<int64_t> index;  // each chunk's position in its document
  std::vector<std::string> preview;
  double ms = 0;
  double context_chars = 0;  // local: its whole context
};

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// Running sums of one cut's measures over the questions, and of their differences from BM25's
// on the same questions (for the margins).
struct Sums {
  struct Measure {
    double sum = 0;
    int64_t n = 0;
    double diff = 0, diff_squares = 0;  // this method's value minus BM25's
    int64_t n_diff = 0;

    void Add(const std::optional<double>& v, const std::optional<double>& base) {
      if (!v) return;
      sum += *v;
      ++n;
      if (!base) return;
      const double d = *v - *base;
      diff += d;
      diff_squares += d * d;
      ++n_diff;
    }
    std::optional<double> Mean() const {
      return n == 0 ? std::nullopt : std::optional<double>(sum / static_cast<double>(n));
    }
    std::optional<double> MarginPoints() const {
      if (n_diff < kMinMarginQuestions) return std::nullopt;
      auto m = PairedMargin(n_diff, diff, diff_squares);
      return m ? std::optional<double>(*m * 100) : std::nullopt;
    }
  };
  Measure chunk, document, answer, evidence;
  double passages = 0, chars = 0;
  int64_t n = 0;

  // `base`: BM25's score of the same question on the same cut; nullptr for BM25 itself.
  void Add(const EvalScore& s, const EvalScore* base) {
    static const EvalScore kNone;
    const EvalScore& b = base != nullptr ? *base : kNone;
    chunk.Add(s.chunk_recall, b.chunk_recall);
    document.Add(s.document_recall, b.document_recall);
    answer.Add(s.answer_contained, b.answer_contained);
    evidence.Add(s.evidence_coverage, b.evidence_coverage);
    passages += static_cast<double>(s.passages);
    chars += static_cast<double>(s.chars);
    ++n;
  }
  EvalAverages Averages() const {
    EvalAverages a;
    a.chunk_recall = chunk.Mean();
    a.document_recall = document.Mean();
    a.answer_contained = answer.Mean();
    a.evidence_coverage = evidence.Mean();
    a.vs_bm25_margin.chunk_recall = chunk.MarginPoints();
    a.vs_bm25_margin.document_recall = document.MarginPoints();
    a.vs_bm25_margin.answer_contained = answer.MarginPoints();
    a.vs_bm25_margin.evidence_coverage = evidence.MarginPoints();
    a.passages = n == 0 ? 0 : passages / static_cast<double>(n);
    a.chars = n == 0 ? 0 : chars / static_cast<double>(n);
    return a;
  }
};

std::vector<EvalPassage> FirstOf(const Ranked& r, size_t n) {
  std::vector<EvalPassage> out;
  for (size_t i = 0; i < std::min(n, r.passages.size()); ++i) out.push_back(*r.passages[i]);
  return out;
}

EvalQuestionMethod Explain(const std::string& method, const EvalQuestion& q, const Ranked& r,
                           size_t k) {
  EvalQuestionMethod m;
  m.method = method;
  m.ms = r.ms;
  const std::vector<EvalPassage> top = FirstOf(r, k);
  std::set<std::string> chunks, documents;
  for (size_t i = 0; i < top.size(); ++i) {
    const EvalPassage& p = top[i];
    chunks.insert(p.chunk_id);
    documents.insert(p.document_id);
    EvalQuestionMethod::Hit h;
    h.chunk_id = p.chunk_id;
    h.document_id = p.document_id;
    h.index = r.index[i];
    h.preview = r.preview[i];
    h.gold =
        std::find(q.gold_chunks.begin(), q.gold_chunks.end(), p.chunk_id) != q.gold_chunks.end() ||
        std::find(q.gold_documents.begin(), q.gold_documents.end(), p.document_id) !=
            q.gold_documents.end();
    m.top.push_back(std::move(h));
  }
  for (const auto& g : std::set<std::string>(q.gold_chunks.begin(), q.gold_chunks.end())) {
    if (!chunks.count(g)) m.missed_chunks.push_back(g);
  }
  for (const auto& g : std::set<std::string>(q.gold_documents.begin(), q.gold_documents.end())) {
    if (!documents.count(g)) m.missed_documents.push_back(g);
  }
  for (const auto& e : q.evidence) {
    if (!EvidenceCovered(e, top)) m.missed_evidence.push_back(e);
  }
  if (!q.answers.empty()) m.answer_found = ContainsAnswer(top, q.answers);
  return m;
}

// Gold ids that are not in the index: no method can find them, which a user should know.
Status CheckGold(Engine& engine, const std::vector<EvalQuestion>& questions,
                 std::vector<std::string>& diagnostics) {
  std::set<std::string> documents;
  GRAG_ASSIGN_OR_RETURN(std::vector<DocumentInfo> docs, engine.Documents());
  for (const auto& d : docs) documents.insert(d.id);
  std::set<std::string> checked;
  constexpr size_t kMaxReported = 10;
  size_t missing = 0;
  for (const auto& q : questions) {
    for (const auto& d : q.gold_documents) {
      if (documents.count(d) || !checked.insert("d" + d).second) continue;
      if (++missing <= kMaxReported) {
        diagnostics.push_back(
            fmt::format("line {}: gold document \"{}\" is not in the index", q.line, d));
      }
    }
    for (const auto& c : q.gold_chunks) {
      if (!checked.insert("c" + c).second) continue;
      GRAG_ASSIGN_OR_RETURN(std::optional<ChunkRecord> chunk, engine.GetChunk(c));
      if (!chunk && ++missing <= kMaxReported) {
        diagnostics.push_back(
            fmt::format("line {}: gold chunk \"{}\" is not in the index", q.line, c));
      }
    }
  }
  if (missing > kMaxReported) {
    diagnostics.push_back(fmt::format("... {} gold ids not in the index in all", missing));
  }
  return Status::Ok();
}

std::optional<double> Points(const std::optional<double>& a, const std::optional<double>& b) {
  if (!a || !b) return std::nullopt;
  return (*a - *b) * 100;
}

json AveragesJson(const EvalAverages& a, const EvalAverages* bm25) {
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  json j = {{"chunk_recall", opt(a.chunk_recall)},
            {"document_recall", opt(a.document_recall)},
            {"answer_contained", opt(a.answer_contained)},
            {"evidence_coverage", opt(a.evidence_coverage)},
            {"mean_passages", a.passages},
            {"mean_chars", a.chars}};
  if (bm25 != nullptr) {
    j["vs_bm25_points"] = {
        {"chunk_recall", opt(Points(a.chunk_recall, bm25->chunk_recall))},
        {"document_recall", opt(Points(a.document_recall, bm25->document_recall))},
        {"answer_contained", opt(Points(a.answer_contained, bm25->answer_contained))},
        {"evidence_coverage", opt(Points(a.evidence_coverage, bm25->evidence_coverage))}};
    const EvalAverages::Margins& m = a.vs_bm25_margin;
    j["vs_bm25_margin_points"] = {{"chunk_recall", opt(m.chunk_recall)},
                                  {"document_recall", opt(m.document_recall)},
                                  {"answer_contained", opt(m.answer_contained)},
                                  {"evidence_coverage", opt(m.evidence_coverage)}};
  }
  return j;
}

}  // namespace

Result<EvalReport> EvaluateRetrieval(Engine& engine, const std::vector<EvalQuestion>& all,
                                     const EvalOptions& options,
                                     const std::function<void(int64_t, int64_t)>& on_progress) {
  if (options.k < 1 || options.k > 100) {
    return Status::InvalidArgument("--k must be between 1 and 100");
  }
  std::vector<std::string> methods = {"bm25"};
  for (const auto& m : options.methods) {
    if (std::find(std::begin(kMethods), std::end(kMethods), m) == std::end(kMethods)) {
      return Status::InvalidArgument(
          fmt::format("unknown method \"{}\" (methods: bm25, vector, graph, hybrid, local)", m));
    }
    if (std::find(methods.begin(), methods.end(), m) == methods.end()) methods.push_back(m);
  }
  std::vector<EvalQuestion> questions = all;
  if (options.limit > 0 && static_cast<int64_t>(questions.size()) > options.limit) {
    questions.resize(static_cast<size_t>(options.limit));
  }

  EvalReport report;
  report.questions = static_cast<int64_t>(questions.size());
  report.k = options.k;
  report.cutoffs = {options.k};
  if (options.k != 10) report.cutoffs.push_back(10);
  std::sort(report.cutoffs.begin(), report.cutoffs.end());
  const size_t deepest = static_cast<size_t>(report.cutoffs.back());
  // Deep enough that a method returning shorter passages than BM25 can fill BM25's characters.
  const int64_t depth = static_cast<int64_t>(std::max<size_t>(20, 2 * deepest));
  for (const auto& q : questions) {
    report.with_chunks += q.gold_chunks.empty() ? 0 : 1;
    report.with_documents += q.gold_documents.empty() ? 0 : 1;
    report.with_answers += q.answers.empty() ? 0 : 1;
    report.with_evidence += q.evidence.empty() ? 0 : 1;
  }
  GRAG_RETURN_IF_ERROR(CheckGold(engine, questions, report.diagnostics));

  GRAG_ASSIGN_OR_RETURN(const Retriever* retriever, EngineInternals::retriever(engine));
  const LocalSearchOptions local_options = EngineInternals::LocalOptions(engine);
  // Each chunk's measures are computed once: questions share chunks, and methods share more.
  std::unordered_map<std::string, EvalPassage> cache;
  auto passage = [&](const std::string& key, const std::string& chunk_id,
                     const std::string& document_id, std::string_view text) {
    auto it = cache.find(key);
    if (it == cache.end()) {
      it = cache.emplace(key, MakeEvalPassage(chunk_id, document_id, text)).first;
    }
    return &it->second;
  };

  const size_t n_cut = report.cutoffs.size();
  std::map<std::string, std::vector<Sums>> at_k, at_chars;
  std::map<std::string, std::vector<double>> times;
  std::map<std::string, double> context_chars;
  for (const auto& m : methods) {
    at_k[m].resize(n_cut);
    at_chars[m].resize(n_cut);
  }

  for (size_t qi = 0; qi < questions.size(); ++qi) {
    const EvalQuestion& q = questions[qi];
    std::map<std::string, Ranked> ranked;
    for (const auto& m : methods) {
      Ranked r;
      if (m == "local") {
        const auto t0 = std::chrono::steady_clock::now();
        auto ctx = BuildLocalContext(
            EngineInternals::store(engine), EngineInternals::embedder(engine),
            EngineInternals::tokenizer(engine), q.question, local_options, nullptr, retriever);
        r.ms = Ms(std::chrono::steady_clock::now() - t0);
        if (!ctx.ok())
          return ctx.status().WithContext(fmt::format("question on line {} (local)", q.line));
        for (const auto& item : ctx->items) {
          r.context_chars += static_cast<double>(item.text.size());
          if (item.type != LocalItemType::kChunk) continue;
          // Measured without its label line, as the other methods' passages are.
          const std::string_view body = LocalItemBody(item);
          r.passages.push_back(
              passage("local " + item.chunk_id, item.chunk_id, item.document_id, body));
          r.index.push_back(item.chunk_index);
          r.preview.push_back(ShortenAtWord(body, 100));
        }
      } else {
        SearchRequest request;
        request.question = q.question;
        request.method = ParseRetrievalMethod(m).value();
        request.top_k = depth;
        const auto t0 = std::chrono::steady_clock::now();
        auto result = engine.Search(request);
        r.ms = Ms(std::chrono::steady_clock::now() - t0);
        if (!result.ok())
          return result.status().WithContext(fmt::format("question on line {} ({})", q.line, m));
        for (const auto& c : result->chunks) {
          r.passages.push_back(passage(c.chunk_id, c.chunk_id, c.document_id, c.text));
          r.index.push_back(c.index);
          r.preview.push_back(ShortenAtWord(c.text, 100));
        }
      }
      times[m].push_back(r.ms);
      context_chars[m] += r.context_chars;
      ranked[m] = std::move(r);
    }

    for (size_t ci = 0; ci < n_cut; ++ci) {
      const size_t cutoff = static_cast<size_t>(report.cutoffs[ci]);
      const std::vector<EvalPassage> bm25_top = FirstOf(ranked["bm25"], cutoff);
      int64_t budget = 0;
      for (const auto& p : bm25_top) budget += p.chars;
      // BM25 within its own characters is BM25 at the cutoff: one baseline for both.
      const EvalScore bm25 = ScorePassages(q, bm25_top);
      for (const auto& m : methods) {
        const Ranked& r = ranked[m];
        const EvalScore* base = m == "bm25" ? nullptr : &bm25;
        at_k[m][ci].Add(ScorePassages(q, FirstOf(r, cutoff)), base);
        std::vector<int64_t> sizes;
        for (const auto* p : r.passages) sizes.push_back(p->chars);
        at_chars[m][ci].Add(ScorePassages(q, FirstOf(r, CountWithinBudget(sizes, budget))), base);
      }
    }
    if (options.keep_details) {
      EvalQuestionDetail d;
      d.line = q.line;
      d.question = q.question;
      for (const auto& m : methods) {
        d.methods.push_back(Explain(m, q, ranked[m], static_cast<size_t>(options.k)));
      }
      report.per_question.push_back(std::move(d));
    }
    if (on_progress) on_progress(static_cast<int64_t>(qi + 1), report.questions);
  }

  for (const auto& m : methods) {
    EvalMethodReport mr;
    mr.method = m;
    for (size_t ci = 0; ci < n_cut; ++ci) {
      mr.at_k.push_back(at_k[m][ci].Averages());
      mr.at_bm25_chars.push_back(at_chars[m][ci].Averages());
    }
    mr.p50_ms = Quantile(times[m], 0.5);
    mr.p95_ms = Quantile(times[m], 0.95);
    if (m == "local" && report.questions > 0) {
      mr.context_chars = context_chars[m] / static_cast<double>(report.questions);
    }
    report.methods.push_back(std::move(mr));
  }
  return report;
}

std::string EvalReportJson(const EvalReport& report, bool pretty) {
  json j = {{"questions", report.questions},
            {"k", report.k},
            {"cutoffs", report.cutoffs},
            {"gold",
             {{"chunks", report.with_chunks},
              {"documents", report.with_documents},
              {"answers", report.with_answers},
              {"evidence", report.with_evidence}}},
            {"diagnostics", report.diagnostics}};
  const EvalMethodReport* bm25 = report.methods.empty() ? nullptr : &report.methods.front();
  json methods = json::object();
  for (const auto& m : report.methods) {
    json jm;
    json at = json::object(), chars = json::object();
    for (size_t ci = 0; ci < report.cutoffs.size(); ++ci) {
      const std::string key = std::to_string(report.cutoffs[ci]);
      const bool base = &m == bm25;
      at[key] = AveragesJson(m.at_k[ci], base ? nullptr : &bm25->at_k[ci]);
      chars[key] = AveragesJson(m.at_bm25_chars[ci], base ? nullptr : &bm25->at_bm25_chars[ci]);
    }
    jm["at_k"] = at;
    jm["at_bm25_chars"] = chars;
    jm["latency_ms"] = {{"p50", m.p50_ms}, {"p95", m.p95_ms}};
    if (m.context_chars) jm["context_chars"] = *m.context_chars;
    methods[m.method] = jm;
  }
  j["methods"] = methods;
  std::vector<std::string> order;
  for (const auto& m : report.methods) order.push_back(m.method);
  j["method_order"] = order;
  if (!report.per_question.empty()) {
    json per = json::array();
    for (const auto& d : report.per_question) {
      json jq = {{"line", d.line}, {"question", d.question}};
      json jms = json::object();
      for (const auto& m : d.methods) {
        json top = json::array();
        for (const auto& h : m.top) {
          top.push_back({{"chunk_id", h.chunk_id},
                         {"document_id", h.document_id},
                         {"index", h.index},
                         {"gold", h.gold},
                         {"preview", h.preview}});
        }
        json jm = {{"top", top},
                   {"missed_chunks", m.missed_chunks},
                   {"missed_documents", m.missed_documents},
                   {"missed_evidence", m.missed_evidence},
                   {"ms", m.ms}};
        jm["answer_found"] = m.answer_found ? json(*m.answer_found) : json(nullptr);
        jms[m.method] = jm;
      }
      jq["methods"] = jms;
      per.push_back(jq);
    }
    j["per_question"] = per;
  }
  return pretty ? j.dump(2) : j.dump();
}

}  // namespace grag
