// Settings: defaults < config file < environment < flags; clear errors; the init file round-trips.
#include "grag/config.h"
#include "grag/drift_search.h"
#include "grag/merge.h"
#include "grag/report.h"
#include "grag/llm.h"
#include "grag/retrieval.h"
#include "grag/resolve.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "grag/prompts.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::TempDir;

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(ConfigTest, DefaultsMatchMicrosoftGraphRag) {
  TempDir dir;
  auto c = LoadConfig(dir.path().string(), "", FakeEnv({}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->chunks.size, 1200);
  EXPECT_EQ(c->chunks.overlap, 100);
  EXPECT_EQ(c->chunks.encoding, "o200k_base");
  EXPECT_EQ(c->llm.concurrency, 16);
  EXPECT_EQ(c->communities.max_cluster_size, 10);
  EXPECT_EQ(c->extraction.entity_types,
            (std::vector<std::string>{"organization", "person", "geo", "event"}));
  EXPECT_TRUE(c->llm.base_url.empty());
}

TEST(ConfigTest, PrecedenceFileThenEnvironmentThenFlags) {
  TempDir dir;
  dir.Write("grag.toml",
            "[llm]\nmodel = \"from-file\"\nconcurrency = 4\nbase_url = \"http://file\"\n"
            "[chunks]\nsize = 600\n[extraction]\nentity_types = [\"person\", \"ship\"]\n");
  auto c = LoadConfig(dir.path().string(), "",
                      FakeEnv({{"GRAG_LLM_MODEL", "from-env"}, {"OPENAI_API_KEY", "sk-openai"}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->llm.model, "from-env");
  EXPECT_EQ(c->llm.base_url, "http://file");
  EXPECT_EQ(c->llm.concurrency, 4);
  EXPECT_EQ(c->chunks.size, 600);
  EXPECT_EQ(c->llm.api_key, "sk-openai");
  EXPECT_EQ(c->extraction.entity_types, (std::vector<std::string>{"person", "ship"}));
  ASSERT_TRUE(ApplySetting(*c, "llm.model", "from-flag").ok());
  EXPECT_EQ(c->llm.model, "from-flag");
}

TEST(ConfigTest, GragKeyWinsOverOpenAiKey) {
  TempDir dir;
  auto c = LoadConfig(dir.path().string(), "",
                      FakeEnv({{"GRAG_LLM_API_KEY", "sk-grag"}, {"OPENAI_API_KEY", "sk-openai"}}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->llm.api_key, "sk-grag");
}

TEST(ConfigTest, ErrorsNameTheFileLineAndKey) {
  TempDir dir;
  dir.Write("grag.toml", "[llm]\nconcurency = 4\n");
  auto c = LoadConfig(dir.path().string(), "", FakeEnv({}));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("llm.concurency"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("line 2"), std::string::npos);

  dir.Write("grag.toml", "[llm]\nconcurrency = \"four\"\n");
  c = LoadConfig(dir.path().string(), "", FakeEnv({}));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("integer"), std::string::npos) << c.status().message();

  dir.Write("grag.toml", "[llm\n");
  c = LoadConfig(dir.path().string(), "", FakeEnv({}));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("grag.toml:1"), std::string::npos) << c.status().message();

  dir.Write("grag.toml", "[chunks]\noverlap = 5000\n");
  c = LoadConfig(dir.path().string(), "", FakeEnv({}));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("chunks.overlap"), std::string::npos);
}

TEST(ConfigTest, BadEnvironmentValueIsNamed) {
  TempDir dir;
  auto c = LoadConfig(dir.path().string(), "", FakeEnv({{"GRAG_LLM_CONCURRENCY", "lots"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("GRAG_LLM_CONCURRENCY"), std::string::npos);
}

TEST(ConfigTest, MissingExplicitFileAndRootAreNotFound) {
  TempDir dir;
  EXPECT_EQ(LoadConfig(dir / "nope", "", FakeEnv({})).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(LoadConfig(dir.path().string(), dir / "x.toml", FakeEnv({})).status().code(),
            ErrorCode::kNotFound);
}

TEST(ConfigTest, RenderedFileParsesBackAndUncommentedValuesApply) {
  TempDir dir;
  Config defaults;
  std::string text = RenderConfigFile(defaults);
  EXPECT_NE(text.find("# model = \"\""), std::string::npos);
  EXPECT_NE(text.find("GRAG_LLM_BASE_URL"), std::string::npos);
  dir.Write("grag.toml", text);
  auto c = LoadConfig(dir.path().string(), "", FakeEnv({}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  // Uncommenting every line gives a file that parses to the same defaults.
  std::string uncommented;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# ", 0) == 0 && line.find(" = ") != std::string::npos &&
        line.find(' ', 2) == line.find(" = ")) {
      line = line.substr(2);
    }
    uncommented += line + "\n";
  }
  dir.Write("grag.toml", uncommented);
  c = LoadConfig(dir.path().string(), "", FakeEnv({}));
  ASSERT_TRUE(c.ok()) << c.status().ToString() << "\n" << uncommented;
  EXPECT_EQ(c->communities.seed, defaults.communities.seed);
  EXPECT_EQ(c->llm.temperature, defaults.llm.temperature);
}

TEST(ConfigTest, ResolveIsRelativeToRoot) {
  Config c;
  c.root = "/srv/proj";
  EXPECT_EQ(c.Resolve("output/index.db"), "/srv/proj/output/index.db");
  EXPECT_EQ(c.Resolve("/abs/x"), "/abs/x");
}

TEST(PromptsTest, DefaultsAreSeedPromptsAndFilesOverride) {
  TempDir dir;
  auto p = LoadPrompt(dir.path().string(), PromptId::kGlobalMap);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->rfind("Answer the question as far as the community reports below allow.", 0), 0u);
  dir.Write("global_map.md", "Q={{question}} R={{report_batch}}");
  p = LoadPrompt(dir.path().string(), PromptId::kGlobalMap);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(FillPrompt(*p, {{"question", "why {{x}}?"}, {"report_batch", "r1"}}),
            "Q=why {{x}}? R=r1");
  dir.Write("global_map.md", "no placeholders");
  p = LoadPrompt(dir.path().string(), PromptId::kGlobalMap);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("{{question}}"), std::string::npos);
  EXPECT_EQ(AllPrompts().size(), 15u);
}

}  // namespace
}  // namespace grag

namespace grag {
namespace {

// The settings declare their defaults beside the library's options; they must agree. (The
// retrieval weights are one struct, RetrievalTuning, in both: this checks the reading of it.)
TEST(ConfigTest, SearchDefaultsAreTheRetrievalDefaults) {
  const Config c;
  const RetrievalOptions r;
  EXPECT_EQ(static_cast<const RetrievalTuning&>(c.search).graph_weight, r.graph_weight);
  EXPECT_EQ(c.search.method, RetrievalMethodName(r.method));
  EXPECT_EQ(c.search.top_k, r.top_k);
  EXPECT_EQ(c.search.candidates, r.candidates);
  const SummarizeOptions so;
  EXPECT_EQ(static_cast<size_t>(c.summaries.max_joined_tokens), so.max_joined_tokens);
  EXPECT_EQ(static_cast<size_t>(c.summaries.max_descriptions), so.max_descriptions);
  EXPECT_EQ(c.summaries.max_summary_tokens, so.max_summary_tokens);
  EXPECT_EQ(c.communities.report_refresh_threshold, ReportOptions{}.refresh_threshold);
  EXPECT_EQ(c.rerank.top_n, r.rerank_top_n);
  EXPECT_EQ(c.local_search.lexical_similarity_floor, r.lexical_similarity_floor);
  EXPECT_EQ(c.local_search.similarity_floor, r.similarity_floor);
  EXPECT_TRUE(ValidateConfig(c).ok());
  Config bad;
  bad.query.method = "magic";
  EXPECT_EQ(ValidateConfig(bad).code(), ErrorCode::kInvalidArgument);
  bad = Config{};
  bad.search.damping = 1.0;
  EXPECT_EQ(ValidateConfig(bad).code(), ErrorCode::kInvalidArgument);
}

TEST(ConfigTest, DriftDefaultsAreTheDriftSearchDefaults) {
  const DriftConfig c;
  const DriftSearchOptions o;
  EXPECT_EQ(c.hyde, o.hyde);
  EXPECT_EQ(c.primer_top_k, o.primer_top_k);
  EXPECT_EQ(c.primer_folds, o.primer_folds);
  EXPECT_EQ(c.primer_fold_tokens, o.primer_fold_tokens);
  EXPECT_EQ(c.followups_per_answer, o.followups_per_answer);
  EXPECT_EQ(c.depth, o.depth);
  EXPECT_EQ(c.breadth, o.breadth);
  EXPECT_EQ(c.depth_decay, o.depth_decay);
  EXPECT_EQ(c.min_parent_score, o.min_parent_score);
  EXPECT_EQ(c.max_calls, o.max_calls);
  EXPECT_EQ(c.local_budget_tokens, o.local.context_budget_tokens);
  EXPECT_EQ(c.local_chunk_share, o.local.chunk_share);
  EXPECT_EQ(c.local_relationship_share, o.local.relationship_share);
  EXPECT_EQ(c.local_report_share, o.local.report_share);
  EXPECT_EQ(c.reduce_budget_tokens, o.reduce_budget_tokens);
  EXPECT_EQ(c.reply_max_tokens, o.reply_max_tokens.value_or(0));
  EXPECT_EQ(c.reduce_reply_max_tokens, o.reduce_reply_max_tokens.value_or(0));
  EXPECT_EQ(MaxDriftCalls(o, o.primer_folds), 10);
  Config bad;
  bad.drift.max_calls = 2;  // hyde, a primer call and the reduce need 3
  EXPECT_EQ(ValidateConfig(bad).code(), ErrorCode::kInvalidArgument);
  bad = Config{};
  bad.drift.local_chunk_share = 0.95;
  EXPECT_EQ(ValidateConfig(bad).code(), ErrorCode::kInvalidArgument);
  bad = Config{};
  bad.query.method = "drift";
  EXPECT_TRUE(ValidateConfig(bad).ok());
}

TEST(ConfigTest, ResolutionDefaultsAreTheResolverDefaults) {
  const Config c;
  const ResolveOptions r;
  EXPECT_EQ(c.resolution.name_weight, r.name_weight);
  EXPECT_EQ(c.resolution.embedding_weight, r.embedding_weight);
  EXPECT_EQ(c.resolution.merge_threshold, r.merge_threshold);
  EXPECT_EQ(c.resolution.adjudicate_threshold, r.adjudicate_threshold);
  EXPECT_EQ(c.resolution.no_llm_merge_threshold, r.no_llm_merge_threshold);
  EXPECT_EQ(static_cast<size_t>(c.resolution.adjudication_batch), r.adjudication_batch);
  EXPECT_EQ(static_cast<size_t>(c.resolution.max_block), r.max_block);
  Config bad;
  bad.resolution.adjudicate_threshold = 0.9;
  bad.resolution.merge_threshold = 0.8;
  EXPECT_EQ(ValidateConfig(bad).code(), ErrorCode::kInvalidArgument);
  bad = Config{};
  bad.resolution.name_weight = 0;
  bad.resolution.embedding_weight = 0;
  EXPECT_EQ(ValidateConfig(bad).code(), ErrorCode::kInvalidArgument);
  bad = Config{};
  bad.resolution.adjudication_batch = 0;
  EXPECT_EQ(ValidateConfig(bad).code(), ErrorCode::kInvalidArgument);
}

// The LLM settings' defaults are the client's.
TEST(ConfigTest, LlmDefaultsAreTheClientDefaults) {
  const Config c;
  const OpenAIOptions o;
  EXPECT_TRUE(c.llm.azure_api_version.empty());  // the client's own, declared there only
  EXPECT_FALSE(o.azure_api_version.empty());
  EXPECT_EQ(c.llm.concurrency, o.max_concurrency);
  EXPECT_EQ(c.llm.requests_per_minute, o.requests_per_minute);
  EXPECT_EQ(c.llm.tokens_per_minute, o.tokens_per_minute);
  EXPECT_EQ(static_cast<int64_t>(c.llm.timeout_seconds * 1000), o.timeout.count());
  EXPECT_EQ(c.llm.max_retries, o.max_retries);
  EXPECT_EQ(c.embeddings.batch_size, o.embedding_batch_size);
  EXPECT_EQ(c.llm.bench_after_failures, o.bench_after_failures);
  EXPECT_EQ(static_cast<int64_t>(c.llm.bench_seconds * 1000), o.bench_base.count());
  EXPECT_EQ(static_cast<int64_t>(c.llm.bench_max_seconds * 1000), o.bench_cap.count());
  const EndpointConfig e;
  const EndpointOptions eo;
  EXPECT_EQ(e.weight, eo.weight);
}

// ---- several endpoints per model role ----

TEST(ConfigTest, EndpointsAreReadFromArraysOfTables) {
  TempDir dir;
  dir.Write(
      "grag.toml",
      "[llm]\nmodel = \"llama3.1\"\nconcurrency = 6\n"
      "[[llm.endpoints]]\nbase_url = \"http://gpu-a:11434/v1\"\nconcurrency = 4\n"
      "[[llm.endpoints]]\nbase_url = \"http://gpu-b:11434/v1\"\nweight = 2.5\n"
      "[[llm.endpoints]]\nname = \"hosted\"\nbase_url = \"https://api.example.com/v1\"\n"
      "api_key_env = \"HOSTED_KEY\"\nmodel = \"meta-llama/Llama-3.1-8B\"\nrpm = 500\n"
      "tpm = 200000\n"
      "[embeddings]\nendpoints = [{base_url = \"http://gpu-a:11434/v1\", model = \"nomic\"}]\n");
  auto c = LoadConfig(dir.path().string(), "", FakeEnv({}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->llm.endpoints.size(), 3u);
  EXPECT_EQ(c->llm.endpoints[0].base_url, "http://gpu-a:11434/v1");
  EXPECT_EQ(c->llm.endpoints[0].concurrency, 4);
  EXPECT_EQ(c->llm.endpoints[1].weight, 2.5);
  EXPECT_EQ(c->llm.endpoints[1].concurrency, 0);  // llm.concurrency
  EXPECT_EQ(c->llm.endpoints[2].name, "hosted");
  EXPECT_EQ(c->llm.endpoints[2].api_key_env, "HOSTED_KEY");
  EXPECT_EQ(c->llm.endpoints[2].model, "meta-llama/Llama-3.1-8B");
  EXPECT_EQ(c->llm.endpoints[2].rpm, 500);
  EXPECT_EQ(c->llm.endpoints[2].tpm, 200000);
  EXPECT_EQ(LlmConcurrency(*c), 4 + 6 + 6);
  // The logical model is llm.model, whatever each endpoint calls it.
  EXPECT_EQ(LogicalModel(c->llm.model, c->llm.endpoints), "llama3.1");
  ASSERT_EQ(c->embeddings.endpoints.size(), 1u);
  EXPECT_EQ(LogicalModel(c->embeddings.model, c->embeddings.endpoints), "nomic");
  EXPECT_EQ(EmbeddingConcurrency(*c), 6);

  // Without endpoints nothing changes: llm.concurrency alone.
  Config plain;
  plain.llm.concurrency = 7;
  EXPECT_EQ(LlmConcurrency(plain), 7);
  EXPECT_EQ(EmbeddingConcurrency(plain), 7);
}

TEST(ConfigTest, ARoleHasEndpointsAKeyVariableAndLimitsOfItsOwn) {
  TempDir dir;
  dir.Write("grag.toml",
            "[llm]\nbase_url = \"http://main:1/v1\"\nmodel = \"big\"\nconcurrency = 6\n"
            "requests_per_minute = 100\n"
            "[llm.extract]\nmodel = \"small\"\nconcurrency = 3\n"
            "[[llm.extract.endpoints]]\nbase_url = \"http://gpu-a:11434/v1\"\n"
            "[[llm.extract.endpoints]]\nbase_url = \"http://gpu-b:11434/v1\"\nconcurrency = 5\n"
            "[llm.query]\nbase_url = \"https://answers.example/v1\"\n"
            "api_key_env = \"ANSWERS_KEY\"\nrequests_per_minute = 0\n"
            "[llm.resolve]\nconcurrency = 2\n");
  auto c = LoadConfig(dir.path().string(), "", FakeEnv({}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->llm.extract.endpoints.size(), 2u);
  EXPECT_EQ(c->llm.extract.endpoints[1].base_url, "http://gpu-b:11434/v1");
  EXPECT_EQ(c->llm.query.api_key_env, "ANSWERS_KEY");
  EXPECT_EQ(c->llm.query.requests_per_minute, 0);  // unlimited, apart from [llm]'s 100
  EXPECT_EQ(c->llm.query.tokens_per_minute, -1);   // [llm]'s
  EXPECT_EQ(c->llm.summarize.requests_per_minute, -1);
  EXPECT_TRUE(c->llm.summarize.empty());
  EXPECT_FALSE(c->llm.resolve.empty());  // limits alone give a role a client of its own
  // Workers per stage follow each role's limits.
  EXPECT_EQ(LlmConcurrency(*c), 6);
  EXPECT_EQ(LlmConcurrency(*c, "extract"), 3 + 5);
  EXPECT_EQ(LlmConcurrency(*c, "query"), 6);
  EXPECT_EQ(LlmConcurrency(*c, "resolve"), 2);
  EXPECT_EQ(LlmConcurrency(*c, "summarize"), 6);

  // Also from --set, and shown without keys.
  Config d;
  ASSERT_TRUE(ApplySetting(d, "llm.summarize.endpoints",
                           "[{base_url = \"http://a:1/v1\", api_key = \"sk-x\"}]")
                  .ok());
  ASSERT_EQ(d.llm.summarize.endpoints.size(), 1u);
  EXPECT_EQ(d.llm.summarize.endpoints[0].api_key, "sk-x");
  bool listed = false;
  for (const SettingInfo& s : ListSettings(d)) {
    if (s.key != "llm.summarize.endpoints") continue;
    listed = true;
    EXPECT_EQ(s.value_text, "[{base_url = \"http://a:1/v1\", api_key = \"***\"}]");
  }
  EXPECT_TRUE(listed);
}

TEST(ConfigTest, BadEndpointsAreRefusedByName) {
  struct Case {
    std::string toml;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"[llm]\nmodel = \"m\"\n[[llm.endpoints]]\nbase_url = \"\"\n",
       "llm.endpoints[0]: base_url is empty"},
      {"[llm]\nmodel = \"m\"\n[[llm.endpoints]]\nbase_url = \"http://a/v1\"\n"
       "[[llm.endpoints]]\nbase_url = \"http://b/v1\"\nweight = 0\n",
       "llm.endpoints[1]: weight must be positive"},
      {"[llm]\nmodel = \"m\"\n[[llm.endpoints]]\nbase_url = \"http://a/v1\"\nweight = -1.5\n",
       "weight must be positive"},
      {"[llm]\nmodel = \"m\"\n[[llm.endpoints]]\nbase_url = \"ftp://a\"\n",
       "must start with http:// or https://"},
      {"[llm]\nmodel = \"m\"\n[[llm.endpoints]]\nbase_url = \"http://a/v1\"\nbase_ulr = \"x\"\n",
       "unknown field \"base_ulr\""},
      {"[llm]\nmodel = \"m\"\n[[llm.endpoints]]\nbase_url = \"http://a/v1\"\nconcurrency = \"4\"\n",
       "concurrency must be an integer"},
      {"[llm]\nmodel = \"m\"\n[[llm.endpoints]]\nbase_url = \"http://a/v1\"\nconcurrency = -1\n",
       "concurrency must be at least 0"},
      {"[llm]\nmodel = \"m\"\n[[llm.endpoints]]\nbase_url = \"http://a/v1\"\napi_key = \"k\"\n"
       "api_key_env = \"K\"\n",
       "api_key or api_key_env, not both"},
      {"[llm]\nmodel = \"m\"\n[[llm.endpoints]]\nbase_url = \"http://a/v1\"\nname = \"x\"\n"
       "[[llm.endpoints]]\nbase_url = \"http://b/v1\"\nname = \"x\"\n",
       "name \"x\" is also endpoint 0's"},
      {"[[llm.endpoints]]\nbase_url = \"http://a/v1\"\nmodel = \"one\"\n"
       "[[llm.endpoints]]\nbase_url = \"http://b/v1\"\nmodel = \"two\"\n",
       "set llm.model to name the model"},
      {"[llm]\nendpoints = \"http://a/v1\"\n", "llm.endpoints must be a list of tables"},
      {"[embeddings]\nendpoints = [{base_url = \"http://a/v1\"}]\n",
       "embeddings.endpoints: set embeddings.model"},
      // A role's own.
      {"[llm]\nbase_url = \"http://m/v1\"\n[[llm.extract.endpoints]]\nbase_url = \"http://a/v1\"\n"
       "model = \"one\"\n[[llm.extract.endpoints]]\nbase_url = \"http://b/v1\"\nmodel = \"two\"\n",
       "llm.extract.endpoints: set llm.extract.model"},
      {"[llm]\nbase_url = \"http://m/v1\"\nmodel = \"m\"\n[[llm.query.endpoints]]\nbase_url = "
       "\"\"\n",
       "llm.query.endpoints[0]: base_url is empty"},
      {"[llm]\nbase_url = \"http://m/v1\"\nmodel = \"m\"\n[llm.query]\nbase_url = \"http://q/v1\"\n"
       "endpoints = [{base_url = \"http://a/v1\"}]\n",
       "set llm.query.base_url or llm.query.endpoints, not both"},
      {"[llm]\nbase_url = \"http://m/v1\"\nmodel = \"m\"\n[llm.resolve]\napi_key = \"k\"\n"
       "api_key_env = \"K\"\n",
       "set llm.resolve.api_key or llm.resolve.api_key_env, not both"},
      {"[llm]\nbase_url = \"http://m/v1\"\nmodel = \"m\"\n[llm.extract]\nconcurrency = -2\n",
       "llm.extract.concurrency"},
      {"[llm]\nbase_url = \"http://m/v1\"\nmodel = \"m\"\n[llm.extract]\nrequests_per_minute = "
       "-5\n",
       "llm.extract.requests_per_minute"},
  };
  for (const Case& c : cases) {
    TempDir dir;
    dir.Write("grag.toml", c.toml);
    auto loaded = LoadConfig(dir.path().string(), "", FakeEnv({}));
    ASSERT_FALSE(loaded.ok()) << c.toml;
    EXPECT_EQ(loaded.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(loaded.status().message().find(c.message), std::string::npos)
        << loaded.status().message() << "\nexpected: " << c.message;
  }
}

TEST(ConfigTest, EndpointsFromAFlagAndRenderedWithoutKeys) {
  Config c;
  c.llm.model = "m";
  ASSERT_TRUE(ApplySetting(c, "llm.endpoints",
                           "[{base_url = \"http://a:1/v1\", concurrency = 2, api_key = \"sk-x\"}, "
                           "{base_url = \"http://b:2/v1\", weight = 3.0}]")
                  .ok());
  ASSERT_EQ(c.llm.endpoints.size(), 2u);
  EXPECT_EQ(c.llm.endpoints[0].api_key, "sk-x");
  EXPECT_EQ(c.llm.endpoints[1].weight, 3.0);
  EXPECT_TRUE(ValidateConfig(c).ok());
  Status bad = ApplySetting(c, "llm.endpoints", "http://a:1/v1");
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("a TOML list of tables"), std::string::npos) << bad.message();
  for (const SettingInfo& s : ListSettings(c)) {
    if (s.key != "llm.endpoints") continue;
    EXPECT_EQ(s.value_text,
              "[{base_url = \"http://a:1/v1\", api_key = \"***\", concurrency = 2}, "
              "{base_url = \"http://b:2/v1\", weight = 3.0}]");
  }
}

}  // namespace
}  // namespace grag

namespace grag {
namespace {

// docs/configuration.md's list of every setting is what the settings table generates: a setting
// added, renamed or with a new default or help shows up there, or this fails.
TEST(ConfigReferenceTest, DocsPageHoldsTheGeneratedList) {
  std::ifstream in(std::string(GRAG_SOURCE_DIR) + "/docs/configuration.md");
  ASSERT_TRUE(in) << "docs/configuration.md not found";
  std::stringstream page;
  page << in.rdbuf();
  const std::string text = page.str();
  const std::string begin_marker = "<!-- generated by `grag config --reference`";
  const std::string end_marker = "<!-- end of generated settings -->";
  const size_t begin = text.find(begin_marker);
  ASSERT_NE(begin, std::string::npos) << "the generated block's start marker is missing";
  const size_t body = text.find("-->\n", begin);
  ASSERT_NE(body, std::string::npos);
  const size_t end = text.find(end_marker, body);
  ASSERT_NE(end, std::string::npos) << "the generated block's end marker is missing";
  EXPECT_EQ(text.substr(body + 4, end - body - 4), RenderSettingsReference())
      << "docs/configuration.md is out of date: run `make docs`";
}

// Every setting is checked against the range or words its row in the table declares, with a
// message naming the setting, what it allows and the value given.
TEST(ConfigValidationTest, EachSettingIsCheckedAgainstWhatItsRowAllows) {
  struct Case {
    const char* key;
    const char* value;
    const char* message;  // empty: accepted
  };
  const Case cases[] = {
      {"search.top_k", "0", "search.top_k must be at least 1, not 0"},
      {"search.top_k", "1", ""},
      {"lazy.budget", "1001", "lazy.budget must be between 1 and 1000, not 1001"},
      {"lazy.budget", "1000", ""},
      {"search.damping", "1", "search.damping must be above 0 and below 1, not 1"},
      {"search.damping", "0.99", ""},
      {"drift.depth_decay", "0", "drift.depth_decay must be above 0 and at most 1, not 0"},
      {"drift.depth_decay", "1", ""},
      {"llm.timeout_seconds", "0", "llm.timeout_seconds must be above 0, not 0"},
      {"query.method", "psychic",
       "query.method must be one of auto, global, local, basic, hybrid, drift, lazy, budgeted, "
       "not \"psychic\""},
      {"llm.think", "", ""},
      {"llm.think", "maybe", "llm.think must be one of \"\", on, off, not \"maybe\""},
      {"embeddings.encoding", "f16", ""},
  };
  for (const Case& c : cases) {
    Config config;
    ASSERT_TRUE(ApplySetting(config, c.key, c.value).ok()) << c.key;
    const Status s = ValidateConfig(config);
    if (std::string(c.message).empty()) {
      EXPECT_TRUE(s.ok()) << c.key << "=" << c.value << ": " << s.message();
    } else {
      EXPECT_EQ(s.message(), c.message) << c.key << "=" << c.value;
    }
  }
  // Settings tied to each other are still checked together.
  Config config;
  ASSERT_TRUE(ApplySetting(config, "chunks.overlap", "1200").ok());
  EXPECT_EQ(ValidateConfig(config).code(), ErrorCode::kInvalidArgument);
}

TEST(ConfigReferenceTest, ListsEverySettingWithItsDefaultAndEnv) {
  const std::string ref = RenderSettingsReference();
  const Config defaults;
  for (const auto& s : ListSettings(defaults)) {
    EXPECT_NE(ref.find("| `" + s.key + "` | `"), std::string::npos) << s.key;
  }
  EXPECT_NE(ref.find("| `chunks.size` | `1200` | at least 1 |"), std::string::npos);
  EXPECT_NE(ref.find("| `llm.model` | `\"\"` |  | `GRAG_LLM_MODEL` |"), std::string::npos);
  EXPECT_NE(ref.find("| `search.damping` | `0.5` | above 0 and below 1 |"), std::string::npos);
  EXPECT_NE(ref.find("| `llm.think` | `\"\"` | one of \"\", on, off |"), std::string::npos);
  EXPECT_NE(ref.find("### `[llm]`"), std::string::npos);
  EXPECT_EQ(ref.find("\n\n\n"), std::string::npos);
}

}  // namespace
}  // namespace grag

namespace grag {
namespace {

// The settings table is the one declaration: every row reaches grag.toml (as `grag init`
// writes it), --set, its environment variable and the docs' list, with no second list to keep.
TEST(ConfigReferenceTest, EverySettingReachesEveryWayOfSettingIt) {
  const Config defaults;
  const std::string file = RenderConfigFile(defaults);
  const std::string reference = RenderSettingsReference();
  for (const SettingInfo& s : ListSettings(defaults)) {
    const size_t dot = s.key.find('.');
    const std::string name = dot == std::string::npos ? s.key : s.key.substr(dot + 1);
    EXPECT_NE(file.find("# " + name + " = " + s.value_text + "\n"), std::string::npos) << s.key;
    EXPECT_NE(reference.find("| `" + s.key + "` | `"), std::string::npos) << s.key;
    if (s.value_text.starts_with("[") || s.value_text.starts_with("{")) continue;  // lists
    std::string raw = s.value_text;
    if (raw.size() >= 2 && raw.front() == '"') raw = raw.substr(1, raw.size() - 2);
    Config c;
    EXPECT_TRUE(ApplySetting(c, s.key, raw).ok()) << s.key << " = " << raw;
    if (!s.env.empty()) {
      TempDir dir;
      auto loaded = LoadConfig(dir.path().string(), "", FakeEnv({{s.env, raw}}));
      ASSERT_TRUE(loaded.ok()) << s.env << "=" << raw << ": " << loaded.status().ToString();
    }
  }
}

}  // namespace
}  // namespace grag
