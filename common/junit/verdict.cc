#include "common/junit/verdict.h"

#include <algorithm>
#include <span>
#include <utility>

#include "absl/strings/ascii.h"
#include "common/inventory/value.h"
#include "common/junit/python_literal.h"
#include "common/junit/reason.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::junit {
namespace {

constexpr std::string_view kFeStage = "FAILED_FE_COMPILATION";
constexpr std::string_view kTtmlirStage = "FAILED_TTMLIR_COMPILATION";
constexpr std::string_view kRuntimeStage = "FAILED_RUNTIME";
constexpr std::string_view kIncorrectResultStage = "INCORRECT_RESULT";

constexpr std::string_view kRuntimeMarkers[] = {
    "TT_FATAL", "TT_THROW", "Out of Memory: Not enough space", "circular buffers"};
constexpr std::string_view kCompilerMarkers[] = {"error:",       "ttir.",   "ttnn.",
                                                 "ElementsAttr", "Aborted", "core dumped"};
constexpr std::string_view kTtErrorMarkers[] = {"TT_FATAL", "TT_THROW"};
constexpr std::string_view kPccFailure = "PCC comparison failed";
constexpr std::string_view kTimeoutMarker = "Timeout >";
constexpr std::string_view kForkedCrash = "CRASHED with signal ";

bool Contains(std::string_view s, std::string_view needle) {
  return s.find(needle) != std::string_view::npos;
}

bool ContainsAny(std::string_view s, std::span<const std::string_view> needles) {
  return std::any_of(needles.begin(), needles.end(),
                     [&](std::string_view n) { return Contains(s, n); });
}

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// "Error code 13" (PJRT's INTERNAL) only says that something failed; the playbooks forbid it as a
// reason and send the reader further down the traceback or into the log.
bool IsGeneric(std::string_view line) {
  return Contains(line, "Error code 13") || Contains(line, "Error code: 13");
}

// Lines that mention errors without being the error (docs/junit.md, "Reason of a failure":
// deprecation warnings and the "non-XLA device" chatter).
bool IsNoise(std::string_view line) {
  return Contains(line, "Warning:") || Contains(line, "warnings.warn(") ||
         Contains(line, "Found an argument on non-XLA device");
}

// The last component of a leading dotted name: "torch._dynamo.exc.Unsupported: x" -> "Unsupported".
std::string_view LeadingTypeName(std::string_view line, std::size_t* name_end) {
  std::size_t n = 0;
  while (n < line.size() && (IsNameChar(line[n]) || line[n] == '.')) ++n;
  *name_end = n;
  if (n == 0 || !IsNameStart(line[0])) return {};
  std::string_view name = line.substr(0, n);
  std::size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

// "XFailed: <YAML reason>" is the runner's imperative pytest.xfail(reason). --runxfail normally
// turns pytest.xfail into a no-op, but a runner that bound the function before pytest_configure
// would still raise it: an echo of the old reason, never the error.
bool IsXFailedLine(std::string_view line) {
  std::size_t end = 0;
  return LeadingTypeName(line, &end) == "XFailed";
}

// "RuntimeError: msg", "torch._dynamo.exc.Unsupported: msg", "NotImplementedError". Outside
// pytest's "E   " lines only names that read as exceptions count, so "INFO: ..." log lines stay
// out.
bool IsExceptionLine(std::string_view line, bool e_line) {
  std::size_t end = 0;
  std::string_view type = LeadingTypeName(line, &end);
  if (type.empty() || !(type[0] >= 'A' && type[0] <= 'Z')) return false;
  bool error_like = type.ends_with("Error") || type.ends_with("Exception") ||
                    type.ends_with("Interrupt") || type.ends_with("Exit");
  if (end == line.size()) return error_like;
  if (line[end] != ':') return false;
  return e_line || error_like;
}

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

bool IsChainSeparator(std::string_view t) {
  return t == "The above exception was the direct cause of the following exception:" ||
         t == "During handling of the above exception, another exception occurred:";
}

// Lines that can be quoted. In a pytest traceback only "E   " lines and flush-left lines belong
// to the exception: indented and ">" lines are source code, which may well contain "TT_FATAL" or
// "error:" inside string literals. Logs also hold indented logger lines ("      Always | FATAL |
// ..."), so there an indented line counts when it has a logger's " | " column separator, and
// the indented "  what():  <text>" that std::terminate prints under "terminate called after
// throwing ..." counts with the label removed.
std::vector<Line> CandidateLines(std::string_view text, TextKind kind) {
  constexpr std::string_view kWhat = "what():";
  std::vector<Line> out;
  int link = 0;
  for (std::string_view line : util::SplitLines(text)) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.starts_with("E") && (line.size() == 1 || line[1] == ' ' || line[1] == '\t')) {
      std::string_view rest = util::TrimWhitespace(line.substr(1));
      if (!rest.empty()) out.push_back({rest, true, kind, link});
      continue;
    }
    if (line.starts_with(">")) continue;
    std::string_view t = util::TrimWhitespace(line);
    if (IsChainSeparator(t)) {
      ++link;
      continue;
    }
    if (kind == TextKind::kLog && t.starts_with(kWhat)) {
      std::string_view what = util::TrimWhitespace(t.substr(kWhat.size()));
      if (!what.empty()) out.push_back({what, false, kind, link, /*what=*/true});
      continue;
    }
    bool indented = !line.empty() && (line[0] == ' ' || line[0] == '\t');
    if (indented && (kind == TextKind::kTraceback || !Contains(line, " | "))) continue;
    if (t.empty() || t.starts_with("File \"")) continue;  // native traceback frame header
    out.push_back({t, false, kind, link});
  }
  return out;
}

// "ValueError: msg" -> ("ValueError", "msg"); "torch._dynamo.exc.Unsupported: m" ->
// ("Unsupported", "m"); a line that does not start with a name and ": " -> ("", line).
std::pair<std::string_view, std::string_view> SplitException(std::string_view line) {
  std::size_t end = 0;
  std::string_view type = LeadingTypeName(line, &end);
  if (type.empty()) return {{}, util::TrimWhitespace(line)};
  if (end == line.size()) return {type, {}};
  if (line.substr(end).starts_with(": ")) return {type, util::TrimWhitespace(line.substr(end + 2))};
  return {{}, util::TrimWhitespace(line)};
}

// The same exception written twice: the plugin's "BackendCompilerFailed: m" and the traceback's
// "torch._dynamo.exc.BackendCompilerFailed: m"; the runner's error_message may lack the type.
bool SameException(std::string_view a, std::string_view b) {
  auto [type_a, message_a] = SplitException(a);
  auto [type_b, message_b] = SplitException(b);
  return message_a == message_b && (type_a.empty() || type_b.empty() || type_a == type_b);
}

// outer wraps inner (docs/junit.md, "Reason of a failure"): one of outer's lines is inner's line
// ("ValueError: inner" under "BackendCompilerFailed: backend='tt' raised:"), or ends with ": "
// and inner's message ("RuntimeError: compile failed: inner").
bool Wraps(std::span<const Line* const> outer, const Line& inner) {
  std::string_view message = SplitException(inner.text).second;
  for (const Line* l : outer) {
    if (l == &inner) continue;
    if (l->text == inner.text) return true;
    if (!message.empty() && l->text.size() > message.size() + 2 && l->text.ends_with(message) &&
        l->text.substr(l->text.size() - message.size() - 2, 2) == ": ") {
      return true;
    }
  }
  return false;
}

constexpr std::string_view kFatalPython = "Fatal Python error:";
constexpr std::string_view kTerminate = "terminate called";
// What LLVM and MLIR print before they abort: llvm_unreachable's "UNREACHABLE executed at
// <file>:<line>!" and report_fatal_error's "LLVM ERROR: <message>". Only the compiler prints them.
constexpr std::string_view kCompilerFatal[] = {"UNREACHABLE executed at", "LLVM ERROR:"};
// The line the agent adds to a pytest log when the process died by a signal and the runner's
// stage file was still there (agent/executor/native_tools.cc): where the dying test was.
constexpr std::string_view kAgentStageLine = "[triage-agent] the bringup stage file reads ";

// A C assert() that failed in compiler code: "<prog>: .../mlir/lib/IR/Verifier.cpp:42: <fn>:
// Assertion `x' failed."; the file names LLVM or MLIR.
bool IsCompilerAssertion(std::string_view t) {
  if (!Contains(t, "Assertion `") || !Contains(t, "' failed")) return false;
  const std::string lower = absl::AsciiStrToLower(std::string(t));
  return Contains(lower, "mlir") || Contains(lower, "llvm");
}

// Where a compiler abort's own message starts in a line; npos when the line is none.
std::size_t CompilerFatalAt(std::string_view t) {
  for (std::string_view marker : kCompilerFatal) {
    if (std::size_t at = t.find(marker); at != std::string_view::npos) return at;
  }
  if (IsCompilerAssertion(t)) {
    // From the file, without the program name in front ("python3: ").
    std::size_t at = t.find(": ");
    return at != std::string_view::npos && at < t.find("Assertion `") ? at + 2 : 0;
  }
  return std::string_view::npos;
}

// The signal a crash report names: faulthandler's "Fatal Python error: Segmentation fault", the
// shell's "Aborted (core dumped)"; 0 when it names none.
int SignalOfCrashText(std::string_view s) {
  if (Contains(s, "Segmentation fault")) return 11;
  if (Contains(s, "Aborted")) return 6;
  if (Contains(s, "Bus error")) return 7;
  if (Contains(s, "Floating point exception")) return 8;
  if (Contains(s, "Illegal instruction")) return 4;
  return 0;
}

// "Fatal Python error: Aborted" only says which signal arrived; the reason names the signal
// itself.
bool NamesOnlyTheSignal(std::string_view fatal_python_line) {
  std::string_view rest = fatal_python_line.substr(fatal_python_line.find(kFatalPython));
  rest = util::TrimWhitespace(rest.substr(kFatalPython.size()));
  while (!rest.empty() && rest.back() == '.') rest.remove_suffix(1);
  for (std::string_view name : {"Segmentation fault", "Aborted", "Bus error",
                                "Floating point exception", "Illegal instruction"}) {
    if (rest == name) return true;
  }
  return false;
}

// glog's fatal line, which torch_xla's failed checks print before aborting:
// "F0601 10:00:00.123456  4242 debug_macros.h:20] Check failed: ...", possibly on pytest's
// progress line. Where it starts, or npos.
std::size_t GlogFatalAt(std::string_view t) {
  for (std::size_t p = t.find('F'); p != std::string_view::npos; p = t.find('F', p + 1)) {
    std::size_t i = p + 1;
    std::size_t digits = 0;
    while (i < t.size() && IsDigit(t[i]) && digits < 5) ++i, ++digits;
    if (digits != 4 || i >= t.size() || t[i] != ' ') continue;
    std::size_t time_start = ++i;
    while (i < t.size() && (IsDigit(t[i]) || t[i] == ':' || t[i] == '.')) ++i;
    if (i == time_start || !Contains(t.substr(time_start, i - time_start), ":")) continue;
    std::size_t spaces = i;
    while (i < t.size() && t[i] == ' ') ++i;
    std::size_t thread = i;
    while (i < t.size() && IsDigit(t[i])) ++i;
    if (i == spaces || i == thread || i >= t.size() || t[i] != ' ') continue;
    std::size_t close = t.find("] ", i);
    std::size_t blank = t.find(' ', i + 1);
    if (close == std::string_view::npos || (blank != std::string_view::npos && blank < close)) {
      continue;
    }
    return p;
  }
  return std::string_view::npos;
}

// What a fatal line says beyond the signal, or nothing: TT_FATAL/TT_THROW lines, a terminate
// message and the exception text under it, "Fatal Python error: <more than a signal name>",
// glog's "F..." lines.
std::optional<std::string_view> FatalMessage(const Line& l) {
  if (l.what) return l.text;
  if (std::size_t at = l.text.find(kFatalPython); at != std::string_view::npos) {
    if (NamesOnlyTheSignal(l.text)) return std::nullopt;
    return l.text.substr(at);
  }
  if (ContainsAny(l.text, kTtErrorMarkers)) return l.text;
  if (std::size_t at = CompilerFatalAt(l.text); at != std::string_view::npos) {
    return l.text.substr(at);
  }
  if (std::size_t at = l.text.find(kTerminate); at != std::string_view::npos) {
    return l.text.substr(at);
  }
  if (std::size_t at = GlogFatalAt(l.text); at != std::string_view::npos) {
    return l.text.substr(at);
  }
  return std::nullopt;
}

// The part of a pytest log about one test: from its "____ test_x[<key>] ____" header in the
// FAILURES (or PASSES) summary to the next header or "====" line. The whole log when there is no
// such header.
std::string_view LogOfTest(std::string_view log, std::string_view key) {
  if (key.empty()) return log;
  const std::string needle = util::StrCat("[", key, "]");
  auto is_header = [](std::string_view t) {
    return t.size() > 6 && t.starts_with("___") && t.ends_with("___");
  };
  std::size_t begin = std::string_view::npos;
  for (std::string_view line : util::SplitLines(log)) {
    std::size_t at = static_cast<std::size_t>(line.data() - log.data());
    std::string_view t = util::TrimWhitespace(line);
    if (begin == std::string_view::npos) {
      if (is_header(t) && Contains(t, needle)) begin = at;
    } else if (is_header(t) || t.starts_with("====")) {
      return log.substr(begin, at - begin);
    }
  }
  return begin == std::string_view::npos ? log : log.substr(begin);
}

std::string_view FirstLine(std::string_view text) {
  for (std::string_view line : util::SplitLines(text)) {
    std::string_view t = util::TrimWhitespace(line);
    if (!t.empty()) return t;
  }
  return {};
}

// The BringupStatus a stage-file marker stands for (tests/runner/test_utils.py's mapping).
std::string_view StageOfStageFile(std::string_view raw) {
  if (raw == "FE_COMPILATION_START" || raw == kFeStage) return kFeStage;
  if (raw == "TTMLIR_COMPILATION_START" || raw == kTtmlirStage) return kTtmlirStage;
  if (raw == "RUNTIME_EXECUTION_START" || raw == kRuntimeStage) return kRuntimeStage;
  return {};
}

// tags' bringup_status is str(BringupStatus.X), i.e. "X"; older runners and YAML echoes also give
// "BringupStatus.X" or the lower-case value. Only the failure stages are of use here.
std::string_view FailureStageOfTag(std::string_view tag) {
  constexpr std::string_view kEnumPrefix = "BringupStatus.";
  if (tag.starts_with(kEnumPrefix)) tag.remove_prefix(kEnumPrefix.size());
  std::string upper(tag);
  for (char& c : upper) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
  for (std::string_view stage : {kFeStage, kTtmlirStage, kRuntimeStage}) {
    if (upper == stage) return stage;
  }
  return {};
}

// "... running the test CRASHED with signal 6" (pytest-forked) -> 6; 0 when absent.
int ForkedCrashSignal(std::string_view s) {
  std::size_t at = s.find(kForkedCrash);
  if (at == std::string_view::npos) return 0;
  int signal = 0;
  for (std::size_t i = at + kForkedCrash.size(); i < s.size() && IsDigit(s[i]); ++i) {
    signal = signal * 10 + (s[i] - '0');
    if (signal > 1000) return 0;
  }
  return signal;
}

class Classifier {
 public:
  Classifier(const TestCase* tc, const VerifyContext& ctx) : tc_(tc), ctx_(ctx) {}

  Finding Run() {
    if (tc_ == nullptr || tc_->outcome == Outcome::kMissing) return WithoutTestcase();
    switch (tc_->outcome) {
      case Outcome::kPassed:
        f_.verdict = Verdict::kPass;
        return f_;
      case Outcome::kSkipped:
        return UnexpectedSkip();
      case Outcome::kFailed:
      case Outcome::kError:
      case Outcome::kMissing:
        break;
    }
    return Failed();
  }

 private:
  // Every reason goes through NormalizeReason (docs/junit.md, "Form of a reason").
  std::string Clean(std::string_view line) const {
    return NormalizeReason(line, ctx_.max_reason_bytes);
  }

  bool IsEcho(std::string_view line) const {
    std::string_view old = util::TrimWhitespace(ctx_.old_reason);
    if (old.empty()) return false;
    line = util::TrimWhitespace(line);
    if (line == old || (line.size() > old.size() + 2 && line.ends_with(old) &&
                        line.substr(line.size() - old.size() - 2, 2) == ": ")) {
      return true;
    }
    // An old reason written before the reason form existed, echoed verbatim.
    return NormalizeReason(line, 0) == NormalizeReason(old, 0);
  }

  // A line that may be quoted as the reason. Only the runner's error_message property echoes the
  // old YAML reason (TrustedErrorMessage); the exception itself (triage_error, the traceback) is
  // the real error even when it reads like the old reason (an op still without a kernel).
  bool Usable(std::string_view line) const {
    return !line.empty() && !IsGeneric(line) && !IsNoise(line) && !IsXFailedLine(line);
  }

  bool IsUsableException(const Line& l) const {
    return Usable(l.text) && IsExceptionLine(l.text, l.e_line);
  }

  // The exception a traceback reports: its outermost exception's first line (outer) and the
  // exception the reason names (pick). pytest prints a chain innermost first, so the search
  // starts at the last exception line (a continuation line of a multi-line message counts: torch's
  // "BackendCompilerFailed: backend='tt' raised:" is followed by the error it wraps) and steps
  // back one link of the chain for as long as the later exception wraps the earlier one.
  struct ExceptionPick {
    const Line* outer = nullptr;
    const Line* pick = nullptr;
  };
  ExceptionPick PickException(const std::vector<Line>& lines) const {
    ExceptionPick out;
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
      if (IsUsableException(*it)) {
        out.pick = &*it;
        break;
      }
    }
    if (out.pick == nullptr) return out;
    for (const Line& l : lines) {
      if (l.link == out.pick->link && IsUsableException(l)) {
        out.outer = &l;
        break;
      }
    }
    while (out.pick->link > 0) {
      const int link = out.pick->link;
      std::vector<const Line*> wrapper;
      const Line* inner = nullptr;
      for (const Line& l : lines) {
        if (l.link == link) wrapper.push_back(&l);
        if (l.link == link - 1 && IsUsableException(l)) inner = &l;
      }
      if (inner == nullptr || !Wraps(wrapper, *inner)) break;
      out.pick = inner;
    }
    return out;
  }

  // The playbooks' order: the first TT_FATAL/TT_THROW line, else the first MLIR "error:" line,
  // else the exception PickException names.
  std::optional<std::string> PickFromLines(const std::vector<Line>& lines) const {
    for (const Line& l : lines) {
      if (Usable(l.text) && ContainsAny(l.text, kTtErrorMarkers)) return Clean(l.text);
    }
    for (const Line& l : lines) {
      if (Usable(l.text) && Contains(l.text, "error:")) return Clean(l.text);
    }
    if (const Line* pick = PickException(lines).pick) return Clean(pick->text);
    return std::nullopt;
  }

  const std::string* TrustedErrorMessage() const {
    const std::string* em = tc_->Property("error_message");
    if (em == nullptr || ctx_.forced_skip || IsEcho(*em)) return nullptr;
    return em;
  }

  void SetReason(std::string reason, std::string_view source) {
    f_.reason = std::move(reason);
    f_.reason_source = std::string(source);
  }

  // triage_error and error_message hold the outermost exception's first line. When the traceback
  // shows that exception wrapping another, the reason is the wrapped one.
  bool SetReasonFromProperty(std::string_view first, std::string_view source) {
    const std::vector<Line> traceback = CandidateLines(tc_->text, TextKind::kTraceback);
    ExceptionPick e = PickException(traceback);
    if (e.pick != nullptr && e.outer != nullptr && e.pick != e.outer &&
        SameException(first, e.outer->text)) {
      SetReason(Clean(e.pick->text), "failure_text");
    } else {
      SetReason(Clean(first), source);
    }
    return true;
  }

  // The generic text the failure left ("RuntimeError: Bad StatusOr access: INTERNAL: Error code:
  // 13"), in SelectReason's order of evidence; false when it left none. Echoes of the old reason
  // never count.
  bool SelectGenericReason() {
    auto generic = [](std::string_view line) { return !line.empty() && IsGeneric(line); };
    if (const std::string* te = tc_->Property("triage_error")) {
      if (std::string_view first = FirstLine(*te); generic(first)) {
        SetReason(Clean(first), "triage_error");
        return true;
      }
    }
    if (const std::string* em = TrustedErrorMessage()) {
      if (std::string_view first = FirstLine(*em); generic(first)) {
        SetReason(Clean(first), "error_message");
        return true;
      }
    }
    for (const Line& l : CandidateLines(tc_->text, TextKind::kTraceback)) {
      if (generic(l.text) && !IsEcho(l.text)) {
        SetReason(Clean(l.text), "failure_text");
        return true;
      }
    }
    if (std::string_view first = FirstLine(tc_->message); generic(first)) {
      SetReason(Clean(first), "failure_text");
      return true;
    }
    return false;
  }

  // Fills reason/reason_source from the best evidence; false when nothing usable exists.
  bool SelectReason() {
    if (const std::string* te = tc_->Property("triage_error")) {
      std::string_view first = FirstLine(*te);
      if (Usable(first)) return SetReasonFromProperty(first, "triage_error");
    }
    if (const std::string* em = TrustedErrorMessage()) {
      std::string_view first = FirstLine(*em);
      if (Usable(first) && first != "Not specified") {  // the runner's placeholder
        return SetReasonFromProperty(first, "error_message");
      }
    }
    if (auto r = PickFromLines(CandidateLines(tc_->text, TextKind::kTraceback))) {
      SetReason(*std::move(r), "failure_text");
      return true;
    }
    if (std::string_view first = FirstLine(tc_->message); Usable(first)) {
      SetReason(Clean(first), "failure_text");
      return true;
    }
    for (std::string_view log :
         {std::string_view(tc_->system_err), std::string_view(tc_->system_out),
          LogOfTest(ctx_.log_text, tc_->key)}) {
      if (auto r = PickFromLines(CandidateLines(log, TextKind::kLog))) {
        SetReason(*std::move(r), "log");
        return true;
      }
    }
    return false;
  }

  // The testcase's own error evidence, as lines: what the stage text rules and the PCC rule read.
  std::vector<Line> FailureLines() const {
    std::vector<Line> lines;
    auto add = [&](std::string_view text, TextKind kind) {
      std::vector<Line> more = CandidateLines(text, kind);
      lines.insert(lines.end(), more.begin(), more.end());
    };
    if (const std::string* te = tc_->Property("triage_error")) add(*te, TextKind::kTraceback);
    if (const std::string* em = TrustedErrorMessage()) add(*em, TextKind::kTraceback);
    add(tc_->message, TextKind::kTraceback);
    add(tc_->text, TextKind::kTraceback);
    return lines;
  }

  std::vector<Line> LogLines() const {
    std::vector<Line> lines;
    for (std::string_view log :
         {std::string_view(tc_->system_err), std::string_view(tc_->system_out),
          LogOfTest(ctx_.log_text, tc_->key)}) {
      std::vector<Line> more = CandidateLines(log, TextKind::kLog);
      lines.insert(lines.end(), more.begin(), more.end());
    }
    return lines;
  }

  // Stage by text (docs/junit.md, "Stage of a failure"): runtime markers
  // win over compiler markers; anything else is a Python exception before any TT call.
  std::string_view StageFromLines(const std::vector<Line>& lines) const {
    auto evidence = [&](const Line& l) { return !IsNoise(l.text) && !IsXFailedLine(l.text); };
    for (const Line& l : lines) {
      if (evidence(l) && ContainsAny(l.text, kRuntimeMarkers)) return kRuntimeStage;
    }
    for (const Line& l : lines) {
      if (evidence(l) && ContainsAny(l.text, kCompilerMarkers)) return kTtmlirStage;
    }
    return kFeStage;
  }

  void SelectStage() {
    if (const std::string* raw = tc_->Property("triage_stage")) {
      std::string_view marker = util::TrimWhitespace(*raw);
      if (std::string_view stage = StageOfStageFile(marker); !stage.empty()) {
        f_.stage = std::string(stage);
        f_.stage_source = "stage_file";
        return;
      }
      if (!marker.empty()) {
        f_.review.push_back(
            util::StrCat("triage_stage property holds an unknown stage '", marker, "' (ignored)"));
      }
    }
    if (!ctx_.forced_skip) {
      if (std::string_view stage = StageFromTags(); !stage.empty()) {
        f_.stage = std::string(stage);
        f_.stage_source = "tags";
        return;
      }
    }
    std::vector<Line> lines = FailureLines();
    // The log joins in only when the reason came from it: a log can hold other tests' output.
    if (f_.reason_source == "log" || f_.reason.empty()) {
      std::vector<Line> more = LogLines();
      lines.insert(lines.end(), more.begin(), more.end());
    }
    f_.stage = std::string(StageFromLines(lines));
    f_.stage_source = "text";
  }

  std::string_view StageFromTags() {
    const std::string* tags = tc_->Property("tags");
    if (tags == nullptr) return {};
    absl::StatusOr<inventory::Value> parsed = ParsePythonLiteral(*tags);
    if (!parsed.ok()) {
      f_.review.push_back(util::StrCat("tags property is not a Python literal (ignored): ",
                                       util::MessageOf(parsed.status())));
      return {};
    }
    if (!parsed->is_map()) {
      f_.review.push_back(
          util::StrCat("tags property is a ", parsed->KindName(), ", not a dict (ignored)"));
      return {};
    }
    const inventory::Value* status = parsed->Find("bringup_status");
    if (status == nullptr || !status->is_string()) return {};
    return FailureStageOfTag(status->string);
  }

  // The first line among lines that contains needle, quoted.
  std::optional<std::string> FindLine(const std::vector<Line>& lines,
                                      std::string_view needle) const {
    for (const Line& l : lines) {
      if (Contains(l.text, needle) && !IsXFailedLine(l.text)) {
        return Clean(l.text);
      }
    }
    return std::nullopt;
  }

  Finding Failed() {
    std::vector<Line> message_lines = CandidateLines(tc_->message, TextKind::kTraceback);
    std::vector<Line> text_lines = CandidateLines(tc_->text, TextKind::kTraceback);

    // pytest-forked: the child died. Its last words are in the captured output (system-err,
    // system-out, or this test's section of the log).
    if (int signal = std::max(ForkedCrashSignal(tc_->message), ForkedCrashSignal(tc_->text));
        signal > 0) {
      for (std::string_view output :
           {std::string_view(tc_->system_err), std::string_view(tc_->system_out),
            LogOfTest(ctx_.log_text, tc_->key)}) {
        std::vector<Line> lines = CandidateLines(output, TextKind::kLog);
        if (auto message = LastFatalMessage(lines)) {
          return Crash(signal, *message, "log", output, lines);
        }
      }
      return Crash(signal, {}, "failure_text", {}, {});
    }

    std::optional<std::string> timeout = FindLine(message_lines, kTimeoutMarker);
    if (!timeout) timeout = FindLine(text_lines, kTimeoutMarker);
    if (timeout) {
      f_.verdict = Verdict::kTimeout;
      SetReason(*std::move(timeout), "failure_text");
      return f_;
    }

    std::vector<Line> failure_lines = FailureLines();
    if (std::optional<std::string> pcc = FindLine(failure_lines, kPccFailure)) {
      f_.verdict = Verdict::kIncorrectResult;
      f_.stage = std::string(kIncorrectResultStage);
      f_.stage_source = "text";
      f_.reason = *std::move(pcc);
      f_.reason_source = "failure_text";
      return f_;
    }

    f_.verdict = Verdict::kFailure;
    if (!SelectReason()) {
      if (ctx_.old_reason_stale && SelectGenericReason()) {
        f_.review.push_back(util::StrCat(
            "generic reason: the device run reported only '", f_.reason, "', and the old reason '",
            util::TrimWhitespace(ctx_.old_reason),
            "' no longer reproduces; written so that the YAML does not keep a false reason; "
            "find the real error in the log"));
      } else {
        f_.review.push_back(
            "failure without a usable reason (only generic or echoed messages); read the log");
      }
    }
    SelectStage();
    if (tc_->outcome == Outcome::kError) {
      f_.review.push_back(util::StrCat("pytest reported an error outside the test body: ",
                                       FirstLine(tc_->message)));
    }
    return f_;
  }

  Finding UnexpectedSkip() {
    bool xfail = tc_->IsXfail();
    f_.verdict = xfail ? Verdict::kUnexpectedXfail : Verdict::kUnexpectedSkip;
    std::string note =
        util::StrCat("unexpected ", xfail ? "pytest.xfail" : "pytest.skip",
                     " with --force-run --runxfail (another skip/xfail path triggered)");
    if (std::string_view msg = FirstLine(tc_->message); !msg.empty()) {
      util::StrAppend(&note, ": ", Clean(msg));
    }
    f_.review.push_back(std::move(note));
    return f_;
  }

  // pytest died without writing the testcase: only the log can tell a crash or a timeout.
  Finding WithoutTestcase() {
    if (util::TrimWhitespace(ctx_.log_text).empty() && ctx_.exit_signal == 0) {
      f_.verdict = Verdict::kNoEvidence;
      f_.review.push_back("no testcase and no log: nothing shows what happened");
      return f_;
    }
    std::string_view key = tc_ != nullptr ? std::string_view(tc_->key) : std::string_view();
    const std::string_view log = LogOfTest(ctx_.log_text, key);
    std::vector<Line> lines = CandidateLines(log, TextKind::kLog);

    // The signal: pytest-forked's number, else the first signal a crash report names
    // (faulthandler's "Fatal Python error: Segmentation fault", the shell's "Aborted (core
    // dumped)"), else the exit signal, else SIGABRT (Py_FatalError and std::terminate abort).
    int signal = 0;
    bool reported = false;
    for (const Line& l : lines) {
      if (int forked = ForkedCrashSignal(l.text); forked > 0) {
        signal = forked;
        reported = true;
        break;
      }
    }
    if (!reported) {
      for (const Line& l : lines) {
        bool fatal_python = Contains(l.text, kFatalPython);
        bool shell = Contains(l.text, "Segmentation fault") ||
                     (Contains(l.text, "Aborted") && Contains(l.text, "core dumped")) ||
                     l.text == "Aborted";
        bool terminate = Contains(l.text, kTerminate);
        if (l.what || !(fatal_python || shell || terminate)) continue;
        reported = true;
        if (signal == 0) signal = SignalOfCrashText(l.text);
      }
      if (signal == 0) signal = ctx_.exit_signal;
      if (signal == 0 && reported) signal = 6;
    }
    // A process that died by a signal and printed nothing about it crashed all the same.
    if (reported || ctx_.exit_signal > 0) {
      return Crash(signal, LastFatalMessage(lines).value_or(std::string_view()), "log", log, lines);
    }

    if (std::optional<std::string> timeout = FindLine(lines, kTimeoutMarker)) {
      f_.verdict = Verdict::kTimeout;
      SetReason(*std::move(timeout), "log");
      return f_;
    }

    f_.verdict = Verdict::kNoEvidence;
    f_.review.push_back("no testcase, and the log shows neither a crash nor a timeout");
    // Not acted on, but it tells the reviewer where to look.
    if (std::optional<std::string> r = PickFromLines(lines)) SetReason(*std::move(r), "log");
    return f_;
  }

  // The last line a dying process left about its error that says more than the signal
  // (FatalMessage): later lines are closer to the death.
  std::optional<std::string_view> LastFatalMessage(const std::vector<Line>& lines) const {
    std::optional<std::string_view> last;
    for (const Line& l : lines) {
      if (!Usable(l.text)) continue;
      if (std::optional<std::string_view> m = FatalMessage(l)) last = m;
    }
    return last;
  }

  // A crash. Its stage is where the dying test was: the runner's stage file as the agent found
  // it after the death (kAgentStageLine in the log), else TT-MLIR compilation when the compiler
  // aborted (an LLVM/MLIR assertion or UNREACHABLE line), else runtime execution, the default a
  // signal alone gives. The reason names the signal, the stage when the evidence showed it, and
  // the last fatal message (docs/junit.md, "Crashes").
  Finding Crash(int signal, std::string_view message, std::string_view source,
                std::string_view output, const std::vector<Line>& lines) {
    f_.verdict = Verdict::kCrash;
    f_.signal = signal;
    f_.stage = std::string(kRuntimeStage);
    f_.stage_source = "signal";
    std::string_view marker;
    for (std::string_view line : util::SplitLines(output)) {
      std::string_view t = util::TrimWhitespace(line);
      if (std::size_t at = t.find(kAgentStageLine); at != std::string_view::npos) {
        marker = util::TrimWhitespace(t.substr(at + kAgentStageLine.size()));
      }
    }
    if (std::string_view stage = StageOfStageFile(marker); !stage.empty()) {
      f_.stage = std::string(stage);
      f_.stage_source = "stage_file";
    } else if (std::any_of(lines.begin(), lines.end(), [](const Line& l) {
                 return CompilerFatalAt(l.text) != std::string_view::npos;
               })) {
      f_.stage = std::string(kTtmlirStage);
      f_.stage_source = "text";
    }
    const std::string_view where =
        f_.stage_source == "signal" ? std::string_view() : CrashWhere(f_.stage);
    SetReason(CrashReason(signal, where, message, ctx_.max_reason_bytes), source);
    f_.crash_message = std::string(message);
    return f_;
  }

  const TestCase* tc_;
  const VerifyContext& ctx_;
  Finding f_;
};

}  // namespace

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "pass";
    case Verdict::kIncorrectResult:
      return "incorrect_result";
    case Verdict::kFailure:
      return "failure";
    case Verdict::kCrash:
      return "crash";
    case Verdict::kTimeout:
      return "timeout";
    case Verdict::kUnexpectedSkip:
      return "unexpected_skip";
    case Verdict::kUnexpectedXfail:
      return "unexpected_xfail";
    case Verdict::kNoEvidence:
      return "no_evidence";
  }
  return "unknown";
}

Finding Classify(const TestCase* tc, const VerifyContext& ctx) { return Classifier(tc, ctx).Run(); }

Decision Decide(const Finding& f) {
  Decision d;
  switch (f.verdict) {
    case Verdict::kPass:
      d.change = true;
      d.status = "EXPECTED_PASSING";
      break;
    case Verdict::kIncorrectResult:
      // The test runs end to end, only inaccurately: keep it running without the PCC assert.
      d.change = true;
      d.status = "EXPECTED_PASSING";
      d.assert_pcc = false;
      break;
    case Verdict::kFailure:
      if (f.reason.empty() || f.stage.empty()) break;  // an xfail needs its documented reason
      d.change = true;
      d.status = "KNOWN_FAILURE_XFAIL";
      d.bringup_status = f.stage;
      d.reason = f.reason;
      break;
    case Verdict::kCrash:
      // Never an xfail: a crashing test would take the whole nightly job down with it.
      d.change = true;
      d.status = "NOT_SUPPORTED_SKIP";
      d.bringup_status = f.stage.empty() ? std::string(kRuntimeStage) : f.stage;
      d.reason = f.reason;
      if (d.reason->empty()) d.reason = CrashReason(f.signal, "");
      break;
    case Verdict::kTimeout:
      d.change = true;
      d.status = "KNOWN_FAILURE_XFAIL";
      d.reason = f.reason;
      d.add_markers = {"notimeout"};
      break;
    case Verdict::kUnexpectedSkip:
    case Verdict::kUnexpectedXfail:
    case Verdict::kNoEvidence:
      break;
  }
  return d;
}

}  // namespace triage::junit
