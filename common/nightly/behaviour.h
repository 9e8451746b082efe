#pragma once

// What one run of a test did, read from its record (docs/nightly.md, section 2, "behaviour"),
// and the figures the rules take from it. Pure.

#include <optional>
#include <string>
#include <string_view>

#include "triage/v1/nightly.pb.h"

namespace triage::nightly {

enum class Behaviour {
  kPass,       // bringup PASSED: ran end to end and its comparison passed
  kIncorrect,  // bringup INCORRECT_RESULT: ran end to end, PCC below the threshold
  kHang,       // outran its timeout
  kCrash,      // its process died (a signal other than SIGKILL, an abort)
  kOomKill,    // killed for host memory (SIGKILL, MemoryError, host OOM)
  kFail,       // any other failure (bringup FAILED_* or UNKNOWN)
  kSkipped,    // skipped: says nothing about the test
};

// "pass", "incorrect", "hang", "crash", "oom_kill", "fail", "skipped".
std::string_view BehaviourName(Behaviour b);

Behaviour BehaviourOf(const v1::NightlyRecord& r);

// Ran end to end (the model produced outputs that were compared): pass or incorrect.
inline bool RanToEnd(Behaviour b) { return b == Behaviour::kPass || b == Behaviour::kIncorrect; }
// Takes the CI job down (xfail cannot catch it): hang, crash or host-memory kill.
inline bool KillsTheJob(Behaviour b) {
  return b == Behaviour::kHang || b == Behaviour::kCrash || b == Behaviour::kOomKill;
}

// The failure stage a failing run reached: the agent plugin's stage file, else tags'
// bringup_status when it is a FAILED_* stage; "" when unknown.
std::string FailureStage(const v1::NightlyRecord& r);

// The first line of the run's error in the reason form (docs/nightly.md, rule R): the agent
// plugin's real error, else the runner's error_message, else the failure's message; an OOM
// message without its per-bank tail; "" when the run left none.
std::string ErrorReason(const v1::NightlyRecord& r);

// The PCC the run measured, when its comparison ran and gave a number (NaN is a number here:
// callers treat it as far below any threshold).
std::optional<double> MeasuredPcc(const v1::NightlyRecord& r);

}  // namespace triage::nightly
