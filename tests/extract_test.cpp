// LLM extraction: tolerant parsing, name normalisation, retry-once-then-skip, gleaning.
#include "grag/extract.h"

#include <gtest/gtest.h>

#include "grag/prompts.h"

namespace grag {
namespace {

ExtractorOptions Options(int gleanings = 0) {
  ExtractorOptions o;
  o.prompt = std::string(GetPromptInfo(PromptId::kExtractGraph).default_text);
  o.entity_types = {"organization", "person", "geo", "event"};
  o.gleanings = gleanings;
  return o;
}

constexpr const char* kReply = R"({"entities": [
  {"name": "Ebenezer Scrooge", "type": "PERSON", "description": "A miser"},
  {"name": "London", "type": "geo", "description": "A city"}],
 "relationships": [{"source": "Ebenezer Scrooge", "target": "London", "description": "lives in", "strength": "7"}]})";

TEST(NormalizeEntityNameTest, CaseWhitespaceAndPunctuationVariantsShareAKey) {
  EXPECT_EQ(NormalizeEntityName("Ebenezer Scrooge"), "ebenezer scrooge");
  EXPECT_EQ(NormalizeEntityName("  EBENEZER   SCROOGE. "), "ebenezer scrooge");
  EXPECT_EQ(NormalizeEntityName("ebenezer-scrooge"), "ebenezer scrooge");
  EXPECT_EQ(NormalizeEntityName("“Ebenezer Scrooge”"), "ebenezer scrooge");
  EXPECT_EQ(NormalizeEntityName("STRASSE"), NormalizeEntityName("straße"));
  EXPECT_EQ(NormalizeEntityName("Ｓｃｒｏｏｇｅ"), "scrooge");  // full-width
  EXPECT_EQ(NormalizeEntityName("..."), "");
}

TEST(ParseExtractionReplyTest, AcceptsFencesProseAndStringNumbers) {
  auto plain = ParseExtractionReply(kReply);
  ASSERT_TRUE(plain.ok());
  ASSERT_EQ(plain->entities.size(), 2u);
  EXPECT_EQ(plain->entities[0].type, "person");
  EXPECT_EQ(plain->entities[0].name_key, "ebenezer scrooge");
  ASSERT_EQ(plain->relationships.size(), 1u);
  EXPECT_DOUBLE_EQ(plain->relationships[0].strength, 7);
  EXPECT_EQ(plain->relationships[0].target_key, "london");

  auto fenced =
      ParseExtractionReply(std::string("Here you go:\n```json\n") + kReply + "\n```\nDone.");
  ASSERT_TRUE(fenced.ok());
  EXPECT_EQ(fenced->entities.size(), 2u);
  auto prose = ParseExtractionReply(std::string("Sure! ") + kReply + " Hope this helps.");
  ASSERT_TRUE(prose.ok());
  EXPECT_EQ(prose->relationships.size(), 1u);
}

TEST(ParseExtractionReplyTest, DropsUnusableEntriesAndClampsStrength) {
  auto r =
      ParseExtractionReply(R"({"entities": [{"name": ""}, {"type": "person"}, 5, {"name": "A"}],
    "relationships": [{"source": "A", "target": "A"}, {"source": "A", "target": "B", "strength": 99},
                      {"source": "A", "target": "C"}]})");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->entities.size(), 1u);
  ASSERT_EQ(r->relationships.size(), 2u);
  EXPECT_DOUBLE_EQ(r->relationships[0].strength, 10);
  EXPECT_DOUBLE_EQ(r->relationships[1].strength, 1);
}

TEST(ParseExtractionReplyTest, NotJsonIsAParseError) {
  EXPECT_EQ(ParseExtractionReply("I cannot do that").status().code(), ErrorCode::kParse);
  EXPECT_EQ(ParseExtractionReply("{\"foo\": 1}").status().code(), ErrorCode::kParse);
  EXPECT_EQ(ParseExtractionReply("{\"entities\": [").status().code(), ErrorCode::kParse);
}

TEST(ExtractChunkTest, PromptCarriesTypesAndChunk) {
  ScriptedChatModel model;
  model.Push(std::string(kReply));
  auto r = ExtractChunk(model, Options(), "Scrooge lived in London.");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->skipped);
  EXPECT_EQ(r->calls, 1);
  const auto requests = model.Requests();
  const auto& prompt = requests.at(0).messages.at(0).content;
  EXPECT_NE(prompt.find("Entity types: organization, person, geo, event"), std::string::npos);
  EXPECT_NE(prompt.find("<text>Scrooge lived in London.</text>"), std::string::npos);
  EXPECT_TRUE(requests.at(0).json_mode);
}

TEST(ExtractChunkTest, InvalidJsonIsRetriedOnceThenSucceeds) {
  ScriptedChatModel model;
  model.Push(std::string("not json at all"));
  model.Push(std::string(kReply));
  auto r = ExtractChunk(model, Options(), "text");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->skipped);
  EXPECT_EQ(r->calls, 2);
  EXPECT_EQ(r->result.entities.size(), 2u);
  // The retry shows the model its bad reply and asks for JSON only.
  const auto requests = model.Requests();
  const auto& retry = requests.at(1).messages;
  ASSERT_EQ(retry.size(), 3u);
  EXPECT_EQ(retry[1].content, "not json at all");
}

TEST(ExtractChunkTest, InvalidJsonTwiceSkipsTheChunkWithAReasonAndCachesNothing) {
  InMemoryCache cache;
  ScriptedModelOptions mo;
  mo.cache = &cache;
  ScriptedChatModel model(mo);
  model.Push(std::string("nope"));
  model.Push(std::string("still nope"));
  auto r = ExtractChunk(model, Options(), "text");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->skipped);
  EXPECT_NE(r->reason.find("not valid JSON"), std::string::npos);
  EXPECT_EQ(r->calls, 2);
  EXPECT_EQ(model.RequestCount(), 2u);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(ExtractChunkTest, ModelErrorsOtherThanParseAreReturned) {
  ScriptedChatModel model;
  model.Push(Status::Unavailable("HTTP 503 after 6 retries"));
  auto r = ExtractChunk(model, Options(), "text");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable);
}

TEST(ExtractChunkTest, GleaningMergesWhatWasMissedInTheSameConversation) {
  ScriptedChatModel model;
  model.Push(std::string(kReply));
  model.Push(std::string(
      R"({"entities": [{"name": "Bob Cratchit", "type": "person", "description": "A clerk"},
    {"name": "London", "type": "geo", "description": "A city"}],
    "relationships": [{"source": "Bob Cratchit", "target": "Ebenezer Scrooge", "description": "works for", "strength": 8}]})"));
  model.Push(std::string(R"({"entities": [], "relationships": []})"));
  auto r = ExtractChunk(model, Options(2), "text");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->result.entities.size(), 3u);  // London not duplicated
  EXPECT_EQ(r->result.relationships.size(), 2u);
  ASSERT_EQ(model.RequestCount(), 3u);  // the second gleaning round was still asked
  const auto requests = model.Requests();
  const auto& glean = requests.at(1).messages;
  ASSERT_EQ(glean.size(), 3u);
  EXPECT_EQ(glean[1].role, "assistant");
  // What was found goes back by name and type, not as the whole reply with its descriptions.
  EXPECT_EQ(glean[1].content,
            R"({"entities":[{"name":"Ebenezer Scrooge","type":"person"},{"name":"London",)"
            R"("type":"geo"}],"relationships":[{"source":"Ebenezer Scrooge","target":"London"}]})");
  EXPECT_EQ(glean[1].content.find("A miser"), std::string::npos);
  EXPECT_NE(glean[2].content.find("missed"), std::string::npos);
  // The second round shows the first round's finds.
  const auto& second = requests.at(2).messages;
  ASSERT_EQ(second.size(), 5u);
  EXPECT_NE(second[3].content.find("Bob Cratchit"), std::string::npos);
  EXPECT_EQ(second[3].content.find("A clerk"), std::string::npos);
}

TEST(ExtractChunkTest, GleanChunkAddsToAFirstExtractionTakenWithoutGleaning) {
  ScriptedChatModel model;
  model.Push(std::string(kReply));
  model.Push(std::string(
      R"({"entities": [{"name": "Bob Cratchit", "type": "person", "description": "A clerk"}],
    "relationships": []})"));
  model.Push(std::string(R"({"entities": [], "relationships": []})"));
  auto first = ExtractChunk(model, Options(0), "text");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(model.RequestCount(), 1u);
  EXPECT_EQ(first->gleaning_rounds, 0);
  ChunkExtraction r = *first;
  ASSERT_TRUE(GleanChunk(model, Options(2), "text", r).ok());
  EXPECT_EQ(r.result.entities.size(), 3u);
  EXPECT_EQ(r.gleaning_rounds, 2);
  EXPECT_EQ(r.calls, 3);
  EXPECT_NE(model.Requests().at(1).messages.at(0).content.find("<text>text</text>"),
            std::string::npos);
}

TEST(ExtractionYieldTest, EntitiesAndRelationshipsPerToken) {
  auto parsed = ParseExtractionReply(kReply);
  ASSERT_TRUE(parsed.ok());
  EXPECT_DOUBLE_EQ(ExtractionYield(*parsed, 30), 0.1);
  EXPECT_DOUBLE_EQ(ExtractionYield(*parsed, 0), 3.0);
}

TEST(ExtractChunkTest, GleaningStopsWhenNothingIsNew) {
  ScriptedChatModel model;
  model.Push(std::string(kReply));
  model.Push(std::string(R"({"entities": [], "relationships": []})"));
  auto r = ExtractChunk(model, Options(3), "text");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->gleaning_rounds, 1);
  EXPECT_EQ(model.RequestCount(), 2u);
}

}  // namespace
}  // namespace grag
