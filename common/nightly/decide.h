#pragma once

// The decision for one nightly candidate (docs/nightly.md, section 3): its confirmation runs
// against the behaviour the nightly showed, and the change for its arch when they agree. Pure:
// the confirmation runner (agent/playbooks/nightly) and the coordinator (--no-confirm, the
// device-time budget, the flagged) decide with it alike.

#include <vector>

#include "common/nightly/rules.h"
#include "triage/v1/types.pb.h"

namespace triage::nightly {

enum class DecideMode {
  kConfirm,      // confirmations are the fleet's runs
  kNoConfirm,    // --no-confirm: the nightly alone decides, labelled so
  kUnconfirmed,  // the device-time budget left it: no change
};

// The outcome of one candidate entry (entry.nightly() holds the candidate) on its arch. The
// outcome's edit is the arch's target (top-level field names: what the entry should resolve to
// on the arch); changed only when the change stands. Confirmed kinds may turn into their
// neighbours by the worst PCC of all runs (a promotion whose confirmations missed the threshold
// is promoted with a lowered one; a near miss whose worst run is far below disables the check).
v1::EntryOutcome DecideNightly(const v1::ShardEntry& entry,
                               const std::vector<v1::NightlyRecord>& confirmations,
                               const RuleOptions& options, DecideMode mode);

// A recheck of a NOT_SUPPORTED_SKIP entry (kind "recheck", docs/nightly.md, "Rechecking skipped
// entries"): the fleet's runs with --force-run are the only records, and they pick the kind:
// every run ran to its end -> promote (PCC as rule P), every run a clean failure ->
// unskip_xfail (KNOWN_FAILURE_XFAIL, bringup_status and the reason of rule R), every run hung,
// crashed or was killed -> refresh_skip (the skip stays, bringup_status and reason refreshed).
// Runs that disagree, or fewer than two, change nothing (flaky).
v1::EntryOutcome DecideRecheck(const v1::ShardEntry& entry,
                               const std::vector<v1::NightlyRecord>& runs,
                               const RuleOptions& options);
// The kind all runs agree on ("" when they do not).
std::string RecheckKind(const std::vector<v1::NightlyRecord>& runs);

// The outcome of a judgement that is only reported (capacity, already): never a change.
v1::EntryOutcome ReportOnly(const v1::ShardEntry& entry);

// The reason of an xfail for a PCC failure, in the policy's pcc_reason form: "runner" writes the
// runner's assertion message with the figures as Python prints them ("PCC comparison failed.
// Calculated: pcc=0.9024592638015747. Required: pcc=0.99."), "short" two decimals ("PCC
// comparison failed (calc ~0.90, required 0.99)"). worst: nullopt or NaN when no run measured a
// number ("nan").
std::string PccFailureReason(std::optional<double> worst, double required, std::string_view form);

// The lowest PCC over a candidate's deciding nightly runs (the latest promote_runs /
// regression_runs of them) and its confirmation runs; nullopt when none measured one.
std::optional<double> WorstPcc(const v1::NightlyCandidate& candidate,
                               const std::vector<v1::NightlyRecord>& confirmations,
                               const RuleOptions& options);

}  // namespace triage::nightly
