#pragma once

// nightly_replay's night (bench/nightly_replay.cc): the CI records of a maintenance round,
// synthesized from the engineer's reading of CI (the entry after the round) and the PCC figures
// the round's pull request quotes.

#include <optional>
#include <string>
#include <vector>

#include "common/nightly/rules.h"
#include "nlohmann/json.hpp"
#include "triage/v1/nightly.pb.h"

namespace triage::bench {

// The archs the runner ran an entry on: supported_archs (before or after), else n150 and p150
// (n300-llmbox for a tensor-parallel key), and the archs of the overrides.
std::vector<std::string> Archs(const std::string& key, const nlohmann::json& before,
                               const nlohmann::json& after);

// The PCC the PR quotes for the key on the arch: the lowest number of a figure line that names
// the arch, else of any figure line; nullopt when it quotes none.
std::optional<double> Figure(const nlohmann::json& figures, const std::string& arch);

struct Synth {
  v1::NightlyRecord record;
  std::string how;  // how the record was made, for the misses listing
};

// The record CI showed for the entry on the arch, as the engineer read it.
Synth Synthesize(const std::string& key, const std::string& arch, const nightly::OnArch& before,
                 const nightly::OnArch& after, std::optional<double> figure);

}  // namespace triage::bench
