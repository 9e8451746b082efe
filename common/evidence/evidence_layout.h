#pragma once

#include <string>

#include "triage/v1/types.pb.h"

namespace triage::evidence {

// The directory name of a shard's evidence (docs/evidence.md's layout below it: probes/, junit/,
// logs/). It is derived from what the shard is — wave, phase, arch, playbook, loader — not from
// ids, so a sweep planned again from the same commits finds the evidence of the first run:
//   w1-full-n150-unpack_forward_output-gpt_mini__causal_lm
std::string ShardDirName(const v1::ShardSpec& spec);

}  // namespace triage::evidence
