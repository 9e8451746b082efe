#pragma once

// A shared fix's wave on the agent (docs/remediation.md, "The shared fix's wave";
// coordinator/planning/shared_wave.h): with the lead's change pre-applied, the candidates whose
// loaders import a changed file (directly or through another shared module) are verified by the
// farm on the shard's arch, every selected one and a sample of the passing ones. No command
// runs and nothing is changed: the result carries no entries and no edits, only what was checked
// (evidence "wave.json") and the verification's JUnit files and logs.

#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/executor/executor.h"
#include "triage/v1/types.pb.h"

namespace triage::agent {

// The dotted modules a change of `files` ("tt_forge_models:<path>") makes different, as a loader
// imports them ("tools.mini_images", "base"), closed over the shared modules below forge_root
// that import one of them (tools/, the root's *.py): importing those runs the changed code too.
std::set<std::string> ChangedModules(const std::filesystem::path& forge_root,
                                     const std::vector<std::string>& files);

// Whether a Python file of `dir` (recursively) imports one of `modules` ("from ...tools.x import
// y", "from ...tools import x", "import a.b"; relative dots are dropped, so a loader's own module
// of the same name also counts: the wave checks one entry more, never one less).
bool DirImports(const std::filesystem::path& dir, const std::set<std::string>& modules);

using VerifyFn = std::function<absl::StatusOr<v1::ShardResult>(
    const std::vector<const v1::ShardEntry*>& entries)>;

// Runs the wave of ctx.spec (its kWaveParam parameter) in ctx.workspace as prepared, verifying
// with `verify`. An error: the parameter does not parse, or the verification could not run.
absl::StatusOr<v1::ShardResult> RunSharedWave(ExecContext& ctx, const VerifyFn& verify);

}  // namespace triage::agent
