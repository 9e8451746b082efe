#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "triage/v1/types.pb.h"

namespace triage::coord {

// The files a unified diff touches (old and new paths, without a/ b/, /dev/null skipped).
std::vector<std::string> DiffPaths(const std::string& diff);

// A result may only change what its shard owns: the YAML entries of the shard, files under
// its loader's directory, and registry lines of training_utils.py (as registry operations).
// Paths must be relative, without "..". Anything else rejects the whole result, with the
// offending file or key named. A result that still carries raw diffs (ttxla_diff, forge_diff) is
// refused too: the command executor's agent lifts them into edits (common/lift/lift.h).
// A verify phase of a native or replayed shard (an executor other than `command`) runs the
// probe's edits, pre-applied, under pytest and decides the YAML: it changes no file and
// proposes no registry line, and a result of one that does is refused. Registry waves rely on
// it (docs/farm.md, "Registry waves start early").
absl::Status CheckResultOwnership(const v1::ShardSpec& spec, const v1::ShardResult& result);

// Whether a verify phase of this executor changes only YAML entries (see above): every
// executor but `command`, whose verify phase runs an operator's command.
bool VerifyChangesOnlyYaml(std::string_view executor);

}  // namespace triage::coord
