#pragma once

#include "absl/status/statusor.h"
#include "agent/playbooks/playbook.h"
#include "triage/v1/types.pb.h"

namespace triage::playbooks {

// Runs the shard's playbook (agent/playbooks/registry.h) in its phase (Playbook::Plan):
//   FULL   probe, fix, re-probe, verify with pytest, decide every entry
//   PROBE  probe and fix only (no device): outcomes say "ready" for entries to verify
//   VERIFY verify and decide with the earlier phase's edits already applied
// Every outcome carries its disposition (docs/playbooks.md, "Dispositions"). A playbook without
// a runner (unknown, or catalog-only) is refused with Unimplemented in the FULL and PROBE
// phases; a VERIFY shard needs none, verification being the same for every playbook. An error
// status is an infrastructure failure (the workspace is broken): the coordinator retries
// elsewhere.
absl::StatusOr<v1::ShardResult> RunPlaybook(PlaybookContext& ctx);

}  // namespace triage::playbooks
