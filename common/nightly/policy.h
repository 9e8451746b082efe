#pragma once

// The nightly policy (docs/nightly.md, "The policy"): every choice the rules make that a
// checkout's engineers make differently over time, as data. A policy file (YAML) sets any of
// the knobs; the ones it leaves keep their defaults. Pure, but for reading the file.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace triage::nightly {

struct Policy {
  // The threshold grid: a lowered or raised required_pcc is the worst PCC floored to it.
  double grid = 0.01;
  // Head room below the worst PCC: when flooring leaves less than this, one grid step lower.
  double margin = 0;
  // A test whose PCC check is off and whose PCC is not nonsense: "floor" turns the check on at
  // the floored worst PCC (the default when it reaches 0.99); "above" only when the worst PCC
  // clears the threshold by the margin, at the threshold.
  std::string enable = "floor";
  // The lowest threshold the rules write: a worst PCC at or below it is nonsense. By the key's
  // parallelism and run mode: the most specific of "<parallelism>-<run_mode>", "<parallelism>",
  // "<run_mode>", then "default" applies.
  std::map<std::string, double> lowest = {{"default", 0.97}};
  // What a test whose PCC is nonsense becomes: "disable_pcc" (EXPECTED_PASSING with assert_pcc
  // false) or "xfail" (KNOWN_FAILURE_XFAIL, bringup_status INCORRECT_RESULT, a PCC reason).
  std::string nonsense = "disable_pcc";
  // The reason of an xfail for a PCC failure: "runner" (the runner's own assertion message,
  // "PCC comparison failed. Calculated: pcc=0.9024592638015747. Required: pcc=0.99.") or
  // "short" ("PCC comparison failed (calc ~0.90, required 0.99)").
  std::string pcc_reason = "runner";
  // A passing test with `assert_pcc: false` demoted for a failure that is not its PCC: "drop"
  // the line (it describes runs that no longer happen; a promotion measures again) or "keep" it.
  std::string demote_pcc_off = "drop";
  // The comment on a PCC line the rules write: "figure" ("# pcc 0.9734 on n150") or "none".
  std::string pcc_comment = "figure";
  // bringup_status on an entry the rules skip: "write" or "omit".
  std::string skip_bringup_status = "write";
  // A failure whose stage the run did not say: bringup_status "UNKNOWN" ("write") or none
  // ("omit").
  std::string unknown_stage = "omit";
  // The reason of a skip for a hang / a host-memory kill: a fixed text, or "message" (the run's
  // own first error line, the fixed text when it left none).
  std::string hang_reason = "Hang";
  std::string oom_reason = "Host OOM: killed by signal 9";
  // The reason of a skip for a crash: "signal" ("crashed with signal 6 (SIGABRT)", then the
  // last fatal message) or "message" (the fatal message alone when the run left one).
  std::string crash_reason = "message";

  // Where each knob's value came from ("default", "policy.yaml:4", ...), by knob name.
  std::map<std::string, std::string> sources;

  // The lowest threshold for a key of this parallelism and run mode.
  double Lowest(std::string_view parallelism, std::string_view run_mode) const;
};

// The knobs' names, in the order docs/nightly.md and a policy file list them.
inline constexpr std::string_view kPolicyKnobs[] = {
    "grid",        "margin",      "enable",         "lowest",       "nonsense",
    "pcc_reason",  "pcc_comment", "demote_pcc_off", "skip_bringup", "unknown_stage",
    "hang_reason", "oom_reason",  "crash_reason"};

// Reads a policy file over `base`: the knobs it sets replace base's, each with its source
// (path:line). Errors name the file, the line and the knob.
absl::StatusOr<Policy> ReadPolicy(std::string_view text, std::string_view path,
                                  const Policy& base = {});

// The policy as a policy file (every knob, its source in a comment).
std::string PolicyYaml(const Policy& policy);

// One knob's value as a policy file writes it, and its source ("default" when none is recorded).
struct KnobValue {
  std::string_view knob;
  std::string value;
  std::string source;
};
std::vector<KnobValue> PolicyValues(const Policy& policy);

}  // namespace triage::nightly
