#include "common/junit/verdict.h"

#include <algorithm>
#include <span>
#include <utility>

#include "absl/strings/ascii.h"
#include "common/inventory/value.h"
#include "common/junit/log_text.h"
#include "common/junit/python_literal.h"
#include "common/junit/reason.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::junit {
namespace {

using namespace log_text;  // NOLINT: verdict.cc is log_text's only reader

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

  // The testcase's part of the log (LogOfTest): none of a shared session's beyond its section.
  std::string_view OwnLog() const { return LogOfTest(ctx_.log_text, tc_->key, ctx_.log_shared); }

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
         {std::string_view(tc_->system_err), std::string_view(tc_->system_out), OwnLog()}) {
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
         {std::string_view(tc_->system_err), std::string_view(tc_->system_out), OwnLog()}) {
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
           {std::string_view(tc_->system_err), std::string_view(tc_->system_out), OwnLog()}) {
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
