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
