// The index pipeline's merge (descriptions and entity resolution) stage: what RunIndex calls
// (stages.h).
#include "stages.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "grag/nlp_prune.h"
#include "grag/hash.h"
#include "grag/log.h"
#include "grag/merge.h"
#include "grag/parallel.h"
#include "grag/prompts.h"
#include "grag/resolve.h"

namespace grag {
namespace {

NlpPruneOptions NlpPruneOptionsFor(const Config& c) {
  NlpPruneOptions o;
  o.min_node_freq = c.extraction.nlp.min_node_freq;
  o.min_edge_weight_pct = c.extraction.nlp.min_edge_weight_pct;
  o.pmi_weights = c.extraction.nlp.pmi_weights;
  return o;
}

struct Description {
  std::string hash;
  std::string text;
  std::string model;
  std::string basis;  // what a summary covers (grag/merge.h SummaryBasis)
};

// The merged description for one entity or relationship: the stored one when its inputs are
// unchanged, else joined or summarised.
struct DescriptionJob {
  std::string name;
  const std::vector<std::string_view>* descriptions;
  std::string hash;
  Description result;
  bool resolved = false;  // taken from the store: inputs unchanged
  Description stored;     // what the store holds for it (empty when new)
  // A joined description is joined when it is written (TakeText), so that the whole graph's
  // joined texts are never in memory at once; result.text stays empty until then.
  enum class Join { kNo, kAll, kWithin } join = Join::kNo;
};

SummarizeOptions SummarizeOptionsFor(Run& run) {
  SummarizeOptions so;
  const SummaryConfig& sc = run.config().summaries;
  so.max_joined_tokens = static_cast<size_t>(sc.max_joined_tokens);
  so.max_descriptions = static_cast<size_t>(sc.max_descriptions);
  so.max_summary_tokens = static_cast<int>(sc.max_summary_tokens);
  const Tokenizer* tok = Tokenizer::Get(run.config().chunks.encoding).value_or(nullptr);
  if (tok != nullptr) so.count_tokens = [tok](std::string_view t) { return tok->Count(t); };
  return so;
}

// The description text to write for `j` (taken from it).
std::string TakeText(DescriptionJob& j, const SummarizeOptions& so) {
  switch (j.join) {
    case DescriptionJob::Join::kAll:
      return JoinDescriptions(*j.descriptions);
    case DescriptionJob::Join::kWithin:
      return JoinDescriptionsWithin(*j.descriptions, so);
    case DescriptionJob::Join::kNo:
      break;
  }
  return std::move(j.result.text);
}

Status ResolveDescriptions(Run& run, std::vector<DescriptionJob>& jobs, MergeSummary& s) {
  const SummarizeOptions so = SummarizeOptionsFor(run);
  const SummaryConfig& sc = run.config().summaries;
  std::vector<size_t> llm_jobs;
  for (size_t i = 0; i < jobs.size(); ++i) {
    auto& j = jobs[i];
    if (j.resolved) continue;
    if (!NeedsSummary(*j.descriptions, so)) {
      j.result = {j.hash, "", "", ""};
      j.join = DescriptionJob::Join::kAll;
    } else if (run.chat() != nullptr) {
      // An update's few new descriptions ride along with the stored summary (no call).
      std::optional<AppendedDescription> appended;
      if (!j.stored.model.empty()) {
        appended =
            AppendToSummary(j.stored.text, j.stored.basis, *j.descriptions, sc.refresh_share, so);
      }
      if (appended) {
        j.result = {j.hash, std::move(appended->description), j.stored.model,
                    std::move(appended->basis)};
        ++s.descriptions_appended;
      } else {
        llm_jobs.push_back(i);
      }
    } else {
      j.result = {j.hash, "", "", ""};
      j.join = DescriptionJob::Join::kWithin;
    }
  }
  if (llm_jobs.empty()) return Status::Ok();
  std::atomic<int64_t> done{0};
  const auto total = static_cast<int64_t>(llm_jobs.size());
  Status st = ParallelForStatus(
      llm_jobs.size(), static_cast<size_t>(LlmConcurrency(run.config(), "summarize")),
      [&](size_t k) -> Status {
        auto& j = jobs[llm_jobs[k]];
        auto summary = SummarizeDescriptions(*run.chat(), j.name, *j.descriptions, so);
        if (summary.ok()) {
          j.result = {j.hash, *summary, run.chat()->model_for(ChatRole::kSummarize),
                      SummaryBasis(*j.descriptions, so)};
        } else if (summary.status().code() == ErrorCode::kParse) {
          // An empty summary twice: keep every description rather than lose any.
          j.result = {j.hash, JoinDescriptions(*j.descriptions), "", ""};
        } else {
          return summary.status().WithContext("summarising " + j.name);
        }
        run.Progress("summarize", ++done, total);
        return Status::Ok();
      },
      run.cancel_flag());
  s.descriptions_summarized += done;
  return st;
}

// ---------------------------------------------------------------- entity resolution

// What resolution decided this run, written with the graph in the merge's transaction.
struct Resolution {
  std::vector<EntityAlias> aliases;
  std::vector<ResolutionLinkRecord> links;
  std::string params;  // the settings fingerprint the decisions were made under
};

ResolveOptions ResolveOptionsFor(const Config& c) {
  ResolveOptions o;
  o.name_weight = c.resolution.name_weight;
  o.embedding_weight = c.resolution.embedding_weight;
  o.merge_threshold = c.resolution.merge_threshold;
  o.adjudicate_threshold = c.resolution.adjudicate_threshold;
  o.no_llm_merge_threshold = c.resolution.no_llm_merge_threshold;
  o.adjudication_batch = static_cast<size_t>(c.resolution.adjudication_batch);
  o.max_block = static_cast<size_t>(c.resolution.max_block);
  o.llm_concurrency = static_cast<int>(LlmConcurrency(c, "resolve"));
  return o;
}

// The options with the judge's prompt when there is a model to judge.
Result<ResolveOptions> ResolveOptionsWithPrompt(Run& run) {
  const Config& config = run.config();
  ResolveOptions options = ResolveOptionsFor(config);
  if (run.chat() != nullptr) {
    GRAG_ASSIGN_OR_RETURN(
        options.adjudication_prompt,
        LoadPrompt(config.Resolve(config.prompts_dir), PromptId::kResolveEntities));
  }
  return options;
}

// Decisions made under other settings, another extractor, other models or another judge's
// prompt are not reused.
std::string ResolutionParams(Run& run, const ExtractorId& extractor, const ResolveOptions& o) {
  const auto& r = run.config().resolution;
  return fmt::format(
      "v1 extractor={}:{} enabled={} weights={}/{} bands={}/{}/{} batch={} block={} "
      "judge_share={} llm={} embedder={} prompt={}",
      ExtractorKindName(extractor.kind), extractor.model, r.enabled, r.name_weight,
      r.embedding_weight, r.merge_threshold, r.adjudicate_threshold, r.no_llm_merge_threshold,
      r.adjudication_batch, r.max_block, r.max_judge_share,
      run.chat() != nullptr ? run.chat()->model_for(ChatRole::kResolve) : "",
      run.embedder() != nullptr ? run.embedder()->model() : "",
      run.chat() != nullptr ? Sha256Hex(o.adjudication_prompt).substr(0, 16) : "");
}

// Resolves the merged graph's names and folds each cluster into one entity. Incremental: a name
// placed by an earlier run under the same settings keeps its place (its links to names still
// present are kept) and only new names are compared; a name whose entity is gone is placed
// again. A person's overrides (grag entities merge/split) win.
Result<Resolution> ResolveGraph(Run& run, const ExtractorId& extractor,
                                const ResolveOptions& options, MergedGraph& g, MergeSummary& s) {
  Store& store = run.store();
  const Config& config = run.config();
  Resolution out;
  out.params = ResolutionParams(run, extractor, options);
  GRAG_ASSIGN_OR_RETURN(std::optional<std::string> stored_params,
                        store.GetMeta("resolution_params"));
  const bool reuse = stored_params && *stored_params == out.params;
  std::unordered_map<std::string, EntityAlias> prior;
  std::vector<ResolutionLinkRecord> prior_links;
  if (reuse) {
    GRAG_ASSIGN_OR_RETURN(std::vector<EntityAlias> aliases, store.ListAliases());
    for (auto& a : aliases) prior.emplace(a.name_key, std::move(a));
    GRAG_ASSIGN_OR_RETURN(prior_links, store.ListResolutionLinks());
  }
  GRAG_ASSIGN_OR_RETURN(std::vector<EntityOverride> overrides, store.ListEntityOverrides());

  const bool enabled = config.resolution.enabled;
  ResolveInput in;
  std::unordered_map<std::string, size_t> index_of;
  in.entities.reserve(g.entities.size());
  SummarizeOptions join;  // a few descriptions are enough to tell two things apart
  join.max_descriptions = 3;
  join.max_joined_tokens = 200;
  std::unordered_map<std::string_view, uint32_t> chunk_number;  // chunks as small ids, for locality
  for (const auto& e : g.entities) {
    index_of.emplace(e.name_key, in.entities.size());
    ResolveEntity r;
    r.key = e.name_key;
    r.name = e.name;
    r.type = e.type;
    r.description = JoinDescriptionsWithin(e.descriptions, join);
    r.frequency = static_cast<int64_t>(e.chunk_ids.size());
    for (const auto& c : e.chunk_ids) {
      r.contexts.push_back(
          chunk_number.emplace(c, static_cast<uint32_t>(chunk_number.size())).first->second);
    }
    std::sort(r.contexts.begin(), r.contexts.end());
    in.entities.push_back(std::move(r));
  }
  std::unordered_set<uint32_t> fresh_chunks;
  for (auto& r : in.entities) {
    auto it = prior.find(r.key);
    // Placed before, into an entity whose name is still here: settled.
    r.fresh = enabled && (it == prior.end() || !index_of.count(it->second.canonical_key));
    s.resolution_fresh += r.fresh ? 1 : 0;
    if (r.fresh) fresh_chunks.insert(r.contexts.begin(), r.contexts.end());
  }
  // The judge's cap: a share of the extraction calls behind the names resolved now (the chunks
  // naming them; on a first index, every chunk).
  ResolveOptions capped = options;
  if (config.resolution.max_judge_share > 0) {
    capped.max_judge_calls = static_cast<int64_t>(
        std::ceil(config.resolution.max_judge_share * static_cast<double>(fresh_chunks.size())));
  }
  for (const auto& l : prior_links) {
    auto a = index_of.find(l.key_a);
    auto b = index_of.find(l.key_b);
    if (a == index_of.end() || b == index_of.end()) continue;  // a name is gone: so is the link
    ResolveLink link;
    link.a = a->second;
    link.b = b->second;
    link.score = l.score;
    link.method = l.method == "rule"  ? ResolveMethod::kRule
                  : l.method == "llm" ? ResolveMethod::kLlm
                                      : ResolveMethod::kSimilarity;
    link.reason = l.reason;
    in.prior_links.push_back(std::move(link));
  }
  for (const auto& o : overrides) {
    auto a = index_of.find(o.key_a);
    auto b = index_of.find(o.key_b);
    if (a == index_of.end() || b == index_of.end()) continue;
    (o.merge ? in.must_link : in.cannot_link).emplace_back(a->second, b->second);
  }
  if (s.resolution_fresh > 0) run.Progress("resolve", 0, s.resolution_fresh);

  GRAG_ASSIGN_OR_RETURN(ResolveResult rr, ResolveEntities(in, capped, run.embedder(), run.chat()));
  s.resolution_adjudicated += rr.stats.adjudicated;
  s.resolution_llm_calls += rr.stats.llm_calls;

  // The best link that placed each name, for `grag entities aliases`.
  std::vector<const ResolveLink*> best(in.entities.size(), nullptr);
  std::vector<ResolveLink> user_links;
  for (const auto& [a, b] : in.must_link)
    user_links.push_back({a, b, 1.0, ResolveMethod::kUser, "merged by a person"});
  auto rank = [](const ResolveLink& l) {  // a person's word first, then the higher score
    return std::make_pair(l.method == ResolveMethod::kUser, l.score);
  };
  auto consider = [&](const ResolveLink& l) {
    for (size_t i : {l.a, l.b}) {
      if (best[i] == nullptr || rank(l) > rank(*best[i])) best[i] = &l;
    }
  };
  for (const auto& l : in.prior_links) consider(l);
  for (const auto& l : rr.links) consider(l);
  for (const auto& l : user_links) consider(l);

  std::unordered_map<std::string, std::string> canonical_of;
  for (size_t i = 0; i < in.entities.size(); ++i) {
    const ResolveEntity& e = in.entities[i];
    const size_t c = i < rr.canonical.size() ? rr.canonical[i] : i;
    EntityAlias a;
    a.name_key = e.key;
    a.name = e.name;
    a.canonical_key = in.entities[c].key;
    if (c != i) {
      canonical_of.emplace(e.key, a.canonical_key);
      if (const ResolveLink* l = best[i]) {
        a.score = l->score;
        a.method = std::string(ResolveMethodName(l->method));
        a.reason = l->reason;
      }
    }
    out.aliases.push_back(std::move(a));
  }
  auto keep_link = [&](const ResolveLink& l) {
    if (l.method == ResolveMethod::kUser) return;
    out.links.push_back({in.entities[l.a].key, in.entities[l.b].key, l.score,
                         std::string(ResolveMethodName(l.method)), l.reason});
  };
  for (const auto& l : in.prior_links) keep_link(l);
  for (const auto& l : rr.links) keep_link(l);
  s.resolution_merged = static_cast<int64_t>(CollapseResolved(g, canonical_of));
  if (s.resolution_fresh > 0) run.Progress("resolve", s.resolution_fresh, s.resolution_fresh);
  return out;
}

// Where the merge keeps what it last merged (MergeInputs) and the figures of that merge.
constexpr std::string_view kMergeStateKey = "merge_state";

// Everything the merged graph is a function of: the extraction results it reads (by the store's
// digest: which results, of which chunks, in which order), the resolution settings and a
// person's overrides, the NLP pruning and the description settings. Two merges with the same
// inputs write the same graph, so the second can be skipped. The version is bumped whenever
// the merge itself changes what it writes.
Result<std::string> MergeInputs(Run& run, const ExtractorId& extractor,
                                const ResolveOptions& options) {
  Store& store = run.store();
  const Config& c = run.config();
  GRAG_ASSIGN_OR_RETURN(std::string digest, store.ExtractionsDigest(extractor));
  GRAG_ASSIGN_OR_RETURN(std::vector<EntityOverride> overrides, store.ListEntityOverrides());
  Hasher h;
  h.Add("merge v1\n").Add(digest).Add("\n").Add(ResolutionParams(run, extractor, options));
  for (const auto& o : overrides) {
    h.Add(fmt::format("\noverride {} {} {}", o.key_a, o.key_b, o.merge));
  }
  const NlpPruneOptions prune = NlpPruneOptionsFor(c);
  h.Add(fmt::format("\nprune {} {} {}", prune.min_node_freq, prune.min_edge_weight_pct,
                    prune.pmi_weights));
  const SummaryConfig& sc = c.summaries;
  h.Add(fmt::format("\nsummaries {} {} {} {} {} {}", sc.max_joined_tokens, sc.max_descriptions,
                    sc.max_summary_tokens, sc.refresh_share, c.chunks.encoding,
                    run.chat() != nullptr ? run.chat()->model_for(ChatRole::kSummarize) : ""));
  return h.HexDigest();
}

// The last merge's record when it merged exactly `inputs`: its figures are the summary's.
Result<bool> MergedAlready(Store& store, const std::string& inputs, MergeSummary& s) {
  GRAG_ASSIGN_OR_RETURN(std::optional<std::string> text, store.GetMeta(kMergeStateKey));
  if (!text) return false;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("inputs", "") != inputs) return false;
  s.entities = j.value("entities", int64_t{0});
  s.relationships = j.value("relationships", int64_t{0});
  s.resolution_merged = j.value("merged", int64_t{0});
  return true;
}

// Feeds the extractor's entity and relationship mentions to `merger`, as they are read.
Status ScanMentions(Store& store, const ExtractorId& extractor, MentionMerger& merger) {
  GRAG_RETURN_IF_ERROR(store.ScanEntityMentions(extractor, [&](const ChunkEntityMention& m) {
    merger.Add(m.chunk_id, m.mention);
    return Status::Ok();
  }));
  GRAG_RETURN_IF_ERROR(
      store.ScanRelationshipMentions(extractor, [&](const ChunkRelationshipMention& m) {
        merger.Add(m.chunk_id, m.mention);
        return Status::Ok();
      }));
  return Status::Ok();
}

// The graph as stored before this merge, indexed by name key.
struct StoredGraph {
  std::vector<EntityRecord> old_entities;
  std::unordered_map<std::string, EntityRecord*> old_by_key;
  std::unordered_map<int64_t, std::string> key_of_id;
  std::vector<RelationshipRecord> old_rels;
  std::map<std::pair<std::string, std::string>, RelationshipRecord*> old_rel_by_keys;
};

Status LoadStoredGraph(Store& store, StoredGraph& out) {
  GRAG_ASSIGN_OR_RETURN(out.old_entities, store.ListEntities());
  // The stored descriptions' texts move into the jobs below: held once, not three times.
  for (auto& e : out.old_entities) {
    out.old_by_key[e.name_key] = &e;
    out.key_of_id[e.id] = e.name_key;
  }
  GRAG_ASSIGN_OR_RETURN(out.old_rels, store.ListRelationships());
  for (auto& r : out.old_rels) {
    std::string a = out.key_of_id[r.source_id];
    std::string b = out.key_of_id[r.target_id];
    if (b < a) std::swap(a, b);
    out.old_rel_by_keys[{a, b}] = &r;
  }
  return Status::Ok();
}

// Descriptions: reuse the stored text when the description set is unchanged. One job per
// entity, then one per relationship; the stored texts move into them.
std::vector<DescriptionJob> DescriptionJobs(const MergedGraph& g, StoredGraph& old) {
  std::vector<DescriptionJob> jobs;
  jobs.reserve(g.entities.size() + g.relationships.size());
  for (const auto& e : g.entities) {
    DescriptionJob j{e.name, &e.descriptions, DescriptionsHash(e.name_key, e.descriptions),
                     {},     false,           {}};
    if (auto it = old.old_by_key.find(e.name_key); it != old.old_by_key.end()) {
      j.stored = {it->second->description_hash, std::move(it->second->description),
                  it->second->description_model, std::move(it->second->description_basis)};
      if (j.stored.hash == j.hash) {
        j.result = std::move(j.stored);
        j.resolved = true;
      }
    }
    jobs.push_back(std::move(j));
  }
  for (const auto& r : g.relationships) {
    const std::string label = r.source_key + " — " + r.target_key;
    DescriptionJob j{label, &r.descriptions, DescriptionsHash(label, r.descriptions),
                     {},    false,           {}};
    if (auto it = old.old_rel_by_keys.find({r.source_key, r.target_key});
        it != old.old_rel_by_keys.end()) {
      j.stored = {it->second->description_hash, std::move(it->second->description),
                  it->second->description_model, std::move(it->second->description_basis)};
      if (j.stored.hash == j.hash) {
        j.result = std::move(j.stored);
        j.resolved = true;
      }
    }
    jobs.push_back(std::move(j));
  }
  return jobs;
}

// Writes the merged graph over the stored one (in the caller's transaction): what changed is
// written, what is gone deleted, and the entities it touches added to `changed`.
struct GraphWrite {
  GraphWrite(Store& st, const MergedGraph& merged, std::vector<DescriptionJob>& description_jobs,
             const SummarizeOptions& summarize, StoredGraph& stored)
      : store(st), g(merged), jobs(description_jobs), so(summarize), old(stored) {}

  // The entities, then the stored ones gone.
  Status WriteEntities() {
    for (size_t i = 0; i < g.entities.size(); ++i) {
      const auto& e = g.entities[i];
      auto old_entity = old.old_by_key.find(e.name_key);
      if (old_entity == old.old_by_key.end() ||
          old_entity->second->description_hash != jobs[i].hash) {
        changed.insert(e.name_key);
      }
      // The description taken from the store (resolved) is the stored one, word for word.
      const std::vector<std::string> chunk_ids(e.chunk_ids.begin(), e.chunk_ids.end());
      if (old_entity != old.old_by_key.end() && jobs[i].resolved &&
          old_entity->second->name == e.name && old_entity->second->type == e.type &&
          old_entity->second->type_counts == e.type_counts) {
        GRAG_RETURN_IF_ERROR(store.SetEntityChunks(old_entity->second->id, chunk_ids));
        id_of_key[e.name_key] = old_entity->second->id;
        keep.insert(e.name_key);
        continue;
      }
      ++written;
      EntityRecord rec;
      rec.name_key = e.name_key;
      rec.name = e.name;
      rec.type = e.type;
      rec.type_counts = e.type_counts;
      rec.description = TakeText(jobs[i], so);
      rec.description_hash = jobs[i].result.hash;
      rec.description_model = jobs[i].result.model;
      rec.description_basis = jobs[i].result.basis;
      GRAG_ASSIGN_OR_RETURN(int64_t id, store.UpsertEntity(rec));
      GRAG_RETURN_IF_ERROR(store.SetEntityChunks(id, chunk_ids));
      id_of_key[e.name_key] = id;
      keep.insert(e.name_key);
    }
    for (const auto& e : old.old_entities) {
      if (!keep.count(e.name_key)) GRAG_RETURN_IF_ERROR(store.DeleteEntity(e.id).status());
    }
    return Status::Ok();
  }

  // The relationships, then the stored ones gone (after the entities: they need their ids).
  Status WriteRelationships() {
    std::set<std::pair<int64_t, int64_t>> kept_pairs;
    for (size_t i = 0; i < g.relationships.size(); ++i) {
      const auto& r = g.relationships[i];
      DescriptionJob& job = jobs[g.entities.size() + i];
      const Description& d = job.result;
      auto old_rel = old.old_rel_by_keys.find({r.source_key, r.target_key});
      if (old_rel == old.old_rel_by_keys.end() || old_rel->second->weight != r.weight ||
          old_rel->second->description_hash != d.hash) {
        changed.insert(r.source_key);
        changed.insert(r.target_key);
      }
      const std::vector<std::string> chunk_ids(r.chunk_ids.begin(), r.chunk_ids.end());
      if (old_rel != old.old_rel_by_keys.end() && job.resolved &&
          old_rel->second->weight == r.weight &&
          std::minmax(old_rel->second->source_id, old_rel->second->target_id) ==
              std::minmax(id_of_key.at(r.source_key), id_of_key.at(r.target_key))) {
        GRAG_RETURN_IF_ERROR(store.SetRelationshipChunks(old_rel->second->id, chunk_ids));
        kept_pairs.insert(std::minmax(old_rel->second->source_id, old_rel->second->target_id));
        continue;
      }
      ++written;
      RelationshipRecord rec;
      rec.source_id = id_of_key.at(r.source_key);
      rec.target_id = id_of_key.at(r.target_key);
      rec.weight = r.weight;
      rec.description = TakeText(job, so);
      rec.description_hash = d.hash;
      rec.description_model = d.model;
      rec.description_basis = d.basis;
      GRAG_ASSIGN_OR_RETURN(int64_t id, store.UpsertRelationship(rec));
      GRAG_RETURN_IF_ERROR(store.SetRelationshipChunks(id, chunk_ids));
      kept_pairs.insert(std::minmax(rec.source_id, rec.target_id));
    }
    std::unordered_map<int64_t, std::string>& key_of_id = old.key_of_id;
    for (const auto& r : old.old_rels) {
      if (kept_pairs.count(std::minmax(r.source_id, r.target_id))) continue;
      // A relationship gone (or an entity gone with it): both ends changed, the ones that remain.
      for (int64_t end : {r.source_id, r.target_id}) {
        if (keep.count(key_of_id[end])) changed.insert(key_of_id[end]);
      }
      if (keep.count(key_of_id[r.source_id]) && keep.count(key_of_id[r.target_id])) {
        GRAG_RETURN_IF_ERROR(store.DeleteRelationship(r.id).status());
      }
    }
    return Status::Ok();
  }

  Store& store;
  const MergedGraph& g;
  std::vector<DescriptionJob>& jobs;
  const SummarizeOptions& so;
  StoredGraph& old;
  int64_t written = 0;
  std::unordered_map<std::string, int64_t> id_of_key;
  std::set<std::string> keep;
  std::set<std::string> changed;
};

}  // namespace

Status Merge(Run& run, const ExtractorId& extractor, MergeSummary& s) {
  Store& store = run.store();
  // Nothing the graph depends on has changed since the last merge: it stands as written.
  // The resolution options (with the judge's prompt read once) serve the fingerprint and the
  // resolution both.
  GRAG_ASSIGN_OR_RETURN(const ResolveOptions options, ResolveOptionsWithPrompt(run));
  GRAG_ASSIGN_OR_RETURN(const std::string inputs, MergeInputs(run, extractor, options));
  GRAG_ASSIGN_OR_RETURN(s.graph_unchanged, MergedAlready(store, inputs, s));
  if (s.graph_unchanged) {
    Log(LogLevel::kInfo, "merge",
        "the extraction results and merge settings are those of the last merge: graph kept");
    run.Progress("merge", 1, 1);
    return Status::Ok();
  }
  // Mentions are merged as they are read: a large index's mentions never are all in memory.
  MentionMerger merger;
  GRAG_RETURN_IF_ERROR(ScanMentions(store, extractor, merger));
  MergedGraph g = merger.Finish();
  GRAG_ASSIGN_OR_RETURN(Resolution resolution, ResolveGraph(run, extractor, options, g, s));
  if (extractor.kind == ExtractorKind::kNlp) {
    // Phrases seen once and weak co-occurrences are noise, as in Microsoft's fast method.
    const NlpPruneStats ps = PruneNlpGraph(g, NlpPruneOptionsFor(run.config()));
    Log(LogLevel::kDebug, "merge",
        fmt::format("NLP graph pruned from {} to {} entities and {} to {} relationships",
                    ps.entities_before, ps.entities_after, ps.relationships_before,
                    ps.relationships_after));
  }

  StoredGraph old;
  GRAG_RETURN_IF_ERROR(LoadStoredGraph(store, old));
  std::vector<DescriptionJob> jobs = DescriptionJobs(g, old);
  GRAG_RETURN_IF_ERROR(ResolveDescriptions(run, jobs, s));
  const SummarizeOptions so = SummarizeOptionsFor(run);

  // An entity or relationship whose record is as stored is not written again (an UPDATE to the
  // same values still rewrites the row's page); the store leaves chunk links that are already
  // there alone. An update rewrites only what its changes reach.
  GraphWrite w(store, g, jobs, so, old);

  // Write the graph in one transaction: readers never see half a merge.
  GRAG_ASSIGN_OR_RETURN(Transaction tx, store.BeginAllOrNothing());
  // Entities whose mentions or relationships changed: only they may change community (see
  // DetectCommunities). Added to what earlier merges left pending.
  GRAG_ASSIGN_OR_RETURN(w.changed, PendingChanges(store));
  const size_t pending_before = w.changed.size();
  GRAG_RETURN_IF_ERROR(w.WriteEntities());
  GRAG_RETURN_IF_ERROR(w.WriteRelationships());
  GRAG_ASSIGN_OR_RETURN(std::optional<ClusteringRecord> clustered, store.LatestClustering());
  if (clustered && w.changed.size() != pending_before) {  // a first index needs no list
    GRAG_RETURN_IF_ERROR(store.SetMeta(kPendingChangesKey, nlohmann::json(w.changed).dump()));
  }
  GRAG_RETURN_IF_ERROR(store.ReplaceResolution(resolution.aliases, resolution.links));
  GRAG_RETURN_IF_ERROR(store.SetMeta("resolution_params", resolution.params));
  GRAG_RETURN_IF_ERROR(store.RecomputeGraphStats());
  s.entities = static_cast<int64_t>(g.entities.size());
  s.relationships = static_cast<int64_t>(g.relationships.size());
  GRAG_RETURN_IF_ERROR(
      store.SetMeta(kMergeStateKey, nlohmann::json{{"inputs", inputs},
                                                   {"entities", s.entities},
                                                   {"relationships", s.relationships},
                                                   {"merged", s.resolution_merged}}
                                        .dump()));
  GRAG_RETURN_IF_ERROR(tx.Commit());
  s.entities_changed = static_cast<int64_t>(w.changed.size() - pending_before);
  Log(LogLevel::kDebug, "merge",
      fmt::format("{} of {} entities and relationships written (the rest as stored)", w.written,
                  g.entities.size() + g.relationships.size()));
  run.Progress("merge", 1, 1);
  return Status::Ok();
}

}  // namespace grag
