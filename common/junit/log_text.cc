#include "common/junit/log_text.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "common/junit/python_literal.h"
#include "common/junit/reason.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::junit::log_text {

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
// FAILURES (or PASSES) summary to the next header or "====" line. With no such header: the whole
// log when it is this test's alone, nothing when the session ran other tests too.
std::string_view LogOfTest(std::string_view log, std::string_view key, bool shared) {
  if (key.empty()) return shared ? std::string_view() : log;
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
  if (begin != std::string_view::npos) return log.substr(begin);
  return shared ? std::string_view() : log;
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

}  // namespace triage::junit::log_text
