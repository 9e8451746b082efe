// The nightly playbook on a recheck shard (docs/nightly.md, "Rechecking skipped entries"): each
// run's time limit comes from the tests' recorded durations, and the runs decide the kind.

#include "agent/playbooks/playbooks.h"
#include "gtest/gtest.h"
#include "tests/support/fake_playbook_tools.h"

namespace triage::playbooks {
namespace {

using std::chrono::seconds;

v1::ShardSpec RecheckShard(const std::vector<std::pair<std::string, double>>& keys) {
  v1::ShardSpec spec;
  spec.set_shard_id("sw-1-s001");
  spec.set_playbook("nightly");
  spec.set_arch("n150");
  spec.mutable_nightly_options()->set_confirm(2);
  for (const auto& [key, seconds_recorded] : keys) {
    v1::ShardEntry& e = *spec.add_entries();
    e.set_key(key);
    e.set_file("tests/runner/test_config/torch/test_config_inference_single_device.yaml");
    v1::NightlyCandidate& c = *e.mutable_nightly();
    c.set_kind("recheck");
    c.set_arch("n150");
    c.set_status("NOT_SUPPORTED_SKIP");
    c.set_reason("Hang");
    c.set_bringup_status("FAILED_RUNTIME");
    c.set_expected_seconds(seconds_recorded);
  }
  return spec;
}

absl::StatusOr<v1::ShardResult> RunRecheck(const v1::ShardSpec& spec, FakeTools& tools) {
  PlaybookContext ctx;
  ctx.spec = &spec;
  ctx.tools = &tools;
  return RunPlaybook(ctx);
}

TEST(NightlyRecheck, EachRunIsLimitedByItsTestsRecordedDurations) {
  const std::string a = "a/pytorch-One-single_device-inference";
  const std::string b = "b/pytorch-One-single_device-inference";
  FakeTools tools;
  tools.crash = {a, b};  // every session dies: each test then runs alone
  auto result = RunRecheck(RecheckShard({{a, 40}, {b, 200}}), tools);
  ASSERT_TRUE(result.ok()) << result.status();
  // 5 x 40 s is under the 300 s floor; 5 x 200 s is 1000 s; the session has the sum.
  const std::vector<seconds> per_confirmation = {seconds(1300), seconds(300), seconds(1000)};
  std::vector<seconds> want = per_confirmation;
  want.insert(want.end(), per_confirmation.begin(), per_confirmation.end());
  EXPECT_EQ(tools.pytest_limits, want);
  ASSERT_EQ(result->entries_size(), 2);
  for (const auto& o : result->entries()) {
    // A crash in both runs: the skip stays, its reason refreshed from "Hang" to the crash.
    EXPECT_EQ(o.verdict(), "refresh_skip") << o.key();
    EXPECT_TRUE(o.changed()) << o.key();
  }
}

TEST(NightlyRecheck, ATestWithoutARecordedDurationHasTheAgentsLimit) {
  FakeTools tools;
  tools.crash = {"a/pytorch-One-single_device-inference"};
  auto result = RunRecheck(RecheckShard({{"a/pytorch-One-single_device-inference", 0},
                                         {"b/pytorch-One-single_device-inference", 60}}),
                           tools);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_FALSE(tools.pytest_limits.empty());
  EXPECT_EQ(tools.pytest_limits[0], seconds(0)) << "the session holds a test nobody measured";
  EXPECT_EQ(tools.pytest_limits[1], seconds(0)) << "a alone: not measured";
  EXPECT_EQ(tools.pytest_limits[2], seconds(300)) << "b alone: the floor";
}

}  // namespace
}  // namespace triage::playbooks
