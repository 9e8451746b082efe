#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/util/diagnostic.h"
#include "common/util/dir_lock.h"
#include "common/util/file.h"
#include "common/util/net.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::util {
namespace {

TEST(SplitLines, KeepsUnterminatedLastLine) {
  EXPECT_EQ(SplitLines("a\nb\n"), (std::vector<std::string_view>{"a", "b"}));
  EXPECT_EQ(SplitLines("a\nb"), (std::vector<std::string_view>{"a", "b"}));
  EXPECT_EQ(SplitLines("\n\n"), (std::vector<std::string_view>{"", ""}));
  EXPECT_TRUE(SplitLines("").empty());
}

TEST(FirstInvalidUtf8, Table) {
  struct Case {
    std::string text;
    std::optional<std::size_t> bad;
  };
  const Case cases[] = {
      {"plain ascii", std::nullopt},
      {"em dash \xE2\x80\x94 ok", std::nullopt},
      {"4-byte \xF0\x9F\x98\x80", std::nullopt},
      {"lone \x80", 5},
      {"truncated \xE2\x80", 10},
      {"overlong \xC0\xAF", 9},
      {"surrogate \xED\xA0\x80", 10},
      {"too big \xF4\x90\x80\x80", 8},
      {"latin1 caf\xE9!", 10},
  };
  for (const auto& c : cases) EXPECT_EQ(FirstInvalidUtf8(c.text), c.bad) << c.text;
}

TEST(Text, IndentBlankCommentAndLineCol) {
  EXPECT_EQ(IndentOf("    status: X"), 4);
  EXPECT_TRUE(IsBlankOrComment("   "));
  EXPECT_TRUE(IsBlankOrComment("  # key:"));
  EXPECT_FALSE(IsBlankOrComment("  key: # c"));
  LineCol lc = LineColAt("ab\ncd\nef", 4);
  EXPECT_EQ(lc.line, 2);
  EXPECT_EQ(lc.col, 2);
  EXPECT_EQ(TruncateUtf8("a\xE2\x80\x94", 3), "a");  // never cuts inside a character
  EXPECT_EQ(TruncateUtf8("abc", 3), "abc");
}

TEST(Strings, StrCatMixesTypes) {
  std::string_view sv = "view";
  EXPECT_EQ(StrCat(sv, ":", 12, ":", std::string("s"), 'c', -3, " ", 0.98), "view:12:sc-3 0.98");
  EXPECT_EQ(Hex(0xAB, 4), "00ab");
  std::vector<int> v = {1, 2, 3};
  EXPECT_EQ(StrJoin(v, ", "), "1, 2, 3");
}

TEST(Diagnostic, FormatsFileLineColumn) {
  Diagnostic d{"a.yaml", 3, 5, Severity::kError, "bad"};
  EXPECT_EQ(d.ToString(), "a.yaml:3:5: bad");
  d.severity = Severity::kWarning;
  EXPECT_EQ(d.ToString(), "a.yaml:3:5: warning: bad");
  EXPECT_FALSE(HasErrors({d}));
  d.severity = Severity::kError;
  d.line = 0;
  EXPECT_EQ(d.ToString(), "a.yaml: bad");
}

TEST(File, AtomicWriteReplacesAndKeepsMode) {
  testing::TempDir tmp;
  const auto path = tmp.path() / "f.yaml";
  ASSERT_TRUE(WriteFileAtomic(path, "one\n").ok());
  ::chmod(path.c_str(), 0600);
  ASSERT_TRUE(WriteFileAtomic(path, "two\n").ok());
  auto read = ReadFile(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, "two\n");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1) << "no temporary file may be left behind";
}

TEST(File, AtomicWriteThroughASymlinkReplacesItsTargetAndKeepsTheLink) {
  testing::TempDir tmp;
  std::filesystem::create_directories(tmp.path() / "real");
  const auto target = tmp.path() / "real" / "f.yaml";
  ASSERT_TRUE(WriteFileAtomic(target, "one\n").ok());
  const auto link = tmp.path() / "link.yaml";
  std::filesystem::create_symlink("real/f.yaml", link);
  ASSERT_TRUE(WriteFileAtomic(link, "two\n").ok());
  EXPECT_TRUE(std::filesystem::is_symlink(link)) << "the link stays a link";
  EXPECT_EQ(std::filesystem::read_symlink(link), "real/f.yaml");
  EXPECT_EQ(*ReadFile(target), "two\n");
  // A dangling link is refused, and nothing is created.
  const auto dangling = tmp.path() / "dangling.yaml";
  std::filesystem::create_symlink("real/missing.yaml", dangling);
  auto status = WriteFileAtomic(dangling, "x\n");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(std::string(status.message()).find("symbolic link to a missing file"),
            std::string::npos)
      << status;
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "real" / "missing.yaml"));
  EXPECT_TRUE(std::filesystem::is_symlink(dangling));
}

TEST(File, AtomicWriteIntoMissingDirectoryFailsCleanly) {
  testing::TempDir tmp;
  auto status = WriteFileAtomic(tmp.path() / "no" / "such" / "f", "x");
  EXPECT_FALSE(status.ok());
  EXPECT_NE(std::string(status.message()).find("no/such"), std::string::npos);
}

TEST(File, ReadRefusesFilesOverTheLimitBeforeReading) {
  testing::TempDir tmp;
  const auto path = tmp.path() / "big";
  testing::WriteFileOrDie(path, std::string(2048, 'x'));
  auto read = ReadFile(path, 1024);
  ASSERT_FALSE(read.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(read.status()));
  EXPECT_NE(std::string(read.status().message()).find("over the limit"), std::string::npos);
  EXPECT_FALSE(ReadFile(tmp.path() / "missing").ok());
}

TEST(DirLock, SecondOwnerIsRefusedWithTheHoldersPid) {
  testing::TempDir tmp;
  const auto file = tmp.path() / "x.lock";
  {
    auto first = DirLock::Acquire(file, "data_dir", tmp.path());
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(testing::ReadFileOrDie(file), StrCat(getpid(), "\n"));
    // flock conflicts between two opens of the file, in this process as in another.
    auto second = DirLock::Acquire(file, "data_dir", tmp.path());
    ASSERT_FALSE(second.ok());
    EXPECT_TRUE(absl::IsFailedPrecondition(second.status()));
    EXPECT_NE(std::string(second.status().message())
                  .find(StrCat("data_dir ", tmp.path().string(), " is in use by pid ", getpid())),
              std::string::npos)
        << second.status();
    DirLock moved = std::move(*first);  // the lock moves with the object
    EXPECT_FALSE(DirLock::Acquire(file, "data_dir", tmp.path()).ok());
  }
  EXPECT_TRUE(DirLock::Acquire(file, "data_dir", tmp.path()).ok()) << "released on destruction";
}

TEST(DirLock, SubprocessesDoNotInheritTheLock) {
  testing::TempDir tmp;
  const auto file = tmp.path() / "x.lock";
  auto lock = std::make_unique<DirLock>(*DirLock::Acquire(file, "workspace", tmp.path()));
  pid_t child = fork();
  if (child == 0) {
    execl("/bin/sleep", "sleep", "5", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(child, 0);
  usleep(100'000);  // the child has exec'd
  lock.reset();     // the owner lets go while its subprocess still runs
  auto again = DirLock::Acquire(file, "workspace", tmp.path());
  kill(child, SIGKILL);
  int status;
  waitpid(child, &status, 0);
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST(BindProblem, NamesAPortInUse) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string address = StrCat("127.0.0.1:", ntohs(addr.sin_port));
  EXPECT_EQ(BindProblem(address), "address in use (another process holds it)");
  close(fd);
  EXPECT_EQ(BindProblem(address), "");
  EXPECT_EQ(BindProblem("nonsense"), "not a host:port address");
  EXPECT_EQ(BindProblem("127.0.0.1:http"), "'http' is not a port number");
}

}  // namespace
}  // namespace triage::util
