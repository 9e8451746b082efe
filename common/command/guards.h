#pragma once

// Guards (docs/remediation.md, "Guards"): the workarounds a command's change may buy a passing
// test with, found by the farm in the change itself rather than declared by the command. Each
// guard reads the lines a unified diff adds (and the lines its hunk removes, to compare), or an
// entry's YAML edit. A finding is for a reviewer: the farm never promotes an entry on one.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "triage/v1/types.pb.h"

namespace triage::command {

// The guards by name:
//   pcc_lowered           required_pcc lowered (an entry edit, or a file's literal), without the
//                         farm's measured CPU bfloat16-vs-float32 PCC floor to justify it
//   pcc_disabled          assert_pcc set false
//   layers_trimmed        a layer count set to a number, or a layer list sliced
//   cpu_offload           a loader moving a model part to the CPU (.to("cpu"), .cpu(),
//                         device="cpu", device_map=)
//   inputs_shortened      a sequence length lowered, a slice of the inputs' last dimension,
//                         truncation turned on
//   modality_dropped      an image, audio or video input the hunk removes and does not add back
//   shape_padding         padding to a shape (F.pad, pad_to_multiple_of, padding="max_length")
//   exception_suppressed  an except clause that passes, a bare except, contextlib.suppress
//   warning_suppressed    warnings ignored, logging disabled
//   marker_added          a pytest skip or xfail marker or call
//   test_deselected       a deselection (--deselect, collect_ignore, pytest_collection_modifyitems)
inline constexpr std::string_view kGuards[] = {
    "pcc_lowered",        "pcc_disabled",     "layers_trimmed",  "cpu_offload",
    "inputs_shortened",   "modality_dropped", "shape_padding",   "exception_suppressed",
    "warning_suppressed", "marker_added",     "test_deselected",
};

// tt-xla's runner's default required_pcc when an entry sets none.
inline constexpr double kDefaultRequiredPcc = 0.99;
// How far under the measured floor a lowered threshold may go and still count as justified.
inline constexpr double kFloorMargin = 0.01;

struct Workaround {
  std::string guard;  // a name of kGuards
  std::string where;  // "<repo>/<path>:<line of the new file>", or "<file>: <key>"
  std::string what;   // the added line, trimmed; "required_pcc 0.99 -> 0.9"; ...
};

// The workarounds of one file's change: `diff` is a unified diff of `path` in `repo` (tt-xla or
// tt_forge_models; several files' diffs are split by path). Only Python files are read, but for
// test_deselected and marker_added, which also read pytest configuration files.
std::vector<Workaround> ScanFileDiff(std::string_view repo, std::string_view diff);

// The workarounds of an entry's YAML edit: before_pcc is the entry's required_pcc before the
// edit (none: the runner's default); floor the farm's measured CPU bfloat16-vs-float32 PCC of
// the test (none: not measured). A lowered threshold no lower than floor - kFloorMargin is
// justified and not a finding.
std::vector<Workaround> ScanEntryEdit(const v1::EntryEdit& edit, std::optional<double> before_pcc,
                                      std::optional<double> floor);

// The evidence kind of the agent's floors.json (agent/executor/command_floor.h).
inline constexpr std::string_view kPccFloorEvidence = "pcc_floor";

// The PCC floors a result's floors.json records: (file, key) -> the measured CPU
// bfloat16-vs-float32 PCC; entries it could not measure are left out. Unreadable evidence reads
// as no floors (every lowered threshold then stays a finding).
std::map<std::pair<std::string, std::string>, double> PccFloors(const v1::ShardResult& result);

// "workaround layers_trimmed: tt_forge_models/x/pytorch/loader.py:12: config.num_hidden_layers = 2"
std::string Describe(const Workaround& w);

}  // namespace triage::command
