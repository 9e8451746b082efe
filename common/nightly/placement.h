#pragma once

// Where a nightly sweep's confirmed changes of one entry go (docs/nightly.md, section 4,
// "Placement"): the archs' targets, placed together against the entry as it is, so that the
// YAML says the least. Pure.

#include <optional>
#include <string>
#include <vector>

#include "common/inventory/document.h"
#include "common/inventory/editor.h"
#include "triage/v1/types.pb.h"

namespace triage::nightly {

// One arch's target: the fields the entry should resolve to on the arch (set) or leave to the
// default (delete), as top-level names (NightlyFinding's edit), and the measured-PCC comment of
// a changed PCC line.
struct ArchTarget {
  std::string arch;
  v1::EntryEdit edit;
  std::string pcc_comment;  // "pcc 0.9734 on n150" ("" when none)
};

struct Placement {
  std::vector<inventory::EntryEdit> edits;  // for the editor: the top level, then per arch
  // Review flags: a top-level change that also reaches archs no run recorded the test on.
  std::vector<std::string> review;
  bool per_arch = false;  // some field went to arch_overrides
};

// archs: every arch the runs recorded the test on (each arch's value is its target, else what
// the entry resolves to there now). targets: the archs with a confirmed change. The entry exists
// (a new entry is one edit with create set: NewEntry).
//  - a unit (status with reason and bringup_status; every other field alone) that every arch
//    wants the same goes to the top level and out of those archs' overrides;
//  - otherwise, for the status group, the top level takes a state without a reason
//    (EXPECTED_PASSING) when some arch wants one, and the archs that fail get overrides with
//    their status, reason and bringup_status (an override cannot unset an inherited reason);
//    for other fields the top level keeps its value while some arch still wants it (else the
//    value most archs want), and only the archs that differ from it get overrides;
//  - required_pcc is one value for the archs that share it (none has its own override): the
//    lowest they want, deleted when 0.99 or above;
//  - an override a unit leaves empty disappears (the editor removes empty blocks).
Placement Place(const inventory::Entry& entry, const std::vector<std::string>& archs,
                const std::vector<ArchTarget>& targets);

// The edit that adds an entry for a test the checkout has no entry for (add_config).
inventory::EntryEdit NewEntry(const std::string& key, const v1::EntryEdit& target);
// The edits that add an entry for a test the checkout has no entry for, with a target on every
// arch of `archs`: one create edit when the archs want the same entry (NewEntry), else Place's
// placement of an entry that has no fields yet: the create edit holds the top level (a state
// without a reason when some arch wants one) and the archs that differ get arch_overrides,
// written in the same batch. nullopt when the top level would be empty.
std::optional<std::vector<inventory::EntryEdit>> PlaceNew(const std::string& key,
                                                          const std::vector<std::string>& archs,
                                                          const std::vector<ArchTarget>& targets);
// Whether every arch's target sets the same fields to the same values (a new entry without
// arch_overrides).
bool SameTargets(const std::vector<ArchTarget>& targets);

}  // namespace triage::nightly
