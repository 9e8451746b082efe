#pragma once

#include <cstddef>
#include <filesystem>

#include "coordinator/core/coordinator.h"

namespace triage::coord {

// Reads a sweep's input through git: a checkout visible to the coordinator at its HEAD (and the
// submodule commit recorded there), or a URL fetched into cache_dir. Files are read from the
// commit, so later edits to the checkout do not change a sweep.
SweepReader MakeGitSweepReader(std::filesystem::path cache_dir,
                               std::size_t max_file_bytes = inventory::kDefaultMaxYamlBytes);

}  // namespace triage::coord
