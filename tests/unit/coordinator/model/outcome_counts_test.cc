// The one way entries are counted (outcome_counts): labels, the arch that labels an entry, and
// the totals every view shows.

#include "coordinator/model/outcome_counts.h"

#include "gtest/gtest.h"

namespace triage::coord {
namespace {

v1::EntryOutcome Changed(const std::string& status, bool pcc_off = false) {
  v1::EntryOutcome o;
  o.set_changed(true);
  auto* f = o.mutable_edit()->add_set();
  f->set_name("status");
  f->mutable_value()->set_string_value(status);
  if (pcc_off) {
    auto* p = o.mutable_edit()->add_set();
    p->set_name("assert_pcc");
    p->mutable_value()->set_bool_value(false);
  }
  return o;
}

TEST(OutcomeCountsTest, Labels) {
  EXPECT_EQ(OutcomeLabel(v1::EntryOutcome{}), "unchanged");
  EXPECT_EQ(OutcomeLabel(Changed("EXPECTED_PASSING")), "EXPECTED_PASSING");
  EXPECT_EQ(OutcomeLabel(Changed("EXPECTED_PASSING", true)), "EXPECTED_PASSING (assert_pcc false)");
  v1::EntryOutcome reason;
  reason.set_changed(true);
  reason.mutable_edit()->add_set()->set_name("reason");
  EXPECT_EQ(OutcomeLabel(reason), "reason updated");

  std::map<std::string, std::string> by_arch = {{"", "probe"}, {"n150", "a"}, {"p150", "b"}};
  EXPECT_EQ(*ForFirstArch(by_arch, {"p150", "n150"}), "b");
  EXPECT_EQ(*ForFirstArch(by_arch, {"n300-llmbox"}), "probe");
  EXPECT_EQ(ForFirstArch(std::map<std::string, std::string>{}, {"n150"}), nullptr);
}

TEST(OutcomeCountsTest, ReviewIsOrthogonalToTheLabel) {
  using P = EntryTally::Phase;
  const auto c = CountEntries({{P::kDone, "EXPECTED_PASSING", true},
                               {P::kDone, "unchanged", true},
                               {P::kDone, "", false},
                               {P::kDone, "conflict", false},
                               {P::kRunning, "", false},
                               {P::kQueued, "", true}});
  EXPECT_EQ(c.total(), 6);
  EXPECT_EQ(c.done(), 4);
  EXPECT_EQ(c.running(), 1);
  EXPECT_EQ(c.queued(), 1);
  EXPECT_EQ(c.by_outcome().at("EXPECTED_PASSING"), 1);
  EXPECT_EQ(c.by_outcome().at("unchanged"), 1);
  EXPECT_EQ(c.by_outcome().at("no_result"), 1);
  EXPECT_EQ(c.by_outcome().at("conflict"), 1);
  EXPECT_EQ(c.by_outcome().count("review"), 0u);
  EXPECT_EQ(c.review(), 3);
  EXPECT_EQ(c.conflicts(), 1);
  EXPECT_EQ(c.decided(), 3) << "done entries with a label; no_result is not a decision";
}

}  // namespace
}  // namespace triage::coord
