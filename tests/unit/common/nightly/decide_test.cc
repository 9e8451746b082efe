// The decision of docs/nightly.md, section 3: confirmation runs against the nightly.

#include "common/nightly/decide.h"

#include "gtest/gtest.h"
#include "tests/unit/common/nightly/nightly_test_support.h"

namespace triage::nightly {
namespace {

using namespace testing;  // NOLINT

// A shard entry carrying the candidate the rules made of these records on this YAML.
v1::ShardEntry CandidateFor(const std::string& fields, std::vector<v1::NightlyRecord> records) {
  OneEntry e = Entry(fields);
  History h;
  h.test_function = "test_all_models_torch";
  h.key = e.entry()->key;
  h.arch = "n150";
  h.records = std::move(records);
  Judgement j = Judge(h, Resolve(e.entry(), "n150"), {});
  EXPECT_EQ(j.kind, Judgement::Kind::kCandidate);
  v1::ShardEntry se;
  se.set_key(h.key);
  se.set_file(e.doc.path());
  *se.mutable_nightly() = j.candidate;
  return se;
}

// "set status=EXPECTED_PASSING; del reason" in the edit's order.
std::string EditText(const v1::EntryOutcome& o) {
  std::string out;
  for (const auto& f : o.edit().set()) {
    out += "set " + f.name() + "=";
    switch (f.value().kind_case()) {
      case v1::YamlValue::kStringValue:
        out += f.value().string_value();
        break;
      case v1::YamlValue::kBoolValue:
        out += f.value().bool_value() ? "true" : "false";
        break;
      case v1::YamlValue::kFloatValue: {
        char buf[16];
        std::snprintf(buf, sizeof(buf), "%.2f", f.value().float_value());
        out += buf;
        break;
      }
      default:
        out += "?";
    }
    out += "; ";
  }
  for (const auto& d : o.edit().delete_()) out += "del " + d + "; ";
  return out;
}

constexpr char kXfail[] =
    "    status: KNOWN_FAILURE_XFAIL\n    bringup_status: FAILED_RUNTIME\n"
    "    reason: \"TT_FATAL @ buffer.cpp:12: bad page\"\n";
constexpr char kPassing[] = "    status: EXPECTED_PASSING\n";

TEST(NightlyDecide, APromotionTheFleetConfirmsStands) {
  auto e = CandidateFor(kXfail, {XfailPass(), XfailPass()});
  auto o = DecideNightly(e, {Pass(), Pass()}, {}, DecideMode::kConfirm);
  EXPECT_TRUE(o.changed());
  EXPECT_EQ(o.verdict(), "promote");
  EXPECT_EQ(o.nightly().decision(), "confirmed");
  EXPECT_EQ(EditText(o), "set status=EXPECTED_PASSING; del reason; del bringup_status; ");
  EXPECT_EQ(o.nightly().confirmations_size(), 2);
  EXPECT_EQ(o.nightly().seen(), "pass (pcc 0.9990), pass (pcc 0.9990)");
}

TEST(NightlyDecide, AnyRunThatDisagreesMakesItFlakyAndChangesNothing) {
  auto e = CandidateFor(kXfail, {XfailPass(), XfailPass()});
  auto o = DecideNightly(e, {Pass(), Fail("FAILED_RUNTIME", "TT_FATAL @ buffer.cpp:12: bad page")},
                         {}, DecideMode::kConfirm);
  EXPECT_FALSE(o.changed());
  EXPECT_EQ(o.verdict(), "flaky");
  EXPECT_EQ(o.nightly().decision(), "flaky");
  ASSERT_EQ(o.review_size(), 1);
  EXPECT_NE(o.review(0).find("the fleet pass (pcc 0.9990), fail"), std::string::npos);
}

TEST(NightlyDecide, ThresholdsTakeTheWorstPccOfEveryRun) {
  // The nightly passed at 0.995; a confirmation run measured 0.984: promoted with 0.98.
  auto e = CandidateFor(kXfail, {XfailPass(0.995), XfailPass(0.996)});
  auto o = DecideNightly(e, {Pass(0.997), Incorrect(0.984)}, {}, DecideMode::kConfirm);
  EXPECT_TRUE(o.changed());
  EXPECT_EQ(EditText(o),
            "set status=EXPECTED_PASSING; set required_pcc=0.98; del reason; del bringup_status; ");
  EXPECT_EQ(o.nightly().pcc_comment(), "pcc 0.9840 on n150");
  EXPECT_DOUBLE_EQ(o.nightly().worst_pcc(), 0.984);
}

TEST(NightlyDecide, ANearMissWhoseConfirmationIsFarBelowDisablesTheCheck) {
  auto e = CandidateFor(kPassing, {Incorrect(0.975), Incorrect(0.976)});
  auto lowered = DecideNightly(e, {Incorrect(0.977), Incorrect(0.975)}, {}, DecideMode::kConfirm);
  EXPECT_EQ(lowered.verdict(), "lower_pcc");
  EXPECT_EQ(EditText(lowered), "set required_pcc=0.97; ");
  auto disabled = DecideNightly(e, {Incorrect(0.6), Incorrect(0.975)}, {}, DecideMode::kConfirm);
  EXPECT_EQ(disabled.verdict(), "disable_pcc");
  EXPECT_EQ(EditText(disabled), "set assert_pcc=false; ");
  // A confirmation that clears the threshold: the near miss was noise.
  auto noise = DecideNightly(e, {Pass(0.995), Incorrect(0.975)}, {}, DecideMode::kConfirm);
  EXPECT_EQ(noise.verdict(), "flaky");
}

TEST(NightlyDecide, ADemotionTakesTheFleetsStageAndReason) {
  auto e = CandidateFor(kPassing, {Fail("FAILED_TTMLIR_COMPILATION", "error: 'ttir.conv2d' op a"),
                                   Fail("FAILED_TTMLIR_COMPILATION", "error: 'ttir.conv2d' op a")});
  auto run = Fail("FAILED_TTMLIR_COMPILATION", "error: 'ttir.conv2d' op expected bias shape");
  run.set_real_error("RuntimeError: error: 'ttir.conv2d' op expected bias shape");
  auto o = DecideNightly(e, {run, run}, {}, DecideMode::kConfirm);
  EXPECT_TRUE(o.changed());
  EXPECT_EQ(o.verdict(), "demote_xfail");
  EXPECT_EQ(EditText(o),
            "set status=KNOWN_FAILURE_XFAIL; set bringup_status=FAILED_TTMLIR_COMPILATION; "
            "set reason=error: 'ttir.conv2d' op expected bias shape; ");
}

TEST(NightlyDecide, HangsAreSkippedWithARuntimeStage) {
  auto e = CandidateFor(kPassing, {Hang(), Hang()});
  auto o = DecideNightly(e, {Hang(), Hang()}, {}, DecideMode::kConfirm);
  EXPECT_EQ(EditText(o),
            "set status=NOT_SUPPORTED_SKIP; set bringup_status=FAILED_RUNTIME; set reason=Hang; ");
  // A hang the fleet sees as an ordinary failure does not take the job down: not confirmed.
  EXPECT_EQ(
      DecideNightly(e, {Hang(), Fail("FAILED_RUNTIME", "x")}, {}, DecideMode::kConfirm).verdict(),
      "flaky");
}

// The decision labels it; no review flag on each entry (a sweep-wide choice, said once in the PR).
TEST(NightlyDecide, NoConfirmDecidesFromTheNightlyAloneAndSaysSo) {
  auto e = CandidateFor(kPassing, {Incorrect(0.975), Incorrect(0.976)});
  auto o = DecideNightly(e, {}, {}, DecideMode::kNoConfirm);
  EXPECT_TRUE(o.changed());
  EXPECT_EQ(o.nightly().decision(), "no_confirm");
  EXPECT_EQ(EditText(o), "set required_pcc=0.97; ");
  EXPECT_EQ(o.review_size(), 0);
}

TEST(NightlyDecide, UnconfirmedAndSkippedChangeNothing) {
  auto e = CandidateFor(kXfail, {XfailPass(), XfailPass()});
  auto budget = DecideNightly(e, {}, {}, DecideMode::kUnconfirmed);
  EXPECT_FALSE(budget.changed());
  EXPECT_EQ(budget.verdict(), "unconfirmed");
  auto skipped = DecideNightly(e, {Rec(v1::NightlyRecord::SKIPPED, "")}, {}, DecideMode::kConfirm);
  EXPECT_FALSE(skipped.changed());
  EXPECT_EQ(skipped.verdict(), "unconfirmed");
}

TEST(NightlyDecide, ARefreshNeedsTheFleetToSeeTheNewFailureToo) {
  auto e = CandidateFor(kXfail, {Fail("FAILED_TTMLIR_COMPILATION", "error: 'ttir.max' op illegal",
                                      v1::NightlyRecord::XFAILED)});
  auto fresh = Fail("FAILED_TTMLIR_COMPILATION", "error: 'ttir.max' op illegal");
  auto o = DecideNightly(e, {fresh, fresh}, {}, DecideMode::kConfirm);
  EXPECT_EQ(o.verdict(), "refresh_reason");
  EXPECT_EQ(EditText(o),
            "set bringup_status=FAILED_TTMLIR_COMPILATION; set reason=error: 'ttir.max' op "
            "illegal; ");
  // The fleet fails as the YAML says: the nightly's failure did not reproduce.
  auto old = Fail("FAILED_RUNTIME", "TT_FATAL @ buffer.cpp:12: bad page");
  EXPECT_EQ(DecideNightly(e, {old, old}, {}, DecideMode::kConfirm).verdict(), "flaky");
}

}  // namespace
}  // namespace triage::nightly

namespace triage::nightly {
namespace {

using namespace testing;  // NOLINT

// A recheck of a NOT_SUPPORTED_SKIP entry (docs/nightly.md, "Rechecking skipped entries").
v1::ShardEntry Recheck(const std::string& reason = "Hang",
                       const std::string& bringup = "FAILED_RUNTIME") {
  v1::ShardEntry se;
  se.set_key("m/pytorch-Base-single_device-inference");
  se.set_file("tests/runner/test_config/torch/test_config_inference_single_device.yaml");
  v1::NightlyCandidate& c = *se.mutable_nightly();
  c.set_kind("recheck");
  c.set_arch("n150");
  c.set_status("NOT_SUPPORTED_SKIP");
  c.set_reason(reason);
  c.set_bringup_status(bringup);
  return se;
}

TEST(DecideRecheck, TheRunsPickTheKind) {
  struct Row {
    const char* what;
    std::vector<v1::NightlyRecord> runs;
    const char* verdict;  // the outcome's verdict
    bool changed;
    const char* edit;  // EditText of the outcome
  };
  const std::vector<Row> rows = {
      {"passes twice",
       {Pass(), Pass()},
       "promote",
       true,
       "set status=EXPECTED_PASSING; del reason; del bringup_status; "},
      {"a near miss twice",
       {Incorrect(0.975), Incorrect(0.976)},
       "promote",
       true,
       "set status=EXPECTED_PASSING; set required_pcc=0.97; del reason; del bringup_status; "},
      {"fails cleanly twice",
       {Fail("FAILED_TTMLIR_COMPILATION", "error: 'ttir.conv' op bad"),
        Fail("FAILED_TTMLIR_COMPILATION", "error: 'ttir.conv' op bad")},
       "unskip_xfail",
       true,
       "set status=KNOWN_FAILURE_XFAIL; set bringup_status=FAILED_TTMLIR_COMPILATION; set "
       "reason=error: 'ttir.conv' op bad; "},
      {"crashes twice", {Crash(6), Crash(6)}, "refresh_skip", true, ""},
      {"hangs twice, as its reason says", {Hang(), Hang()}, "already", false, ""},
      {"pass then fail", {Pass(), Fail("FAILED_RUNTIME", "boom")}, "flaky", false, ""},
      {"one pass is no confirmation", {Pass()}, "flaky", false, ""},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.what);
    const v1::EntryOutcome o = DecideRecheck(Recheck(), row.runs, {});
    EXPECT_EQ(o.verdict(), row.verdict);
    EXPECT_EQ(o.changed(), row.changed);
    if (std::string(row.edit).size() > 0) {
      EXPECT_EQ(EditText(o), row.edit);
    }
    if (!row.changed) {
      EXPECT_EQ(o.edit().set_size(), 0);
    }
  }
  // A crash refreshes the skip's reason to the crash's line, and stays NOT_SUPPORTED_SKIP.
  const v1::EntryOutcome crash = DecideRecheck(Recheck(), {Crash(6), Crash(6)}, {});
  EXPECT_NE(EditText(crash).find("set status=NOT_SUPPORTED_SKIP; "), std::string::npos)
      << EditText(crash);
  EXPECT_NE(crash.reason().find("signal 6"), std::string::npos) << crash.reason();
  EXPECT_EQ(crash.nightly().kind(), "refresh_skip");
  // A skip whose reason names the crash already stays as a person wrote it, without a
  // bringup_status and without the signal's words; one that names something else is refreshed.
  auto too_large = Crash(6);
  too_large.set_real_error("Too large for single chip");
  const v1::EntryOutcome kept =
      DecideRecheck(Recheck("Too large for single chip - https://example.com/issues/1", ""),
                    {too_large, too_large}, {});
  EXPECT_EQ(kept.verdict(), "already");
  EXPECT_FALSE(kept.changed());
  const v1::EntryOutcome stale =
      DecideRecheck(Recheck("Can't convert shape rank", ""), {too_large, too_large}, {});
  EXPECT_EQ(stale.verdict(), "refresh_skip");
  EXPECT_TRUE(stale.changed());
  // Runs that disagree say so.
  const v1::EntryOutcome flaky = DecideRecheck(Recheck(), {Pass(), Crash(6)}, {});
  ASSERT_EQ(flaky.review_size(), 1);
  EXPECT_NE(flaky.review(0).find("recheck: the runs disagreed"), std::string::npos);
}

}  // namespace
}  // namespace triage::nightly

namespace triage::nightly {
namespace {

using namespace testing;  // NOLINT

TEST(NightlyDecide, ANewEntryForAFailingTestIsWrittenAsADemotionWould) {
  History h;
  h.test_function = "test_all_models_torch";
  h.key = "m/pytorch-New-single_device-inference";
  h.arch = "n150";
  const auto fail = Fail("FAILED_TTMLIR_COMPILATION", "error: failed to legalize 'ttir.gather'");
  h.records = {fail, fail};
  Judgement j = Judge(h, Resolve(nullptr, "n150"), {});
  ASSERT_EQ(j.kind, Judgement::Kind::kCandidate);
  v1::ShardEntry se;
  se.set_key(h.key);
  *se.mutable_nightly() = j.candidate;
  auto o = DecideNightly(se, {fail, fail}, {}, DecideMode::kConfirm);
  EXPECT_TRUE(o.changed());
  EXPECT_EQ(o.nightly().kind(), "add_config");
  EXPECT_EQ(EditText(o),
            "set status=KNOWN_FAILURE_XFAIL; set bringup_status=FAILED_TTMLIR_COMPILATION; "
            "set reason=error: failed to legalize 'ttir.gather'; ");
  // A fleet run that passes: the runs disagree, no entry.
  EXPECT_FALSE(DecideNightly(se, {Pass(), fail}, {}, DecideMode::kConfirm).changed());
}

}  // namespace
}  // namespace triage::nightly
