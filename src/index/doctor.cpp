#include "grag/doctor.h"

#include <fmt/format.h>

#include <chrono>
#include <map>

#include "grag/extract.h"
#include "grag/llm.h"
#include "grag/models.h"
#include "grag/nlp_extract.h"
#include "grag/prompts.h"
#include "grag/tokenizer.h"
#include "grag/words.h"

namespace grag {
namespace {

// What extraction is tried on when no sample is given: the kind of text people index (people,
// organisations, places, dates, numbers), written for this purpose.
constexpr std::string_view kSample =
    "In March 1998 the Harbour Trust of Port Elsey hired the engineer Mara Voss to rebuild the "
    "North Pier, which a storm had broken the winter before. Voss had trained at the Technical "
    "University of Delft and had worked for eleven years with Brandt & Okafor, a firm in "
    "Rotterdam that builds sea walls. She brought two of its surveyors, Tomas Reyes and Ilse "
    "Brandt, and the Trust's chairman, Edwin Calloway, gave her a budget of 4.2 million pounds. "
    "The work took until October 2000. Calloway resigned in 1999 after a dispute with the town "
    "council over the cost, and his deputy, Nadia Okonkwo, finished the project with Voss. The "
    "rebuilt pier was opened by the mayor, Peter Hale, on 14 October 2000, and the Port Elsey "
    "Maritime Museum keeps Voss's drawings. In 2004 the Royal Institution of Civil Engineers gave "
    "Voss and Okonkwo its Telford Medal for the work.";

int64_t Millis(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               since)
      .count();
}

// What a failed request says about the endpoint.
void Classify(const Status& st, DoctorProbe& p) {
  p.error = st.message();
  const bool unanswered = st.code() == ErrorCode::kUnavailable &&
                          st.message().find("does not answer") != std::string::npos;
  p.reachable = !unanswered && st.code() != ErrorCode::kTimeout;
  p.model_found = p.reachable && st.code() != ErrorCode::kNotFound &&
                  st.message().find("HTTP 404") == std::string::npos;
}

std::string RootOf(std::string url) {
  while (url.ends_with('/')) url.pop_back();
  if (url.ends_with("/v1")) url.resize(url.size() - 3);
  return url;
}

// Whether the chat server is an Ollama server (it answers /api/show for the model), and the
// model's context window when it says.
void DetectOllama(const Config& c, DoctorReport& r) {
  if (c.llm.base_url.empty()) return;
  Result<std::unique_ptr<HttpTransport>> transport = MakeCurlTransport();
  if (!transport.ok()) return;
  HttpRequest req;
  req.url = RootOf(c.llm.base_url) + "/api/show";
  req.headers.push_back({"Content-Type", "application/json"});
  if (!c.llm.api_key.empty()) req.headers.push_back({"Authorization", "Bearer " + c.llm.api_key});
  req.body = fmt::format("{{\"model\":\"{}\"}}", c.llm.model);
  req.timeout = std::chrono::milliseconds(10'000);
  req.connect_timeout = std::chrono::milliseconds(5'000);
  Result<HttpResponse> reply = (*transport)->Post(req);
  if (!reply.ok() || reply->status != 200) return;
  if (reply->body.find("\"model_info\"") == std::string::npos &&
      reply->body.find("\"details\"") == std::string::npos) {
    return;
  }
  r.ollama_detected = true;
  const size_t at = reply->body.find(".context_length\"");
  if (at != std::string::npos) {
    size_t i = reply->body.find(':', at);
    int64_t n = 0;
    if (i != std::string::npos) {
      for (++i; i < reply->body.size() && reply->body[i] == ' '; ++i) {
      }
      for (; i < reply->body.size() && std::isdigit(static_cast<unsigned char>(reply->body[i]));
           ++i) {
        n = n * 10 + (reply->body[i] - '0');
      }
    }
    if (n > 0) r.context_window = n;
  }
}

// Where a role's calls go: its own server, else [llm]'s.
std::string RoleUrl(const Config& c, const LlmRoleConfig& role) {
  if (!role.endpoints.empty()) return role.endpoints.front().base_url;
  if (!role.base_url.empty()) return role.base_url;
  if (c.llm.base_url.empty() && !c.llm.endpoints.empty()) return c.llm.endpoints.front().base_url;
  return c.llm.base_url;
}

// Sends one chat request, never from the cache, and notes what came back.
DoctorProbe Ask(std::string name, std::string base_url, ChatModel& chat, ChatRequest req,
                Result<ChatResponse>* reply) {
  DoctorProbe p;
  p.name = std::move(name);
  p.base_url = std::move(base_url);
  p.model = chat.model_for(req.role);
  req.use_cache = false;
  const auto start = std::chrono::steady_clock::now();
  *reply = chat.Chat(req);
  p.latency_ms = Millis(start);
  if (!reply->ok()) {
    Classify(reply->status(), p);
    return p;
  }
  const ChatResponse& r = **reply;
  p.reachable = p.model_found = true;
  p.prompt_tokens = r.prompt_tokens;
  p.completion_tokens = r.completion_tokens;
  p.reasoning_tokens = r.reasoning_tokens;
  p.thinking_seen = r.reasoning_tokens > 0;
  p.finish_reason = r.finish_reason;
  p.reply_excerpt = ShortenAtWord(r.content, 300);
  return p;
}

DoctorProbe ProbeExtraction(const Config& c, ChatModel& chat, const std::string& prompt,
                            DoctorReport& r) {
  ChatRequest req;
  req.messages.push_back({"user", prompt});
  req.role = ChatRole::kExtract;
  req.json_mode = c.llm.json_mode;
  req.json_schema = std::string(ExtractionSchema());
  Result<ChatResponse> reply = Status::Internal("not sent");
  DoctorProbe p = Ask("extraction", RoleUrl(c, c.llm.extract), chat, std::move(req), &reply);
  if (!reply.ok()) return p;
  Result<ParsedExtraction> parsed = ParseExtractionReply(reply->content);
  p.json_valid = parsed.ok();
  if (parsed.ok()) {
    p.entities = static_cast<int64_t>(parsed->entities.size());
    p.relationships = static_cast<int64_t>(parsed->relationships.size());
  }
  if (!p.json_valid) {
    p.error = "the reply is not the JSON the extraction prompt asks for";
  } else if (p.entities == 0 && r.sample_names > 0) {
    p.error = fmt::format("no entity extracted from a sample that holds {} names", r.sample_names);
  }
  p.ok = p.error.empty();
  return p;
}

DoctorProbe ProbeAnswer(const Config& c, ChatModel& chat) {
  ChatRequest req;
  req.messages.push_back(
      {"user", "Answer in one short sentence: which river flows through Paris?"});
  req.role = ChatRole::kQuery;
  Result<ChatResponse> reply = Status::Internal("not sent");
  DoctorProbe p = Ask("answer", RoleUrl(c, c.llm.query), chat, std::move(req), &reply);
  if (!reply.ok()) return p;
  if (reply->content.empty()) p.error = "the answer is empty";
  p.ok = p.error.empty();
  return p;
}

DoctorProbe ProbeEmbedding(const Config& c, EmbeddingModel& embed) {
  DoctorProbe p;
  p.name = "embedding";
  p.base_url = c.embeddings.base_url.empty() ? c.llm.base_url : c.embeddings.base_url;
  p.model = embed.model();
  if (c.embeddings.model.empty() && c.embeddings.endpoints.empty()) {
    p.base_url = "built in, no network";
  }
  const auto start = std::chrono::steady_clock::now();
  Result<EmbeddingResponse> reply = embed.Embed({"The North Pier was rebuilt in 2000."});
  p.latency_ms = Millis(start);
  if (!reply.ok()) {
    Classify(reply.status(), p);
    return p;
  }
  p.reachable = p.model_found = true;
  p.prompt_tokens = reply->prompt_tokens;
  p.dimension = static_cast<int64_t>(reply->dimension);
  p.ok = p.dimension > 0;
  if (!p.ok) p.error = "the embedding is empty";
  return p;
}

void Advise(const Config& c, DoctorReport& r) {
  auto add = [&](std::string line) { r.advice.push_back(std::move(line)); };
  for (const DoctorProbe& p : r.probes) {
    if (p.ok) continue;
    if (!p.reachable) {
      add(
          fmt::format("{}: nothing answers at {}: is the server running, and is the base URL "
                      "right?",
                      p.name, p.base_url));
    } else if (!p.model_found) {
      add(
          fmt::format("{}: the server does not know model {}: check the model name (Ollama: "
                      "`ollama pull {}`)",
                      p.name, p.model, p.model));
    }
  }
  const DoctorProbe* extraction = nullptr;
  bool thinking = false;
  int64_t thinking_tokens = 0;
  for (const DoctorProbe& p : r.probes) {
    if (p.name == "extraction") extraction = &p;
    thinking = thinking || p.thinking_seen;
    thinking_tokens += p.reasoning_tokens;
  }
  const bool ollama_native = c.llm.api_style == "ollama";
  if (r.ollama_detected && !ollama_native) {
    add(fmt::format(
        "this is an Ollama server: set llm.api_style = \"ollama\". Through its OpenAI endpoint "
        "Ollama runs the model with its default context window and silently drops the start of "
        "longer prompts{}; grag's own Ollama client sets the window each request needs and keeps "
        "the model loaded",
        r.context_window ? fmt::format(" (the model could take {} tokens)", *r.context_window)
                         : std::string()));
  }
  if (extraction != nullptr && extraction->reachable && extraction->model_found) {
    if (!extraction->json_valid) {
      add(extraction->error.find("thinking") != std::string::npos
              ? "extraction: the model spent its reply thinking: set llm.reasoning_effort = "
                "\"low\" or llm.think = \"off\""
              : "extraction: the replies are not the JSON the prompt asks for: use a larger "
                "model, keep llm.json_mode = true, or adapt prompts/extract_graph.md to the model");
    } else if (extraction->entities == 0 && r.sample_names > 0) {
      add("extraction: the model found no entity in a sample full of names: a context window "
          "that cut the prompt, or a model too small for the task; an index would be empty");
    }
  }
  if (thinking) {
    add(
        fmt::format("the model thinks before it answers ({} tokens of thinking on these requests): "
                    "grag keeps the thinking out of what it parses, but it costs time and tokens; "
                    "llm.reasoning_effort = \"low\" or llm.think = \"off\" turns it down where the "
                    "server allows",
                    thinking_tokens));
  }
  for (const std::string& a : r.adaptations) {
    add("adapted on its own (kept in the index, no setting needed): " + a);
  }
  if (r.context_window && *r.context_window < r.extraction_prompt_tokens + 1024) {
    add(
        fmt::format("the model's context window ({} tokens) barely holds an extraction prompt of "
                    "{} tokens and its reply: lower chunks.size",
                    *r.context_window, r.extraction_prompt_tokens));
  }
  if (r.llm_configured && !c.llm.Priced()) {
    add("set llm.price_input_per_million and llm.price_output_per_million to see what an index "
        "costs (dry runs and budgets use them too)");
  }
}

}  // namespace

Result<DoctorReport> RunDoctor(const Config& config, const DoctorOptions& options) {
  DoctorReport r;
  r.api_style = config.llm.api_style;
  InMemoryCache cache;  // fresh: every probe reaches the server, and nothing is kept
  GRAG_ASSIGN_OR_RETURN(std::unique_ptr<ChatModel> chat, MakeChatModel(config, &cache));
  GRAG_ASSIGN_OR_RETURN(std::unique_ptr<EmbeddingModel> embed, MakeEmbeddingModel(config, &cache));
  r.llm_configured = chat != nullptr;

  const std::string sample =
      options.sample_text.empty() ? std::string(kSample) : options.sample_text;
  if (Result<ParsedExtraction> nlp = ExtractNlp(sample, NlpExtractorOptions(), ""); nlp.ok()) {
    r.sample_names = static_cast<int64_t>(nlp->entities.size());
  }
  if (chat) {
    GRAG_ASSIGN_OR_RETURN(std::string templ,
                          LoadPrompt(config.Resolve(config.prompts_dir), PromptId::kExtractGraph));
    std::string types;
    for (const std::string& t : config.extraction.entity_types) {
      types += (types.empty() ? "" : ", ") + t;
    }
    const std::string prompt = FillPrompt(templ, {{"entity_types", types}, {"chunk", sample}});
    GRAG_ASSIGN_OR_RETURN(const Tokenizer* tok, Tokenizer::Get(config.chunks.encoding));
    r.extraction_prompt_tokens = static_cast<int64_t>(tok->Count(prompt));
    DetectOllama(config, r);
    r.probes.push_back(ProbeExtraction(config, *chat, prompt, r));
    r.probes.push_back(ProbeAnswer(config, *chat));
    if (auto* client = dynamic_cast<OpenAIClient*>(chat.get())) {
      r.adaptations = client->Adaptations();
      if (std::optional<int64_t> w = client->ModelContextWindow()) r.context_window = w;
    }
    r.calls_per_chunk = 1 + config.extraction.gleanings;
    const DoctorProbe& e = r.probes.front();
    if (e.ok && config.llm.Priced()) {
      // A glean turn re-sends the conversation: about the prompt and the reply again as prompt.
      const double prompt_tokens = static_cast<double>(e.prompt_tokens) +
                                   static_cast<double>(config.extraction.gleanings) *
                                       static_cast<double>(e.prompt_tokens + e.completion_tokens);
      const double completion_tokens = static_cast<double>(e.completion_tokens) *
                                       static_cast<double>(1 + config.extraction.gleanings);
      r.cost_per_1000_chunks = 1000.0 *
                               (prompt_tokens * config.llm.InputPrice("extract") +
                                completion_tokens * config.llm.OutputPrice("extract")) /
                               1e6;
    }
  }
  r.probes.push_back(ProbeEmbedding(config, *embed));
  for (const DoctorProbe& p : r.probes) r.ok = r.ok && p.ok;
  if (r.ollama_detected && config.llm.api_style != "ollama") r.ok = false;
  Advise(config, r);
  return r;
}

}  // namespace grag
