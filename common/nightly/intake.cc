#include "common/nightly/intake.h"

#include <archive.h>
#include <archive_entry.h>
#include <expat.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/junit/junit.h"
#include "common/nightly/record.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::nightly {
namespace {

namespace fs = std::filesystem;

// Bytes handed to expat at a time (and read from a file or an archive member at a time).
constexpr std::size_t kBlockBytes = 64 * 1024;
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

bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7f; }

// A name from inside an archive or a directory, fit for a message and a protobuf string: control
// characters as '?', bytes that are not UTF-8 as U+FFFD, at most 512 bytes.
std::string SafeName(std::string_view s) {
  std::string out;
  while (!s.empty() && out.size() < 512) {
    std::optional<std::size_t> bad = util::FirstInvalidUtf8(s);
    std::string_view good = s.substr(0, bad.value_or(s.size()));
    for (char c : good) out.push_back(IsControl(static_cast<unsigned char>(c)) ? '?' : c);
    if (!bad) break;
    out.append("\xEF\xBF\xBD");
    s.remove_prefix(*bad + 1);
  }
  if (out.size() > 512) out = std::string(util::TruncateUtf8(out, 512)) + "...";
  return out;
}

bool EndsWith(std::string_view s, std::string_view suffix) { return s.ends_with(suffix); }

bool IsXmlName(std::string_view name) { return EndsWith(name, ".xml"); }

enum class ArchiveKind { kNone, kZip, kTar, kTarGz };

ArchiveKind ArchiveKindOf(std::string_view name) {
  if (EndsWith(name, ".zip")) return ArchiveKind::kZip;
  if (EndsWith(name, ".tar.gz") || EndsWith(name, ".tgz")) return ArchiveKind::kTarGz;
  if (EndsWith(name, ".tar")) return ArchiveKind::kTar;
  return ArchiveKind::kNone;
}

// Days since 1970-01-01 of a proleptic Gregorian date.
std::int64_t DaysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

}  // namespace

std::optional<std::int64_t> ParseTimestampMs(std::string_view s) {
  std::size_t i = 0;
  auto number = [&](std::size_t digits, int& out) {
    if (i + digits > s.size()) return false;
    out = 0;
    for (std::size_t k = 0; k < digits; ++k, ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      out = out * 10 + (s[i] - '0');
    }
    return true;
  };
  auto expect = [&](char c) {
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  };
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!number(4, year) || !expect('-') || !number(2, month) || !expect('-') || !number(2, day)) {
    return std::nullopt;
  }
  if (!expect('T') && !expect(' ')) return std::nullopt;
  if (!number(2, hour) || !expect(':') || !number(2, minute) || !expect(':') ||
      !number(2, second)) {
    return std::nullopt;
  }
  int millis = 0;
  if (expect('.') || expect(',')) {
    std::size_t digits = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++digits) {
      if (digits < 3) millis = millis * 10 + (s[i] - '0');
    }
    if (digits == 0) return std::nullopt;
    for (std::size_t k = digits; k < 3; ++k) millis *= 10;
  }
  int offset_minutes = 0;
  if (i < s.size()) {
    if (expect('Z')) {
    } else if (s[i] == '+' || s[i] == '-') {
      const int sign = s[i] == '-' ? -1 : 1;
      ++i;
      int oh = 0, om = 0;
      if (!number(2, oh)) return std::nullopt;
      expect(':');
      if (!number(2, om) || oh > 23 || om > 59) return std::nullopt;
      offset_minutes = sign * (oh * 60 + om);
    } else {
      return std::nullopt;
    }
  }
  if (i != s.size()) return std::nullopt;
  static constexpr int kDaysIn[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12 || day < 1 || day > kDaysIn[month - 1] || hour > 23 || minute > 59 ||
      second > 60) {
    return std::nullopt;
  }
  const std::int64_t days =
      DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  const std::int64_t seconds =
      days * 86400 + hour * 3600 + minute * 60 + second - std::int64_t{offset_minutes} * 60;
  return seconds * 1000 + millis;
}

namespace {

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

// What one run's reading shares between its files.
struct RunState {
  v1::NightlyRun* run = nullptr;
  IntakeLimits limits;
  std::uint64_t run_bytes = 0;  // uncompressed bytes read so far
};

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

// One JUnit document read as a stream: expat events build one junit::TestCase at a time, which
// becomes a record (or a count, or a problem line) as soon as its </testcase> is read.
class DocumentReader {
 public:
  // display: the file as messages name it (the run's path as given joined with the file inside
  // the run); in_run: the file inside the run (records' source, problem lines).
  DocumentReader(std::string display, std::string in_run, RunState& state)
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
  ~DocumentReader() { XML_ParserFree(parser_); }
  DocumentReader(const DocumentReader&) = delete;
  DocumentReader& operator=(const DocumentReader&) = delete;

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

  static DocumentReader& Self(void* user) { return *static_cast<DocumentReader*>(user); }

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
    run.add_records()->Swap(&r);
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

// A file descriptor closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string ErrnoText(int err) { return std::generic_category().message(err); }

// Opens a regular file for reading without blocking on a FIFO, and refuses anything else.
absl::StatusOr<std::unique_ptr<Fd>> OpenRegular(const fs::path& path, const std::string& display) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(util::StrCat(display, ": no such file"));
    }
    return absl::InvalidArgumentError(util::StrCat(display, ": cannot open: ", ErrnoText(err)));
  }
  auto owned = std::make_unique<Fd>(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return absl::InvalidArgumentError(util::StrCat(display, ": cannot stat: ", ErrnoText(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        util::StrCat(display, ": not a regular file (a FIFO, socket or device): refused"));
  }
  // Reads block from here on (O_NONBLOCK only kept open() from waiting on a FIFO).
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return owned;
}

void FileRead(RunState& state, const std::string& in_run, const IntakeOptions* options) {
  state.run->add_files(in_run);
  if (options != nullptr && options->progress) {
    options->progress(state.run->files_size(), state.run->testcases());
  }
}

// One JUnit file on disk.
absl::Status ReadXmlFile(const fs::path& path, const std::string& display,
                         const std::string& in_run, RunState& state, const IntakeOptions* options) {
  absl::StatusOr<std::unique_ptr<Fd>> fd = OpenRegular(path, display);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (::fstat((*fd)->get(), &st) == 0 &&
      static_cast<std::uint64_t>(st.st_size) > state.limits.max_file_bytes) {
    return absl::InvalidArgumentError(
        util::StrCat(display, ": ", st.st_size, " bytes, over the limit of ",
                     state.limits.max_file_bytes, " bytes for one JUnit file"));
  }
  DocumentReader reader(display, in_run, state);
  std::vector<char> buffer(kBlockBytes);
  while (true) {
    ssize_t n = ::read((*fd)->get(), buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InvalidArgumentError(util::StrCat(display, ": cannot read: ", ErrnoText(errno)));
    }
    absl::Status status =
        reader.Feed(std::string_view(buffer.data(), static_cast<std::size_t>(n)), n == 0);
    if (!status.ok()) return status;
    if (n == 0) break;
  }
  FileRead(state, in_run, options);
  return absl::OkStatus();
}

struct ArchiveDeleter {
  void operator()(struct archive* a) const { archive_read_free(a); }
};

// An archive on disk, read as a stream: its *.xml members are parsed as they are decompressed;
// nothing is written to disk. display/in_run name the archive; members are "<archive>!<member>".
absl::Status ReadArchive(const fs::path& path, ArchiveKind kind, const std::string& display,
                         const std::string& in_run, RunState& state, const IntakeOptions* options) {
  absl::StatusOr<std::unique_ptr<Fd>> fd = OpenRegular(path, display);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<struct archive, ArchiveDeleter> a(archive_read_new());
  if (!a) return absl::ResourceExhaustedError(util::StrCat(display, ": out of memory"));
  if (kind == ArchiveKind::kZip) {
    archive_read_support_format_zip(a.get());
  } else {
    archive_read_support_format_tar(a.get());
    if (kind == ArchiveKind::kTarGz) archive_read_support_filter_gzip(a.get());
  }
  auto archive_error = [&](std::string_view where, std::string_view what) {
    const char* text = archive_error_string(a.get());
    return absl::InvalidArgumentError(
        util::StrCat(where, ": ", what, ": ", SafeName(text != nullptr ? text : "unknown")));
  };
  if (archive_read_open_fd(a.get(), (*fd)->get(), kBlockBytes) != ARCHIVE_OK) {
    return archive_error(display, "not a readable archive");
  }
  const std::string member_sep = in_run.empty() ? "" : "!";
  const std::string display_sep = "!";
  std::vector<char> buffer(kBlockBytes);
  while (true) {
    struct archive_entry* entry = nullptr;
    int rc = archive_read_next_header(a.get(), &entry);
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
      return archive_error(display, "not a readable archive");
    }
    const char* raw_name = archive_entry_pathname_utf8(entry);
    if (raw_name == nullptr) raw_name = archive_entry_pathname(entry);
    const std::string member = SafeName(raw_name != nullptr ? raw_name : "(unnamed)");
    const std::string member_display = util::StrCat(display, display_sep, member);
    const std::string member_in_run = util::StrCat(in_run, member_sep, member);
    if (archive_entry_filetype(entry) != AE_IFREG || !IsXmlName(member)) {
      // Skipping a member of a compressed tar decompresses it: it counts towards the run.
      if (kind == ArchiveKind::kTarGz && archive_entry_size_is_set(entry)) {
        state.run_bytes +=
            static_cast<std::uint64_t>(std::max<la_int64_t>(0, archive_entry_size(entry)));
        if (state.run_bytes > state.limits.max_run_bytes) {
          return absl::InvalidArgumentError(util::StrCat(member_display, ": the run is over ",
                                                         state.limits.max_run_bytes,
                                                         " bytes uncompressed"));
        }
      }
      if (archive_read_data_skip(a.get()) != ARCHIVE_OK) {
        return archive_error(member_display, "cannot read");
      }
      continue;
    }
    DocumentReader reader(member_display, member_in_run, state);
    while (true) {
      la_ssize_t n = archive_read_data(a.get(), buffer.data(), buffer.size());
      if (n < 0) return archive_error(member_display, "cannot read");
      absl::Status status =
          reader.Feed(std::string_view(buffer.data(), static_cast<std::size_t>(n)), n == 0);
      if (!status.ok()) return status;
      if (n == 0) break;
    }
    FileRead(state, member_in_run, options);
  }
  return absl::OkStatus();
}

// a joined with b by '/', without doubling a trailing one.
std::string JoinPath(std::string_view a, std::string_view b) {
  if (a.empty()) return std::string(b);
  if (a.back() == '/') return util::StrCat(a, b);
  return util::StrCat(a, "/", b);
}

// Whether `inner` (canonical) is `root` (canonical) or below it.
bool IsWithin(const fs::path& inner, const fs::path& root) {
  auto r = root.begin();
  auto i = inner.begin();
  for (; r != root.end(); ++r, ++i) {
    if (i == inner.end() || *i != *r) return false;
  }
  return true;
}

absl::Status ReadDirectory(const fs::path& root, const std::string& given, RunState& state,
                           const IntakeOptions& options) {
  std::error_code ec;
  const fs::path canonical_root = fs::canonical(root, ec);
  if (ec) {
    return absl::InvalidArgumentError(util::StrCat(given, ": cannot resolve: ", ec.message()));
  }
  struct Item {
    std::string rel;
    fs::path path;  // what to open (a symbolic link's target inside the run)
    ArchiveKind archive = ArchiveKind::kNone;
    std::string problem;  // not read: why (a problem line of the run)
  };
  std::vector<Item> items;
  fs::recursive_directory_iterator it(root, fs::directory_options::none, ec);
  if (ec) return absl::InvalidArgumentError(util::StrCat(given, ": cannot list: ", ec.message()));
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::directory_entry& entry = *it;
    const std::string name = entry.path().filename().string();
    const ArchiveKind archive = ArchiveKindOf(name);
    if (!IsXmlName(name) && archive == ArchiveKind::kNone) continue;
    const std::string rel = SafeName(entry.path().lexically_relative(root).generic_string());
    const std::string display = JoinPath(given, rel);
    fs::file_status status = entry.symlink_status(ec);
    if (ec) break;
    fs::path open_path = entry.path();
    if (fs::is_symlink(status)) {
      fs::path target = fs::canonical(entry.path(), ec);
      if (ec) {
        ec.clear();
        items.push_back({rel, {}, archive, "a symbolic link to nothing"});
        continue;
      }
      if (!IsWithin(target, canonical_root)) {
        items.push_back({rel, {}, archive, "a symbolic link out of the run's directory"});
        continue;
      }
      status = fs::status(target, ec);
      if (ec) break;
      open_path = target;
    }
    if (fs::is_directory(status)) continue;  // e.g. a folder named "x.xml": its files are read
    if (!fs::is_regular_file(status)) {
      return absl::InvalidArgumentError(
          util::StrCat(display, ": not a regular file (a FIFO, socket or device): refused"));
    }
    items.push_back({rel, open_path, archive, ""});
  }
  if (ec) return absl::InvalidArgumentError(util::StrCat(given, ": cannot list: ", ec.message()));
  std::sort(items.begin(), items.end(), [](const Item& x, const Item& y) { return x.rel < y.rel; });
  for (const Item& item : items) {
    if (!item.problem.empty()) {
      AddProblem(*state.run, util::StrCat(item.rel, ": ", item.problem, ": not read"));
      continue;
    }
    const std::string display = JoinPath(given, item.rel);
    absl::Status status =
        item.archive == ArchiveKind::kNone
            ? ReadXmlFile(item.path, display, item.rel, state, &options)
            : ReadArchive(item.path, item.archive, display, item.rel, state, &options);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::NightlyRun> ReadNightlyRun(const fs::path& path, const IntakeOptions& options) {
  const std::string given = path.string();
  v1::NightlyRun run;
  run.set_source(SafeName(given));
  std::string trimmed = given;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  run.set_label(SafeName(fs::path(trimmed).filename().string()));

  RunState state;
  state.run = &run;
  state.limits = options.limits;

  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    return absl::NotFoundError(util::StrCat(given, ": no such file or directory"));
  }
  absl::Status read;
  const std::string name = fs::path(trimmed).filename().string();
  if (fs::is_directory(status)) {
    read = ReadDirectory(path, given, state, options);
  } else if (ArchiveKind kind = ArchiveKindOf(name); kind != ArchiveKind::kNone) {
    read = ReadArchive(path, kind, given, "", state, &options);
  } else if (IsXmlName(name)) {
    read = ReadXmlFile(path, given, SafeName(name), state, &options);
  } else if (!fs::is_regular_file(status)) {
    read = absl::InvalidArgumentError(
        util::StrCat(given, ": not a regular file (a FIFO, socket or device): refused"));
  } else {
    read = absl::InvalidArgumentError(util::StrCat(
        given, ": not a directory, a JUnit .xml file or a .zip/.tar.gz/.tgz/.tar archive"));
  }
  if (!read.ok()) return read;
  return run;
}

absl::Status ReadJUnitBytes(std::string_view xml, const std::string& name, v1::NightlyRun& run,
                            const IntakeLimits& limits) {
  RunState state;
  state.run = &run;
  state.limits = limits;
  DocumentReader reader(name, name, state);
  // The same blocks a file is read in, so that the fuzz target sees what a real read does.
  do {
    std::string_view block = xml.substr(0, kBlockBytes);
    xml.remove_prefix(block.size());
    absl::Status status = reader.Feed(block, xml.empty());
    if (!status.ok()) return status;
  } while (!xml.empty());
  run.add_files(name);
  return absl::OkStatus();
}

}  // namespace triage::nightly
