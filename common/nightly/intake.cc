#include "common/nightly/intake.h"

#include <archive.h>
#include <archive_entry.h>
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
#include "common/nightly/intake_stream.h"
#include "common/nightly/record.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::nightly {

// A name from inside an archive or a directory, fit for a message and a protobuf string: control
// characters as '?', bytes that are not UTF-8 as U+FFFD, at most 512 bytes.
std::string internal::SafeName(std::string_view s) {
  std::string out;
  while (!s.empty() && out.size() < 512) {
    std::optional<std::size_t> bad = util::FirstInvalidUtf8(s);
    std::string_view good = s.substr(0, bad.value_or(s.size()));
    for (char c : good) {
      const auto u = static_cast<unsigned char>(c);  // a control character
      out.push_back(u < 0x20 || u == 0x7f ? '?' : c);
    }
    if (!bad) break;
    out.append("\xEF\xBF\xBD");
    s.remove_prefix(*bad + 1);
  }
  if (out.size() > 512) out = std::string(util::TruncateUtf8(out, 512)) + "...";
  return out;
}

using internal::AddProblem;
using internal::DocumentReader;
using internal::RunState;
using internal::SafeName;

namespace {

namespace fs = std::filesystem;

// Bytes handed to expat at a time (and read from a file or an archive member at a time).
constexpr std::size_t kBlockBytes = 64 * 1024;

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
