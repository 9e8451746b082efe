#pragma once

// The lift: a command executor's raw diffs of both repositories become the structured edits a
// native result carries (docs/farm.md, "Executors"; docs/report.md, "Command executor"). It runs
// once, on the agent that ran the command; the coordinator only ever sees structured results.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/inventory/value.h"
#include "triage/v1/types.pb.h"

namespace triage::lift {

// The files of a sweep's pinned commits.
class PinnedFiles {
 public:
  virtual ~PinnedFiles() = default;
  // Path relative to the tt-xla root / the tt_forge_models root. NotFound for a missing file.
  virtual absl::StatusOr<std::string> ReadTtXla(const std::string& path) = 0;
  virtual absl::StatusOr<std::string> ReadForge(const std::string& path) = 0;
};

struct LiftOutput {
  // One sentence per change that could not be lifted inside the shard's own files: an unreadable
  // diff or base file, a diff that does not apply, a YAML file or training_utils.py the command
  // left unreadable, a change of an entry outside the shard, another arch's overrides. Each is
  // also a review flag on the shard's entry outcomes (the arch case only on the outcome it
  // concerns), so it reaches the report.
  std::vector<std::string> notes;
  // Files outside what the shard owns ("tt-xla/<path>", "tt_forge_models/<path>"). Their diffs
  // stay in the result as file edits, so that the coordinator's ownership check rejects the
  // result naming them, as it rejects a native result that edits them.
  std::vector<std::string> outside;
};

// A test-config field value to its wire form and back (lists are lists of strings).
v1::YamlValue ToYaml(const inventory::Value& v);
inventory::Value FromYaml(const v1::YamlValue& v);

// Lifts result.ttxla_diff and result.forge_diff, both `git diff`s against the pinned commits of
// spec, into structured edits, reading the base files through files:
//  - a hunk of one of the shard's YAML files -> the field edit of each changed entry, as the
//    shard's arch sees the entry (top level with arch_overrides.<arch> on top), on that entry's
//    outcome (changed is set when the edit changes something);
//  - training_utils.py -> registry operations (a changed attribute is a remove and an add);
//  - a file under the shard's loader directory -> a tt_forge_models file edit against the
//    pinned commit (against_pinned).
// Both raw diff fields are cleared. Expects result.entries to hold an outcome per entry of the
// shard (the command executor writes them before lifting).
LiftOutput Lift(const v1::ShardSpec& spec, v1::ShardResult& result, PinnedFiles& files);

}  // namespace triage::lift
