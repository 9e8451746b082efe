// Which outcomes go on to verification: read from the disposition, and from the verdict name
// only for outcomes recorded without one (docs/playbooks.md, "Dispositions").

#include "coordinator/planning/waves.h"

#include "gtest/gtest.h"

namespace triage::coord {
namespace {

v1::EntryOutcome Outcome(const std::string& verdict, v1::EntryOutcome::Disposition d) {
  v1::EntryOutcome o;
  o.set_verdict(verdict);
  o.set_disposition(d);
  return o;
}

TEST(Waves, NeedsVerificationReadsTheDisposition) {
  struct Row {
    std::string verdict;
    v1::EntryOutcome::Disposition disposition;
    bool needs_verification;
    bool awaits_verification;
  };
  const Row rows[] = {
      // With a disposition the verdict name does not matter.
      {"pass", v1::EntryOutcome::DONE, true, false},
      {"escalate", v1::EntryOutcome::DONE, true, false},
      {"command", v1::EntryOutcome::DONE, true, false},
      {"ready", v1::EntryOutcome::VERIFY, true, true},
      {"pass", v1::EntryOutcome::VERIFY, true, true},
      {"needs_unpack", v1::EntryOutcome::NEEDS_PLAYBOOK, false, false},
      {"pass", v1::EntryOutcome::NEEDS_PLAYBOOK, false, false},
      {"no_fix", v1::EntryOutcome::NEEDS_REVIEW, false, false},
      {"", v1::EntryOutcome::NEEDS_REVIEW, false, false},
      {"ready", v1::EntryOutcome::NEEDS_REVIEW, false, false},
      // Without one (older agents): the verdict names.
      {"pass", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, true, false},
      {"command", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, true, false},
      {"ready", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, true, true},
      {"", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, true, false},
      {"not_reproduced", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
      {"escalate", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
      {"needs_unpack", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
      {"gate_misfired", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
      {"no_fix", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
      {"probe_failed", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
      {"conflict", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
      {"fix_failed", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
      {"no_evidence", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
  };
  for (const Row& r : rows) {
    const auto o = Outcome(r.verdict, r.disposition);
    const std::string what = r.verdict + " / " + v1::EntryOutcome::Disposition_Name(r.disposition);
    EXPECT_EQ(NeedsVerification(o), r.needs_verification) << what;
    EXPECT_EQ(AwaitsVerification(o), r.awaits_verification) << what;
  }
}

}  // namespace
}  // namespace triage::coord
