// The command executor's parameters: every malformed value is an error naming the parameter
// (never an exception), so the coordinator can refuse it when the sweep starts.

#include "common/command/command_params.h"

#include "common/util/strings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace triage::command {
namespace {

using ::testing::HasSubstr;

TEST(CommandParamsTest, ValidParameters) {
  auto p = ParseParams({{"command", R"(["tool", "{key}", "{keys}"])"}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->command, (std::vector<std::string>{"tool", "{key}", "{keys}"}));
  EXPECT_FALSE(p->per_shard);
  EXPECT_FALSE(p->timeout.has_value());
  p = ParseParams({{"command", R"(["t"])"}, {"per", "shard"}, {"timeout_seconds", "90"}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->per_shard);
  EXPECT_EQ(p->timeout, std::chrono::seconds(90));
}

TEST(CommandParamsTest, VerifyIsOnUnlessSetToFalse) {
  auto p = ParseParams({{"command", R"(["t"])"}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->verify) << "the default";
  p = ParseParams({{"command", R"(["t"])"}, {"verify", ""}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->verify);
  p = ParseParams({{"command", R"(["t"])"}, {"verify", "true"}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->verify);
  p = ParseParams({{"command", R"(["t"])"}, {"verify", "false"}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->verify);
  for (const char* bad : {"yes", "no", "1", "0", "True", "FALSE", " true"}) {
    p = ParseParams({{"command", R"(["t"])"}, {"verify", bad}});
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(p.status())) << p.status();
    EXPECT_THAT(util::MessageOf(p.status()),
                HasSubstr(util::StrCat("params.verify must be true or false, got '", bad, "'")));
  }
}

// The command's environment: the allow-list and the operator's additions, nothing else.
TEST(CommandParamsTest, OnlyAllowListedVariablesReachTheCommand) {
  const std::vector<std::string> agent_env = {
      "PATH=/usr/bin:/bin",
      "HOME=/home/agent",
      "ANTHROPIC_API_KEY=x",
      "AWS_SECRET_ACCESS_KEY=y",
      "GOOGLE_APPLICATION_CREDENTIALS=/secret.json",
      "TRIAGE_AGENT_TOKEN=t",
      "LANG=C.UTF-8",
      "PYTHONPATH=/opt/py",
      "MY_TOOL_HOME=/opt/tool",
      "PATH=/second",
      "NOEQUALS",
      "=empty",
  };
  using Env = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(AllowedEnvironment({}, agent_env), (Env{{"PATH", "/usr/bin:/bin"},
                                                    {"HOME", "/home/agent"},
                                                    {"LANG", "C.UTF-8"},
                                                    {"PYTHONPATH", "/opt/py"}}));
  EXPECT_EQ(AllowedEnvironment({"MY_TOOL_HOME"}, agent_env), (Env{{"PATH", "/usr/bin:/bin"},
                                                                  {"HOME", "/home/agent"},
                                                                  {"LANG", "C.UTF-8"},
                                                                  {"PYTHONPATH", "/opt/py"},
                                                                  {"MY_TOOL_HOME", "/opt/tool"}}));
  EXPECT_TRUE(AllowedEnvironment({}, {}).empty());
  for (std::string_view name : kEnvAllowList) EXPECT_TRUE(ValidEnvName(name)) << name;
  for (const char* good : {"A", "_X", "MY_VAR_2", "lower"}) EXPECT_TRUE(ValidEnvName(good)) << good;
  for (const char* bad : {"", "2X", "A=B", "A B", "A-B", "PATH\n"}) {
    EXPECT_FALSE(ValidEnvName(bad)) << bad;
  }
}

TEST(CommandParamsTest, EachBadValueNamesItsParameter) {
  const std::string ok = R"(["t"])";
  const struct {
    std::map<std::string, std::string> params;
    std::string says;
  } cases[] = {
      {{}, "params.command is required"},
      {{{"command", ""}}, "params.command is required"},
      {{{"command", R"(["tool",)"}}, "params.command is not valid JSON"},
      {{{"command", "t {key}"}}, "params.command is not valid JSON"},
      {{{"command", "[]"}}, "non-empty JSON array"},
      {{{"command", R"({"a": 1})"}}, "non-empty JSON array"},
      {{{"command", "[1]"}}, "params.command[0] must be a string, got 1"},
      {{{"command", R"(["t", null])"}}, "params.command[1] must be a string"},
      {{{"command", "[1e400]"}}, "params.command"},
      {{{"command", std::string(10000, '[')}}, "params.command"},
      {{{"command", ok}, {"per", "loader"}}, "params.per must be entry or shard"},
      {{{"command", ok}, {"timeout_seconds", "abc"}}, "params.timeout_seconds"},
      {{{"command", ok}, {"timeout_seconds", "0"}}, "params.timeout_seconds"},
      {{{"command", ok}, {"timeout_seconds", "-5"}}, "params.timeout_seconds"},
      {{{"command", ok}, {"timeout_seconds", "99999999999999999999"}}, "params.timeout_seconds"},
      {{{"command", ok}, {"timeout_seconds", "10s"}}, "params.timeout_seconds"},
  };
  for (const auto& c : cases) {
    auto p = ParseParams(c.params);
    ASSERT_FALSE(p.ok()) << c.says;
    EXPECT_TRUE(absl::IsInvalidArgument(p.status())) << p.status();
    EXPECT_THAT(util::MessageOf(p.status()), HasSubstr(c.says));
  }
}

}  // namespace
}  // namespace triage::command
