// Logging (core): a log file per index. Lines go to the log file of the thread that logs them,
// ParallelFor's workers log where their caller does, and two files never see each other's lines.
#include "grag/log.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "grag/parallel.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

TEST(LogFileTest, LinesGoToTheCallingThreadsFileAndWorkersInheritIt) {
  testing::TempDir dir;
  auto a = LogFile::Open(dir / "a.log");
  auto b = LogFile::Open(dir / "b.log");
  ASSERT_TRUE(a.ok() && b.ok());
  Log(LogLevel::kInfo, "test", "before any file");
  {
    ScopedLogFile scope(*a);
    Log(LogLevel::kInfo, "test", "alpha on the caller");
    ParallelFor(8, 4,
                [](size_t i) { Log(LogLevel::kDebug, "test", "alpha item " + std::to_string(i)); });
    std::thread other([] {
      ScopedLogFile inner(nullptr);  // no file: stderr only
      Log(LogLevel::kInfo, "test", "nowhere");
    });
    other.join();
    {
      ScopedLogFile nested(*b);
      Log(LogLevel::kWarn, "test", "beta nested");
    }
    Log(LogLevel::kInfo, "test", "alpha again");   // the outer file is back
    Log(LogLevel::kTrace, "test", "alpha trace");  // below the files' debug level
  }
  Log(LogLevel::kInfo, "test", "after");
  EXPECT_EQ(CurrentLogFile(), nullptr);
  a->reset();
  b->reset();
  const std::string la = testing::ReadFile(dir / "a.log");
  const std::string lb = testing::ReadFile(dir / "b.log");
  EXPECT_NE(la.find("info [test] alpha on the caller"), std::string::npos) << la;
  for (int i = 0; i < 8; ++i) {
    EXPECT_NE(la.find("debug [test] alpha item " + std::to_string(i) + "\n"), std::string::npos)
        << la;
  }
  EXPECT_NE(la.find("alpha again"), std::string::npos);
  for (const char* absent : {"before any file", "nowhere", "beta", "after", "alpha trace"}) {
    EXPECT_EQ(la.find(absent), std::string::npos) << absent;
  }
  EXPECT_NE(lb.find("warning [test] beta nested"), std::string::npos) << lb;
  EXPECT_EQ(lb.find("alpha"), std::string::npos) << lb;
}

TEST(LogFileTest, AFileThatCannotBeOpenedIsAClearError) {
  testing::TempDir dir;
  dir.Write("blocker", "a file where the folder should be");
  auto f = LogFile::Open(dir / "blocker/x.log");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::kIoError);
  EXPECT_NE(f.status().message().find("cannot open log file"), std::string::npos);
}

}  // namespace
}  // namespace grag
