// The rule table of docs/nightly.md, section 2: one test per row (and per boundary).

#include "common/nightly/rules.h"

#include "common/nightly/behaviour.h"
#include "gtest/gtest.h"
#include "tests/unit/common/nightly/nightly_test_support.h"

namespace triage::nightly {
namespace {

using namespace testing;  // NOLINT
using Kind = Judgement::Kind;

History Of(std::vector<v1::NightlyRecord> records, std::string arch = "n150") {
  History h;
  h.test_function = "test_all_models_torch";
  h.key = "m/pytorch-Base-single_device-inference";
  h.arch = std::move(arch);
  h.records = std::move(records);
  return h;
}

Judgement JudgeOn(const std::string& fields, std::vector<v1::NightlyRecord> records,
                  RuleOptions o = {}) {
  OneEntry e = Entry(fields);
  EXPECT_TRUE(e.doc.ok());
  return Judge(Of(std::move(records)), Resolve(e.entry(), "n150"), o);
}

std::string KindOf(const Judgement& j) {
  switch (j.kind) {
    case Kind::kNothing:
      return "nothing";
    case Kind::kCandidate:
      return j.candidate.kind();
    case Kind::kAlready:
      return "already";
    case Kind::kCapacity:
      return "capacity";
  }
  return "?";
}

constexpr char kXfail[] =
    "    status: KNOWN_FAILURE_XFAIL\n    bringup_status: FAILED_RUNTIME\n"
    "    reason: \"TT_FATAL @ buffer.cpp:12: bad page\"\n";
constexpr char kPassing[] = "    status: EXPECTED_PASSING\n";

TEST(NightlyBehaviour, ReadsTheRunnersRecords) {
  EXPECT_EQ(BehaviourOf(Pass()), Behaviour::kPass);
  EXPECT_EQ(BehaviourOf(XfailPass()), Behaviour::kPass);
  EXPECT_EQ(BehaviourOf(Incorrect(0.9)), Behaviour::kIncorrect);
  EXPECT_EQ(BehaviourOf(Incorrect(0.9, v1::NightlyRecord::XFAILED)), Behaviour::kIncorrect);
  EXPECT_EQ(BehaviourOf(Fail("FAILED_RUNTIME", "TT_FATAL")), Behaviour::kFail);
  EXPECT_EQ(BehaviourOf(Fail("FAILED_RUNTIME", "x", v1::NightlyRecord::XFAILED)), Behaviour::kFail);
  EXPECT_EQ(BehaviourOf(Hang()), Behaviour::kHang);
  EXPECT_EQ(BehaviourOf(Crash(6)), Behaviour::kCrash);
  EXPECT_EQ(BehaviourOf(Crash(9)), Behaviour::kOomKill);
  EXPECT_EQ(BehaviourOf(Rec(v1::NightlyRecord::SKIPPED, "")), Behaviour::kSkipped);
  // The device's own allocator running out is a runtime failure, not the host's memory.
  EXPECT_EQ(BehaviourOf(Fail("FAILED_RUNTIME",
                             "Out of Memory: Not enough space to allocate 1048576 B DRAM buffer "
                             "across 12 banks, where each bank needs to store 87382 B")),
            Behaviour::kFail);
  EXPECT_EQ(BehaviourOf(Fail("UNKNOWN", "MemoryError: Unable to allocate")), Behaviour::kOomKill);
  EXPECT_EQ(BehaviourOf(Fail("UNKNOWN", "Fatal Python error: Aborted")), Behaviour::kCrash);
}

TEST(NightlyBehaviour, ReasonIsTheFirstLineWithoutTheAllocatorsState) {
  EXPECT_EQ(ErrorReason(Fail("FAILED_RUNTIME",
                             "Out of Memory: Not enough space to allocate 1048576 B DRAM buffer "
                             "across 12 banks, where each bank needs to store 87382 B\nmore")),
            "Out of Memory: Not enough space to allocate 1048576 B DRAM buffer across 12 banks, "
            "where each bank needs to store 87382 B");
  // The sizes asked for are the bug's; what else was allocated then is the run's.
  EXPECT_EQ(ErrorReason(Fail("FAILED_RUNTIME",
                             "Out of Memory: Not enough space to allocate 135790592 B DRAM buffer "
                             "across 11 banks, where each bank needs to store 11317248 B, but bank "
                             "size is 1073741792 B (allocated: 1055220960 B, free: 18520832 B, "
                             "largest free block: 9253856 B)")),
            "Out of Memory: Not enough space to allocate 135790592 B DRAM buffer across 11 banks, "
            "where each bank needs to store 11317248 B, but bank size is 1073741792 B");
  EXPECT_EQ(ErrorReason(Crash(6)), "crashed with signal 6 (SIGABRT)");
  // A confirmation run that left no testcase: its log's reason is already the crash's.
  auto confirmed = Crash(6);
  confirmed.set_real_error("crashed with signal 6 (SIGABRT)");
  EXPECT_EQ(ErrorReason(confirmed), "crashed with signal 6 (SIGABRT)");
}

TEST(NightlyRules, Row1PromotesAnXfailThatPassedInTheLatestRuns) {
  Judgement j = JudgeOn(kXfail, {XfailPass(), XfailPass()});
  EXPECT_EQ(KindOf(j), "promote");
  EXPECT_EQ(j.candidate.expect(), "pass");
  EXPECT_EQ(j.candidate.runs(), 2);
  EXPECT_NE(j.candidate.rule().find("RM_XFAIL"), std::string::npos);
}

TEST(NightlyRules, Row1NeedsEveryOneOfTheLatestPromoteRuns) {
  // A pass after a failure is one pass: reviewers block a promotion of a test that passed once.
  EXPECT_EQ(KindOf(JudgeOn(kXfail, {Fail("FAILED_RUNTIME", "TT_FATAL @ buffer.cpp:12: bad page",
                                         v1::NightlyRecord::XFAILED),
                                    XfailPass()})),
            "nothing");
  // With one run given, one pass is all there is.
  EXPECT_EQ(KindOf(JudgeOn(kXfail, {XfailPass()})), "promote");
  RuleOptions three;
  three.promote_runs = 3;
  EXPECT_EQ(KindOf(JudgeOn(
                kXfail,
                {Fail("FAILED_RUNTIME", "x", v1::NightlyRecord::XFAILED), XfailPass(), XfailPass()},
                three)),
            "nothing");
}

TEST(NightlyRules, Rows2And3PromoteAnIncorrectResultByItsPcc) {
  Judgement near = JudgeOn(kXfail, {Incorrect(0.985, v1::NightlyRecord::XFAILED),
                                    Incorrect(0.986, v1::NightlyRecord::XFAILED)});
  EXPECT_EQ(KindOf(near), "promote");
  EXPECT_EQ(near.candidate.expect(), "incorrect");
  EXPECT_NE(near.candidate.rule().find("lowered required_pcc"), std::string::npos);
  Judgement far = JudgeOn(kXfail, {Incorrect(0.6, v1::NightlyRecord::XFAILED)});
  EXPECT_EQ(KindOf(far), "promote");
  EXPECT_NE(far.candidate.rule().find("assert_pcc false"), std::string::npos);
}

TEST(NightlyRules, Row4EnablesThePccCheckAtTheFlooredPccUnlessItIsNonsense) {
  const std::string off = "    status: EXPECTED_PASSING\n    assert_pcc: false\n";
  EXPECT_EQ(KindOf(JudgeOn(off, {Pass(0.999), Pass(0.998)})), "enable_pcc");
  // Just under the default: on, at the floored PCC (policy enable: floor) ...
  EXPECT_EQ(KindOf(JudgeOn(off, {Incorrect(0.985, v1::NightlyRecord::PASSED)})), "enable_pcc");
  // ... but not a nonsense PCC.
  EXPECT_EQ(KindOf(JudgeOn(off, {Incorrect(0.6, v1::NightlyRecord::PASSED)})), "nothing");
  // enable: above, with the runner's buffer as margin: only what clears threshold + margin.
  RuleOptions above;
  above.policy.enable = "above";
  above.pcc_margin = 0.004;
  EXPECT_EQ(KindOf(JudgeOn(off, {Pass(0.993)}, above)), "nothing");
  // Against a lowered threshold.
  EXPECT_EQ(KindOf(JudgeOn("    status: EXPECTED_PASSING\n    assert_pcc: false\n"
                           "    required_pcc: 0.95\n",
                           {Incorrect(0.96, v1::NightlyRecord::PASSED)})),
            "enable_pcc");
}

TEST(NightlyRules, Row5RaisesALoweredThresholdToTheFlooredWorstPcc) {
  Judgement j =
      JudgeOn("    status: EXPECTED_PASSING\n    required_pcc: 0.90\n", {Pass(0.97), Pass(0.965)});
  EXPECT_EQ(KindOf(j), "raise_pcc");
  EXPECT_NE(j.candidate.rule().find("0.96"), std::string::npos);
  // No step gained: nothing.
  EXPECT_EQ(
      KindOf(JudgeOn("    status: EXPECTED_PASSING\n    required_pcc: 0.96\n", {Pass(0.965)})),
      "nothing");
  // The default is never "raised": it is already 0.99.
  EXPECT_EQ(KindOf(JudgeOn(kPassing, {Pass(0.9999)})), "nothing");
}

TEST(NightlyRules, Rows6And7ANearMissLowersAFarMissDisables) {
  EXPECT_EQ(KindOf(JudgeOn(kPassing, {Incorrect(0.975), Incorrect(0.976)})), "lower_pcc");
  EXPECT_EQ(KindOf(JudgeOn(kPassing, {Incorrect(0.97), Incorrect(0.5)})), "disable_pcc");
  EXPECT_EQ(KindOf(JudgeOn(kPassing, {Incorrect(std::nan(""))})), "disable_pcc");
  // One near miss after a good night: not a regression yet.
  EXPECT_EQ(KindOf(JudgeOn(kPassing, {Pass(0.995), Incorrect(0.975)})), "nothing");
}

TEST(NightlyRules, Row8DemotesAFailureOfTheLatestRegressionRuns) {
  Judgement j = JudgeOn(kPassing, {Fail("FAILED_TTMLIR_COMPILATION", "error: 'ttir.conv2d' op x"),
                                   Fail("FAILED_TTMLIR_COMPILATION", "error: 'ttir.conv2d' op x")});
  EXPECT_EQ(KindOf(j), "demote_xfail");
  EXPECT_EQ(KindOf(JudgeOn(kPassing, {Pass(), Fail("FAILED_RUNTIME", "x")})), "nothing");
  RuleOptions one;
  one.regression_runs = 1;
  EXPECT_EQ(KindOf(JudgeOn(kPassing, {Pass(), Fail("FAILED_RUNTIME", "x")}, one)), "demote_xfail");
}

TEST(NightlyRules, Row9HangsAndCrashesAreSkippedNeverXfailed) {
  EXPECT_EQ(KindOf(JudgeOn(kPassing, {Hang(), Hang()})), "demote_skip");
  EXPECT_EQ(KindOf(JudgeOn(kXfail, {Crash(6), Crash(11)})), "demote_skip");
}

TEST(NightlyRules, Rows10And11AHostMemoryKillIsCapacityWhenAnotherArchRanIt) {
  History h = Of({Crash(9), Crash(9)});
  h.completed_elsewhere = {"p150"};
  OneEntry e = Entry(kPassing);
  Judgement j = Judge(h, Resolve(e.entry(), "n150"), {});
  EXPECT_EQ(KindOf(j), "capacity");
  EXPECT_NE(j.candidate.rule().find("p150"), std::string::npos);
  EXPECT_EQ(KindOf(JudgeOn(kPassing, {Crash(9), Crash(9)})), "demote_skip");
}

TEST(NightlyRules, Row12RefreshesAStaleReasonOnly) {
  // The stage changed.
  EXPECT_EQ(KindOf(JudgeOn(kXfail, {Fail("FAILED_TTMLIR_COMPILATION", "error: 'ttir.max' op",
                                         v1::NightlyRecord::XFAILED)})),
            "refresh_reason");
  // Same stage, same error with other numbers: the reason stands.
  EXPECT_EQ(KindOf(JudgeOn(kXfail, {Fail("FAILED_RUNTIME", "TT_FATAL @ buffer.cpp:99: bad page",
                                         v1::NightlyRecord::XFAILED)})),
            "nothing");
  // Same stage, another error.
  EXPECT_EQ(KindOf(JudgeOn(kXfail, {Fail("FAILED_RUNTIME", "TT_THROW @ program.cpp:902: circular",
                                         v1::NightlyRecord::XFAILED)})),
            "refresh_reason");
}

TEST(NightlyRules, Row13ATestWithoutAnEntryGetsOneWithTheStatusItsRunsShow) {
  History h = Of({Pass(), Pass()});
  h.records.back().add_guidance("ADD_CONFIG");
  Judgement j = Judge(h, Resolve(nullptr, "n150"), {});
  EXPECT_EQ(KindOf(j), "add_config");
  EXPECT_EQ(j.candidate.expect(), "pass");
  EXPECT_TRUE(j.candidate.new_entry());
  // Failing in the latest runs: an entry all the same (KNOWN_FAILURE_XFAIL, or a skip for what
  // takes the job down); runs that disagree: nothing yet.
  Judgement fail = Judge(Of({Fail("FAILED_RUNTIME", "x"), Fail("FAILED_RUNTIME", "x")}),
                         Resolve(nullptr, "n150"), {});
  EXPECT_EQ(KindOf(fail), "add_config");
  EXPECT_EQ(fail.candidate.expect(), "fail");
  EXPECT_EQ(Judge(Of({Hang(), Hang()}), Resolve(nullptr, "n150"), {}).candidate.expect(), "hang");
  EXPECT_EQ(KindOf(Judge(Of({Fail("FAILED_RUNTIME", "x"), Hang()}), Resolve(nullptr, "n150"), {})),
            "nothing");
}

TEST(NightlyRules, Row14AlreadyAtTargetStateWhenTheRunnerHintedOtherwise) {
  // Promoted since the run: the runner still said RM_XFAIL.
  auto r = XfailPass();
  r.set_model_test_status("ModelTestStatus.KNOWN_FAILURE_XFAIL");
  EXPECT_EQ(KindOf(JudgeOn(kPassing, {r})), "already");
  // A passing test without hints is not reported at all.
  EXPECT_EQ(KindOf(JudgeOn(kPassing, {Pass()})), "nothing");
}

TEST(NightlyRules, SkippedRecordsSayNothing) {
  EXPECT_EQ(KindOf(JudgeOn(kXfail, {XfailPass(), Rec(v1::NightlyRecord::SKIPPED, "")})), "nothing");
  EXPECT_EQ(KindOf(JudgeOn("    status: NOT_SUPPORTED_SKIP\n", {Pass()})), "nothing");
}

TEST(NightlyRules, RuleP) {
  RuleOptions floor;  // the default: the worst PCC floored to the grid
  EXPECT_DOUBLE_EQ(FloorThreshold(0.9801, floor), 0.98);
  EXPECT_DOUBLE_EQ(FloorThreshold(0.98, floor), 0.98);
  EXPECT_DOUBLE_EQ(FloorThreshold(0.9899, floor), 0.98);
  RuleOptions o;  // with head room: one step lower when flooring leaves less than the margin
  o.pcc_margin = 0.004;
  EXPECT_DOUBLE_EQ(FloorThreshold(0.975, o), 0.97);
  EXPECT_DOUBLE_EQ(FloorThreshold(0.985, o), 0.98);
  EXPECT_DOUBLE_EQ(FloorThreshold(0.9801, o), 0.97);  // 0.98 would leave less than the margin
  EXPECT_DOUBLE_EQ(FloorThreshold(0.9712, o), 0.97);  // but never below the far-below line
  EXPECT_DOUBLE_EQ(FloorThreshold(0.9995, o), 0.99);
  EXPECT_DOUBLE_EQ(FloorThreshold(0.98, o), 0.97);
}

TEST(NightlyRules, MinDevicesByParallelismAndArch) {
  EXPECT_EQ(MinDevices("single_device", "n300-llmbox"), 1);
  EXPECT_EQ(MinDevices("tensor_parallel", "n300-llmbox"), 8);
  EXPECT_EQ(MinDevices("data_parallel", "n300"), 2);
  EXPECT_EQ(MinDevices("tensor_parallel", "p150"), 1);
}

TEST(NightlyRules, ResolvesPerField) {
  OneEntry e = Entry(
      "    status: EXPECTED_PASSING\n    required_pcc: 0.97\n    arch_overrides:\n"
      "      p150:\n        status: KNOWN_FAILURE_XFAIL\n        reason: \"x\"\n");
  OnArch n = Resolve(e.entry(), "n150");
  OnArch p = Resolve(e.entry(), "p150");
  EXPECT_EQ(n.status, "EXPECTED_PASSING");
  EXPECT_EQ(p.status, "KNOWN_FAILURE_XFAIL");
  EXPECT_EQ(p.reason, "x");
  EXPECT_DOUBLE_EQ(*p.required_pcc, 0.97);
  EXPECT_TRUE(p.assert_pcc);
}

}  // namespace
}  // namespace triage::nightly
