#include "common/nightly/intake_stream.h"

#include <expat.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <utility>

#include "common/junit/junit.h"
#include "common/nightly/record.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::nightly::internal {
namespace {

// Of an outcome element's text (the traceback) a testcase keeps its first kTextHeadBytes and its
// last kTextTailBytes (pytest's "E   ..." lines end the traceback).
constexpr std::size_t kTextHeadBytes = 8 * 1024;
constexpr std::size_t kTextTailBytes = 2 * 1024;
// Of the <failure>/<error> message attribute a testcase keeps this much.
constexpr std::size_t kMessageBytes = 16 * 1024;
// Problem lines kept in a run; the rest are counted in one last line.
constexpr int kMaxProblems = 100;
constexpr std::string_view kMoreProblemsPrefix = "... and ";
constexpr std::string_view kMoreProblemsSuffix = " more testcases left out";

// The text of an outcome element: its first kTextHeadBytes and its last kTextTailBytes, each cut
// on a UTF-8 boundary (expat hands over UTF-8).
class TextCapture {
 public:
  void Append(std::string_view s) {
    if (!cut_) {
      std::size_t room = kTextHeadBytes - head_.size();
      if (s.size() <= room) {
        head_.append(s);
        return;
      }
      while (room > 0 && (static_cast<unsigned char>(s[room]) & 0xC0) == 0x80) --room;
      head_.append(s.substr(0, room));
      s.remove_prefix(room);
      cut_ = true;
    }
    tail_.append(s);
    if (tail_.size() > 4 * kTextTailBytes) Trim();
  }

  std::string Take() {
    if (!cut_) return std::move(head_);
    Trim();
    return util::StrCat(head_, "\n[...]\n", tail_);
  }

 private:
  void Trim() {
    if (tail_.size() <= kTextTailBytes) return;
    std::size_t from = tail_.size() - kTextTailBytes;
    while (from < tail_.size() && (static_cast<unsigned char>(tail_[from]) & 0xC0) == 0x80) {
      ++from;
    }
    tail_.erase(0, from);
  }

  std::string head_, tail_;
  bool cut_ = false;
};

}  // namespace

// One JUnit document read as a stream: expat events build one junit::TestCase at a time, which
// becomes a record (or a count, or a problem line) as soon as its </testcase> is read.
class DocumentReader::Impl {
 public:
  // display: the file as messages name it (the run's path as given joined with the file inside
  // the run); in_run: the file inside the run (records' source, problem lines).
  Impl(std::string display, std::string in_run, RunState& state)
      : display_(std::move(display)), in_run_(std::move(in_run)), state_(state) {
    parser_ = XML_ParserCreate(nullptr);
    XML_SetUserData(parser_, this);
    XML_SetElementHandler(parser_, &OnStart, &OnEnd);
    XML_SetCharacterDataHandler(parser_, &OnText);
    XML_SetCommentHandler(parser_, &OnComment);
    XML_SetProcessingInstructionHandler(parser_, &OnProcessingInstruction);
    XML_SetStartDoctypeDeclHandler(parser_, &OnDoctype);
    XML_SetEntityDeclHandler(parser_, &OnEntityDecl);
    XML_SetExternalEntityRefHandler(parser_, &OnExternalEntity);
    XML_SetParamEntityParsing(parser_, XML_PARAM_ENTITY_PARSING_NEVER);
    token_limit_ = 4 * std::uint64_t{state_.limits.max_property_bytes} + (1 << 20);
  }
  ~Impl() { XML_ParserFree(parser_); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Hands the next bytes of the document to the parser; final on the last call (data may be
  // empty then). The first error ends the document.
  absl::Status Feed(std::string_view data, bool final) {
    if (!error_.ok()) return error_;
    fed_ += data.size();
    state_.run_bytes += data.size();
    if (fed_ > state_.limits.max_file_bytes) {
      return Stop(util::StrCat(display_, ": over ", state_.limits.max_file_bytes,
                               " bytes uncompressed: larger than any JUnit file a run writes"));
    }
    if (state_.run_bytes > state_.limits.max_run_bytes) {
      return Stop(util::StrCat(display_, ": the run is over ", state_.limits.max_run_bytes,
                               " bytes uncompressed"));
    }
    if (const void* nul = std::memchr(data.data(), 0, data.size())) {
      std::size_t at = static_cast<const char*>(nul) - data.data();
      util::LineCol lc = util::LineColAt(data, at);
      std::size_t line = lines_ + static_cast<std::size_t>(lc.line);
      std::size_t col = lc.line == 1 ? col_ + static_cast<std::size_t>(lc.col) : lc.col;
      return Stop(util::StrCat(display_, ":", line, ":", col,
                               ": a NUL byte (a JUnit report is UTF-8 text; NUL is never in it)"));
    }
    CountLines(data);
    if (XML_Parse(parser_, data.data(), static_cast<int>(data.size()),
                  final ? XML_TRUE : XML_FALSE) == XML_STATUS_ERROR) {
      if (!error_.ok()) return error_;
      XML_Error code = XML_GetErrorCode(parser_);
      std::string what = XML_ErrorString(code);
      if (code == XML_ERROR_INVALID_TOKEN) {
        what +=
            ": a character XML forbids, or bytes that are not in the document's encoding "
            "(UTF-8 unless declared)";
      }
      bool at_end =
          final && (code == XML_ERROR_NO_ELEMENTS || code == XML_ERROR_UNCLOSED_TOKEN ||
                    code == XML_ERROR_PARTIAL_CHAR || code == XML_ERROR_UNCLOSED_CDATA_SECTION);
      if (at_end) what += " (the file ends before the XML is complete: truncated?)";
      error_ = ErrorHere(util::StrCat("malformed JUnit XML: ", what));
      return error_;
    }
    if (!error_.ok()) return error_;
    // One token (a tag with its attributes, a comment) is buffered whole by expat: bound it.
    if (fed_ - last_event_ > token_limit_) {
      return Stop(util::StrCat(display_, ": an XML token (a tag with its attributes, a comment) ",
                               "over ", token_limit_, " bytes, from byte ", last_event_));
    }
    if (final && !root_seen_) {
      error_ = absl::InvalidArgumentError(util::StrCat(display_, ": no root element"));
    }
    return error_;
  }

 private:
  struct Outcome {
    int rank = 0;  // failure 3, error 2, skipped 1
    junit::Outcome outcome = junit::Outcome::kPassed;
    std::string type, message;
    TextCapture text;
  };

  static Impl& Self(void* user) { return *static_cast<Impl*>(user); }

  static void XMLCALL OnStart(void* user, const XML_Char* name, const XML_Char** attrs) {
    Self(user).Start(name, attrs);
  }
  static void XMLCALL OnEnd(void* user, const XML_Char* name) { Self(user).End(name); }
  static void XMLCALL OnText(void* user, const XML_Char* s, int len) {
    Self(user).Text(std::string_view(s, static_cast<std::size_t>(len)));
  }
  static void XMLCALL OnComment(void* user, const XML_Char*) { Self(user).Mark(); }
  static void XMLCALL OnProcessingInstruction(void* user, const XML_Char*, const XML_Char*) {
    Self(user).Mark();
  }
  static void XMLCALL OnDoctype(void* user, const XML_Char*, const XML_Char*, const XML_Char*,
                                int) {
    Self(user).Fail(
        "a <!DOCTYPE> declaration: a JUnit report has none, and entities are never expanded");
  }
  static void XMLCALL OnEntityDecl(void* user, const XML_Char*, int, const XML_Char*, int,
                                   const XML_Char*, const XML_Char*, const XML_Char*,
                                   const XML_Char*) {
    Self(user).Fail("an entity declaration: entities are never expanded");
  }
  static int XMLCALL OnExternalEntity(XML_Parser parser, const XML_Char*, const XML_Char*,
                                      const XML_Char*, const XML_Char*) {
    Self(XML_GetUserData(parser)).Fail("an external entity: entities are never expanded");
    return XML_STATUS_ERROR;
  }

  static const char* Attr(const XML_Char** attrs, std::string_view name) {
    for (const XML_Char** a = attrs; *a != nullptr; a += 2) {
      if (name == a[0]) return a[1];
    }
    return nullptr;
  }

  void CountLines(std::string_view data) {
    std::size_t last = data.rfind('\n');
    if (last == std::string_view::npos) {
      col_ += data.size();
      return;
    }
    lines_ += static_cast<std::size_t>(std::count(data.begin(), data.end(), '\n'));
    col_ = data.size() - last - 1;
  }

  // The position of the event being handled: the end of the last complete token.
  void Mark() {
    XML_Index at = XML_GetCurrentByteIndex(parser_);
    if (at >= 0) last_event_ = static_cast<std::uint64_t>(at);
  }

  absl::Status ErrorHere(std::string_view what) const {
    return absl::InvalidArgumentError(util::StrCat(
        display_, ":", static_cast<std::uint64_t>(XML_GetCurrentLineNumber(parser_)), ":",
        static_cast<std::uint64_t>(XML_GetCurrentColumnNumber(parser_)) + 1, ": ", what));
  }

  // An error found in a handler: kept (the first one) and the parser stopped.
  void Fail(std::string_view what) { Fail(ErrorHere(what)); }
  void Fail(absl::Status status) {
    if (error_.ok()) error_ = std::move(status);
    XML_StopParser(parser_, XML_FALSE);
  }
  absl::Status Stop(std::string message) {
    error_ = absl::InvalidArgumentError(std::move(message));
    return error_;
  }

  bool CheckProperty(std::string_view name, std::size_t size) {
    if (size <= state_.limits.max_property_bytes) return true;
    Fail(util::StrCat("property '", SafeName(name), "' is ", size, " bytes, over the limit of ",
                      state_.limits.max_property_bytes, " bytes"));
    return false;
  }

  void Start(const XML_Char* name_chars, const XML_Char** attrs) {
    Mark();
    if (!error_.ok()) return;
    const std::string_view name = name_chars;
    ++depth_;
    if (depth_ > state_.limits.max_depth) {
      Fail(util::StrCat("elements nested deeper than ", state_.limits.max_depth));
      return;
    }
    if (depth_ == 1) {
      root_seen_ = true;
      if (name != "testsuites" && name != "testsuite") {
        Fail(util::StrCat("not a JUnit report: the root element is <", SafeName(name),
                          ">, expected <testsuites> or <testsuite>"));
        return;
      }
    }
    if (tc_depth_ == 0) {
      if (name == "testsuite") {
        if (const char* ts = Attr(attrs, "timestamp")) {
          if (std::optional<std::int64_t> ms = ParseTimestampMs(ts); ms && *ms > 0) {
            v1::NightlyRun& run = *state_.run;
            if (run.started_unix_ms() == 0 || *ms < run.started_unix_ms()) {
              run.set_started_unix_ms(*ms);
            }
          }
        }
      } else if (name == "testcase") {
        StartTestcase(attrs);
      }
      return;
    }
    if (depth_ == tc_depth_ + 1) {
      if (name == "properties") {
        in_properties_ = true;
      } else if (name == "failure" || name == "error" || name == "skipped") {
        reading_ = Outcome();
        reading_->rank = name == "failure" ? 3 : name == "error" ? 2 : 1;
        reading_->outcome = name == "failure" ? junit::Outcome::kFailed
                            : name == "error" ? junit::Outcome::kError
                                              : junit::Outcome::kSkipped;
        if (const char* type = Attr(attrs, "type")) reading_->type = type;
        if (const char* message = Attr(attrs, "message")) {
          reading_->message = util::TruncateUtf8(message, kMessageBytes);
        }
      }
      return;
    }
    if (in_properties_ && depth_ == tc_depth_ + 2 && name == "property") {
      const char* property = Attr(attrs, "name");
      const char* value = Attr(attrs, "value");
      std::string property_name = property != nullptr ? property : "";
      if (value != nullptr) {
        std::size_t size = std::strlen(value);
        if (!CheckProperty(property_name, size)) return;
        tc_.properties.emplace_back(std::move(property_name), std::string(value, size));
      } else {
        // Some writers put a long value in the element's text.
        property_text_ = std::make_pair(std::move(property_name), std::string());
      }
    }
  }

  void StartTestcase(const XML_Char** attrs) {
    tc_ = junit::TestCase();
    tc_depth_ = depth_;
    tc_line_ = static_cast<std::uint64_t>(XML_GetCurrentLineNumber(parser_));
    decisive_.reset();
    reading_.reset();
    property_text_.reset();
    in_properties_ = false;
    if (const char* v = Attr(attrs, "name")) tc_.name = v;
    if (const char* v = Attr(attrs, "classname")) tc_.classname = v;
    if (const char* v = Attr(attrs, "file")) tc_.file = v;
    tc_.key = junit::KeyOfTestName(tc_.name);
    if (const char* v = Attr(attrs, "time")) {
      std::string_view t = v;
      double seconds = 0;
      auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), seconds);
      if (ec == std::errc() && std::isfinite(seconds) && seconds > 0) tc_.time_seconds = seconds;
    }
  }

  void Text(std::string_view s) {
    Mark();
    if (!error_.ok() || tc_depth_ == 0) return;
    if (reading_ && depth_ == tc_depth_ + 1) {
      reading_->text.Append(s);
    } else if (property_text_ && depth_ == tc_depth_ + 2) {
      if (!CheckProperty(property_text_->first, property_text_->second.size() + s.size())) {
        return;
      }
      property_text_->second.append(s);
    }
  }

  void End(const XML_Char* name_chars) {
    Mark();
    if (!error_.ok()) return;
    const std::string_view name = name_chars;
    if (tc_depth_ != 0) {
      if (depth_ == tc_depth_ + 2 && property_text_ && name == "property") {
        tc_.properties.push_back(std::move(*property_text_));
        property_text_.reset();
      } else if (depth_ == tc_depth_ + 1) {
        if (name == "properties") {
          in_properties_ = false;
        } else if (reading_) {
          if (!decisive_ || reading_->rank > decisive_->rank) decisive_ = std::move(reading_);
          reading_.reset();
        }
      } else if (depth_ == tc_depth_) {
        FinishTestcase();
      }
    }
    --depth_;
  }

  void FinishTestcase() {
    tc_depth_ = 0;
    if (decisive_) {
      tc_.outcome = decisive_->outcome;
      tc_.result_type = std::move(decisive_->type);
      tc_.message = std::move(decisive_->message);
      tc_.text = decisive_->text.Take();
      decisive_.reset();
    }
    v1::NightlyRun& run = *state_.run;
    run.set_testcases(run.testcases() + 1);
    const std::string where = util::StrCat(in_run_, ":", tc_line_);
    absl::StatusOr<std::optional<v1::NightlyRecord>> record = RecordOf(tc_, where);
    if (!record.ok()) {
      // RecordOf names the file inside the run; messages name it as the user gave the run.
      std::string message = util::MessageOf(record.status());
      if (std::string_view(message).starts_with(in_run_)) {
        message = util::StrCat(display_, std::string_view(message).substr(in_run_.size()));
      }
      Fail(absl::InvalidArgumentError(message));
      return;
    }
    if (!record->has_value()) {
      run.set_not_model_tests(run.not_model_tests() + 1);
      return;
    }
    v1::NightlyRecord& r = **record;
    if (r.arch().empty()) {
      const bool has_tags = tc_.Property("tags") != nullptr;
      AddProblem(run, util::StrCat(where, ": ", r.test_function(), "[", r.key(),
                                   "]: ", has_tags ? "its tags have no arch" : "no tags property",
                                   ": left out"));
      return;
    }
    if (absl::Status pcc = CheckPcc(r); !pcc.ok()) {
      AddProblem(run, util::StrCat(where, ": ", r.test_function(), "[", r.key(),
                                   "]: ", util::MessageOf(pcc), ": left out"));
      return;
    }
    KeepRecord(state_, r);
  }

  std::string display_, in_run_;
  RunState& state_;
  XML_Parser parser_ = nullptr;
  absl::Status error_;
  std::uint64_t fed_ = 0;
  std::uint64_t last_event_ = 0;
  std::uint64_t token_limit_ = 0;
  std::size_t lines_ = 0;  // newlines fed so far
  std::size_t col_ = 0;    // bytes fed since the last newline
  std::size_t depth_ = 0;
  bool root_seen_ = false;

  // The testcase being read (tc_depth_ == 0: none).
  junit::TestCase tc_;
  std::size_t tc_depth_ = 0;
  std::uint64_t tc_line_ = 0;
  bool in_properties_ = false;
  std::optional<std::pair<std::string, std::string>> property_text_;
  std::optional<Outcome> reading_;   // the outcome element open now
  std::optional<Outcome> decisive_;  // the outcome so far: failure > error > skipped
};

namespace {

// The record's bytes without its source: what two records must share to be one.
std::string IdentityBytes(v1::NightlyRecord& record) {
  std::string source = std::move(*record.mutable_source());
  record.clear_source();
  std::string bytes;
  record.SerializeToString(&bytes);
  record.set_source(std::move(source));
  return bytes;
}

std::uint64_t HashOf(std::string_view bytes) { return std::hash<std::string_view>()(bytes); }

}  // namespace

void IndexRecords(RunState& state) {
  state.kept.clear();
  for (int i = 0; i < state.run->records_size(); ++i) {
    state.kept.emplace(HashOf(IdentityBytes(*state.run->mutable_records(i))), i);
  }
}

bool KeepRecord(RunState& state, v1::NightlyRecord& record) {
  v1::NightlyRun& run = *state.run;
  const std::string bytes = IdentityBytes(record);
  const std::uint64_t hash = HashOf(bytes);
  auto [first, last] = state.kept.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    if (IdentityBytes(*run.mutable_records(it->second)) == bytes) {
      run.set_duplicate_testcases(run.duplicate_testcases() + 1);
      return false;
    }
  }
  state.kept.emplace(hash, run.records_size());
  run.add_records()->Swap(&record);
  return true;
}

// A testcase left out of the run: kept while there are fewer than kMaxProblems, then counted in
// one last line ("... and N more testcases left out").
void AddProblem(v1::NightlyRun& run, std::string problem) {
  if (run.problems_size() < kMaxProblems) {
    run.add_problems(std::move(problem));
    return;
  }
  std::int64_t more = 0;
  if (run.problems_size() > kMaxProblems) {
    std::string_view last = run.problems(run.problems_size() - 1);
    if (last.starts_with(kMoreProblemsPrefix)) {
      last.remove_prefix(kMoreProblemsPrefix.size());
      std::from_chars(last.data(), last.data() + last.size(), more);
    }
    run.mutable_problems()->RemoveLast();
  }
  run.add_problems(util::StrCat(kMoreProblemsPrefix, more + 1, kMoreProblemsSuffix));
}

DocumentReader::DocumentReader(std::string display, std::string in_run, RunState& state)
    : impl_(std::make_unique<Impl>(std::move(display), std::move(in_run), state)) {}
DocumentReader::~DocumentReader() = default;
absl::Status DocumentReader::Feed(std::string_view data, bool final) {
  return impl_->Feed(data, final);
}

}  // namespace triage::nightly::internal
