#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "triage/v1/types.pb.h"

namespace triage::coord {

// The files a unified diff touches (old and new paths, without a/ b/, /dev/null skipped).
std::vector<std::string> DiffPaths(const std::string& diff);

// A result may only change what its shard owns: the YAML entries of the shard, files under
// its loader's directory, and registry lines of training_utils.py (as registry operations, or
// as lines of that file in a command executor's diff). Paths must be relative, without "..".
// Anything else rejects the whole result, with the offending file or key named.
absl::Status CheckResultOwnership(const v1::ShardSpec& spec, const v1::ShardResult& result);

}  // namespace triage::coord
