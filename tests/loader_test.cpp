// Loading .txt/.md/.json/.jsonl/.csv files and folders; binary and invalid UTF-8 handling.
#include "grag/loader.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::TempDir;

LoadOptions Opts(const TempDir& dir) {
  LoadOptions o;
  o.base_dir = dir.path().string();
  return o;
}

TEST(LoaderTest, LoadsFolderRecursivelyWithRelativeIdsSorted) {
  TempDir dir;
  dir.Write("in/b.txt", "bee");
  dir.Write("in/sub/a.md", "# A\nalpha");
  dir.Write("in/.hidden/x.txt", "hidden");
  dir.Write("in/.secret.txt", "hidden");
  dir.Write("in/image.png", "not text");
  auto r = LoadDocuments({dir / "in"}, Opts(dir));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->documents.size(), 2u);
  EXPECT_EQ(r->documents[0].id, "in/b.txt");
  EXPECT_EQ(r->documents[0].title, "b.txt");
  EXPECT_EQ(r->documents[0].text, "bee");
  EXPECT_EQ(r->documents[1].id, "in/sub/a.md");
  EXPECT_EQ(r->documents[1].text, "# A\nalpha");
  EXPECT_EQ(r->documents[1].content_hash.size(), 64u);
  EXPECT_TRUE(r->issues.empty());
}

TEST(LoaderTest, StripsByteOrderMark) {
  TempDir dir;
  dir.Write("a.txt", "\xEF\xBB\xBFhello");
  auto r = LoadDocuments({dir / "a.txt"}, Opts(dir));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->documents.at(0).text, "hello");
}

TEST(LoaderTest, MissingPathIsNotFound) {
  TempDir dir;
  auto r = LoadDocuments({dir / "nope"}, Opts(dir));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.status().message().find("nope"), std::string::npos);
}

TEST(LoaderTest, BinaryFileIsSkippedWithOffset) {
  TempDir dir;
  dir.Write("bin.txt", std::string("abc\0def", 7));
  dir.Write("ok.txt", "fine");
  auto r = LoadDocuments({dir.path().string()}, Opts(dir));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->documents.size(), 1u);
  ASSERT_EQ(r->issues.size(), 1u);
  EXPECT_NE(r->issues[0].path.find("bin.txt"), std::string::npos);
  EXPECT_NE(r->issues[0].message.find("byte offset 3"), std::string::npos) << r->issues[0].message;
  EXPECT_TRUE(r->issues[0].skipped);
}

TEST(LoaderTest, InvalidUtf8SkippedOrRepaired) {
  TempDir dir;
  dir.Write("bad.txt", "caf\xC3 ok \xFF end");
  auto skipped = LoadDocuments({dir / "bad.txt"}, Opts(dir));
  ASSERT_TRUE(skipped.ok());
  EXPECT_TRUE(skipped->documents.empty());
  ASSERT_EQ(skipped->issues.size(), 1u);
  EXPECT_NE(skipped->issues[0].message.find("byte offset 3"), std::string::npos);

  auto opts = Opts(dir);
  opts.invalid_utf8 = InvalidUtf8Policy::kRepair;
  auto repaired = LoadDocuments({dir / "bad.txt"}, opts);
  ASSERT_TRUE(repaired.ok());
  ASSERT_EQ(repaired->documents.size(), 1u);
  EXPECT_EQ(repaired->documents[0].text, "caf\xEF\xBF\xBD ok \xEF\xBF\xBD end");
  ASSERT_EQ(repaired->issues.size(), 1u);
  EXPECT_FALSE(repaired->issues[0].skipped);
}

TEST(LoaderTest, Utf8Validation) {
  EXPECT_EQ(FindInvalidUtf8("plain ascii"), std::string::npos);
  EXPECT_EQ(FindInvalidUtf8("日本語 😀"), std::string::npos);
  EXPECT_EQ(FindInvalidUtf8("ab\xC0\xAF"), 2u);        // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("x\xED\xA0\x80"), 1u);     // UTF-16 surrogate
  EXPECT_EQ(FindInvalidUtf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("ok\xE6\x97"), 2u);        // truncated at the end
  EXPECT_EQ(RepairUtf8("a\xFF"
                       "b"),
            "a\xEF\xBF\xBD"
            "b");
}

TEST(LoaderTest, JsonArrayWithConfigurableFields) {
  TempDir dir;
  dir.Write("docs.json", R"([{"uid": 7, "body": "first", "name": "One"},
                            {"body": "second"},
                            {"nobody": "x"},
                            "not an object"])");
  auto opts = Opts(dir);
  opts.json_text_field = "body";
  opts.json_id_field = "uid";
  opts.json_title_field = "name";
  auto r = LoadDocuments({dir / "docs.json"}, opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->documents.size(), 2u);
  EXPECT_EQ(r->documents[0].id, "7");
  EXPECT_EQ(r->documents[0].title, "One");
  EXPECT_EQ(r->documents[0].text, "first");
  EXPECT_EQ(r->documents[1].id, "docs.json#1");
  EXPECT_EQ(r->documents[1].text, "second");
  ASSERT_EQ(r->issues.size(), 2u);
  EXPECT_NE(r->issues[0].message.find("\"body\""), std::string::npos);
}

TEST(LoaderTest, JsonSingleObjectTakesFileId) {
  TempDir dir;
  dir.Write("one.json", R"({"text": "solo"})");
  auto r = LoadDocuments({dir / "one.json"}, Opts(dir));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->documents.size(), 1u);
  EXPECT_EQ(r->documents[0].id, "one.json");
}

TEST(LoaderTest, JsonlSkipsBadLinesWithOffset) {
  TempDir dir;
  dir.Write("d.jsonl", "{\"id\":\"a\",\"text\":\"x\"}\n\n{broken\n{\"id\":\"b\",\"text\":\"y\"}\n");
  auto r = LoadDocuments({dir / "d.jsonl"}, Opts(dir));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->documents.size(), 2u);
  EXPECT_EQ(r->documents[1].id, "b");
  ASSERT_EQ(r->issues.size(), 1u);
  EXPECT_NE(r->issues[0].message.find("line 3"), std::string::npos) << r->issues[0].message;
  EXPECT_NE(r->issues[0].message.find("byte offset 23"), std::string::npos) << r->issues[0].message;
}

TEST(LoaderTest, InvalidJsonIsAnIssueNotACrash) {
  TempDir dir;
  dir.Write("bad.json", "[{\"text\": \"x\"},");
  auto r = LoadDocuments({dir / "bad.json"}, Opts(dir));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->documents.empty());
  ASSERT_EQ(r->issues.size(), 1u);
  EXPECT_NE(r->issues[0].message.find("not valid JSON"), std::string::npos);
}

TEST(LoaderTest, CsvWithQuotesAndConfigurableColumn) {
  TempDir dir;
  dir.Write("t.csv",
            "id,content,title\r\n"
            "d1,\"Hello, \"\"world\"\"\nsecond line\",T1\r\n"
            "d2,plain,\r\n");
  auto opts = Opts(dir);
  opts.csv_text_column = "content";
  auto r = LoadDocuments({dir / "t.csv"}, opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->documents.size(), 2u);
  EXPECT_EQ(r->documents[0].id, "d1");
  EXPECT_EQ(r->documents[0].text, "Hello, \"world\"\nsecond line");
  EXPECT_EQ(r->documents[0].title, "T1");
  EXPECT_EQ(r->documents[1].title, "d2");
}

TEST(LoaderTest, CsvWithoutTextColumnOrUnterminatedQuoteIsAnIssue) {
  TempDir dir;
  dir.Write("a.csv", "x,y\n1,2\n");
  dir.Write("b.csv", "text\n\"open\n");
  auto r = LoadDocuments({dir / "a.csv", dir / "b.csv"}, Opts(dir));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->documents.empty());
  ASSERT_EQ(r->issues.size(), 2u);
  EXPECT_NE(r->issues[0].message.find("\"text\""), std::string::npos);
  EXPECT_NE(r->issues[1].message.find("byte offset 5"), std::string::npos) << r->issues[1].message;
}

TEST(LoaderTest, DuplicateIdsAreRefused) {
  TempDir dir;
  dir.Write("a.jsonl", "{\"id\":\"same\",\"text\":\"1\"}\n{\"id\":\"same\",\"text\":\"2\"}\n");
  auto r = LoadDocuments({dir / "a.jsonl"}, Opts(dir));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("\"same\""), std::string::npos);
}

// The documents LoadDocuments gives, one at a time: in id order across plain files and files of
// records (whose ids interleave with the plain files'), with the same issues in file order.
TEST(LoaderTest, ReaderGivesLoadDocumentsDocumentsInIdOrder) {
  TempDir dir;
  dir.Write("in/a/b.txt", "under a");
  dir.Write("in/a-c.txt", "a dash");  // before "a/b.txt" as an id, after it as a path
  dir.Write(
      "in/m.jsonl",
      "{\"id\": \"z\", \"text\": \"last\"}\n{\"id\": \"b\", \"text\": \"early\"}\nnot json\n");
  dir.Write("in/k.txt", "");  // an issue, no document
  dir.Write("in/n.csv", "id,text\nin/k2,between\n");
  dir.Write("in/x.md", "ex");
  auto all = LoadDocuments({dir / "in"}, Opts(dir));
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  auto reader = DocumentReader::Open({dir / "in"}, Opts(dir));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(reader->Remaining(), 7u);  // 4 plain files (k.txt gives none) and 3 records
  std::vector<std::string> ids;
  while (auto doc = reader->Next()) {
    ids.push_back(doc->id);
    ASSERT_LE(ids.size(), all->documents.size());
    EXPECT_EQ(doc->text, all->documents[ids.size() - 1].text);
    EXPECT_EQ(doc->source_path, all->documents[ids.size() - 1].source_path);
  }
  EXPECT_EQ(ids,
            (std::vector<std::string>{"b", "in/a-c.txt", "in/a/b.txt", "in/k2", "in/x.md", "z"}));
  EXPECT_EQ(reader->Remaining(), 0u);
  const std::vector<LoadIssue> issues = reader->TakeIssues();
  ASSERT_EQ(issues.size(), all->issues.size());
  ASSERT_EQ(issues.size(), 2u);
  for (size_t i = 0; i < issues.size(); ++i) EXPECT_EQ(issues[i].message, all->issues[i].message);
  EXPECT_NE(issues[0].path.find("k.txt"), std::string::npos);  // k.txt comes before m.jsonl
  EXPECT_NE(issues[1].path.find("m.jsonl"), std::string::npos);
}

// A plain file is read when its turn comes, not when the reader opens: a large input is never
// held whole.
TEST(LoaderTest, ReaderReadsPlainFilesOnlyWhenTheirTurnComes) {
  TempDir dir;
  for (int i = 0; i < 5; ++i) dir.Write("in/d" + std::to_string(i) + ".txt", "before");
  auto reader = DocumentReader::Open({dir / "in"}, Opts(dir));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto first = reader->Next();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->text, "before");
  dir.Write("in/d3.txt", "after");
  std::filesystem::remove(dir / "in/d4.txt");
  std::vector<std::string> texts;
  while (auto doc = reader->Next()) texts.push_back(doc->text);
  EXPECT_EQ(texts, (std::vector<std::string>{"before", "before", "after"}));
  const auto issues = reader->TakeIssues();
  ASSERT_EQ(issues.size(), 1u);  // d4.txt: gone
  EXPECT_TRUE(issues[0].skipped);
}

// Two documents with one id are refused when the reader opens, before any is handed out, also
// when one comes from a plain file and the other from a record.
TEST(LoaderTest, ReaderRefusesSharedIdsWhenItOpens) {
  TempDir dir;
  dir.Write("in/a.txt", "plain");
  dir.Write("in/r.jsonl", "{\"id\": \"in/a.txt\", \"text\": \"record\"}\n");
  auto reader = DocumentReader::Open({dir / "in"}, Opts(dir));
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(reader.status().message().find("share the id \"in/a.txt\""), std::string::npos)
      << reader.status().message();
  // A plain file that gives no document shares nothing.
  dir.Write("in/a.txt", "  \n");
  reader = DocumentReader::Open({dir / "in"}, Opts(dir));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto doc = reader->Next();
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->text, "record");
  EXPECT_FALSE(reader->Next().has_value());
  // The same file named twice.
  dir.Write("in/a.txt", "plain");
  auto twice = DocumentReader::Open({dir / "in/a.txt", dir / "in/a.txt"}, Opts(dir));
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("given twice"), std::string::npos)
      << twice.status().message();
}

TEST(LoaderTest, IdsAreStableAcrossLoads) {
  TempDir dir;
  dir.Write("in/x.txt", "stable");
  auto a = LoadDocuments({dir / "in"}, Opts(dir));
  auto b = LoadDocuments({dir / "in/x.txt"}, Opts(dir));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->documents[0].id, b->documents[0].id);
  EXPECT_EQ(a->documents[0].content_hash, b->documents[0].content_hash);
}

// Issue 11: the source path is the same however the project root is spelled, so a later run
// can tell a file that is gone from one that could not be read.
TEST(LoaderTest, SourcePathIsRelativeToTheRootHoweverItIsSpelled) {
  TempDir dir;
  dir.Write("proj/input/a.txt", "alpha");
  std::filesystem::create_directory_symlink(dir.path() / "proj", dir.path() / "alias");
  auto at = [&](const std::string& root, const std::string& file) {
    LoadOptions o;
    o.root_dir = root;
    o.base_dir = root + "/input";
    auto r = LoadDocuments({file}, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() && !r->documents.empty() ? r->documents[0] : Document{};
  };
  const Document a = at(dir / "proj", dir / "proj/input/a.txt");
  const Document b = at(dir / "alias", dir / "proj/input/a.txt");
  const Document c = at(dir / "proj", dir / "alias/input/../input/a.txt");
  EXPECT_EQ(a.source_path, "input/a.txt");
  EXPECT_EQ(b.source_path, "input/a.txt");
  EXPECT_EQ(c.source_path, "input/a.txt");
  EXPECT_EQ(a.id, "a.txt");
  EXPECT_EQ(b.id, "a.txt");
  EXPECT_EQ(c.id, "a.txt");
  EXPECT_EQ(SourcePathFor(dir / "elsewhere/x.txt", dir / "proj"),
            (dir.path() / "elsewhere/x.txt").lexically_normal().generic_string());
  EXPECT_EQ(ResolveSourcePath("input/a.txt", dir / "proj"),
            (dir.path() / "proj/input/a.txt").generic_string());
}

TEST(LoaderTest, IssuesNameTheirSourceLikeDocumentsDo) {
  TempDir dir;
  dir.Write("input/bad.txt", "caf\xC3");
  LoadOptions o;
  o.root_dir = dir.path().string();
  o.base_dir = dir / "input";
  auto r = LoadDocuments({dir / "input"}, o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->issues.size(), 1u);
  EXPECT_EQ(r->issues[0].source_path, "input/bad.txt");
}

TEST(LoaderTest, EmptyAndBlankFilesAreSkippedWithAWarning) {
  TempDir dir;
  dir.Write("in/empty.txt", "");
  dir.Write("in/blank.md", " \n\t\r\n\xC2\xA0\xE3\x80\x80\n");  // NBSP and ideographic space too
  dir.Write("in/ok.txt", "  words  ");
  dir.Write("in/r.jsonl", "{\"id\":\"a\",\"text\":\"  \"}\n{\"id\":\"b\",\"text\":\"b\"}\n");
  dir.Write("in/t.csv", "id,text\nc,\nd,dee\n");
  auto r = LoadDocuments({dir / "in"}, Opts(dir));
  ASSERT_TRUE(r.ok());
  std::vector<std::string> ids;
  for (const auto& d : r->documents) ids.push_back(d.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"b", "d", "in/ok.txt"}));
  ASSERT_EQ(r->issues.size(), 4u);
  std::string all;
  for (const auto& i : r->issues) {
    EXPECT_TRUE(i.skipped);
    all += i.path + ": " + i.message + "\n";
  }
  EXPECT_NE(all.find("empty.txt: is empty"), std::string::npos) << all;
  EXPECT_NE(all.find("blank.md: holds only white space"), std::string::npos) << all;
  EXPECT_NE(all.find("r.jsonl record 0"), std::string::npos) << all;
  EXPECT_NE(all.find("t.csv row 1"), std::string::npos) << all;
}

TEST(LoaderTest, SymlinkedFileKeepsTheLinksPathAsItsId) {
  TempDir dir;
  dir.Write("store/real-name.txt", "linked text");
  std::filesystem::create_directories(dir.path() / "in");
  std::filesystem::create_symlink(dir.path() / "store/real-name.txt", dir.path() / "in/link.txt");
  auto r = LoadDocuments({dir / "in"}, Opts(dir));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->documents.size(), 1u);
  EXPECT_EQ(r->documents[0].id, "in/link.txt");
  EXPECT_EQ(r->documents[0].title, "link.txt");
  auto named = LoadDocuments({dir / "in/link.txt"}, Opts(dir));
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->documents.at(0).id, "in/link.txt");
}

TEST(LoaderTest, SymlinkedFoldersAreFollowedAndLoopsReported) {
  TempDir dir;
  dir.Write("shared/deep/s.txt", "shared text");
  dir.Write("in/own.txt", "own text");
  std::filesystem::create_directory_symlink(dir.path() / "shared", dir.path() / "in/linked");
  std::filesystem::create_directory_symlink(dir.path() / "in", dir.path() / "in/linked/back");
  auto r = LoadDocuments({dir / "in"}, Opts(dir));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<std::string> ids;
  for (const auto& d : r->documents) ids.push_back(d.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"in/linked/deep/s.txt", "in/own.txt"}));
  ASSERT_EQ(r->issues.size(), 1u);
  EXPECT_NE(r->issues[0].message.find("loop"), std::string::npos) << r->issues[0].message;
  EXPECT_NE(r->issues[0].path.find("back"), std::string::npos);
  EXPECT_FALSE(r->issues[0].skipped);  // nothing was lost: its files are read through "in"
}

// Found by the loader fuzzer: a number beyond double's range is valid JSON syntax that the
// parser refuses with an exception of another kind; it ended the process.
TEST(LoaderTest, ANumberOutOfRangeIsAnIssueNotACrash) {
  TempDir dir;
  dir.Write("big.json", "{\"id\": \"a\", \"text\": \"x\", \"n\": 444444.44e4464}");
  dir.Write("ok.txt", "fine");
  auto r = LoadDocuments({dir.path().string()}, Opts(dir));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->documents.size(), 1u);
  ASSERT_EQ(r->issues.size(), 1u);
  EXPECT_NE(r->issues[0].message.find("cannot be read as JSON"), std::string::npos)
      << r->issues[0].message;
}

}  // namespace
}  // namespace grag
