#pragma once

// Shared scope (docs/remediation.md, "Shared fixes beyond the loader"): the paths outside a
// shard's loader directory that a command sweep's shards may change, such as tt-xla's Python
// package or tt-forge-models' shared modules. A fix there can repair many loaders at once, so it
// is owned by the failure cluster whose lead made it and verified over the cluster's other
// entries before it lands. Never the runner, CI or test-config files: the YAML changes only
// through each entry's decision.
//
// A shared path is written "<repo>:<prefix>": repo is tt-xla or tt_forge_models; a prefix ending
// in "/" is a directory (every file under it), otherwise one file.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace triage::command {

// The shared paths of a --failing sweep that names none (docs/remediation.md).
inline constexpr std::string_view kDefaultSharedPaths[] = {
    "tt-xla:python_package/",
    "tt_forge_models:tools/",
    "tt_forge_models:base.py",
    "tt_forge_models:config.py",
};

// The executor parameter of a shared fix's wave shard (docs/remediation.md, "The shared fix's
// wave"; coordinator/planning/shared_wave.h): set by the coordinator, never by a sweep.
inline constexpr std::string_view kWaveParam = "wave";

// The value that turns the shared scope off (`--shared-path none`).
inline constexpr std::string_view kNoSharedPaths = "none";

// Checks one shared path and returns it as written. InvalidArgument naming the path and why: no
// "repo:" part or another repository, an empty, absolute or ".." path, or a path no shared fix
// may take (tt-xla's tests/ and third_party/, .github/ in either repository, tt_forge_models'
// training_utils.py, whose registry lines travel as registry operations).
absl::StatusOr<std::string> CheckSharedPath(std::string_view path);

// Whether repo/path (a file of the workspace, relative to that repository's root) is under one
// of shared (checked shared paths).
bool InSharedScope(const std::vector<std::string>& shared, std::string_view repo,
                   std::string_view path);

// Whether repo/path lies outside the directory of loader (a loader path from the tt-xla root,
// "third_party/tt_forge_models/<dir>/loader.py"): an edit there is a shared edit.
bool OutsideLoader(std::string_view loader, std::string_view repo, std::string_view path);

}  // namespace triage::command
