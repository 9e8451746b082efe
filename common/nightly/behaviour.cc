#include "common/nightly/behaviour.h"

#include <array>
#include <cmath>

#include "common/junit/reason.h"
#include "common/util/text.h"

namespace triage::nightly {
namespace {

using Outcome = v1::NightlyRecord::Outcome;

bool Contains(std::string_view s, std::string_view needle) {
  return s.find(needle) != std::string_view::npos;
}

template <std::size_t N>
bool ContainsAny(std::string_view s, const std::array<std::string_view, N>& needles) {
  for (std::string_view n : needles) {
    if (Contains(s, n)) return true;
  }
  return false;
}

// Host memory, not the device's ("Out of Memory: Not enough space to allocate ... DRAM buffer"
// is the device's own allocator and a runtime failure).
constexpr std::array<std::string_view, 5> kHostOomMarkers = {
    "MemoryError", "Host OOM", "host OOM", "oom-kill", "Out of memory: Killed process"};
constexpr std::array<std::string_view, 3> kAbortMarkers = {"Fatal Python error: Aborted",
                                                           "core dumped", "Aborted (core dumped)"};
constexpr int kSigKill = 9;

// Every text of the record a marker may sit in.
bool AnyText(const v1::NightlyRecord& r, auto&& pred) {
  return pred(r.failure()) || pred(r.error_message()) || pred(r.real_error());
}

template <util::TemporaryString S>  // a view into it
std::string_view StripEnum(S&& s) = delete;
std::string_view StripEnum(std::string_view s) {
  if (auto dot = s.rfind('.'); dot != std::string_view::npos) s.remove_prefix(dot + 1);
  return s;
}

// The bringup status the runner computed, as a NAME ("" when absent).
std::string Bringup(const v1::NightlyRecord& r) {
  std::string s(StripEnum(r.bringup_status()));
  for (char& c : s) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
  return s;
}

// "Out of Memory: Not enough space to allocate 1048576 B DRAM buffer across 12 banks, where each
// bank needs to store 87382 B, but bank size is 1073741792 B (allocated: …, free: …, largest
// free block: …)" ends before the allocator's state: the sizes asked for are the bug's and
// engineers keep them; what else was allocated at the time differs from run to run.
std::string WithoutAllocatorState(std::string reason) {
  if (!Contains(reason, "Not enough space to allocate")) return reason;
  const std::size_t at = reason.find(" (allocated:");
  if (at != std::string::npos) reason.resize(at);
  return reason;
}

}  // namespace

std::string_view BehaviourName(Behaviour b) {
  switch (b) {
    case Behaviour::kPass:
      return "pass";
    case Behaviour::kIncorrect:
      return "incorrect";
    case Behaviour::kHang:
      return "hang";
    case Behaviour::kCrash:
      return "crash";
    case Behaviour::kOomKill:
      return "oom_kill";
    case Behaviour::kFail:
      return "fail";
    case Behaviour::kSkipped:
      return "skipped";
  }
  return "fail";
}

Behaviour BehaviourOf(const v1::NightlyRecord& r) {
  if (r.outcome() == v1::NightlyRecord::SKIPPED) return Behaviour::kSkipped;
  if (r.crash_signal() == kSigKill) return Behaviour::kOomKill;
  if (AnyText(r, [](std::string_view t) { return ContainsAny(t, kHostOomMarkers); })) {
    return Behaviour::kOomKill;
  }
  if (r.crash_signal() > 0) return Behaviour::kCrash;
  if (AnyText(r, [](std::string_view t) { return ContainsAny(t, kAbortMarkers); })) {
    return Behaviour::kCrash;
  }
  if (r.timed_out()) return Behaviour::kHang;
  const std::string bringup = Bringup(r);
  const bool ended = r.outcome() == v1::NightlyRecord::PASSED ||
                     r.outcome() == v1::NightlyRecord::XFAILED ||
                     r.outcome() == v1::NightlyRecord::FAILED;
  if (bringup == "INCORRECT_RESULT" && ended) return Behaviour::kIncorrect;
  if (bringup == "PASSED" &&
      (r.outcome() == v1::NightlyRecord::PASSED || r.outcome() == v1::NightlyRecord::XFAILED)) {
    return Behaviour::kPass;
  }
  // A runner that wrote no bringup status: a plain pass is a pass.
  if (bringup.empty() && r.outcome() == v1::NightlyRecord::PASSED) return Behaviour::kPass;
  return Behaviour::kFail;
}

std::string FailureStage(const v1::NightlyRecord& r) {
  for (std::string stage : {r.stage(), Bringup(r)}) {
    std::string_view s = StripEnum(stage);
    if (s == "FE_COMPILATION_START") s = "FAILED_FE_COMPILATION";
    if (s == "TTMLIR_COMPILATION_START") s = "FAILED_TTMLIR_COMPILATION";
    if (s == "RUNTIME_EXECUTION_START") s = "FAILED_RUNTIME";
    if (s.starts_with("FAILED_")) return std::string(s);
  }
  return "";
}

std::string ErrorReason(const v1::NightlyRecord& r) {
  if (r.crash_signal() > 0) {
    // A confirmation run's real error may already be the crash's reason.
    if (r.real_error().starts_with("crashed")) return junit::NormalizeReason(r.real_error());
    return junit::CrashReason(r.crash_signal(), r.real_error());
  }
  for (const std::string* text : {&r.real_error(), &r.error_message(), &r.failure()}) {
    std::string reason = WithoutAllocatorState(junit::NormalizeReason(*text));
    if (!reason.empty()) return reason;
  }
  return "";
}

std::optional<double> MeasuredPcc(const v1::NightlyRecord& r) {
  if (!r.has_pcc()) return std::nullopt;
  return r.pcc();
}

}  // namespace triage::nightly
