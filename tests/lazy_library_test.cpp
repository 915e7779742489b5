// LazyLibrary: a shared library opened on first use (the model client's libcurl, the PostgreSQL
// store's libpq, clustering's igraph), and the clear error when it is not installed.
#include "grag/lazy_library.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

namespace grag {
namespace {

TEST(LazyLibraryTest, AMissingLibraryNamesWhatNeedsItAndWhatToInstall) {
  LazyLibrary lib("libgrag-no-such-library.so.7", "testing the loader", "grag-test-package");
  const Status open = lib.Open();
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.code(), ErrorCode::kUnimplemented);  // installing fixes it, retrying does not
  EXPECT_NE(open.message().find("testing the loader"), std::string::npos) << open.message();
  EXPECT_NE(open.message().find("libgrag-no-such-library.so.7"), std::string::npos);
  EXPECT_NE(open.message().find("install grag-test-package"), std::string::npos);
  // The same answer every time after, and no symbol.
  EXPECT_EQ(lib.Open().message(), open.message());
  size_t (*strlen_fn)(const char*) = nullptr;
  EXPECT_FALSE(lib.Resolve(strlen_fn, "strlen").ok());
  EXPECT_EQ(strlen_fn, nullptr);
}

TEST(LazyLibraryTest, ResolvesFunctionsTypedAsDeclared) {
  LazyLibrary lib("libc.so.6", "testing the loader", "libc6");
  ASSERT_TRUE(lib.Open().ok());
  decltype(&::strlen) strlen_fn = nullptr;
  ASSERT_TRUE(lib.Resolve(strlen_fn, "strlen").ok());
  EXPECT_EQ(strlen_fn("grag"), 4u);
  decltype(&::strlen) missing = nullptr;
  const Status no_such = lib.Resolve(missing, "grag_no_such_function");
  EXPECT_EQ(no_such.code(), ErrorCode::kUnimplemented);
  EXPECT_NE(no_such.message().find("grag_no_such_function"), std::string::npos);
}

TEST(LazyLibraryTest, APreloadAndManyFirstUsersAtOnceAgree) {
  for (int round = 0; round < 20; ++round) {
    LazyLibrary lib("libm.so.6", "testing the loader", "libc6");
    lib.Preload();
    lib.Preload();  // a second preload does nothing
    std::vector<std::thread> users;
    std::vector<void*> found(8, nullptr);
    for (size_t i = 0; i < found.size(); ++i) {
      users.emplace_back([&, i] {
        Result<void*> sym = lib.Symbol("cos");
        if (sym.ok()) found[i] = *sym;
      });
    }
    for (std::thread& t : users) t.join();
    for (void* f : found) {
      ASSERT_NE(f, nullptr);
      EXPECT_EQ(f, found[0]);
    }
  }
  // Destroyed while a preload may still be running: the destructor waits for it.
  for (int round = 0; round < 20; ++round) {
    LazyLibrary lib("libm.so.6", "testing the loader", "libc6");
    lib.Preload();
  }
}

// Whether the process has `soname` loaded (without loading it).
bool Loaded(const char* soname) {
  void* handle = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  dlclose(handle);
  return true;
}

TEST(LazyLibraryTest, APreloadWaitsForTheLastHoldButOpenDoesNot) {
  // glibc's libanl: in every Debian libc6, and nothing else in this test loads it.
  const char* soname = "libanl.so.1";
  ASSERT_FALSE(Loaded(soname));
  LazyLibrary lib(soname, "testing the loader", "libc6");
  std::optional<LazyLibrary::PreloadHold> outer(std::in_place);
  std::optional<LazyLibrary::PreloadHold> inner(std::in_place);
  lib.Preload();
  lib.Preload();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(Loaded(soname)) << "a preload started under a hold";
  inner.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(Loaded(soname)) << "a preload started while a hold was left";
  outer.reset();  // the last hold: the held-back preload starts now
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!Loaded(soname) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(Loaded(soname));
  EXPECT_TRUE(lib.Open().ok());

  // Open never waits for holds: a hold changes when a load starts, not what a caller gets.
  LazyLibrary libm("libm.so.6", "testing the loader", "libc6");
  LazyLibrary::PreloadHold hold;
  libm.Preload();
  EXPECT_TRUE(libm.Open().ok());
  EXPECT_TRUE(libm.Symbol("cos").ok());
}

}  // namespace
}  // namespace grag
