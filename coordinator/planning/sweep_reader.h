#pragma once

#include <cstddef>
#include <filesystem>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/inventory/inventory.h"
#include "common/nightly/policy.h"
#include "coordinator/planning/input_hash.h"
#include "triage/v1/control.pb.h"

namespace triage::coord {

// What a sweep reads: the checkout pinned at its commits, and its inventory read through git.
struct SweepInput {
  std::string repo;  // for display
  std::string ttxla_commit;
  std::string forge_commit;
  std::string forge_gitlink;  // the commit ttxla_commit records for the submodule
  std::string forge_source;   // gitlink, checkout, ref (git::ForgeSourceName)
  std::vector<std::string> notes;
  std::string agent_repo_url;
  inventory::Inventory inventory;
  // The pinned trees entries' input hashes are made of (empty when they could not be read:
  // notes says why, and nothing of this sweep can be carried later).
  std::optional<InputTrees> inputs;
  // The checkout's own .test_durations at the tt-xla commit (pytest-split's JSON, as tt-xla keeps
  // one at its root); "" when it has none. Planning uses it when the request brings none.
  std::string checkout_durations;
  // A nightly or recheck sweep's policy as the checkout's maintenance history at ttxla_commit
  // teaches it (docs/nightly.md, "Which policy a sweep follows"), and what it was learned from;
  // none when the sweep is of another kind, asked no_learn, or the history could not be read
  // (notes says why).
  std::optional<nightly::Policy> learned_policy;
  std::string learned_from;
};
using SweepReader = std::function<absl::StatusOr<SweepInput>(const v1::StartSweepRequest&)>;

// Reads a sweep's input through git: a checkout visible to the coordinator at its HEAD (and the
// submodule commit recorded there), or a URL fetched into cache_dir. Files are read from the
// commit, so later edits to the checkout do not change a sweep.
SweepReader MakeGitSweepReader(std::filesystem::path cache_dir,
                               std::size_t max_file_bytes = inventory::kDefaultMaxYamlBytes);

}  // namespace triage::coord
