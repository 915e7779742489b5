// End to end: the grag binary indexes A Christmas Carol against loopback servers that behave like
// the local and reasoning models people try first (thinking before every answer, JSON mode
// refused, empty extractions, Ollama cutting prompts to its default window), and `grag doctor`
// reports each of those behaviours.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/fake_graphrag_llm.h"
#include "support/fake_openai_server.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::Answering;
using testing::ChatCompletion;
using testing::FakeGraphRagReply;
using testing::FakeHandler;
using testing::FakeOpenAIServer;
using testing::FakeReply;
using testing::FakeRequest;
using ::testing::HasSubstr;
using testing::OpenAIError;
using testing::PromptKind;
using testing::RawReply;
using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;

std::string Grag(const std::string& args) { return ShellQuote(GRAG_BINARY) + " " + args; }

// A project holding the book.
std::string NewProject(const TempDir& dir, const std::string& name) {
  const std::string root = dir / name;
  auto init = RunCommand(Grag("init " + ShellQuote(root)));
  EXPECT_EQ(init.exit_code, 0) << init.err;
  std::filesystem::copy_file(
      std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt",
      root + "/input/christmas_carol.txt");
  return root;
}

std::string Env(const FakeOpenAIServer& server, const std::string& model = "fake-model") {
  return "GRAG_LLM_BASE_URL=" + server.base_url() + " GRAG_LLM_MODEL=" + model + " ";
}

nlohmann::json IndexJson(const FakeOpenAIServer& server, const std::string& root,
                         const std::string& sets = "", int* exit_code = nullptr,
                         std::string* err = nullptr) {
  auto r =
      RunCommand(Env(server) + Grag("--root " + ShellQuote(root) + " " + sets + " index --json"));
  if (exit_code != nullptr) *exit_code = r.exit_code;
  if (err != nullptr) *err = r.err;
  if (r.exit_code != 0) return nullptr;
  return nlohmann::json::parse(r.out, nullptr, false);
}

std::string Thinking(std::string_view prompt) {
  return "<think>\nThe user wants JSON such as {\"entities\": [...]}. I will list the names {like "
         "this} and check each one.\n</think>\n\n" +
         FakeGraphRagReply(prompt);
}

// ---- indexing ----

TEST(E2eLocalModelsTest, ThinkingBeforeEveryReplyGivesTheGraphOfAPlainModel) {
  TempDir dir;
  FakeOpenAIServer plain(
      Answering([](const FakeRequest& r) { return FakeGraphRagReply(r.LastUserMessage()); }));
  const auto base = IndexJson(plain, NewProject(dir, "plain"));
  ASSERT_FALSE(base.is_null());
  const int plain_entities = base["entities"].get<int>();
  ASSERT_GT(plain_entities, 50);

  FakeOpenAIServer reasoning(
      Answering([](const FakeRequest& r) { return Thinking(r.LastUserMessage()); }));
  int code = 0;
  std::string err;
  const auto thought = IndexJson(reasoning, NewProject(dir, "thinking"), "", &code, &err);
  ASSERT_EQ(code, 0) << err;
  EXPECT_GE(thought["entities"].get<int>(), plain_entities * 9 / 10);
  EXPECT_EQ(thought["chunks"]["skipped"], 0);
  EXPECT_GT(thought["reports"]["generated"].get<int>(), 0) << thought.dump();
}

TEST(E2eLocalModelsTest, AServerRefusingJsonModeIsAskedInThePromptAndRemembered) {
  TempDir dir;
  std::atomic<int> refused{0};
  FakeOpenAIServer server([&](const FakeRequest& r) -> FakeReply {
    if (r.json.contains("response_format")) {
      ++refused;
      return OpenAIError(400, "'response_format' of type 'json_object' is not supported");
    }
    return ChatCompletion(FakeGraphRagReply(r.LastUserMessage()));
  });
  const std::string root = NewProject(dir, "strict");
  // A first run stopped by its budget (resumable), then the rest: the resume does not probe.
  int code = 0;
  std::string err;
  IndexJson(server, root, "--set llm.max_calls=6 --set llm.concurrency=1", &code, &err);
  ASSERT_NE(code, 0);
  // A JSON schema refused, then a JSON object: the prompt alone asks for JSON from then on.
  EXPECT_EQ(refused.load(), 2) << err;
  const auto done = IndexJson(server, root, "--set llm.json_mode=true", &code, &err);
  ASSERT_EQ(code, 0) << err;
  EXPECT_EQ(refused.load(), 2);
  EXPECT_GT(done["entities"].get<int>(), 50);
}

TEST(E2eLocalModelsTest, EmptyExtractionsStopTheRunEarlyWithADiagnosis) {
  TempDir dir;
  FakeOpenAIServer server(Answering([](const FakeRequest& r) {
    const std::string kind = PromptKind(r.LastUserMessage());
    if (kind == "extract" || kind == "glean" || kind == "retry") {
      return std::string(R"({"entities": [], "relationships": []})");
    }
    return FakeGraphRagReply(r.LastUserMessage());
  }));
  const std::string root = NewProject(dir, "empty");
  int code = 0;
  std::string err;
  IndexJson(server, root, "", &code, &err);
  EXPECT_EQ(code, 1);
  EXPECT_LE(server.request_count(), 30);
  EXPECT_THAT(err, HasSubstr("no entity"));
  EXPECT_THAT(err, HasSubstr("likely cause"));
  EXPECT_THAT(err, HasSubstr("grag doctor"));
  EXPECT_THAT(err, HasSubstr("fake-model"));
  // The chunks done so far are kept and counted.
  auto stats = RunCommand(Grag("--root " + ShellQuote(root) + " stats --json"));
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_GT(nlohmann::json::parse(stats.out)["chunks_empty"].get<int>(), 0);
}

// An Ollama server: its OpenAI endpoint runs the model with a 2,048-token window and keeps the
// end of a longer prompt (the instructions at its start are lost); its own /api/chat uses the
// num_ctx a request sends. It counts the prompts it had to cut.
struct OllamaServer {
  std::atomic<int> cut{0};
  std::atomic<int> native{0};

  static std::string Keep(const std::string& prompt, int64_t ctx) {
    const size_t max = static_cast<size_t>(ctx) * 4;  // ~4 bytes a token
    return prompt.size() <= max ? prompt : prompt.substr(prompt.size() - max);
  }

  FakeReply operator()(const FakeRequest& r) {
    if (r.path == "/api/show") {
      return RawReply(200, R"({"model_info":{"llama.context_length":16384},"details":{}})");
    }
    if (r.path == "/api/chat") {
      ++native;
      int64_t ctx = 2048;
      if (r.json.contains("options") && r.json["options"].contains("num_ctx")) {
        ctx = r.json["options"]["num_ctx"].get<int64_t>();
      }
      std::string prompt;
      for (const auto& m : r.json["messages"]) prompt += m["content"].get<std::string>();
      const std::string kept = Keep(r.LastUserMessage(), ctx);
      if (prompt.size() > static_cast<size_t>(ctx) * 4) ++cut;
      nlohmann::json reply = {
          {"model", "llama"},
          {"message", {{"role", "assistant"}, {"content", FakeGraphRagReply(kept)}}},
          {"done_reason", "stop"},
          {"prompt_eval_count", prompt.size() / 4},
          {"eval_count", 20}};
      return RawReply(200, reply.dump());
    }
    if (r.IsChat()) {
      std::string prompt;
      for (const auto& m : r.json["messages"]) prompt += m["content"].get<std::string>();
      if (prompt.size() > 2048 * 4) ++cut;
      return ChatCompletion(FakeGraphRagReply(Keep(r.LastUserMessage(), 2048)));
    }
    return RawReply(404, R"({"error":"not found"})");
  }
};

TEST(E2eLocalModelsTest, OllamaGetsTheContextWindowEachPromptNeeds) {
  TempDir dir;
  auto ollama = std::make_shared<OllamaServer>();
  FakeOpenAIServer server([ollama](const FakeRequest& r) { return (*ollama)(r); });
  // Chunks of 2,400 tokens make prompts longer than Ollama's default window.
  const std::string sets = "--set chunks.size=2400 --set chunks.overlap=100";

  // Through the OpenAI endpoint the prompts are cut: the run stops and says what to change.
  int code = 0;
  std::string err;
  IndexJson(server, NewProject(dir, "openai"), sets, &code, &err);
  EXPECT_EQ(code, 1);
  EXPECT_GT(ollama->cut.load(), 0);
  EXPECT_THAT(err, HasSubstr("llm.api_style = \"ollama\""));

  // Through Ollama's own API every prompt arrives whole.
  ollama->cut = 0;
  const auto done = IndexJson(server, NewProject(dir, "ollama"),
                              sets + " --set llm.api_style=ollama", &code, &err);
  ASSERT_EQ(code, 0) << err;
  EXPECT_EQ(ollama->cut.load(), 0);
  EXPECT_GT(ollama->native.load(), 0);
  EXPECT_GT(done["entities"].get<int>(), 50);
}

// ---- grag doctor ----

nlohmann::json Doctor(const FakeOpenAIServer& server, const std::string& root,
                      const std::string& sets = "", int* exit_code = nullptr) {
  auto r =
      RunCommand(Env(server) + Grag("--root " + ShellQuote(root) + " " + sets + " doctor --json"));
  if (exit_code != nullptr) *exit_code = r.exit_code;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
  return j;
}

const nlohmann::json& Probe(const nlohmann::json& report, const std::string& name) {
  for (const auto& p : report["probes"]) {
    if (p["name"] == name) return p;
  }
  static const nlohmann::json none;
  ADD_FAILURE() << "no probe " << name << " in " << report.dump();
  return none;
}

std::string Advice(const nlohmann::json& report) {
  std::string all;
  for (const auto& a : report["advice"]) all += a.get<std::string>() + "\n";
  return all;
}

TEST(E2eLocalModelsTest, DoctorReportsEachBehaviour) {
  TempDir dir;
  const std::string root = NewProject(dir, "doctor");
  int code = 0;
  {
    FakeOpenAIServer plain(
        Answering([](const FakeRequest& r) { return FakeGraphRagReply(r.LastUserMessage()); }));
    auto j = Doctor(plain, root, "--set llm.price_input_per_million=0.15", &code);
    EXPECT_EQ(code, 0) << j.dump(2);
    EXPECT_TRUE(j["ok"].get<bool>());
    const auto& e = Probe(j, "extraction");
    EXPECT_TRUE(e["json_valid"].get<bool>());
    EXPECT_GT(e["entities"].get<int>(), 3);
    EXPECT_FALSE(e["thinking_seen"].get<bool>());
    EXPECT_TRUE(j["cost_per_1000_chunks"].is_number());
    // Ollama's /api/show (404 here), one extraction, one answer; embeddings are lexical.
    EXPECT_EQ(plain.request_count(), 3);
  }
  {
    FakeOpenAIServer reasoning(
        Answering([](const FakeRequest& r) { return Thinking(r.LastUserMessage()); }));
    auto j = Doctor(reasoning, root, "", &code);
    EXPECT_EQ(code, 0) << j.dump(2);
    EXPECT_TRUE(Probe(j, "extraction")["thinking_seen"].get<bool>());
    EXPECT_TRUE(Probe(j, "extraction")["json_valid"].get<bool>());
    EXPECT_THAT(Advice(j), HasSubstr("llm.reasoning_effort"));
  }
  {
    FakeOpenAIServer strict([](const FakeRequest& r) -> FakeReply {
      if (r.json.contains("response_format")) {
        return OpenAIError(400, "response_format json_object is not supported");
      }
      return ChatCompletion(FakeGraphRagReply(r.LastUserMessage()));
    });
    auto j = Doctor(strict, root, "", &code);
    EXPECT_EQ(code, 0) << j.dump(2);
    EXPECT_TRUE(Probe(j, "extraction")["json_valid"].get<bool>());
    EXPECT_THAT(j["adaptations"].dump(), HasSubstr("response_format"));
  }
  {
    FakeOpenAIServer empty(Answering([](const FakeRequest& r) {
      if (PromptKind(r.LastUserMessage()) == "extract") {
        return std::string(R"({"entities": [], "relationships": []})");
      }
      return FakeGraphRagReply(r.LastUserMessage());
    }));
    auto j = Doctor(empty, root, "", &code);
    EXPECT_EQ(code, 1);
    EXPECT_FALSE(Probe(j, "extraction")["ok"].get<bool>());
    EXPECT_THAT(Advice(j), HasSubstr("no entity"));
  }
  {
    auto ollama = std::make_shared<OllamaServer>();
    FakeOpenAIServer server([ollama](const FakeRequest& r) { return (*ollama)(r); });
    auto j = Doctor(server, root, "", &code);
    EXPECT_EQ(code, 1);
    EXPECT_TRUE(j["ollama_detected"].get<bool>());
    EXPECT_EQ(j["context_window"], 16384);
    EXPECT_THAT(Advice(j), HasSubstr("llm.api_style = \"ollama\""));
    auto native = Doctor(server, root, "--set llm.api_style=ollama", &code);
    EXPECT_EQ(code, 0) << native.dump(2);
    EXPECT_EQ(native["context_window"], 16384);
  }
  {
    // Nothing listens: not reachable, said plainly.
    std::string url;
    {
      FakeOpenAIServer gone;
      url = gone.base_url();
    }
    auto r = RunCommand("GRAG_LLM_BASE_URL=" + url + " GRAG_LLM_MODEL=m " +
                        Grag("--root " + ShellQuote(root) + " doctor --json"));
    EXPECT_EQ(r.exit_code, 1);
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out << r.err;
    EXPECT_FALSE(Probe(j, "extraction")["reachable"].get<bool>());
    EXPECT_THAT(Advice(j), HasSubstr("is the server running"));
  }
}

}  // namespace
}  // namespace grag
