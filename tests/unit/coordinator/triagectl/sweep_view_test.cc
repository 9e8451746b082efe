#include "coordinator/triagectl/sweep_view.h"

#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace triage::ctl::farm {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::Sweep Running(int decided, int total) {
  v1::Sweep s;
  s.set_id("sw-0007");
  s.set_state("running");
  s.set_eta_seconds(125);
  s.mutable_entries()->set_total(total);
  s.mutable_entries()->set_decided(decided);
  s.mutable_entries()->set_done(decided);
  (*s.mutable_entries()->mutable_by_outcome())["unchanged"] = decided;
  (*s.mutable_shards_by_state())["queued"] = 3;
  return s;
}

TEST(ProgressLineTest, CountsAreProvisionalUntilTheMerge) {
  v1::Sweep s = Running(9, 26);
  s.mutable_entries()->set_rechecking(2);
  const std::string line = ProgressLine(s);
  EXPECT_THAT(line, HasSubstr("9/26 entries decided"));
  EXPECT_THAT(line, HasSubstr("(provisional until the merge; 2 rechecked)"));
  EXPECT_THAT(line, HasSubstr("| ETA 2m5s"));
  s.set_state("succeeded");
  s.mutable_entries()->set_rechecking(0);
  EXPECT_THAT(ProgressLine(s), Not(HasSubstr("provisional")));
  EXPECT_THAT(ProgressLine(s), HasSubstr("| succeeded"));
}

TEST(ProgressLineTest, StatusSaysProvisionalToo) {
  std::ostringstream out;
  PrintSweep(out, Running(3, 4));
  EXPECT_THAT(out.str(), HasSubstr("3/4 decided"));
  EXPECT_THAT(out.str(), HasSubstr("(provisional until the merge)"));
}

// A budget that left candidates unconfirmed says what confirming all of them takes; a recheck
// sweep has no nightly line (it reads no run).
TEST(ProgressLineTest, StatusSaysWhatFullConfirmationNeeds) {
  v1::Sweep s = Running(3, 4);
  auto* n = s.mutable_nightly();
  n->set_runs(2);
  n->set_unconfirmed(1080);
  n->set_confirm_seconds_planned(7200);
  n->set_confirm_seconds_needed(9.3 * 3600);
  std::ostringstream out;
  PrintSweep(out, s);
  EXPECT_THAT(out.str(), HasSubstr("unconfirmed=1080"));
  EXPECT_THAT(out.str(), HasSubstr("budget    confirmations of 2.0 device-hours run, 9.3 needed "
                                   "to confirm every candidate (--max-device-hours 10)"));
  EXPECT_THAT(out.str(), HasSubstr("nightly   2 runs"));
  s.mutable_recheck()->set_selected(40);
  std::ostringstream recheck;
  PrintSweep(recheck, s);
  EXPECT_THAT(recheck.str(), Not(HasSubstr("nightly   ")));
  EXPECT_THAT(recheck.str(), HasSubstr("recheck   40 of"));
}

// The problems are printed first, then the line that points at them: "above", not "below".
TEST(ProgressPrinterTest, ABlockedSweepsLinePointsAtTheProblemsPrintedBeforeIt) {
  v1::Sweep s = Running(2, 26);
  s.set_state("blocked");
  s.add_problems("2 shards need arch p150 with executor native");
  std::ostringstream out;
  ProgressPrinter printer(out, /*tty=*/false);
  printer.Show(s);
  const std::string text = out.str();
  const auto problem = text.find("problem: 2 shards need arch p150");
  const auto blocked = text.find("BLOCKED: needs a person (problems above)");
  ASSERT_NE(problem, std::string::npos) << text;
  ASSERT_NE(blocked, std::string::npos) << text;
  EXPECT_LT(problem, blocked) << text;
  s.set_over_budget(true);
  s.set_state("blocked");
  EXPECT_THAT(ProgressLine(s), HasSubstr("failure budget spent, needs a person (problems above)"));
}

// Without a terminal, a line is printed when the entries or the state change, not per shard move.
TEST(ProgressPrinterTest, PrintsALinePerChangeOfEntriesOrState) {
  std::ostringstream out;
  ProgressPrinter printer(out, /*tty=*/false);
  v1::Sweep s = Running(1, 4);
  printer.Show(s);
  (*s.mutable_shards_by_state())["queued"] = 2;
  printer.Show(s);  // a shard moved: no new line
  s = Running(2, 4);
  printer.Show(s);
  std::istringstream lines(out.str());
  int n = 0;
  for (std::string l; std::getline(lines, l);) ++n;
  EXPECT_EQ(n, 2) << out.str();
}

// `sweep list` shows what README says: entries decided, review, shards by state, ETA, problems.
TEST(SweepListTest, ARowHasTheColumnsTheHeaderNames) {
  v1::Sweep s = Running(9, 26);
  s.mutable_entries()->set_review(4);
  s.add_problems("a problem");
  const auto header = SweepListHeader();
  const auto row = SweepListRow(s);
  ASSERT_EQ(header.size(), row.size());
  auto cell = [&](const std::string& column) {
    for (std::size_t i = 0; i < header.size(); ++i) {
      if (header[i] == column) return row[i];
    }
    ADD_FAILURE() << "no column " << column;
    return std::string();
  };
  EXPECT_EQ(cell("DECIDED"), "9/26");
  EXPECT_EQ(cell("REVIEW"), "4");
  EXPECT_EQ(cell("SHARDS"), "queued=3");
  EXPECT_EQ(cell("ETA"), "2m5s");
  EXPECT_EQ(cell("PROBLEMS"), "1");
  s.set_state("succeeded");
  EXPECT_EQ(SweepListRow(s)[6], "-") << "an ended sweep has no ETA";
}

}  // namespace
}  // namespace triage::ctl::farm
