// The comparison rule of the command executor's verification (docs/farm.md, "Executors"): when
// the command's YAML edit and the farm's decision agree, and when the farm's wins.

#include "agent/executor/command_verify.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace triage::agent {
namespace {

using ::testing::HasSubstr;

v1::YamlValue Str(const std::string& s) {
  v1::YamlValue v;
  v.set_string_value(s);
  return v;
}

// An outcome whose edit sets these string fields (and assert_pcc when given) and deletes those.
v1::EntryOutcome Edit(const std::map<std::string, std::string>& set,
                      const std::vector<std::string>& del = {},
                      std::optional<bool> assert_pcc = std::nullopt) {
  v1::EntryOutcome o;
  o.set_changed(true);
  for (const auto& [k, v] : set) {
    auto* f = o.mutable_edit()->add_set();
    f->set_name(k);
    *f->mutable_value() = Str(v);
  }
  if (assert_pcc) {
    auto* f = o.mutable_edit()->add_set();
    f->set_name("assert_pcc");
    f->mutable_value()->set_bool_value(*assert_pcc);
  }
  for (const auto& d : del) o.mutable_edit()->add_delete_(d);
  return o;
}

const EntryFields kSkipped = {
    {"status", Str("NOT_SUPPORTED_SKIP")},
    {"bringup_status", Str("FAILED_FE_COMPILATION")},
    {"reason", Str("RuntimeError: mat1 and mat2 must have the same dtype")}};

// The farm's decisions, as EditFor writes them.
v1::EntryOutcome FarmPass() {
  return Edit({{"status", "EXPECTED_PASSING"}}, {"bringup_status", "reason"});
}
v1::EntryOutcome FarmXfail(const std::string& reason) {
  return Edit({{"status", "KNOWN_FAILURE_XFAIL"},
               {"bringup_status", "FAILED_RUNTIME"},
               {"reason", reason}});
}

TEST(CommandVerifyTest, APromotionAgreesWithAPassingRun) {
  // The command removed the reason too (its bringup_status is not compared).
  auto check = CheckCommandDecision(kSkipped, Edit({{"status", "EXPECTED_PASSING"}}, {"reason"}),
                                    FarmPass());
  EXPECT_TRUE(check.agree) << check.command_wrote << " / " << check.farm_writes;
  EXPECT_EQ(check.command_wrote, "status EXPECTED_PASSING, no reason");
}

TEST(CommandVerifyTest, APromotionThatKeepsTheOldReasonDiffers) {
  auto check = CheckCommandDecision(kSkipped, Edit({{"status", "EXPECTED_PASSING"}}), FarmPass());
  EXPECT_FALSE(check.agree);
  EXPECT_THAT(check.command_wrote, HasSubstr("reason 'RuntimeError: mat1"));
  EXPECT_EQ(check.farm_writes, "status EXPECTED_PASSING, no reason");
}

TEST(CommandVerifyTest, APromotionOfATestThatStillFailsDiffers) {
  auto check = CheckCommandDecision(kSkipped, Edit({{"status", "EXPECTED_PASSING"}}, {"reason"}),
                                    FarmXfail("RuntimeError: boom"));
  EXPECT_FALSE(check.agree);
  EXPECT_EQ(check.command_wrote, "status EXPECTED_PASSING, no reason");
  EXPECT_EQ(check.farm_writes, "status KNOWN_FAILURE_XFAIL, reason 'RuntimeError: boom'");
}

TEST(CommandVerifyTest, ReasonsAgreeInTheirNormalizedForm) {
  const std::string farm = "TT_FATAL @ circular_buffer.cpp:88: CB page size 64";
  // The same error with an absolute path and extra whitespace reads the same.
  auto check = CheckCommandDecision(
      kSkipped,
      Edit({{"status", "KNOWN_FAILURE_XFAIL"},
            {"reason",
             "  TT_FATAL @ /home/u/tt-metal/impl/circular_buffer.cpp:88: CB page size 64"}}),
      FarmXfail(farm));
  EXPECT_TRUE(check.agree) << check.command_wrote;
  // Another error does not.
  check = CheckCommandDecision(
      kSkipped, Edit({{"status", "KNOWN_FAILURE_XFAIL"}, {"reason", "RuntimeError: other"}}),
      FarmXfail(farm));
  EXPECT_FALSE(check.agree);
  // Nor does the right reason under another status.
  check = CheckCommandDecision(kSkipped, Edit({{"status", "NOT_SUPPORTED_SKIP"}, {"reason", farm}}),
                               FarmXfail(farm));
  EXPECT_FALSE(check.agree);
}

TEST(CommandVerifyTest, NoEditAgreesOnlyWithNoChangeOfStatusAndReason) {
  v1::EntryOutcome none;  // not changed
  // The farm would write one: the command's silence differs.
  auto check = CheckCommandDecision(kSkipped, none, FarmPass());
  EXPECT_FALSE(check.agree);
  EXPECT_THAT(check.command_wrote, HasSubstr("no YAML change (status NOT_SUPPORTED_SKIP"));
  // Neither writes one (an unexpected skip: a person decides).
  check = CheckCommandDecision(kSkipped, none, none);
  EXPECT_TRUE(check.agree);
  // An edit where the farm writes none differs; one of fields the farm does not decide agrees.
  check = CheckCommandDecision(kSkipped, Edit({{"status", "EXPECTED_PASSING"}}), none);
  EXPECT_FALSE(check.agree);
  check = CheckCommandDecision(kSkipped, Edit({{"batch_size", "4"}}), none);
  EXPECT_TRUE(check.agree);
}

TEST(CommandVerifyTest, AssertPccIsComparedWhereTheFarmSetsIt) {
  v1::EntryOutcome farm = Edit({{"status", "EXPECTED_PASSING"}}, {"bringup_status", "reason"},
                               /*assert_pcc=*/false);
  auto check = CheckCommandDecision(
      kSkipped, Edit({{"status", "EXPECTED_PASSING"}}, {"reason"}, false), farm);
  EXPECT_TRUE(check.agree) << check.command_wrote;
  check = CheckCommandDecision(kSkipped, Edit({{"status", "EXPECTED_PASSING"}}, {"reason"}), farm);
  EXPECT_FALSE(check.agree);
  EXPECT_THAT(check.command_wrote, HasSubstr("assert_pcc (none)"));
  EXPECT_THAT(check.farm_writes, HasSubstr("assert_pcc false"));
}

}  // namespace
}  // namespace triage::agent
