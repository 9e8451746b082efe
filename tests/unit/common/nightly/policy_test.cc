// The nightly policy (docs/nightly.md, "The policy"): the file's knobs, its errors, and what
// each knob changes in the rules' decisions.

#include "common/nightly/policy.h"

#include "common/nightly/decide.h"
#include "common/nightly/policy_options.h"
#include "common/nightly/rules.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/nightly/nightly_test_support.h"

namespace triage::nightly {
namespace {

using namespace testing;  // NOLINT
using ::testing::HasSubstr;

Policy Read(const std::string& text) {
  auto p = ReadPolicy(text, "policy.yaml");
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Policy{};
}

std::string Error(const std::string& text) {
  auto p = ReadPolicy(text, "policy.yaml");
  EXPECT_FALSE(p.ok());
  return p.ok() ? "" : std::string(p.status().message());
}

TEST(NightlyPolicy, AnEmptyFileKeepsEveryDefault) {
  Policy p = Read("");
  EXPECT_EQ(p.grid, 0.01);
  EXPECT_EQ(p.margin, 0);
  EXPECT_EQ(p.enable, "floor");
  EXPECT_EQ(p.Lowest("single_device", "inference"), 0.97);
  EXPECT_EQ(p.nonsense, "disable_pcc");
  EXPECT_TRUE(p.sources.empty());
}

TEST(NightlyPolicy, KnobsAreReadWithTheirLines) {
  Policy p = Read(
      "grid: 0.005\n"
      "margin: 0\n"
      "lowest: {default: 0.95, tensor_parallel: 0.9, tensor_parallel-training: 0.85}\n"
      "nonsense: xfail\n"
      "pcc_comment: none\n"
      "hang_reason: message\n"
      "oom_reason: \"Host OOM\"\n");
  EXPECT_EQ(p.grid, 0.005);
  EXPECT_EQ(p.margin, 0);
  EXPECT_EQ(p.Lowest("single_device", "inference"), 0.95);
  EXPECT_EQ(p.Lowest("tensor_parallel", "inference"), 0.9);
  EXPECT_EQ(p.Lowest("tensor_parallel", "training"), 0.85);
  EXPECT_EQ(p.nonsense, "xfail");
  EXPECT_EQ(p.hang_reason, "message");
  EXPECT_EQ(p.oom_reason, "Host OOM");
  EXPECT_EQ(p.sources.at("nonsense"), "policy.yaml:4");
  EXPECT_EQ(p.sources.count("skip_bringup"), 0u);
  // Written back, every knob with where it came from.
  EXPECT_THAT(PolicyYaml(p), HasSubstr("nonsense: xfail  # policy.yaml:4\n"));
  EXPECT_THAT(PolicyYaml(p), HasSubstr("skip_bringup: write  # default\n"));
}

TEST(NightlyPolicy, BadInputNamesTheLineAndTheKnob) {
  EXPECT_THAT(Error("grid: 0.01\nnonsens: xfail\n"),
              AllOf(HasSubstr("policy.yaml:2: nonsens: not a knob"), HasSubstr("nonsense")));
  EXPECT_THAT(Error("nonsense: skip\n"),
              HasSubstr("policy.yaml:1: nonsense: 'skip' is not one of disable_pcc, xfail"));
  EXPECT_THAT(Error("grid: 0.01\nlowest: 1.5\n"),
              HasSubstr("policy.yaml:2: lowest: 1.5 is not between 0 and 0.999"));
  EXPECT_THAT(Error("lowest: {galaxy: 0.9}\n"), HasSubstr("'galaxy' is not default"));
  EXPECT_THAT(Error("grid: abc\n"), HasSubstr("policy.yaml:1: grid: expected a number"));
  EXPECT_THAT(Error("grid: 0.01\ngrid: 0.02\n"), HasSubstr("policy.yaml:2: grid: set twice"));
  EXPECT_THAT(Error("grid: 0.005\nmargin: 0.005\n"), HasSubstr("must be smaller than grid"));
  EXPECT_THAT(Error("- grid\n"), HasSubstr("policy.yaml:1: a policy is a mapping"));
  EXPECT_THAT(Error("grid: [0.01\n"), HasSubstr("policy.yaml:"));
}

// The candidate the rules make of these records on this YAML, decided by two like runs.
v1::EntryOutcome Decided(const std::string& fields, const std::vector<v1::NightlyRecord>& runs,
                         const RuleOptions& o) {
  OneEntry e = Entry(fields);
  History h;
  h.test_function = "test_all_models_torch";
  h.key = e.entry()->key;
  h.arch = "n150";
  h.records = runs;
  Judgement j = Judge(h, Resolve(e.entry(), "n150"), o);
  if (j.kind != Judgement::Kind::kCandidate) return {};
  v1::ShardEntry se;
  se.set_key(h.key);
  se.set_file(e.doc.path());
  *se.mutable_nightly() = j.candidate;
  return DecideNightly(se, runs, o, DecideMode::kConfirm);
}

std::string Set(const v1::EntryOutcome& o, const std::string& name) {
  for (const auto& f : o.edit().set()) {
    if (f.name() != name) continue;
    if (f.value().has_string_value()) return f.value().string_value();
    if (f.value().has_bool_value()) return f.value().bool_value() ? "true" : "false";
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%.3f", f.value().float_value());
    return buf;
  }
  return "<unset>";
}

constexpr char kPassing[] = "    status: EXPECTED_PASSING\n";

TEST(NightlyPolicy, ANonsensePccDisablesTheCheckOrXfailsByThePolicy) {
  const std::vector<v1::NightlyRecord> runs = {Incorrect(0.41), Incorrect(0.41)};
  auto disabled = Decided(kPassing, runs, {});
  EXPECT_EQ(disabled.nightly().kind(), "disable_pcc");
  EXPECT_EQ(Set(disabled, "assert_pcc"), "false");

  RuleOptions xfail = WithPolicy({}, Read("nonsense: xfail\n"));
  auto o = Decided(kPassing, runs, xfail);
  EXPECT_TRUE(o.changed());
  EXPECT_EQ(o.nightly().kind(), "demote_xfail");
  EXPECT_EQ(Set(o, "status"), "KNOWN_FAILURE_XFAIL");
  EXPECT_EQ(Set(o, "bringup_status"), "INCORRECT_RESULT");
  EXPECT_EQ(Set(o, "reason"), "PCC comparison failed. Calculated: pcc=0.41. Required: pcc=0.99.");
  EXPECT_EQ(Set(o, "assert_pcc"), "<unset>");
  auto short_form =
      Decided(kPassing, runs, WithPolicy({}, Read("nonsense: xfail\npcc_reason: short\n")));
  EXPECT_EQ(Set(short_form, "reason"), "PCC comparison failed (calc ~0.41, required 0.99)");
}

// A passing test with its check off, demoted for another failure: the line goes, or stays.
TEST(NightlyPolicy, ADemotedTestsCheckOffIsDroppedOrKeptByThePolicy) {
  const std::string off = "    status: EXPECTED_PASSING\n    assert_pcc: false\n";
  const std::vector<v1::NightlyRecord> runs = {Fail("FAILED_RUNTIME", "TT_FATAL: bad shape"),
                                               Fail("FAILED_RUNTIME", "TT_FATAL: bad shape")};
  auto dropped = Decided(off, runs, {});
  EXPECT_EQ(dropped.nightly().kind(), "demote_xfail");
  EXPECT_EQ(Set(dropped, "assert_pcc"), "<unset>");
  EXPECT_THAT(dropped.edit().delete_(), ::testing::Contains("assert_pcc"));
  auto kept = Decided(off, runs, WithPolicy({}, Read("demote_pcc_off: keep\n")));
  EXPECT_EQ(kept.nightly().kind(), "demote_xfail");
  EXPECT_THAT(kept.edit().delete_(), ::testing::Not(::testing::Contains("assert_pcc")));
  // A test whose check is on has nothing to drop.
  auto on = Decided(kPassing, runs, {});
  EXPECT_THAT(on.edit().delete_(), ::testing::Not(::testing::Contains("assert_pcc")));
}

// The runner's message as Python prints its floats: the shortest text that reads back.
TEST(NightlyPolicy, ThePccReasonWritesTheFiguresAsTheRunnerDoes) {
  EXPECT_EQ(PccFailureReason(0.9024592638015747, 0.99, "runner"),
            "PCC comparison failed. Calculated: pcc=0.9024592638015747. Required: pcc=0.99.");
  EXPECT_EQ(PccFailureReason(-0.05, 1.0, "runner"),
            "PCC comparison failed. Calculated: pcc=-0.05. Required: pcc=1.0.");
  EXPECT_EQ(PccFailureReason(std::nullopt, 0.97, "runner"),
            "PCC comparison failed. Calculated: pcc=nan. Required: pcc=0.97.");
  EXPECT_EQ(PccFailureReason(std::nan(""), 0.97, "short"),
            "PCC comparison failed (calc nan, required 0.97)");
}

TEST(NightlyPolicy, TheLowestThresholdFollowsTheKeysParallelism) {
  // 0.933: nonsense under the default (0.97), a near miss where the lowest is 0.90.
  const std::vector<v1::NightlyRecord> runs = {Incorrect(0.933), Incorrect(0.933)};
  EXPECT_EQ(Decided(kPassing, runs, {}).nightly().kind(), "disable_pcc");
  RuleOptions low = WithPolicy({}, Read("lowest: {default: 0.97, single_device: 0.9}\n"));
  auto o = Decided(kPassing, runs, low);
  EXPECT_EQ(o.nightly().kind(), "lower_pcc");
  EXPECT_EQ(Set(o, "required_pcc"), "0.930");  // floored
  RuleOptions tp = WithPolicy({}, Read("lowest: {default: 0.97, tensor_parallel: 0.9}\n"));
  EXPECT_EQ(Decided(kPassing, runs, tp).nightly().kind(), "disable_pcc");
}

TEST(NightlyPolicy, GridAndMarginSetTheFloor) {
  const std::vector<v1::NightlyRecord> runs = {Incorrect(0.9882), Incorrect(0.9882)};
  EXPECT_EQ(Set(Decided(kPassing, runs, {}), "required_pcc"), "0.980");
  RuleOptions fine = WithPolicy({}, Read("grid: 0.005\nmargin: 0\n"));
  auto o = Decided(kPassing, runs, fine);
  EXPECT_EQ(Set(o, "required_pcc"), "0.985");
  EXPECT_EQ(o.nightly().pcc_comment(), "pcc 0.9882 on n150");
  RuleOptions bare = WithPolicy({}, Read("pcc_comment: none\n"));
  EXPECT_EQ(Decided(kPassing, runs, bare).nightly().pcc_comment(), "");
}

TEST(NightlyPolicy, ReasonFormsAndBringupStatusOfSkips) {
  auto hang = Hang();
  hang.set_error_message("Model timed out during compilation");
  const std::vector<v1::NightlyRecord> runs = {hang, hang};
  auto fixed = Decided(kPassing, runs, {});
  EXPECT_EQ(Set(fixed, "reason"), "Hang");
  EXPECT_EQ(Set(fixed, "bringup_status"), "FAILED_RUNTIME");
  RuleOptions own = WithPolicy({}, Read("hang_reason: message\nskip_bringup: omit\n"));
  auto o = Decided(kPassing, runs, own);
  EXPECT_EQ(Set(o, "status"), "NOT_SUPPORTED_SKIP");
  EXPECT_EQ(Set(o, "reason"), "Model timed out during compilation");
  EXPECT_EQ(Set(o, "bringup_status"), "<unset>");
  // A run that left no message of its own gets the fixed form.
  const std::vector<v1::NightlyRecord> bare = {Hang(), Hang()};
  EXPECT_EQ(Set(Decided(kPassing, bare, own), "reason"), "Hang");
}

TEST(NightlyPolicy, AnUnknownStageIsWrittenOrLeftOut) {
  const std::vector<v1::NightlyRecord> runs = {Fail("UNKNOWN", "ValueError: Error code: 13"),
                                               Fail("UNKNOWN", "ValueError: Error code: 13")};
  // Engineers leave out a stage they do not know (the default).
  auto o = Decided(kPassing, runs, {});
  EXPECT_EQ(Set(o, "status"), "KNOWN_FAILURE_XFAIL");
  EXPECT_EQ(Set(o, "bringup_status"), "<unset>");
  EXPECT_EQ(Set(o, "reason"), "ValueError: Error code: 13");
  RuleOptions write = WithPolicy({}, Read("unknown_stage: write\n"));
  EXPECT_EQ(Set(Decided(kPassing, runs, write), "bringup_status"), "UNKNOWN");
}

// A sweep's policy travels as text in its options (coordinator -> agents -> report): every knob,
// free text with quotes and '#' included, and every source come back as they were.
TEST(NightlyPolicy, ThePolicyInASweepsOptionsComesBackWhole) {
  Policy p = Read(
      "grid: 0.005\n"
      "enable: above\n"
      "lowest: {default: 0.95, tensor_parallel-training: 0.85}\n"
      "nonsense: xfail\n"
      "skip_bringup: omit\n"
      "hang_reason: 'Hangs in \"compile\" # see the issue'\n"
      "crash_reason: signal\n");
  p.sources["oom_reason"] = "learned from 2 changes, newest abc1234 2026-08-01 k";
  p.oom_reason = "Host OOM: killed (see #123)";
  RuleOptions o;
  o = WithPolicy(o, p);
  const RuleOptions back = RuleOptionsFrom(ToProto(o));
  EXPECT_EQ(PolicyYaml(back.policy), PolicyYaml(p));
  EXPECT_EQ(back.policy.hang_reason, "Hangs in \"compile\" # see the issue");
  EXPECT_EQ(back.policy.oom_reason, "Host OOM: killed (see #123)");
  EXPECT_EQ(back.policy.Lowest("tensor_parallel", "training"), 0.85);
  EXPECT_EQ(back.pcc_step, 0.005);
  EXPECT_EQ(back.pcc_far_below, 0.95);
  EXPECT_EQ(back.policy.sources, p.sources);
  // Options without a policy (an older sweep): the pcc_* numbers over the defaults.
  v1::NightlyOptions old;
  old.set_pcc_step(0.02);
  EXPECT_EQ(RuleOptionsFrom(old).policy.grid, 0.02);
  EXPECT_EQ(RuleOptionsFrom(old).policy.nonsense, "disable_pcc");
}

TEST(NightlyPolicy, ASweepFollowsTheLearnedPolicyThenItsFileThenItsFlags) {
  Policy learned;
  learned.nonsense = "xfail";
  learned.grid = 0.001;
  learned.sources = {{"nonsense", "learned from 3 changes"}, {"grid", "learned from 4 changes"}};
  v1::NightlyOptions asked;
  asked.set_policy_file("ops/policy.yaml");
  asked.set_policy_text("pcc_comment: none\ngrid: 0.01\n");
  asked.set_pcc_far_below(0.9);
  auto r = ResolvePolicy(asked, &learned, "5 maintenance round(s)");
  ASSERT_TRUE(r.ok()) << r.status();
  const Policy p = RuleOptionsFrom(*r).policy;
  EXPECT_EQ(p.nonsense, "xfail");  // learned, the file silent on it
  EXPECT_EQ(p.sources.at("nonsense"), "learned from 3 changes");
  EXPECT_EQ(p.grid, 0.01);  // the file over the learned value
  EXPECT_EQ(p.sources.at("grid"), "ops/policy.yaml:2");
  EXPECT_EQ(p.pcc_comment, "none");
  EXPECT_EQ(p.Lowest("", ""), 0.9);  // the flag over both
  EXPECT_EQ(p.sources.at("lowest"), "--pcc-far-below");
  EXPECT_EQ(p.sources.count("hang_reason"), 0u);  // default
  EXPECT_EQ(r->policy_learned_from(), "5 maintenance round(s)");
  // What was asked stays as asked.
  EXPECT_EQ(r->policy_file(), "ops/policy.yaml");
  EXPECT_EQ(r->pcc_step(), 0);

  // --no-learn: the defaults under the file.
  asked.set_no_learn(true);
  r = ResolvePolicy(asked, &learned, "5 maintenance round(s)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(RuleOptionsFrom(*r).policy.nonsense, "disable_pcc");
  EXPECT_EQ(r->policy_learned_from(), "");
  // No history read (a recheck of a checkout without one): the defaults.
  asked.set_no_learn(false);
  r = ResolvePolicy(asked, nullptr, "");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(RuleOptionsFrom(*r).policy.nonsense, "disable_pcc");
}

TEST(NightlyPolicy, ASweepsPolicyErrorsNameTheFileAndLine) {
  v1::NightlyOptions asked;
  asked.set_policy_file("ops/policy.yaml");
  asked.set_policy_text("grid: 0.01\nnonsense: maybe\n");
  auto r = ResolvePolicy(asked, nullptr, "");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("ops/policy.yaml:2: nonsense: 'maybe' is not one of"));
  EXPECT_FALSE(CheckAskedPolicy(asked).ok());
  // The resolved fields are the coordinator's.
  v1::NightlyOptions forged;
  forged.set_policy_yaml("grid: 0.5\n");
  EXPECT_THAT(CheckAskedPolicy(forged).message(), HasSubstr("resolved by the coordinator"));
  // A flag's margin against the file's grid.
  v1::NightlyOptions clash;
  clash.set_policy_file("p.yaml");
  clash.set_policy_text("grid: 0.01\n");
  clash.set_pcc_margin(0.02);
  r = ResolvePolicy(clash, nullptr, "");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("margin (0.02, from --pcc-margin)"));
  EXPECT_THAT(r.status().message(), HasSubstr("grid (0.01, from p.yaml:1)"));
}

}  // namespace
}  // namespace triage::nightly
