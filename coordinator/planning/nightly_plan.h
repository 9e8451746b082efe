#pragma once

// The planning step of a nightly sweep (docs/nightly.md): the runs' records mapped to the pinned
// checkout, the rule table's candidates, and their confirmation shards, one per loader, arch and
// device need. What is decided without the fleet (--no-confirm, what the device-time budget
// leaves, what is only reported) becomes shards that succeeded when planned, with their results.

#include <string>
#include <vector>

#include "common/inventory/inventory.h"
#include "coordinator/planning/planner.h"
#include "triage/v1/control.pb.h"

namespace triage::coord {

// The nightly sweep's plan: plan.shards (confirmation shards queued, decided ones succeeded),
// plan.decided (the decided shards' results), plan.nightly (the intake and the rules' counts).
Plan PlanNightly(const inventory::Inventory& inventory, const v1::StartSweepRequest& request,
                 const PlanOptions& options, const std::string& sweep_id,
                 const std::string& ttxla_commit, const std::string& forge_commit, TimePoint now);

// A recheck of the skipped entries (docs/nightly.md, "Rechecking skipped entries"): every
// NOT_SUPPORTED_SKIP entry of every test-config file, on each of the request's archs where it
// resolves to NOT_SUPPORTED_SKIP, becomes a candidate of kind "recheck" confirmed at least twice
// on the fleet. The entry-archs checked longest ago (never first) go first; with
// nightly_options.max_device_hours, those that do not fit are left for a later sweep (counted in
// plan.recheck, not planned). plan.nightly holds the intake (no runs).
Plan PlanRecheck(const inventory::Inventory& inventory, const v1::StartSweepRequest& request,
                 const PlanOptions& options, const std::string& sweep_id,
                 const std::string& ttxla_commit, const std::string& forge_commit, TimePoint now);

}  // namespace triage::coord
