#pragma once

// The summary a command writes of its run (docs/remediation.md, "The command's summary"): a small
// JSON object at $TRIAGE_SUMMARY, read and checked by the agent, carried on the entry outcomes of
// the run, and grouped by fingerprint in the report.
//
//   {"fingerprint": "flax-class-removed-in-transformers",   required: [a-z0-9][a-z0-9._-]*, <= 100
//    "layer": "loader",            loader | tt-xla | tt-mlir | tt-metal | hardware | unknown
//    "fix_kind": "loader",         none | loader | shared | compiler | yaml
//    "workarounds": {"layer_trimming": false, "cpu_offload": false, "text_only_inputs": false,
//                    "shape_padding": false, "pcc_lowering": false, "suppression": false},
//    "root_cause": "…",            at most 4096 bytes
//    "result": "pass",             pass | xfail | failed | nothing_to_fix
//    "version": "agent 2.1 (triage skill 7)",   the command's own version, at most 200 bytes
//    "pins": {"tt-mlir": "4f2a…"}} commits the command built with that the workspace does not
//                                  pin: at most 32 names of [A-Za-z0-9._/-] (at most 64 bytes) to
//                                  strings of at most 200 bytes
//
// version and pins are provenance (docs/remediation.md, "Provenance"): the agent records them in
// provenance.json, not on the outcomes.
//
// Every field but fingerprint may be left out; an unknown field is refused (a misspelt name
// would otherwise be lost silently).

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "triage/v1/types.pb.h"

namespace triage::command {

// Larger summaries are refused unread.
inline constexpr std::size_t kMaxSummaryBytes = 64 * 1024;
inline constexpr std::size_t kMaxRootCauseBytes = 4096;

inline constexpr std::string_view kSummaryLayers[] = {"loader",   "tt-xla",   "tt-mlir",
                                                      "tt-metal", "hardware", "unknown"};
inline constexpr std::string_view kSummaryFixKinds[] = {"none", "loader", "shared", "compiler",
                                                        "yaml"};
inline constexpr std::string_view kSummaryResults[] = {"pass", "xfail", "failed", "nothing_to_fix"};
inline constexpr std::string_view kSummaryWorkarounds[] = {"layer_trimming",   "cpu_offload",
                                                           "text_only_inputs", "shape_padding",
                                                           "pcc_lowering",     "suppression"};

// The summary in text; InvalidArgument "<source>: <field>: <why>" when it is not one.
absl::StatusOr<v1::CommandSummary> ParseSummary(std::string_view text, std::string_view source);

inline constexpr std::size_t kMaxVersionBytes = 200;
inline constexpr std::size_t kMaxPins = 32;

// A valid summary's version and pins (empty for a summary ParseSummary refuses).
struct SummaryProvenance {
  std::string version;
  std::map<std::string, std::string> pins;
};
SummaryProvenance ProvenanceOfSummary(std::string_view text);

}  // namespace triage::command
