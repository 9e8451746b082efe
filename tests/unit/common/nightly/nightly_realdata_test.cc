// The nightly mapping and rules over tt-xla's real test-config files (../shared/data/tt-xla/head):
// a record for every entry, named as tt-xla's runner names its test, finds that entry; the one
// key tt-xla defines in two jax files is named, never guessed; and the rule table judges every
// real entry without stumbling on its fields.

#include <map>

#include "common/inventory/inventory.h"
#include "common/nightly/mapping.h"
#include "common/nightly/record.h"
#include "common/nightly/rules.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::nightly {
namespace {

v1::NightlyRun OnePassPerEntry(const inventory::Inventory& inv, std::string_view arch) {
  v1::NightlyRun run;
  run.set_label("every-entry");
  for (const auto& ref : inv.TestEntries()) {
    v1::NightlyRecord& r = *run.add_records();
    r.set_test_function(std::string(TestFunctionOfFile(ref.document->path())));
    r.set_key(ref.entry->key);
    r.set_arch(std::string(arch));
    r.set_outcome(ref.entry->StatusForArch(arch) == "KNOWN_FAILURE_XFAIL"
                      ? v1::NightlyRecord::XFAILED
                      : v1::NightlyRecord::PASSED);
    r.set_bringup_status("PASSED");
    r.set_pcc(0.9995);
    r.set_parallelism(ref.entry->parts ? ref.entry->parts->parallelism : "");
    r.set_source(ref.document->path());
  }
  run.set_testcases(run.records_size());
  return run;
}

TEST(NightlyRealData, EveryEntryIsFoundFromItsOwnTestFunction) {
  TRIAGE_REQUIRE_SHARED_DATA(dir);
  inventory::WorkTreeSource source(dir / "head");
  auto inv = inventory::LoadInventory(source);
  ASSERT_TRUE(inv.ok()) << inv.status();
  const v1::NightlyRun run = OnePassPerEntry(*inv, "n150");
  ASSERT_GT(run.records_size(), 1900);
  for (const auto& r : run.records()) {
    EXPECT_TRUE(IsModelTestFunction(r.test_function())) << r.source() << ": " << r.key();
    EXPECT_TRUE(CheckKey(r.key()).ok()) << CheckKey(r.key());
  }
  const Mapping m = MapRuns(*inv, {run});
  // The key defined in two jax files is the only one not mapped (its two records are one test
  // of the run: a duplicate).
  EXPECT_EQ(m.intake.duplicates(), 1);
  EXPECT_EQ(m.intake.unmapped(), 1) << (m.intake.examples().empty() ? "" : m.intake.examples(0));
  EXPECT_EQ(m.intake.mapped(), run.records_size() - 2);
  ASSERT_EQ(m.intake.examples_size(), 1);
  EXPECT_NE(m.intake.examples(0).find("falcon/jax-3_3B_Base-single_device-inference"),
            std::string::npos);
  EXPECT_NE(m.intake.examples(0).find("defined in"), std::string::npos);

  // The rule table over every real entry: each judgement is one the table has, and a run where
  // every test passes well above its threshold proposes nothing that fails a test.
  std::map<std::string, int> kinds;
  for (const auto& t : m.tests) {
    for (const auto& h : t.histories) {
      const Judgement j = Judge(h, Resolve(t.entry, h.arch), {});
      if (j.kind == Judgement::Kind::kCandidate) {
        ++kinds[j.candidate.kind()];
        EXPECT_TRUE(j.candidate.kind() == "promote" || j.candidate.kind() == "enable_pcc" ||
                    j.candidate.kind() == "raise_pcc")
            << t.key << ": " << j.candidate.kind();
      }
    }
  }
  EXPECT_GT(kinds["promote"], 100);
  EXPECT_GT(kinds["enable_pcc"], 10);
  EXPECT_GT(kinds["raise_pcc"], 10);
}

}  // namespace
}  // namespace triage::nightly
