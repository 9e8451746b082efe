#include "common/junit/verdict.h"

#include <cctype>

#include <algorithm>
#include <span>
#include <utility>

#include "common/inventory/value.h"
#include "common/junit/python_literal.h"
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

// Colour codes: raw ESC sequences in logs, and "#x1B[..m" where pytest's XML writer replaced the
// ESC byte it may not write.
std::string StripAnsi(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    std::size_t skip = 0;
    if (s[i] == '\x1b' && i + 1 < s.size() && s[i + 1] == '[') {
      skip = 2;
    } else if (s.substr(i).starts_with("#x1B[")) {
      skip = 5;
    }
    if (skip != 0) {
      std::size_t j = i + skip;
      while (j < s.size() && (IsDigit(s[j]) || s[j] == ';')) ++j;
      if (j < s.size() && ((s[j] >= 'A' && s[j] <= 'Z') || (s[j] >= 'a' && s[j] <= 'z'))) {
        i = j + 1;
        continue;
      }
    }
    out.push_back(s[i++]);
  }
  return out;
}

// tt-metal's logger writes "2025-05-01 10:00:00.123 | critical |   Always | TT_FATAL @ ...";
// the reason starts at the message, after the last column separator before the marker.
std::string_view DropLogHeader(std::string_view line, std::string_view marker) {
  std::size_t at = line.find(marker);
  std::size_t first_bar = line.find(" | ");
  if (at == std::string_view::npos || first_bar == std::string_view::npos || first_bar > at) {
    return line;
  }
  std::string_view first = util::TrimWhitespace(line.substr(0, first_bar));
  bool timestamp = !first.empty() && IsDigit(first[0]) &&
                   first.find_first_not_of("0123456789-:. T") == std::string_view::npos;
  bool component = !first.empty() && std::all_of(first.begin(), first.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  });
  if (!timestamp && !component) return line;
  std::size_t bar = line.rfind(" | ", at);
  return line.substr(bar + 3);
}

enum class TextKind { kTraceback, kLog };

struct Line {
  std::string_view text;  // trimmed, pytest's "E" column removed
  bool e_line = false;
  TextKind kind = TextKind::kTraceback;
};

// Lines that can be quoted. In a pytest traceback only "E   " lines and flush-left lines belong
// to the exception: indented and ">" lines are source code, which may well contain "TT_FATAL" or
// "error:" inside string literals. Logs also hold indented logger lines ("      Always | FATAL |
// ..."), so there an indented line counts when it has a logger's " | " column separator.
std::vector<Line> CandidateLines(std::string_view text, TextKind kind) {
  std::vector<Line> out;
  for (std::string_view line : util::SplitLines(text)) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.starts_with("E") && (line.size() == 1 || line[1] == ' ' || line[1] == '\t')) {
      std::string_view rest = util::TrimWhitespace(line.substr(1));
      if (!rest.empty()) out.push_back({rest, true, kind});
      continue;
    }
    if (line.starts_with(">")) continue;
    bool indented = !line.empty() && (line[0] == ' ' || line[0] == '\t');
    if (indented && (kind == TextKind::kTraceback || !Contains(line, " | "))) continue;
    std::string_view t = util::TrimWhitespace(line);
    if (t.empty() || t.starts_with("File \"")) continue;  // native traceback frame header
    out.push_back({t, false, kind});
  }
  return out;
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

int SignalOfCrashText(std::string_view s) {
  if (Contains(s, "Segmentation fault")) return 11;
  if (Contains(s, "Aborted")) return 6;
  if (Contains(s, "Bus error")) return 7;
  if (Contains(s, "Floating point exception")) return 8;
  if (Contains(s, "Illegal instruction")) return 4;
  return 0;
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
  std::string Clean(std::string_view line) const {
    std::string s = StripAnsi(line);
    std::string_view t = util::TrimWhitespace(s);
    t = util::TrimWhitespace(util::TruncateUtf8(t, ctx_.max_reason_bytes));
    return std::string(t);
  }

  bool IsEcho(std::string_view line) const {
    std::string_view old = util::TrimWhitespace(ctx_.old_reason);
    if (old.empty()) return false;
    line = util::TrimWhitespace(line);
    return line == old || (line.size() > old.size() + 2 && line.ends_with(old) &&
                           line.substr(line.size() - old.size() - 2, 2) == ": ");
  }

  // A line that may be quoted as the reason. Only the runner's error_message property echoes the
  // old YAML reason (TrustedErrorMessage); the exception itself (triage_error, the traceback) is
  // the real error even when it reads like the old reason (an op still without a kernel).
  bool Usable(std::string_view line) const {
    return !line.empty() && !IsGeneric(line) && !IsNoise(line) && !IsXFailedLine(line);
  }

  std::string Quote(const Line& line, std::string_view marker) const {
    return Clean(line.kind == TextKind::kLog ? DropLogHeader(line.text, marker) : line.text);
  }

  // The playbooks' order: the first TT_FATAL/TT_THROW line, else the first MLIR "error:" line,
  // else the last exception line (pytest prints the outermost exception last).
  std::optional<std::string> PickFromLines(const std::vector<Line>& lines) const {
    for (const Line& l : lines) {
      if (!Usable(l.text)) continue;
      for (std::string_view m : kTtErrorMarkers) {
        if (Contains(l.text, m)) return Quote(l, m);
      }
    }
    for (const Line& l : lines) {
      if (Usable(l.text) && Contains(l.text, "error:")) return Quote(l, "error:");
    }
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
      if (Usable(it->text) && IsExceptionLine(it->text, it->e_line)) return Clean(it->text);
    }
    return std::nullopt;
  }

  const std::string* TrustedErrorMessage() const {
    const std::string* em = tc_->Property("error_message");
    if (em == nullptr || ctx_.forced_skip || IsEcho(*em)) return nullptr;
    return em;
  }

  void SetReason(std::string reason, std::string_view source) {
    f_.reason = StripTypeBeforeTtError(std::move(reason));
    f_.reason_source = std::string(source);
  }

  // "RuntimeError: TT_FATAL @ ..." -> "TT_FATAL @ ...": the compiler/runtime's own line is the
  // reason tt-xla records for device errors; Python frontend errors keep their type
  // ("RuntimeError: mat1 and mat2 ...").
  static std::string StripTypeBeforeTtError(std::string reason) {
    static constexpr std::string_view kTtStarts[] = {"TT_FATAL", "TT_THROW",
                                                     "error: ", "Out of Memory", "ElementsAttr"};
    std::size_t colon = reason.find(": ");
    if (colon == std::string::npos || colon == 0) return reason;
    std::string_view type = std::string_view(reason).substr(0, colon);
    for (char c : type) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return reason;
    }
    if (!(type.ends_with("Error") || type.ends_with("Exception"))) return reason;
    std::string_view rest = std::string_view(reason).substr(colon + 2);
    for (auto start : kTtStarts) {
      if (rest.starts_with(start)) return std::string(rest);
    }
    return reason;
  }

  // Fills reason/reason_source from the best evidence; false when nothing usable exists.
  bool SelectReason() {
    if (const std::string* te = tc_->Property("triage_error")) {
      std::string_view first = FirstLine(*te);
      if (Usable(first)) {
        SetReason(Clean(first), "triage_error");
        return true;
      }
    }
    if (const std::string* em = TrustedErrorMessage()) {
      std::string_view first = FirstLine(*em);
      if (Usable(first) && first != "Not specified") {  // the runner's placeholder
        SetReason(Clean(first), "error_message");
        return true;
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
          std::string_view(ctx_.log_text)}) {
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
          std::string_view(ctx_.log_text)}) {
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

    if (int signal = std::max(ForkedCrashSignal(tc_->message), ForkedCrashSignal(tc_->text));
        signal > 0) {
      f_.verdict = Verdict::kCrash;
      f_.signal = signal;
      f_.stage = std::string(kRuntimeStage);
      f_.stage_source = "signal";
      SetReason(util::StrCat("crashed with signal ", signal), "failure_text");
      return f_;
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
      f_.review.push_back(
          "failure without a usable reason (only generic or echoed messages); read the log");
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
    std::vector<Line> lines = CandidateLines(ctx_.log_text, TextKind::kLog);

    for (const Line& l : lines) {
      if (int signal = ForkedCrashSignal(l.text); signal > 0) {
        return Crash(signal, util::StrCat("crashed with signal ", signal));
      }
    }
    const Line* fatal = nullptr;
    const Line* shell = nullptr;
    int signal = 0;
    for (const Line& l : lines) {
      if (fatal == nullptr && Contains(l.text, "Fatal Python error:")) fatal = &l;
      bool shell_report = Contains(l.text, "Segmentation fault") ||
                          (Contains(l.text, "Aborted") && Contains(l.text, "core dumped")) ||
                          l.text == "Aborted";
      if (shell_report) {
        if (shell == nullptr) shell = &l;
        if (signal == 0) signal = SignalOfCrashText(l.text);
      }
    }
    if (fatal != nullptr) {
      int from_fatal = SignalOfCrashText(fatal->text);
      // pytest prints the crash on the test's progress line: the reason starts at the error.
      std::string_view text = fatal->text;
      text = text.substr(text.find("Fatal Python error:"));
      return Crash(from_fatal != 0 ? from_fatal : signal, Clean(text));
    }
    if (shell != nullptr) return Crash(signal, Clean(shell->text));
    // The process died by a signal and printed nothing about it.
    if (ctx_.exit_signal > 0) {
      return Crash(ctx_.exit_signal, util::StrCat("crashed with signal ", ctx_.exit_signal));
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

  Finding Crash(int signal, std::string reason) {
    f_.verdict = Verdict::kCrash;
    f_.signal = signal;
    f_.stage = std::string(kRuntimeStage);
    f_.stage_source = "signal";
    SetReason(std::move(reason), "log");
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
      d.bringup_status = std::string(kRuntimeStage);
      d.reason = f.reason;
      if (d.reason->empty()) {
        d.reason = f.signal > 0 ? util::StrCat("crashed with signal ", f.signal) : "crashed";
      }
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
