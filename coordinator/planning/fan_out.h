#pragma once

// Fix once, verify many (docs/remediation.md): a failure cluster's follower shards wait for the
// cluster's lead shard; when it ends, each follower learns what the lead found and is queued.

#include <string>
#include <vector>

#include "coordinator/model/model.h"
#include "triage/v1/types.pb.h"

namespace triage::coord {

// The verdict of the farm's verification of a command's entry that passes.
inline constexpr std::string_view kPassVerdict = "pass";

// Releases `follower` (waiting, with spec.fan_out naming `lead`) once its lead has ended.
// With the lead succeeded and `result` its accepted result:
//  - lead_fixed when an entry of the follower's cluster passes on the lead's arch with the
//    lead's change, verified by the farm (verdict pass, the farm did not replace the command's
//    decision); then the lead's edits outside its loader directory (shared scope) and its
//    registry lines are pre-applied, so the follower verifies its entries with them before any
//    command runs;
//  - lead_summary: the summary of a fixed entry of the cluster, else of any entry of it (the hint
//    the follower's command gets, also when the lead gave up).
// A lead that failed or was cancelled releases its followers without either: their entries get
// their own runs. The follower is queued at `now`; returns one line for the sweep's events.
std::string ReleaseFollower(const ShardRecord& lead, const v1::ShardResult* result,
                            ShardRecord& follower, TimePoint now);

// Whether a file edit of `spec`'s result lies outside its loader directory: a shared-scope
// edit (the registry travels as registry operations, never as a file edit).
bool IsSharedEdit(const v1::ShardSpec& spec, const v1::FileEdit& edit);

// Rejected means rejected (docs/remediation.md, "What lands of a command's work"): whether a
// command result's file edits and registry lines land. They do unless the farm overruled one of
// its entries' decisions and accepted none of its entry changes (an outcome that changed its
// entry and was not replaced by the farm's decision).
bool CommandEditsLand(const v1::ShardResult& result);

// A result of the sweep accepted earlier, with its shard's spec.
struct AcceptedResult {
  const v1::ShardSpec* spec = nullptr;
  const v1::ShardResult* result = nullptr;
};

// The conflict rule of the shared scope (docs/remediation.md, "Shared fixes beyond the
// loader"): `result` of the shard `spec` edits a shared file that a result accepted earlier
// (`earlier`, whose edits land) edited differently, and `spec` did not start from that edit.
// The first accepted stands; the shard runs again on top of it, with the edits returned
// pre-applied. Empty: no such conflict.
std::vector<v1::FileEdit> SharedEditsToBuildOn(const v1::ShardSpec& spec,
                                               const v1::ShardResult& result,
                                               const std::vector<AcceptedResult>& earlier);

}  // namespace triage::coord
