#include "common/process/process.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/util/strings.h"
#include "common/util/text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::process {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

RunResult RunOk(RunOptions options) {
  auto result = process::Run(options);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : RunResult{};
}

RunOptions Cmd(std::vector<std::string> argv) {
  RunOptions options;
  options.argv = std::move(argv);
  return options;
}

RunOptions Sh(std::string script) { return Cmd({"/bin/sh", "-c", std::move(script)}); }

// Alive and not a zombie (a killed grandchild is re-parented and may wait to be reaped).
bool IsAlive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const std::size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] != 'Z';
}

bool GoneWithin(pid_t pid, milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (!IsAlive(pid)) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return !IsAlive(pid);
}

TEST(ProcessTest, ExitCodes) {
  RunResult zero = RunOk(Cmd({"true"}));
  EXPECT_EQ(zero.exit_code, 0);
  EXPECT_TRUE(zero.ok());
  EXPECT_EQ(zero.Describe(), "exit 0");

  RunResult three = RunOk(Sh("exit 3"));
  EXPECT_EQ(three.exit_code, 3);
  EXPECT_EQ(three.signal, 0);
  EXPECT_FALSE(three.ok());
  EXPECT_EQ(three.Describe(), "exit 3");
}

// `nice` raises the child's niceness by that much, capped at 19; 0 leaves it as the caller's.
TEST(ProcessTest, NiceLowersTheChildsPriority) {
  const int mine = ::getpriority(PRIO_PROCESS, 0);
  const auto niceness = [](const RunOptions& o) { return RunOk(o).output; };
  EXPECT_EQ(niceness(Cmd({"nice"})), std::to_string(mine) + "\n");
  RunOptions lower = Cmd({"nice"});
  lower.nice = 5;
  EXPECT_EQ(niceness(lower), std::to_string(std::min(19, mine + 5)) + "\n");
  lower.nice = 40;
  EXPECT_EQ(niceness(lower), "19\n");
  EXPECT_EQ(::getpriority(PRIO_PROCESS, 0), mine) << "the caller's own is unchanged";
}

TEST(ProcessTest, CapturesStdoutAndStderrTogether) {
  RunResult r = RunOk(Sh("echo out; echo err >&2; echo out2"));
  EXPECT_EQ(r.output, "out\nerr\nout2\n");
  EXPECT_EQ(r.err, "");
}

TEST(ProcessTest, SeparateStderr) {
  RunOptions options = Sh("echo out; echo err >&2");
  options.separate_stderr = true;
  RunResult r = RunOk(options);
  EXPECT_EQ(r.output, "out\n");
  EXPECT_EQ(r.err, "err\n");
}

TEST(ProcessTest, Stdin) {
  RunOptions options = Cmd({"cat"});
  options.stdin_data = "hello\nworld\n";
  RunResult r = RunOk(options);
  EXPECT_EQ(r.output, "hello\nworld\n");
  // Without stdin_data the child reads /dev/null and does not wait for input.
  RunOptions no_input = Cmd({"cat"});
  no_input.timeout = milliseconds(1000);
  RunResult empty = RunOk(no_input);
  EXPECT_TRUE(empty.ok()) << empty.Describe();
  EXPECT_EQ(empty.output, "");
}

TEST(ProcessTest, StdinNotReadByChildDoesNotHangOrKillUs) {
  // The child exits without reading; writing the rest must fail quietly (EPIPE, no SIGPIPE).
  RunOptions options = Cmd({"true"});
  options.stdin_data = std::string(1 << 20, 'x');
  RunResult r = RunOk(options);
  EXPECT_TRUE(r.ok());
}

TEST(ProcessTest, Cwd) {
  testing::TempDir dir;
  RunOptions options = Cmd({"pwd"});
  options.cwd = dir.path();
  RunResult r = RunOk(options);
  EXPECT_EQ(r.output, std::filesystem::canonical(dir.path()).string() + "\n");
}

TEST(ProcessTest, EnvSetAndUnset) {
  ::setenv("TRIAGE_PROCESS_TEST_INHERITED", "inherited", 1);
  ::setenv("TRIAGE_PROCESS_TEST_UNSET", "should-go", 1);
  RunOptions options =
      Sh("echo \"$TRIAGE_PROCESS_TEST_INHERITED|$TRIAGE_PROCESS_TEST_SET|"
         "${TRIAGE_PROCESS_TEST_UNSET-unset}\"");
  options.env = {{"TRIAGE_PROCESS_TEST_SET", "a=b c"}};
  options.unset_env = {"TRIAGE_PROCESS_TEST_UNSET"};
  RunResult r = RunOk(options);
  EXPECT_EQ(r.output, "inherited|a=b c|unset\n");

  options.env = {{"TRIAGE_PROCESS_TEST_INHERITED", "overridden"}};
  EXPECT_EQ(RunOk(options).output, "overridden||unset\n");
  ::unsetenv("TRIAGE_PROCESS_TEST_INHERITED");
  ::unsetenv("TRIAGE_PROCESS_TEST_UNSET");
}

// inherit_env = false: the child sees only what options.env gives it.
TEST(ProcessTest, WithoutInheritingTheChildSeesOnlyItsOwnEnvironment) {
  ::setenv("ANTHROPIC_API_KEY", "x", 1);
  RunOptions options = Cmd({"/usr/bin/env"});
  options.inherit_env = false;
  options.env = {{"TRIAGE_PROCESS_TEST_ONLY", "1"}, {"PATH", "/usr/bin:/bin"}};
  EXPECT_EQ(RunOk(options).output, "TRIAGE_PROCESS_TEST_ONLY=1\nPATH=/usr/bin:/bin\n");
  options.inherit_env = true;
  EXPECT_THAT(RunOk(options).output, HasSubstr("ANTHROPIC_API_KEY=x"));
  ::unsetenv("ANTHROPIC_API_KEY");
}

TEST(ProcessTest, PathFromChildEnvironment) {
  testing::TempDir dir;
  testing::WriteFileOrDie(dir.path() / "triage-hello", "#!/bin/sh\necho hello from path\n");
  std::filesystem::permissions(dir.path() / "triage-hello", std::filesystem::perms::owner_all);
  RunOptions options = Cmd({"triage-hello"});
  options.env = {{"PATH", dir.path().string() + ":/usr/bin:/bin"}};
  RunResult r = RunOk(options);
  EXPECT_EQ(r.output, "hello from path\n");
}

TEST(ProcessTest, CommandNotFoundNamesIt) {
  auto r = process::Run(Cmd({"triage-no-such-command-xyz", "arg"}));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsNotFound(r.status())) << r.status();
  EXPECT_THAT(util::MessageOf(r.status()), HasSubstr("triage-no-such-command-xyz"));

  auto abs = process::Run(Cmd({"/nonexistent/triage-cmd"}));
  ASSERT_FALSE(abs.ok());
  EXPECT_THAT(util::MessageOf(abs.status()), HasSubstr("/nonexistent/triage-cmd"));
}

TEST(ProcessTest, NotExecutableIsPermissionDenied) {
  testing::TempDir dir;
  testing::WriteFileOrDie(dir.path() / "script", "#!/bin/sh\n");
  std::filesystem::permissions(dir.path() / "script", std::filesystem::perms::owner_read |
                                                          std::filesystem::perms::owner_write);
  auto r = process::Run(Cmd({(dir.path() / "script").string()}));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsPermissionDenied(r.status())) << r.status();
}

TEST(ProcessTest, MissingCwdNamesIt) {
  testing::TempDir dir;
  const std::filesystem::path missing = dir.path() / "does-not-exist";
  RunOptions options = Cmd({"true"});
  options.cwd = missing;
  auto r = process::Run(options);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsNotFound(r.status())) << r.status();
  EXPECT_THAT(util::MessageOf(r.status()), HasSubstr(missing.string()));
}

TEST(ProcessTest, EmptyArgvIsAnError) { EXPECT_FALSE(process::Run(RunOptions()).ok()); }

TEST(ProcessTest, TimeoutKillsTheWholeGroup) {
  RunOptions options = Sh("sleep 100 & echo $!; sleep 100");
  options.timeout = milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  RunResult r = RunOk(options);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1500));
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.Describe(), "timed out after 300ms");
  EXPECT_EQ(r.signal, SIGTERM);
  const pid_t grandchild = std::stoi(r.output);
  ASSERT_GT(grandchild, 1);
  EXPECT_TRUE(GoneWithin(grandchild, milliseconds(1000))) << "grandchild " << grandchild;
}

TEST(ProcessTest, TimeoutEscalatesToSigkill) {
  RunOptions options = Sh("trap '' TERM; while :; do sleep 0.05; done");
  options.timeout = milliseconds(200);
  options.kill_grace = milliseconds(200);
  RunResult r = RunOk(options);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_LT(r.duration, milliseconds(1500));
}

TEST(ProcessTest, DescribesTimeoutInSeconds) {
  RunResult r;
  r.timed_out = true;
  r.timeout = milliseconds(5000);
  EXPECT_EQ(r.Describe(), "timed out after 5s");
}

TEST(ProcessTest, ReportsSignals) {
  RunResult segv = RunOk(Sh("ulimit -c 0; kill -SEGV $$"));
  EXPECT_EQ(segv.signal, SIGSEGV);
  EXPECT_EQ(segv.exit_code, -1);
  EXPECT_FALSE(segv.ok());
  EXPECT_EQ(segv.Describe(), "killed by signal 11 (SIGSEGV)");

  RunResult abrt = RunOk(Sh("ulimit -c 0; kill -ABRT $$"));
  EXPECT_EQ(abrt.signal, SIGABRT);
  EXPECT_THAT(abrt.Describe(), HasSubstr("(SIGABRT)"));
}

TEST(ProcessTest, Cancellation) {
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(150));
    cancel = true;
  });
  RunOptions options = Sh("sleep 100");
  options.cancelled = [&] { return cancel.load(); };
  RunResult r = RunOk(options);
  canceller.join();
  EXPECT_TRUE(r.cancelled);
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.Describe(), "cancelled");
  EXPECT_LT(r.duration, milliseconds(1000));
}

TEST(ProcessTest, OnPollSeesWhatTheChildWritesWhileItRuns) {
  testing::TempDir dir;
  const std::filesystem::path mark = dir.path() / "mark";
  RunOptions options = Sh("touch '" + mark.string() + "'; sleep 0.5");
  bool seen = false;
  int polls = 0;
  options.on_poll = [&] {
    ++polls;
    seen = seen || std::filesystem::exists(mark);
  };
  RunResult r = RunOk(options);
  EXPECT_TRUE(r.ok()) << r.Describe();
  EXPECT_TRUE(seen) << "the file the child wrote was seen before it exited";
  EXPECT_GE(polls, 3);  // about every 50 ms over half a second
  EXPECT_FALSE(r.cancelled) << "on_poll alone never cancels";
}

TEST(ProcessTest, LogPathAppendsAndCreatesParents) {
  testing::TempDir dir;
  const std::filesystem::path log = dir.path() / "a" / "b" / "run.log";
  RunOptions options = Sh("echo one; echo two >&2");
  options.log_path = log;
  RunResult first = RunOk(options);
  EXPECT_EQ(first.output, "");
  RunOk(options);
  EXPECT_EQ(testing::ReadFileOrDie(log), "one\ntwo\none\ntwo\n");
}

TEST(ProcessTest, LargeOutputDoesNotDeadlock) {
  RunOptions options = Cmd({"head", "-c", "10000000", "/dev/zero"});
  options.timeout = milliseconds(5000);
  RunResult r = RunOk(options);
  EXPECT_TRUE(r.ok()) << r.Describe();
  EXPECT_EQ(r.output.size(), 10000000u);
  EXPECT_FALSE(r.output_truncated);

  // Large stdin and large stdout at the same time.
  std::string input(10 << 20, 'y');
  RunOptions cat = Cmd({"cat"});
  cat.timeout = milliseconds(5000);
  cat.stdin_data = input;
  RunResult echo = RunOk(cat);
  EXPECT_TRUE(echo.ok()) << echo.Describe();
  EXPECT_EQ(echo.output.size(), input.size());
  EXPECT_TRUE(echo.output == input);
}

TEST(ProcessTest, TruncationFlag) {
  RunOptions options = Cmd({"head", "-c", "5000", "/dev/zero"});
  options.max_capture_bytes = 1000;
  RunResult r = RunOk(options);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.output.size(), 1000u);
  EXPECT_TRUE(r.output_truncated);
}

TEST(ProcessTest, BackgroundProcessHoldingThePipeDoesNotHang) {
  // The subshell keeps stdout open after sh exits; it is killed with the group.
  RunOptions options = Sh("(sleep 100; echo late) & echo $!");
  const auto start = std::chrono::steady_clock::now();
  RunResult r = RunOk(options);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
  EXPECT_TRUE(r.ok()) << r.Describe();
  const pid_t background = std::stoi(r.output);
  EXPECT_TRUE(GoneWithin(background, milliseconds(1000)));
}

TEST(ProcessTest, ProcessThatLeftTheGroupDoesNotHang) {
  // setsid moves the sleeper out of the group (the kill cannot reach it) while it keeps stdout
  // open; reading stops after a short drain.
  RunOptions options = Sh("setsid sleep 3 & echo $!; sleep 0.2");
  const auto start = std::chrono::steady_clock::now();
  RunResult r = RunOk(options);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
  EXPECT_TRUE(r.ok()) << r.Describe();
  const pid_t escaped = std::stoi(r.output);
  ASSERT_GT(escaped, 1);
  EXPECT_TRUE(IsAlive(escaped));
  ::kill(escaped, SIGKILL);
}

TEST(ProcessTest, ParallelRunsDoNotShareOutput) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  // A slow run in parallel must not delay the fast ones (no inherited pipe ends).
  std::thread slow([] { RunOk(Sh("sleep 1")); });
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([i, &failures] {
      for (int j = 0; j < 10; ++j) {
        const std::string word = std::to_string(i * 100 + j);
        const auto start = std::chrono::steady_clock::now();
        auto r = process::Run(Cmd({"echo", word}));
        if (!r.ok() || r->output != word + "\n" ||
            std::chrono::steady_clock::now() - start > milliseconds(800)) {
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  slow.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ProcessTest, TailLinesOfText) {
  EXPECT_THAT(TailLines(std::string_view("a\nb\nc\n"), 2), ElementsAre("b", "c"));
  EXPECT_THAT(TailLines(std::string_view("a\nb\nc"), 2), ElementsAre("b", "c"));
  EXPECT_THAT(TailLines(std::string_view("a\r\nb\r\n"), 5), ElementsAre("a", "b"));
  EXPECT_TRUE(TailLines(std::string_view(""), 3).empty());
  EXPECT_TRUE(TailLines(std::string_view("a\n"), 0).empty());
  EXPECT_THAT(TailLines("x\ny\n", 1), ElementsAre("y"));
  const std::string output = "1\n2\n3\n";
  EXPECT_THAT(TailLines(output, 2), ElementsAre("2", "3"));
}

TEST(ProcessTest, TailLinesOfFile) {
  testing::TempDir dir;
  EXPECT_TRUE(TailLines(dir.path() / "missing.log", 3).empty());

  std::string big;
  for (int i = 0; i < 20000; ++i) big += "line " + std::to_string(i) + "\n";
  ASSERT_GT(big.size(), 64u * 1024);
  testing::WriteFileOrDie(dir.path() / "big.log", big);
  EXPECT_THAT(TailLines(dir.path() / "big.log", 2), ElementsAre("line 19998", "line 19999"));
  // Asking for more lines than the 64 KiB window holds: only whole lines are returned.
  std::vector<std::string> many = TailLines(dir.path() / "big.log", 100000);
  ASSERT_FALSE(many.empty());
  EXPECT_LT(many.size(), 20000u);
  EXPECT_THAT(many.front(), ::testing::StartsWith("line "));
  EXPECT_EQ(many.back(), "line 19999");
  const int first = std::stoi(many.front().substr(5));
  EXPECT_EQ(many.size(), static_cast<std::size_t>(20000 - first));
}

}  // namespace
}  // namespace triage::process
