// The planning step of a nightly sweep (coordinator/planning/nightly_plan.h): confirmation shards
// per loader, arch and device need; what is decided when planned; the device-time budget; and the
// request's checks (start_request.h).

#include "coordinator/planning/nightly_plan.h"

#include "common/nightly/policy_options.h"

#include "coordinator/planning/start_request.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/nightly/nightly_test_support.h"

namespace triage::coord {
namespace {

using ::testing::HasSubstr;
using namespace nightly::testing;  // NOLINT

constexpr char kInference[] =
    "tests/runner/test_config/torch/test_config_inference_single_device.yaml";
constexpr char kTp[] = "tests/runner/test_config/torch/test_config_inference_tensor_parallel.yaml";

inventory::Inventory Checkout() {
  inventory::Inventory inv;
  inv.documents.push_back(inventory::Document::Parse(
      kInference,
      "test_config:\n"
      "  a/pytorch-One-single_device-inference:\n    status: KNOWN_FAILURE_XFAIL\n\n"
      "  a/pytorch-Two-single_device-inference:\n    status: KNOWN_FAILURE_XFAIL\n\n"
      "  b/pytorch-One-single_device-inference:\n    status: EXPECTED_PASSING\n\n"
      "  c/pytorch-One-single_device-inference:\n    status: EXPECTED_PASSING\n"));
  inv.documents.push_back(
      inventory::Document::Parse(kTp,
                                 "test_config:\n  t/pytorch-Big-tensor_parallel-inference:\n"
                                 "    status: KNOWN_FAILURE_XFAIL\n"));
  for (const auto& d : inv.documents) EXPECT_TRUE(d.ok()) << d.diagnostics()[0].ToString();
  return inv;
}

v1::NightlyRecord On(std::string key, v1::NightlyRecord r, std::string arch = "n150") {
  r.set_key(std::move(key));
  r.set_arch(std::move(arch));
  return r;
}

v1::StartSweepRequest Request() {
  v1::StartSweepRequest req;
  req.set_repo_path("/repo");
  v1::NightlyRun& run = *req.add_nightly();
  run.set_label("night");
  for (auto r : {On("a/pytorch-One-single_device-inference", XfailPass()),
                 On("a/pytorch-Two-single_device-inference", XfailPass()),
                 On("a/pytorch-One-single_device-inference", XfailPass(0.999, "p150"), "p150"),
                 On("b/pytorch-One-single_device-inference", Incorrect(0.975)),
                 On("c/pytorch-One-single_device-inference", Crash(9)),
                 On("c/pytorch-One-single_device-inference", Pass(0.999, "p150"), "p150")}) {
    *run.add_records() = r;
  }
  v1::NightlyRecord tp = On("t/pytorch-Big-tensor_parallel-inference", XfailPass(), "n300-llmbox");
  tp.set_parallelism("tensor_parallel");
  *run.add_records() = tp;
  return req;
}

Plan PlanOf(const v1::StartSweepRequest& req) {
  PlanOptions options;
  options.executor = "native";
  options.playbook_estimates = {{"nightly", 300}};
  return PlanNightly(Checkout(), req, options, "sw", "tt", "forge", TimePoint{});
}

std::vector<std::string> Keys(const ShardRecord& s) {
  std::vector<std::string> keys;
  for (const auto& e : s.spec.entries()) keys.push_back(e.key());
  return keys;
}

TEST(NightlyPlan, OneConfirmationShardPerLoaderArchAndDeviceNeed) {
  Plan plan = PlanOf(Request());
  ASSERT_TRUE(plan.nightly);
  EXPECT_EQ(plan.nightly->candidates().at("promote"), 4);
  EXPECT_EQ(plan.nightly->candidates().at("lower_pcc"), 1);
  EXPECT_EQ(plan.nightly->flagged(), 1);
  std::vector<std::tuple<std::string, std::string, std::string, int>> shards;
  for (const auto& s : plan.shards) {
    shards.push_back({s.spec.loader(), s.spec.arch(), std::string(ShardStateName(s.state)),
                      s.spec.min_devices()});
    EXPECT_EQ(s.spec.playbook(), "nightly");
    EXPECT_EQ(s.spec.phase(), v1::PHASE_FULL);
    EXPECT_EQ(s.spec.nightly_options().confirm(), 2) << "the defaults are written out";
    for (const auto& f : s.spec.owned_files()) {
      EXPECT_TRUE(f == kInference || f == kTp) << "a confirmation owns YAML only: " << f;
    }
  }
  using T = std::tuple<std::string, std::string, std::string, int>;
  const std::string la = "third_party/tt_forge_models/a/pytorch/loader.py";
  EXPECT_THAT(
      shards,
      ::testing::ElementsAre(
          T{la, "n150", "queued", 1}, T{la, "p150", "queued", 1},
          T{"third_party/tt_forge_models/b/pytorch/loader.py", "n150", "queued", 1},
          // The host-memory kill on n150 while p150 ran it: flagged, decided now.
          T{"third_party/tt_forge_models/c/pytorch/loader.py", "n150", "succeeded", 1},
          T{"third_party/tt_forge_models/t/pytorch/loader.py", "n300-llmbox", "queued", 8}));
  EXPECT_EQ(Keys(plan.shards[0]),
            (std::vector<std::string>{"a/pytorch-One-single_device-inference",
                                      "a/pytorch-Two-single_device-inference"}));
  // The candidate knows every arch the runs recorded the test on (for the merge's placement).
  EXPECT_THAT(plan.shards[0].spec.entries(0).nightly().archs(),
              ::testing::ElementsAre("n150", "p150"));
  // Two confirmation runs per entry of what the runs measured (12 s).
  EXPECT_DOUBLE_EQ(plan.shards[0].expected_seconds, 2 * 2 * 12);
  ASSERT_EQ(plan.decided.size(), 1u);
  EXPECT_EQ(plan.decided[0].shard_id, plan.shards[3].id);
  EXPECT_TRUE(plan.shards[3].spec.decided_at_planning());
  ASSERT_EQ(plan.decided[0].result.entries_size(), 1);
  EXPECT_EQ(plan.decided[0].result.entries(0).verdict(), "capacity");
  EXPECT_FALSE(plan.decided[0].result.entries(0).changed());
}

TEST(NightlyPlan, NoConfirmDecidesEveryCandidateWhenPlanned) {
  v1::StartSweepRequest req = Request();
  req.mutable_nightly_options()->set_no_confirm(true);
  Plan plan = PlanOf(req);
  for (const auto& s : plan.shards) EXPECT_EQ(s.state, ShardState::kSucceeded) << s.id;
  int changed = 0;
  for (const auto& r : plan.decided) {
    for (const auto& o : r.result.entries()) {
      changed += o.changed();
      if (o.changed()) {
        EXPECT_EQ(o.nightly().decision(), "no_confirm");
      }
    }
  }
  EXPECT_EQ(changed, 5);
}

TEST(NightlyPlan, TheBudgetConfirmsTheMostValuableFirst) {
  v1::StartSweepRequest req = Request();
  // Room for two candidates' confirmations (2 x 12 s each): two promotions; the other two and
  // the lowered threshold wait.
  req.mutable_nightly_options()->set_max_device_hours(50.0 / 3600);
  Plan plan = PlanOf(req);
  EXPECT_EQ(plan.nightly->unconfirmed(), 3);
  int queued = 0;
  for (const auto& s : plan.shards) {
    if (s.state == ShardState::kQueued) {
      for (const auto& e : s.spec.entries()) {
        EXPECT_EQ(e.nightly().kind(), "promote");
        ++queued;
      }
    }
  }
  EXPECT_EQ(queued, 2);
  int unconfirmed = 0;
  for (const auto& r : plan.decided) {
    for (const auto& o : r.result.entries()) unconfirmed += o.verdict() == "unconfirmed";
  }
  EXPECT_EQ(unconfirmed, 3);
}

TEST(NightlyPlan, ArchsAskedForKeepOnlyTheirRecords) {
  v1::StartSweepRequest req = Request();
  req.add_archs("p150");
  Plan plan = PlanOf(req);
  for (const auto& s : plan.shards) EXPECT_EQ(s.spec.arch(), "p150");
  EXPECT_THAT(plan.nightly->archs(), ::testing::ElementsAre("p150"));
}

TEST(NightlyRequest, TheRunsAreCheckedAgainOnTheCoordinator) {
  v1::StartSweepRequest req = Request();
  EXPECT_TRUE(ValidateNightly(req).ok());
  v1::StartSweepRequest bad_key = req;
  bad_key.mutable_nightly(0)->mutable_records(0)->set_key(
      "../../x/pytorch-A-single_device-inference");
  EXPECT_THAT(std::string(ValidateNightly(bad_key).message()), HasSubstr("not a test-config key"));
  v1::StartSweepRequest bad_arch = req;
  bad_arch.mutable_nightly(0)->mutable_records(0)->set_arch("n999");
  EXPECT_THAT(std::string(ValidateNightly(bad_arch).message()), HasSubstr("unknown arch 'n999'"));
  v1::StartSweepRequest with_playbooks = req;
  with_playbooks.add_playbooks("dtype_bfloat16");
  EXPECT_THAT(std::string(ValidateNightly(with_playbooks).message()), HasSubstr("playbooks"));
  v1::StartSweepRequest options_alone;
  options_alone.mutable_nightly_options()->set_confirm(3);
  EXPECT_THAT(std::string(ValidateNightly(options_alone).message()), HasSubstr("nightly"));
  v1::StartSweepRequest far = req;
  far.mutable_nightly_options()->set_pcc_far_below(1.5);
  EXPECT_THAT(std::string(ValidateNightly(far).message()), HasSubstr("pcc_far_below"));
}

TEST(NightlyRequest, TheKeptRequestHoldsTheRunsDigestAndARepeatIsTheSame) {
  const v1::StartSweepRequest req = Request();
  const v1::StartSweepRequest kept = WithoutNightlyRuns(req);
  EXPECT_TRUE(kept.nightly().empty());
  EXPECT_EQ(kept.nightly_digest().size(), 64u);
  EXPECT_TRUE(StartOptionsDiffer(kept, WithoutNightlyRuns(req)).empty());
  v1::StartSweepRequest other = req;
  other.mutable_nightly(0)->mutable_records(0)->set_pcc(0.5);
  EXPECT_THAT(StartOptionsDiffer(kept, WithoutNightlyRuns(other)),
              ::testing::ElementsAre("nightly_digest"));
}

// The coordinator records the policy it resolved in the kept request; a retry asks without it.
TEST(NightlyRequest, ARetryIsTheSameSweepWhateverPolicyTheFirstResolved) {
  v1::StartSweepRequest req = Request();
  req.mutable_nightly_options()->set_policy_file("p.yaml");
  req.mutable_nightly_options()->set_policy_text("grid: 0.005\n");
  EXPECT_TRUE(ValidateNightly(req).ok());
  v1::StartSweepRequest kept = WithoutNightlyRuns(req);
  auto resolved = nightly::ResolvePolicy(kept.nightly_options(), nullptr, "");
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  *kept.mutable_nightly_options() = *resolved;
  EXPECT_FALSE(kept.nightly_options().policy_yaml().empty());
  EXPECT_TRUE(StartOptionsDiffer(kept, WithoutNightlyRuns(req)).empty());
  // Another policy file is another sweep.
  v1::StartSweepRequest other = req;
  other.mutable_nightly_options()->set_policy_text("grid: 0.01\n");
  EXPECT_THAT(StartOptionsDiffer(kept, WithoutNightlyRuns(other)),
              ::testing::ElementsAre("nightly_options"));
  // A bad policy file is refused at the start, naming its line; so is a forged resolution.
  v1::StartSweepRequest bad = req;
  bad.mutable_nightly_options()->set_policy_text("grid: 0.005\ngird: 1\n");
  EXPECT_THAT(std::string(ValidateNightly(bad).message()),
              HasSubstr("p.yaml:2: gird: not a knob of the nightly policy"));
  v1::StartSweepRequest forged = req;
  forged.mutable_nightly_options()->set_policy_yaml("grid: 0.5\n");
  EXPECT_THAT(std::string(ValidateNightly(forged).message()),
              HasSubstr("resolved by the coordinator"));
}

}  // namespace
}  // namespace triage::coord

namespace triage::coord {
namespace {

// Three skipped entries, one of them skipped on n150 only.
inventory::Inventory Skipped() {
  inventory::Inventory inv;
  inv.documents.push_back(inventory::Document::Parse(
      kInference,
      "test_config:\n"
      "  a/pytorch-One-single_device-inference:\n    status: NOT_SUPPORTED_SKIP\n"
      "    reason: \"Hang\"\n"
      "  a/pytorch-Two-single_device-inference:\n    status: NOT_SUPPORTED_SKIP\n"
      "  b/pytorch-One-single_device-inference:\n    status: KNOWN_FAILURE_XFAIL\n"
      "  c/pytorch-One-single_device-inference:\n    status: EXPECTED_PASSING\n"
      "    arch_overrides:\n      n150:\n        status: NOT_SUPPORTED_SKIP\n"));
  EXPECT_TRUE(inv.documents[0].ok());
  return inv;
}

v1::StartSweepRequest RecheckRequest(double hours = 0) {
  v1::StartSweepRequest req;
  req.set_repo_path("/repo");
  req.set_recheck_skipped(true);
  if (hours > 0) req.mutable_nightly_options()->set_max_device_hours(hours);
  return req;
}

std::vector<std::string> Planned(const Plan& plan) {
  std::vector<std::string> out;
  for (const auto& s : plan.shards) {
    for (const auto& e : s.spec.entries()) out.push_back(e.key() + "@" + s.spec.arch());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(PlanRecheck, EverySkippedEntryArchIsConfirmedTwice) {
  PlanOptions options;
  options.archs = {"n150", "p150"};
  const Plan plan = PlanRecheck(Skipped(), RecheckRequest(), options, "sw-1", "t", "f", {});
  EXPECT_EQ(Planned(plan),
            (std::vector<std::string>{"a/pytorch-One-single_device-inference@n150",
                                      "a/pytorch-One-single_device-inference@p150",
                                      "a/pytorch-Two-single_device-inference@n150",
                                      "a/pytorch-Two-single_device-inference@p150",
                                      "c/pytorch-One-single_device-inference@n150"}));
  ASSERT_TRUE(plan.recheck.has_value());
  EXPECT_EQ(plan.recheck->skipped(), 5);
  EXPECT_EQ(plan.recheck->selected(), 5);
  EXPECT_EQ(plan.recheck->never_checked(), 0);
  for (const auto& s : plan.shards) {
    EXPECT_EQ(s.spec.nightly_options().confirm(), 2);
    EXPECT_EQ(s.spec.playbook(), "nightly");
    for (const auto& e : s.spec.entries()) {
      EXPECT_EQ(e.nightly().kind(), "recheck");
      // The archs the entry is skipped on, for the merge to place over.
      EXPECT_EQ(e.nightly().archs_size(), e.key().starts_with("c/") ? 1 : 2) << e.key();
    }
  }
  EXPECT_EQ(plan.entries.size(), 3u);
}

TEST(PlanRecheck, ABudgetTakesTheLongestUncheckedFirst) {
  PlanOptions options;
  options.archs = {"n150"};
  options.default_estimate = 600;  // two runs: 20 minutes an entry-arch
  // a/One was checked a week ago, c/One yesterday, a/Two never.
  const std::map<std::string, std::int64_t> checked = {
      {RecheckKey(kInference, "a/pytorch-One-single_device-inference", "n150"), 1000},
      {RecheckKey(kInference, "c/pytorch-One-single_device-inference", "n150"), 2000}};
  options.rechecked = &checked;
  const Plan plan =
      PlanRecheck(Skipped(), RecheckRequest(0.7), options, "sw-2", "t", "f", {});  // 42 minutes
  EXPECT_EQ(Planned(plan),
            (std::vector<std::string>{"a/pytorch-One-single_device-inference@n150",
                                      "a/pytorch-Two-single_device-inference@n150"}));
  ASSERT_TRUE(plan.recheck.has_value());
  EXPECT_EQ(plan.recheck->skipped(), 3);
  EXPECT_EQ(plan.recheck->selected(), 2);
  EXPECT_EQ(plan.recheck->left(), 1);
  EXPECT_EQ(plan.recheck->checked_before(), 2);
  EXPECT_EQ(plan.recheck->oldest_check_unix_ms(), 2000);  // of those left for later
}

TEST(PlanRecheck, RecordedDurationsSetTheRunsTimeLimitEstimatesDoNot) {
  PlanOptions options;
  options.archs = {"n150"};
  options.durations = {
      {"tests/runner/test_models.py::test_all_models_torch[a/pytorch-One-single_device-inference]",
       40.0}};
  const Plan plan = PlanRecheck(Skipped(), RecheckRequest(), options, "sw-3", "t", "f", {});
  for (const auto& s : plan.shards) {
    for (const auto& e : s.spec.entries()) {
      EXPECT_EQ(e.nightly().expected_seconds(), e.key().starts_with("a/pytorch-One") ? 40.0 : 0.0)
          << e.key();
    }
  }
}

TEST(PlanRecheck, TheRequestIsCheckedAsANightlySweepIs) {
  v1::StartSweepRequest req = RecheckRequest();
  req.add_playbooks("unpack_forward_output");
  auto st = ValidateStartRequest(req, {});
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.status().message()), HasSubstr("a recheck sweep"));
  req = RecheckRequest();
  req.add_nightly()->set_label("n");
  st = ValidateStartRequest(req, {});
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.status().message()), HasSubstr("two kinds of sweep"));
  EXPECT_TRUE(ValidateStartRequest(RecheckRequest(1.5), {}).ok());
}

}  // namespace
}  // namespace triage::coord
