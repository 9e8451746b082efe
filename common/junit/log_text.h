#pragma once

// What verdict.cc reads in a testcase's texts (its failure message, traceback and the session's
// log): which lines can be quoted as an error, exception chains, compiler and runtime fatal
// messages, crash signals and bringup stages. Internal to common/junit (docs/junit.md).

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/util/text.h"

namespace triage::junit::log_text {

inline constexpr std::string_view kFeStage = "FAILED_FE_COMPILATION";
inline constexpr std::string_view kTtmlirStage = "FAILED_TTMLIR_COMPILATION";
inline constexpr std::string_view kRuntimeStage = "FAILED_RUNTIME";
inline constexpr std::string_view kIncorrectResultStage = "INCORRECT_RESULT";

inline constexpr std::string_view kRuntimeMarkers[] = {
    "TT_FATAL", "TT_THROW", "Out of Memory: Not enough space", "circular buffers"};
inline constexpr std::string_view kCompilerMarkers[] = {"error:",       "ttir.",   "ttnn.",
                                                        "ElementsAttr", "Aborted", "core dumped"};
inline constexpr std::string_view kTtErrorMarkers[] = {"TT_FATAL", "TT_THROW"};
inline constexpr std::string_view kPccFailure = "PCC comparison failed";
inline constexpr std::string_view kTimeoutMarker = "Timeout >";
inline constexpr std::string_view kForkedCrash = "CRASHED with signal ";

inline constexpr std::string_view kFatalPython = "Fatal Python error:";
inline constexpr std::string_view kTerminate = "terminate called";
// What LLVM and MLIR print before they abort: llvm_unreachable's "UNREACHABLE executed at
// <file>:<line>!" and report_fatal_error's "LLVM ERROR: <message>". Only the compiler prints them.
inline constexpr std::string_view kCompilerFatal[] = {"UNREACHABLE executed at", "LLVM ERROR:"};
// The line the agent adds to a pytest log when the process died by a signal and the runner's
// stage file was still there (agent/executor/native_tools.cc): where the dying test was.
inline constexpr std::string_view kAgentStageLine = "[triage-agent] the bringup stage file reads ";

enum class TextKind { kTraceback, kLog };

struct Line {
  std::string_view text;  // trimmed, pytest's "E" column (or a "what():" label) removed
  bool e_line = false;
  TextKind kind = TextKind::kTraceback;
  // Position in an exception chain: 0 for the first exception printed, one more after each
  // "The above exception was the direct cause of the following exception:" or "During handling
  // of the above exception, another exception occurred:".
  int link = 0;
  // The text of a C++ exception that ended in std::terminate ("  what():  <text>").
  bool what = false;
};

bool Contains(std::string_view s, std::string_view needle);

bool ContainsAny(std::string_view s, std::span<const std::string_view> needles);

// "Error code 13" (PJRT's INTERNAL) only says that something failed; the playbooks forbid it as a
// reason and send the reader further down the traceback or into the log.
bool IsGeneric(std::string_view line);

// Lines that mention errors without being the error (docs/junit.md, "Reason of a failure":
// deprecation warnings and the "non-XLA device" chatter).
bool IsNoise(std::string_view line);

// The last component of a leading dotted name: "torch._dynamo.exc.Unsupported: x" -> "Unsupported".
std::string_view LeadingTypeName(std::string_view line, std::size_t* name_end);
template <util::TemporaryString S>
std::string_view LeadingTypeName(S&& line, std::size_t* name_end) = delete;

// "XFailed: <YAML reason>" is the runner's imperative pytest.xfail(reason). --runxfail normally
// turns pytest.xfail into a no-op, but a runner that bound the function before pytest_configure
// would still raise it: an echo of the old reason, never the error.
bool IsXFailedLine(std::string_view line);

// "RuntimeError: msg", "torch._dynamo.exc.Unsupported: msg", "NotImplementedError". Outside
// pytest's "E   " lines only names that read as exceptions count, so "INFO: ..." log lines stay
// out.
bool IsExceptionLine(std::string_view line, bool e_line);

bool IsChainSeparator(std::string_view t);

// Lines that can be quoted. In a pytest traceback only "E   " lines and flush-left lines belong
// to the exception: indented and ">" lines are source code, which may well contain "TT_FATAL" or
// "error:" inside string literals. Logs also hold indented logger lines ("      Always | FATAL |
// ..."), so there an indented line counts when it has a logger's " | " column separator, and
// the indented "  what():  <text>" that std::terminate prints under "terminate called after
// throwing ..." counts with the label removed.
std::vector<Line> CandidateLines(std::string_view text, TextKind kind);

// "ValueError: msg" -> ("ValueError", "msg"); "torch._dynamo.exc.Unsupported: m" ->
// ("Unsupported", "m"); a line that does not start with a name and ": " -> ("", line).
std::pair<std::string_view, std::string_view> SplitException(std::string_view line);

// The same exception written twice: the plugin's "BackendCompilerFailed: m" and the traceback's
// "torch._dynamo.exc.BackendCompilerFailed: m"; the runner's error_message may lack the type.
bool SameException(std::string_view a, std::string_view b);

// outer wraps inner (docs/junit.md, "Reason of a failure"): one of outer's lines is inner's line
// ("ValueError: inner" under "BackendCompilerFailed: backend='tt' raised:"), or ends with ": "
// and inner's message ("RuntimeError: compile failed: inner").
bool Wraps(std::span<const Line* const> outer, const Line& inner);

// A C assert() that failed in compiler code: "<prog>: .../mlir/lib/IR/Verifier.cpp:42: <fn>:
// Assertion `x' failed."; the file names LLVM or MLIR.
bool IsCompilerAssertion(std::string_view t);

// Where a compiler abort's own message starts in a line; npos when the line is none.
std::size_t CompilerFatalAt(std::string_view t);

// The signal a crash report names: faulthandler's "Fatal Python error: Segmentation fault", the
// shell's "Aborted (core dumped)"; 0 when it names none.
int SignalOfCrashText(std::string_view s);

// "Fatal Python error: Aborted" only says which signal arrived; the reason names the signal
// itself.
bool NamesOnlyTheSignal(std::string_view fatal_python_line);

// glog's fatal line, which torch_xla's failed checks print before aborting:
// "F0601 10:00:00.123456  4242 debug_macros.h:20] Check failed: ...", possibly on pytest's
// progress line. Where it starts, or npos.
std::size_t GlogFatalAt(std::string_view t);

// What a fatal line says beyond the signal, or nothing: TT_FATAL/TT_THROW lines, a terminate
// message and the exception text under it, "Fatal Python error: <more than a signal name>",
// glog's "F..." lines.
std::optional<std::string_view> FatalMessage(const Line& l);

// The part of a pytest log about one test: from its "____ test_x[<key>] ____" header in the
// FAILURES (or PASSES) summary to the next header or "====" line. With no such header (a session
// that died before its summary): the whole log when it is this test's alone, nothing when
// `shared` (the session ran other tests too, whose output and crash would be taken for this one's).
std::string_view LogOfTest(std::string_view log, std::string_view key, bool shared = false);
template <util::TemporaryString S>
std::string_view LogOfTest(S&& log, std::string_view key, bool shared = false) = delete;

// The first line of text that is not blank, without its surrounding whitespace (a view into text;
// a temporary string is refused, as util::SplitLines says).
std::string_view FirstLine(std::string_view text);
template <util::TemporaryString S>
std::string_view FirstLine(S&& text) = delete;

// The BringupStatus a stage-file marker stands for (tests/runner/test_utils.py's mapping).
std::string_view StageOfStageFile(std::string_view raw);

// tags' bringup_status is str(BringupStatus.X), i.e. "X"; older runners and YAML echoes also give
// "BringupStatus.X" or the lower-case value. Only the failure stages are of use here.
std::string_view FailureStageOfTag(std::string_view tag);

// "... running the test CRASHED with signal 6" (pytest-forked) -> 6; 0 when absent.
int ForkedCrashSignal(std::string_view s);

}  // namespace triage::junit::log_text
