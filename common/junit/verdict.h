#pragma once

// Turns one verification testcase (pytest --force-run --runxfail --junitxml) into what its YAML
// entry becomes. The rules and their tables are in docs/junit.md.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/junit/junit.h"
#include "common/junit/reason.h"

namespace triage::junit {

enum class Verdict {
  kPass,
  kIncorrectResult,
  kFailure,
  kCrash,
  kTimeout,
  kUnexpectedSkip,
  kUnexpectedXfail,
  kNoEvidence,
};

// "pass", "incorrect_result", "failure", "crash", "timeout", "unexpected_skip",
// "unexpected_xfail", "no_evidence".
std::string_view VerdictName(Verdict v);

struct VerifyContext {
  // The entry was NOT_SUPPORTED_SKIP and ran with --force-run: the runner's error_message
  // property and the bringup_status in its tags merely echo the old YAML values, so neither is
  // evidence.
  bool forced_skip = false;
  // The entry's current YAML reason. An error_message (or traceback line) equal to it is an echo
  // even when forced_skip is not known: the runner also records the YAML reason for failing
  // KNOWN_FAILURE_XFAIL entries.
  std::string old_reason;
  // What pytest printed (stdout and stderr). The evidence when there is no testcase (pytest died
  // without writing XML) and the fallback when the testcase carries only a generic error.
  std::string log_text;
  // log_text is of a session that ran other tests too (a shard's several keys, a batch of
  // shards): a testcase reads only its own section of it, never the rest, where another test's
  // output or crash would pass for its own (docs/junit.md, "Logs of shared sessions").
  bool log_shared = false;
  std::size_t max_reason_bytes = kMaxReasonBytes;
  // The probe showed the old reason to be false: it no longer reproduces on CPU, or a fix of
  // this shard removed it. A failure that left only generic text ("Error code: 13") then gets
  // that text as its reason, flagged for a better one, rather than keeping the old reason.
  bool old_reason_stale = false;
  // The signal that killed the pytest process (0: it exited). With no testcase and nothing in
  // the log, this is the crash's only trace.
  int exit_signal = 0;
};

struct Finding {
  Verdict verdict = Verdict::kNoEvidence;
  // "FAILED_FE_COMPILATION" | "FAILED_TTMLIR_COMPILATION" | "FAILED_RUNTIME" | "INCORRECT_RESULT"
  // | "" (pass, timeout, unexpected skip/xfail, no evidence).
  std::string stage;
  // "stage_file" (the agent plugin's triage_stage property) | "tags" | "text" | "signal" | "".
  std::string stage_source;
  // One line of the evidence in the reason form of NormalizeReason (reason.h): the innermost
  // error, without logger headers, colour codes, absolute paths, addresses or process ids, cut at
  // a UTF-8 boundary when longer than max_reason_bytes. A crash reads "crashed with signal N
  // (SIGNAME)[ during <stage>][: <last fatal message>]" (CrashReason). "Error code 13" only when
  // it is all the run left and ctx.old_reason_stale (docs/junit.md).
  std::string reason;
  // "triage_error" | "error_message" | "failure_text" | "log" | "".
  std::string reason_source;
  int signal = 0;  // crashes: the signal number when known
  // Crashes: the last fatal message the reason quotes ("" when none), without the signal and
  // the stage (nightly maintenance writes its own reason form from it: docs/nightly.md).
  std::string crash_message;
  // Human-review flags; they do not change the verdict.
  std::vector<std::string> review;
};

// tc == nullptr (or a kMissing testcase): there is no testcase, only ctx.log_text.
Finding Classify(const TestCase* tc, const VerifyContext& ctx);

// What the YAML entry becomes.
struct Decision {
  bool change = false;  // false: leave the entry as it is (a human decides)
  std::string status;   // EXPECTED_PASSING | KNOWN_FAILURE_XFAIL | NOT_SUPPORTED_SKIP
  std::optional<std::string> bringup_status, reason;  // nullopt: delete the field
  std::optional<bool> assert_pcc;        // nullopt: leave; false: write assert_pcc: false
  std::vector<std::string> add_markers;  // e.g. "notimeout"
};

Decision Decide(const Finding& f);

}  // namespace triage::junit
