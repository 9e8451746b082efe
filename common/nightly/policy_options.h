#pragma once

// Which policy a nightly sweep's rules follow (docs/nightly.md, "Which policy a sweep follows"):
// resolved once, when the sweep starts, and recorded in its options, so that the coordinator,
// the agents and the report read the same knobs.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/nightly/policy.h"
#include "triage/v1/nightly.pb.h"

namespace triage::nightly {

// The asked policy file (policy_text, named policy_file) read over the defaults: errors name the
// file, the line and the knob. Also refuses the resolved fields, which only the coordinator sets.
absl::Status CheckAskedPolicy(const v1::NightlyOptions& asked);

// The asked file's name for errors and sources ("nightly_options.policy_text" when unnamed).
std::string PolicyFileName(const v1::NightlyOptions& asked);

// `asked` with policy_yaml, policy_sources and policy_learned_from set: `learned` (the defaults
// when it is null or asked.no_learn), then the asked file's knobs (read once, over them), then
// pcc_step, pcc_margin and pcc_far_below where asked (sources "--pcc-step", ...).
absl::StatusOr<v1::NightlyOptions> ResolvePolicy(const v1::NightlyOptions& asked,
                                                 const Policy* learned,
                                                 const std::string& learned_from);

}  // namespace triage::nightly
