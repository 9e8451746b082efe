// A nightly sweep's results through the merge and the report (docs/nightly.md, section 4):
// the archs' confirmed targets placed together, a new entry only when every arch confirmed it,
// issue links on the reasons by key or failure cluster, and the report's sections.

#include <map>

#include "common/nightly/decide.h"
#include "common/nightly/policy_options.h"
#include "common/util/strings.h"
#include "coordinator/merge/clusters.h"
#include "coordinator/merge/merge.h"
#include "coordinator/merge/nightly_report.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/memory_pinned_files.h"
#include "tests/unit/common/nightly/nightly_test_support.h"

namespace triage::merge {
namespace {

using ::testing::HasSubstr;
using namespace nightly::testing;  // NOLINT

constexpr char kFile[] = "tests/runner/test_config/torch/test_config_inference_single_device.yaml";
constexpr char kYaml[] =
    "test_config:\n"
    "  a/pytorch-One-single_device-inference:\n    status: EXPECTED_PASSING\n\n"
    "  b/pytorch-One-single_device-inference:\n    status: EXPECTED_PASSING\n";
constexpr char kA[] = "a/pytorch-One-single_device-inference";
constexpr char kB[] = "b/pytorch-One-single_device-inference";
constexpr char kNew[] = "n/pytorch-One-single_device-inference";
constexpr char kError[] = "error: 'ttir.conv2d' op expected bias shape";

// A confirmation shard of one test on one arch, and its result from these runs.
struct Confirmed {
  coord::ShardRecord shard;
  coord::ResultRecord result;
};

Confirmed Confirm(const std::string& key, const std::string& arch, const std::string& fields,
                  std::vector<v1::NightlyRecord> nightly, std::vector<v1::NightlyRecord> fleet,
                  int n) {
  OneEntry e = Entry(fields, key);
  nightly::History h;
  h.test_function = "test_all_models_torch";
  h.key = key;
  h.arch = arch;
  h.records = std::move(nightly);
  auto j = nightly::Judge(h, nightly::Resolve(fields.empty() ? nullptr : e.entry(), arch), {});
  EXPECT_EQ(j.kind, nightly::Judgement::Kind::kCandidate) << key << " " << arch;
  Confirmed c;
  c.shard.id = "sw-s" + std::to_string(n);
  c.shard.sweep_id = "sw";
  c.shard.state = coord::ShardState::kSucceeded;
  c.shard.spec.set_shard_id(c.shard.id);
  c.shard.spec.set_playbook("nightly");
  c.shard.spec.set_phase(v1::PHASE_FULL);
  c.shard.spec.set_wave(1);
  c.shard.spec.set_arch(arch);
  v1::ShardEntry& se = *c.shard.spec.add_entries();
  se.set_key(key);
  se.set_file(kFile);
  *se.mutable_nightly() = j.candidate;
  se.mutable_nightly()->add_archs("n150");
  se.mutable_nightly()->add_archs("p150");
  c.result.shard_id = c.shard.id;
  c.result.lease_id = c.shard.id + "-l1";
  c.result.token = 1;
  *c.result.result.add_entries() =
      nightly::DecideNightly(se, fleet, {}, nightly::DecideMode::kConfirm);
  return c;
}

MergeOutput MergeOf(const std::vector<Confirmed>& confirmed,
                    std::map<std::string, std::string> links = {}) {
  testing::MemoryPinnedFiles files;
  files.ttxla[kFile] = kYaml;
  MergeInput in;
  in.sweep_id = "sw";
  in.archs = {"n150", "p150"};
  in.files = &files;
  in.issue_links = std::move(links);
  for (const auto& c : confirmed) {
    in.shards.push_back(c.shard);
    in.results.push_back(c.result);
  }
  auto out = Merge(in);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : MergeOutput{};
}

std::vector<Confirmed> Demotions() {
  auto fail = Fail("FAILED_TTMLIR_COMPILATION", kError);
  return {Confirm(kA, "n150", "    status: EXPECTED_PASSING\n", {fail, fail}, {fail, fail}, 1),
          Confirm(kA, "p150", "    status: EXPECTED_PASSING\n", {fail, fail}, {fail, fail}, 2),
          Confirm(kB, "n150", "    status: EXPECTED_PASSING\n", {fail, fail}, {fail, fail}, 3)};
}

TEST(NightlyMerge, TargetsArePlacedTogetherAndLinksLandOnTheirReasons) {
  // By the failure cluster's id: both entries share the error, so both reasons get the link.
  const std::string cluster = ClusterIdOfReason(kError);
  MergeOutput out = MergeOf(Demotions(), {{cluster, "https://example.com/issues/7"}});
  EXPECT_THAT(out.ttxla_patch,
              HasSubstr("+    status: KNOWN_FAILURE_XFAIL\n"
                        "+    bringup_status: FAILED_TTMLIR_COMPILATION\n"
                        "+    reason: \"error: 'ttir.conv2d' op expected bias shape - "
                        "https://example.com/issues/7\"\n"));
  // b failed on n150 only: the top level keeps EXPECTED_PASSING, n150 gets an override.
  EXPECT_THAT(out.ttxla_patch, HasSubstr("+    arch_overrides:\n+      n150:\n"
                                         "+        status: KNOWN_FAILURE_XFAIL\n"));
  for (const auto& e : out.entries) EXPECT_EQ(e.issue_link, "https://example.com/issues/7");
  // By key, only that entry.
  MergeOutput by_key = MergeOf(Demotions(), {{kB, "https://example.com/issues/8"}});
  EXPECT_THAT(by_key.ttxla_patch, HasSubstr("bias shape - https://example.com/issues/8\"\n"));
  EXPECT_THAT(by_key.ttxla_patch, HasSubstr("bias shape\"\n"));
}

TEST(NightlyMerge, ANewEntryNeedsEveryArchTheRunsRecordedItOn) {
  MergeOutput one = MergeOf({Confirm(kNew, "n150", "", {Pass(), Pass()}, {Pass(), Pass()}, 1)});
  EXPECT_EQ(one.ttxla_patch, "");
  ASSERT_EQ(one.entries.size(), 1u);
  EXPECT_THAT(one.entries[0].review, ::testing::Contains(HasSubstr("not confirmed on p150")));
  MergeOutput both = MergeOf({Confirm(kNew, "n150", "", {Pass(), Pass()}, {Pass(), Pass()}, 1),
                              Confirm(kNew, "p150", "", {Pass(), Pass()}, {Pass(), Pass()}, 2)});
  EXPECT_THAT(both.ttxla_patch, HasSubstr("+\n+  n/pytorch-One-single_device-inference:\n"
                                          "+    status: EXPECTED_PASSING\n"));
  ASSERT_EQ(both.entries.size(), 1u);
  EXPECT_TRUE(both.entries[0].new_entry);
  // Archs that want different entries: the top level passes, the failing arch has its
  // override, in the entry's one block of the patch.
  auto fail = Fail("FAILED_TTMLIR_COMPILATION", kError);
  MergeOutput mixed = MergeOf({Confirm(kNew, "n150", "", {fail, fail}, {fail, fail}, 1),
                               Confirm(kNew, "p150", "", {Pass(), Pass()}, {Pass(), Pass()}, 2)});
  EXPECT_THAT(mixed.ttxla_patch, HasSubstr("+  n/pytorch-One-single_device-inference:\n"
                                           "+    status: EXPECTED_PASSING\n"
                                           "+    arch_overrides:\n"
                                           "+      n150:\n"
                                           "+        status: KNOWN_FAILURE_XFAIL\n"));
  ASSERT_EQ(mixed.entries.size(), 1u);
  EXPECT_TRUE(mixed.entries[0].new_entry);
  EXPECT_EQ(mixed.entries[0].placement, EntryMerge::Placement::kPerArch);
  EXPECT_THAT(mixed.entries[0].yaml_after, HasSubstr("bias shape"));
}

// A checkout of December 2025, whose runner put an op-by-op segment between parallelism and run
// mode: its file is read with that runner's grammar, so its entries are edited, not refused.
TEST(NightlyMerge, AFileIsEditedWithTheKeyGrammarOfItsCheckoutsRunner) {
  constexpr char kOld[] = "a/pytorch-One-single_device-full-inference";
  const std::string runner =
      "@pytest.mark.parametrize(\"run_mode\", [pytest.param(1, id=\"inference\"), "
      "pytest.param(2, id=\"training\")])\n"
      "@pytest.mark.parametrize(\"op_by_op\", [None, 1], ids=[\"full\", \"op_by_op_torch\"])\n"
      "@pytest.mark.parametrize(\"parallelism\", [pytest.param(1, id=\"single_device\"), "
      "pytest.param(2, id=\"data_parallel\")])\n"
      "@pytest.mark.parametrize(\"test_entry\", test_entries, ids=make_test_id)\n"
      "def test_all_models_torch(test_entry, run_mode, op_by_op, parallelism):\n"
      "    run(test_entry)\n";
  auto fail = Fail("FAILED_TTMLIR_COMPILATION", kError);
  const std::vector<Confirmed> confirmed = {
      Confirm(kOld, "n150", "    status: EXPECTED_PASSING\n", {fail, fail}, {fail, fail}, 1),
      Confirm(kOld, "p150", "    status: EXPECTED_PASSING\n", {fail, fail}, {fail, fail}, 2)};
  for (const bool with_runner : {true, false}) {
    SCOPED_TRACE(with_runner ? "with its runner" : "without a runner");
    testing::MemoryPinnedFiles files;
    files.ttxla[kFile] =
        util::StrCat("test_config:\n  ", kOld, ":\n    status: EXPECTED_PASSING\n");
    if (with_runner) files.ttxla["tests/runner/test_models.py"] = runner;
    MergeInput in;
    in.sweep_id = "sw";
    in.archs = {"n150", "p150"};
    in.files = &files;
    for (const auto& c : confirmed) {
      in.shards.push_back(c.shard);
      in.results.push_back(c.result);
    }
    auto out = Merge(in);
    if (with_runner) {
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_THAT(out->ttxla_patch, HasSubstr("+    status: KNOWN_FAILURE_XFAIL\n"));
    } else {
      // The built-in grammar does not know the key: the file has errors and is never written.
      ASSERT_FALSE(out.ok());
      EXPECT_THAT(out.status().message(), HasSubstr("validation errors"));
    }
  }
}

TEST(NightlyMerge, TheReportGroupsTheArchsOfAnEntry) {
  MergeOutput out = MergeOf(Demotions());
  v1::NightlyIntake intake;
  intake.set_runs(2);
  intake.add_archs("n150");
  intake.add_archs("p150");
  NightlySections s = BuildNightlySections(out, intake, {}, {"n150", "p150"});
  EXPECT_EQ(s.json["sections"]["demoted"].size(), 3u);
  EXPECT_THAT(s.markdown, HasSubstr("### Demoted (2)"));
  EXPECT_THAT(s.markdown, HasSubstr("- `a/pytorch-One-single_device-inference` on n150, p150\n"));
  // The entry's YAML as the patch changes it, line by line (the diff is long enough to live on
  // the heap: a view into a freed temporary would read garbage, and ASan stops it).
  EXPECT_THAT(s.markdown, HasSubstr("    ```diff\n"
                                    "       a/pytorch-One-single_device-inference:\n"
                                    "    -    status: EXPECTED_PASSING\n"
                                    "    +    status: KNOWN_FAILURE_XFAIL\n"
                                    "    +    bringup_status: FAILED_TTMLIR_COMPILATION\n"
                                    "    +    reason: \"error: 'ttir.conv2d' op expected bias "
                                    "shape\"\n"
                                    "    ```\n"))
      << s.markdown;
  EXPECT_EQ(s.markdown.find('\0'), std::string::npos);
  EXPECT_THAT(s.markdown, HasSubstr("Confirmation: 2 run(s) per candidate on its arch."));
  // Every knob of the policy, with where it came from (none asked, none learned: the defaults).
  EXPECT_THAT(s.markdown, HasSubstr("| knob | value | from |\n|---|---|---|\n| `grid` | `0.01` | "
                                    "default |\n"));
  EXPECT_EQ(s.json["options"]["policy"].size(), std::size(nightly::kPolicyKnobs));
  // A history that taught nothing is not named as the policy's origin.
  const nightly::Policy taught_nothing;
  auto resolved = nightly::ResolvePolicy({}, &taught_nothing,
                                         "0 maintenance round(s) in the newest 1 commit(s)");
  ASSERT_TRUE(resolved.ok());
  EXPECT_THAT(BuildNightlySections(out, intake, *resolved, {"n150"}).markdown,
              HasSubstr("The rules followed this policy:\n"));
}

// The policy the sweep resolved when it started is what the report lists.
TEST(NightlyMerge, TheReportSaysWhereEachKnobOfThePolicyCameFrom) {
  MergeOutput out = MergeOf(Demotions());
  v1::NightlyIntake intake;
  intake.add_archs("n150");
  nightly::Policy learned;
  learned.nonsense = "xfail";
  learned.sources["nonsense"] = "learned from 2 changes in 2 rounds, newest abc 2026-08-01 k|x";
  v1::NightlyOptions asked;
  asked.set_policy_file("ops.yaml");
  asked.set_policy_text("hang_reason: message\n");
  auto resolved = nightly::ResolvePolicy(asked, &learned, "2 maintenance round(s)");
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  NightlySections s = BuildNightlySections(out, intake, *resolved, {"n150"});
  EXPECT_THAT(s.markdown, HasSubstr("The rules followed this policy, learned from 2 maintenance "
                                    "round(s) where that history speaks to a knob:"));
  // A pipe in a source does not break the table.
  EXPECT_THAT(s.markdown, HasSubstr("| `nonsense` | `xfail` | learned from 2 changes in 2 rounds, "
                                    "newest abc 2026-08-01 k\\|x |\n"));
  EXPECT_THAT(s.markdown, HasSubstr("| `hang_reason` | `\"message\"` | ops.yaml:1 |\n"));
  EXPECT_EQ(s.json["options"]["policy"]["nonsense"]["value"], "xfail");
  EXPECT_EQ(s.json["options"]["policy"]["hang_reason"]["source"], "ops.yaml:1");
  EXPECT_EQ(s.json["options"]["policy_learned_from"], "2 maintenance round(s)");
}

}  // namespace
}  // namespace triage::merge
