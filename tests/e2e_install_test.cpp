// Installing grag (issue 44): `cmake --install` of this build into a fresh prefix gives a grag
// that runs from there (and finds grag-serve beside it), a man page that renders cleanly and
// describes every command, and shell completions that complete commands, nested commands and
// flags; a program of its own builds with find_package(grag) against the installed library;
// `cpack -G DEB` gives a Debian package holding the same files with its dependencies, the
// libraries grag opens at run time included, whose grag, unpacked into a fresh root, works.
#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>
#include <string>

#include "support/run_command.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;

// The commands `grag --help` lists, read from its Subcommands section.
std::vector<std::string> ListedCommands(const std::string& help) {
  std::vector<std::string> out;
  const size_t at = help.find("Subcommands:");
  if (at == std::string::npos) return out;
  size_t line = help.find('\n', at);
  while (line != std::string::npos && line + 1 < help.size()) {
    const size_t next = help.find('\n', line + 1);
    const std::string text = help.substr(line + 1, next - line - 1);
    if (text.rfind("  ", 0) != 0) break;
    const size_t start = text.find_first_not_of(' ');
    if (start == 2) out.push_back(text.substr(start, text.find(' ', start) - start));
    line = next;
  }
  return out;
}

// `cmake --install` of this build into `prefix`.
void InstallInto(const std::string& prefix) {
  auto installed = RunCommand("cmake --install " + ShellQuote(GRAG_BUILD_DIR) + " --prefix " +
                              ShellQuote(prefix));
  ASSERT_EQ(installed.exit_code, 0) << installed.out << installed.err;
}

// A project folder at `root` whose input is the book.
void BookProject(const std::string& root) {
  std::filesystem::create_directories(root + "/input");
  std::filesystem::copy_file(
      std::string(GRAG_SOURCE_DIR) + "/tests/data/christmas_carol/christmas_carol.txt",
      root + "/input/christmas_carol.txt");
}

TEST(E2eInstallTest, InstalledGragRunsWithItsManPageAndCompletions) {
  TempDir dir;
  const std::string prefix = dir / "prefix";
  ASSERT_NO_FATAL_FAILURE(InstallInto(prefix));
  const std::string grag = prefix + "/bin/grag";
  ASSERT_TRUE(std::filesystem::exists(prefix + "/bin/grag-serve"));

  auto version = RunCommand(ShellQuote(grag) + " --version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("grag ", 0), 0u) << version.out;
  // The installed grag serves (it execs the installed grag-serve beside it).
  const std::string root = dir / "p";
  ASSERT_EQ(RunCommand(ShellQuote(grag) + " init " + ShellQuote(root)).exit_code, 0);
  testing::ServerProcess serve;
  ASSERT_TRUE(
      serve.Start(ShellQuote(grag) + " --root " + ShellQuote(root) + " --no-llm serve --port 0"))
      << serve.log();
  EXPECT_EQ(serve.Stop(SIGTERM), 0) << serve.log();

  // The man page: renders with no groff warning, and has a section for every command.
  const std::string man = prefix + "/share/man/man1/grag.1.gz";
  ASSERT_TRUE(std::filesystem::exists(man));
  auto rendered = RunCommand("zcat " + ShellQuote(man) + " | groff -man -Tutf8 -ww -z");
  EXPECT_EQ(rendered.exit_code, 0) << rendered.err;
  EXPECT_EQ(rendered.err, "");
  auto page = RunCommand("zcat " + ShellQuote(man));
  const std::vector<std::string> commands =
      ListedCommands(RunCommand(ShellQuote(grag) + " --help").out);
  ASSERT_GE(commands.size(), 15u);
  for (const std::string& c : commands) {
    EXPECT_NE(page.out.find("\n.SS " + c + "\n"), std::string::npos) << c;
  }
  EXPECT_EQ(page.out.find(".SS manpage"), std::string::npos);  // hidden from users

  // bash completion: commands, nested commands, flags.
  const std::string bash = prefix + "/share/bash-completion/completions/grag";
  auto complete = [&](const std::string& words, int cword) {
    return RunCommand("bash -c " + ShellQuote("source " + ShellQuote(bash) + "; COMP_WORDS=(" +
                                              words + "); COMP_CWORD=" + std::to_string(cword) +
                                              "; _grag; echo \"${COMPREPLY[*]}\""))
        .out;
  };
  EXPECT_EQ(complete("grag in", 1), "init index\n");
  EXPECT_EQ(complete("grag entities me", 2), "merge\n");
  EXPECT_EQ(complete("grag --root x query --me", 4), "--method\n");
  EXPECT_TRUE(std::filesystem::exists(prefix + "/share/zsh/vendor-completions/_grag"));
  const std::string fish = prefix + "/share/fish/vendor_completions.d/grag.fish";
  ASSERT_TRUE(std::filesystem::exists(fish));
  if (RunCommand("command -v fish").exit_code == 0) {
    EXPECT_EQ(RunCommand("fish -n " + ShellQuote(fish)).exit_code, 0);
  }
}

// The library: a program of its own (tests/data/library_consumer/) configured with
// find_package(grag) against the installed prefix only, built, and run on a copy of the book.
TEST(E2eInstallTest, AProgramBuildsAgainstTheInstalledLibrary) {
  TempDir dir;
  const std::string prefix = dir / "prefix";
  ASSERT_NO_FATAL_FAILURE(InstallInto(prefix));
  ASSERT_TRUE(std::filesystem::exists(prefix + "/include/grag/engine.h"));
  const std::string source = std::string(GRAG_SOURCE_DIR) + "/tests/data/library_consumer";
  const std::string build = dir / "consumer";
  auto configured =
      RunCommand("cmake -S " + ShellQuote(source) + " -B " + ShellQuote(build) +
                 " -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=" + ShellQuote(prefix));
  ASSERT_EQ(configured.exit_code, 0) << configured.out << configured.err;
  auto built = RunCommand("cmake --build " + ShellQuote(build));
  ASSERT_EQ(built.exit_code, 0) << built.out << built.err;

  const std::string root = dir / "book";
  BookProject(root);
  auto run = RunCommand(ShellQuote(build + "/consumer") + " " + ShellQuote(root) +
                        " 'Who was Jacob Marley?'");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(run.out.find("entities 0\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("entities "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Marley"), std::string::npos) << run.out;
  // The index it wrote is an ordinary grag index: the grag command reads it.
  auto stats = RunCommand(ShellQuote(GRAG_BINARY) + " --root " + ShellQuote(root) + " stats");
  EXPECT_EQ(stats.exit_code, 0) << stats.err;
}

TEST(E2eInstallTest, TheDebianPackageHoldsTheFilesAndNamesItsDependencies) {
  if (RunCommand("command -v dpkg-deb && command -v dpkg-shlibdeps").exit_code != 0) {
    GTEST_SKIP() << "dpkg-deb or dpkg-shlibdeps (dpkg-dev) is not installed";
  }
  TempDir dir;
  const std::string out = dir / "packages";
  auto packed =
      RunCommand("cd " + ShellQuote(GRAG_BUILD_DIR) + " && cpack -G DEB -B " + ShellQuote(out));
  ASSERT_EQ(packed.exit_code, 0) << packed.out << packed.err;
  std::string deb;
  for (const auto& e : std::filesystem::directory_iterator(out)) {
    if (e.path().extension() == ".deb") deb = e.path().string();
  }
  ASSERT_FALSE(deb.empty()) << packed.out;
  auto field = [&](const std::string& name) {
    auto r = RunCommand("dpkg-deb -f " + ShellQuote(deb) + " " + name);
    return r.out.substr(0, r.out.find_last_not_of('\n') + 1);
  };
  EXPECT_EQ(field("Package"), "grag");
  // "grag 0.1.0\n" -> "0.1.0"
  const std::string version = RunCommand(ShellQuote(GRAG_BINARY) + " --version").out;
  EXPECT_EQ(field("Version"), version.substr(5, version.find('\n') - 5));
  const std::string depends = field("Depends");
  for (const char* lib : {"libc6", "libcurl4", "libpq5", "libigraph3"}) {
    EXPECT_NE(depends.find(lib), std::string::npos) << lib << " in " << depends;
  }
  auto listing = RunCommand("dpkg-deb -c " + ShellQuote(deb));
  for (const char* file :
       {"./usr/bin/grag", "./usr/bin/grag-serve", "./usr/share/man/man1/grag.1.gz",
        "./usr/share/bash-completion/completions/grag", "./usr/share/zsh/vendor-completions/_grag",
        "./usr/share/fish/vendor_completions.d/grag.fish", "./usr/share/doc/grag/README.md",
        "./usr/include/grag/engine.h", "/libgrag.a", "/cmake/grag/gragConfig.cmake"}) {
    EXPECT_NE(listing.out.find(file), std::string::npos) << file << "\n" << listing.out;
  }

  // Unpacked into a fresh root, its grag indexes and answers on the book.
  const std::string root = dir / "root";
  auto unpacked = RunCommand("dpkg-deb -x " + ShellQuote(deb) + " " + ShellQuote(root));
  ASSERT_EQ(unpacked.exit_code, 0) << unpacked.err;
  const std::string grag = root + "/usr/bin/grag";
  const std::string project = dir / "book";
  BookProject(project);
  auto indexed = RunCommand(ShellQuote(grag) + " --root " + ShellQuote(project) +
                            " --no-llm index --no-progress");
  ASSERT_EQ(indexed.exit_code, 0) << indexed.out << indexed.err;
  auto answer = RunCommand(ShellQuote(grag) + " --root " + ShellQuote(project) +
                           " --no-llm query --method local 'Who is Jacob Marley?'");
  ASSERT_EQ(answer.exit_code, 0) << answer.out << answer.err;
  EXPECT_NE(answer.out.find("Marley"), std::string::npos) << answer.out;
}

}  // namespace
}  // namespace grag
