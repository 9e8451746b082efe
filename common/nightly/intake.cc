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

// Archives inside archives are read as streams from their parent down to this depth (the run's
// own archive, or an archive in the run's directory, is depth 1); deeper ones are named, not read.
constexpr int kMaxArchiveDepth = 3;

// What a file or member is read as, by its name (suffixes in any case).
enum class Container {
  kNone,  // not named like a report or an archive: passed over
  kXml,   // a JUnit report
  kZip,
  kTar,
  kRaw,  // one compressed JUnit report (.xml.gz): libarchive's raw format under the filter
};
enum class Filter { kNone, kGzip, kBzip2, kXz, kZstd };

struct Format {
  Container container = Container::kNone;
  Filter filter = Filter::kNone;
  // Named like a report or an archive, but not read: why (a problem line of the run).
  std::string unread;
  bool readable() const { return container != Container::kNone && unread.empty(); }
  bool archive() const { return readable() && container != Container::kXml; }
};

// What the intake reads, for messages.
constexpr std::string_view kFormatsRead =
    ".xml; .xml.gz, .xml.bz2, .xml.xz, .xml.zst; .zip; .tar, .tar.gz/.tgz, .tar.bz2/.tbz2, "
    ".tar.xz/.txz, .tar.zst/.tzst";

// Whether this libarchive decompresses zstd itself (not through an external program).
bool HasZstd() {
  static const bool has = [] {
    struct archive* a = archive_read_new();
    const bool ok = a != nullptr && archive_read_support_filter_zstd(a) == ARCHIVE_OK;
    if (a != nullptr) archive_read_free(a);
    return ok;
  }();
  return has;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

Format FormatOf(std::string_view name) {
  const std::string n = Lower(name);
  auto ends = [&](std::string_view suffix) { return std::string_view(n).ends_with(suffix); };
  Format f;
  struct Suffix {
    std::string_view suffix;
    Container container;
    Filter filter;
  };
  static constexpr Suffix kRead[] = {
      {".xml", Container::kXml, Filter::kNone},      {".xml.gz", Container::kRaw, Filter::kGzip},
      {".xml.bz2", Container::kRaw, Filter::kBzip2}, {".xml.xz", Container::kRaw, Filter::kXz},
      {".xml.zst", Container::kRaw, Filter::kZstd},  {".zip", Container::kZip, Filter::kNone},
      {".tar", Container::kTar, Filter::kNone},      {".tar.gz", Container::kTar, Filter::kGzip},
      {".tgz", Container::kTar, Filter::kGzip},      {".tar.bz2", Container::kTar, Filter::kBzip2},
      {".tbz2", Container::kTar, Filter::kBzip2},    {".tbz", Container::kTar, Filter::kBzip2},
      {".tar.xz", Container::kTar, Filter::kXz},     {".txz", Container::kTar, Filter::kXz},
      {".tar.zst", Container::kTar, Filter::kZstd},  {".tzst", Container::kTar, Filter::kZstd},
  };
  for (const Suffix& s : kRead) {
    if (!ends(s.suffix)) continue;
    f.container = s.container;
    f.filter = s.filter;
    if (s.filter == Filter::kZstd && !HasZstd()) {
      f.unread = "compressed with zstd, which this build of libarchive does not read";
    }
    return f;
  }
  // Named like an archive or a compressed report, in a format the intake does not read.
  static constexpr std::pair<std::string_view, std::string_view> kUnread[] = {
      {".7z", "a 7-Zip archive"},
      {".rar", "a RAR archive"},
      {".tar.lz", "a tar compressed with lzip"},
      {".tar.lzma", "a tar compressed with lzma"},
      {".tar.lz4", "a tar compressed with lz4"},
      {".tar.z", "a tar compressed with compress (.Z)"},
      {".tar.br", "a tar compressed with brotli"},
      {".xml.lz", "a report compressed with lzip"},
      {".xml.lzma", "a report compressed with lzma"},
      {".xml.lz4", "a report compressed with lz4"},
      {".xml.z", "a report compressed with compress (.Z)"},
      {".xml.br", "a report compressed with brotli"},
  };
  for (const auto& [suffix, what] : kUnread) {
    if (ends(suffix)) {
      f.unread = util::StrCat(what, ", not a format the intake reads (", kFormatsRead, ")");
      return f;
    }
  }
  return f;
}

std::string_view FilterName(Filter filter) {
  switch (filter) {
    case Filter::kNone:
      return "uncompressed";
    case Filter::kGzip:
      return "gzip";
    case Filter::kBzip2:
      return "bzip2";
    case Filter::kXz:
      return "xz";
    case Filter::kZstd:
      return "zstd";
  }
  return "?";
}

int FilterCode(Filter filter) {
  switch (filter) {
    case Filter::kNone:
      return ARCHIVE_FILTER_NONE;
    case Filter::kGzip:
      return ARCHIVE_FILTER_GZIP;
    case Filter::kBzip2:
      return ARCHIVE_FILTER_BZIP2;
    case Filter::kXz:
      return ARCHIVE_FILTER_XZ;
    case Filter::kZstd:
      return ARCHIVE_FILTER_ZSTD;
  }
  return ARCHIVE_FILTER_NONE;
}

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

// A member of an archive being read, as the stream of an archive inside it: libarchive pulls its
// bytes from the parent's current member. Every byte pulled counts towards the run's limit.
struct ParentStream {
  struct archive* parent = nullptr;
  RunState* state = nullptr;
  const std::string* display = nullptr;  // the member, as messages name it
  std::vector<char> buffer = std::vector<char>(kBlockBytes);
  absl::Status error;  // why the last read failed (libarchive only hears "failed")
};

la_ssize_t ReadFromParent(struct archive* a, void* client, const void** out) {
  auto& stream = *static_cast<ParentStream*>(client);
  const la_ssize_t n = archive_read_data(stream.parent, stream.buffer.data(), stream.buffer.size());
  if (n < 0) {
    const char* text = archive_error_string(stream.parent);
    stream.error = absl::InvalidArgumentError(util::StrCat(
        *stream.display, ": cannot read: ", SafeName(text != nullptr ? text : "unknown")));
    archive_set_error(a, EIO, "the enclosing archive cannot be read");
    return -1;
  }
  RunState& state = *stream.state;
  state.run_bytes += static_cast<std::uint64_t>(n);
  if (state.run_bytes > state.limits.max_run_bytes) {
    stream.error = absl::InvalidArgumentError(util::StrCat(
        *stream.display, ": the run is over ", state.limits.max_run_bytes, " bytes uncompressed"));
    archive_set_error(a, EIO, "the run is over its limit");
    return -1;
  }
  *out = stream.buffer.data();
  return n;
}

// A member or file named like a report or an archive that is not read: one problem line.
void NotRead(RunState& state, std::string_view in_run, std::string_view why) {
  AddProblem(*state.run, util::StrCat(in_run, ": ", why, ": not read"));
}

// An archive (or one compressed report) read as a stream: its reports are parsed as they are
// decompressed, archives inside it are read the same way from it (to kMaxArchiveDepth), nothing
// is written to disk. The bytes come from fd, or from the current member of parent. display and
// in_run name the archive; its members are "<archive>!<member>".
absl::Status ReadArchive(const Format& format, int depth, int fd, struct archive* parent,
                         const std::string& display, const std::string& in_run, RunState& state,
                         const IntakeOptions* options) {
  std::unique_ptr<struct archive, ArchiveDeleter> a(archive_read_new());
  if (!a) return absl::ResourceExhaustedError(util::StrCat(display, ": out of memory"));
  switch (format.container) {
    case Container::kZip:
      archive_read_support_format_zip(a.get());
      break;
    case Container::kTar:
      archive_read_support_format_tar(a.get());
      break;
    default:
      archive_read_support_format_raw(a.get());
      break;
  }
  switch (format.filter) {
    case Filter::kNone:
      break;
    case Filter::kGzip:
      archive_read_support_filter_gzip(a.get());
      break;
    case Filter::kBzip2:
      archive_read_support_filter_bzip2(a.get());
      break;
    case Filter::kXz:
      archive_read_support_filter_xz(a.get());
      break;
    case Filter::kZstd:
      archive_read_support_filter_zstd(a.get());
      break;
  }
  ParentStream stream;
  stream.parent = parent;
  stream.state = &state;
  stream.display = &display;
  auto archive_error = [&](std::string_view where, std::string_view what) -> absl::Status {
    if (!stream.error.ok()) return stream.error;  // the parent's own error says more
    const char* text = archive_error_string(a.get());
    return absl::InvalidArgumentError(
        util::StrCat(where, ": ", what, ": ", SafeName(text != nullptr ? text : "unknown")));
  };
  const int opened = parent != nullptr
                         ? archive_read_open(a.get(), &stream, nullptr, &ReadFromParent, nullptr)
                         : archive_read_open_fd(a.get(), fd, kBlockBytes);
  if (opened != ARCHIVE_OK) return archive_error(display, "not a readable archive");
  std::vector<char> buffer(kBlockBytes);
  // Reads the current entry's data into a JUnit reader.
  auto read_report = [&](const std::string& report_display,
                         const std::string& report_in_run) -> absl::Status {
    DocumentReader reader(report_display, report_in_run, state);
    while (true) {
      la_ssize_t n = archive_read_data(a.get(), buffer.data(), buffer.size());
      if (n < 0) return archive_error(report_display, "cannot read");
      absl::Status status =
          reader.Feed(std::string_view(buffer.data(), static_cast<std::size_t>(n)), n == 0);
      if (!status.ok()) return status;
      if (n == 0) break;
    }
    FileRead(state, report_in_run, options);
    return absl::OkStatus();
  };

  if (format.container == Container::kRaw) {
    // One compressed report: libarchive's raw format hands over the decompressed bytes.
    struct archive_entry* entry = nullptr;
    const int rc = archive_read_next_header(a.get(), &entry);
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
      if (!stream.error.ok()) return stream.error;
      return absl::InvalidArgumentError(
          util::StrCat(display, ": not ", FilterName(format.filter), " data (empty)"));
    }
    if (archive_filter_code(a.get(), 0) != FilterCode(format.filter)) {
      return absl::InvalidArgumentError(
          util::StrCat(display, ": not ", FilterName(format.filter), " data"));
    }
    return read_report(display, in_run);
  }

  const std::string member_sep = in_run.empty() ? "" : "!";
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
    const std::string member_display = util::StrCat(display, "!", member);
    const std::string member_in_run = util::StrCat(in_run, member_sep, member);
    const Format member_format = FormatOf(member);
    const bool regular =
        archive_entry_filetype(entry) == AE_IFREG && archive_entry_hardlink(entry) == nullptr;
    bool read = false;
    if (archive_entry_filetype(entry) == AE_IFDIR) {
      // A folder, whatever its name: its files are members of their own.
    } else if (!member_format.unread.empty()) {
      NotRead(state, member_in_run, member_format.unread);
    } else if (member_format.container == Container::kNone) {
      // Not a report: passed over.
    } else if (!regular) {
      NotRead(state, member_in_run, "not a regular file in the archive (a link or a device)");
    } else if (member_format.container == Container::kXml) {
      read = true;
      if (absl::Status st = read_report(member_display, member_in_run); !st.ok()) return st;
    } else if (depth >= kMaxArchiveDepth) {
      NotRead(state, member_in_run,
              util::StrCat("an archive inside ", depth, " archives, nested deeper than ",
                           kMaxArchiveDepth, " levels"));
    } else {
      read = true;
      absl::Status st = ReadArchive(member_format, depth + 1, -1, a.get(), member_display,
                                    member_in_run, state, options);
      if (!st.ok()) return st;
    }
    if (read) continue;
    // Skipping a member of a compressed archive decompresses it: it counts towards the run.
    if (format.filter != Filter::kNone && archive_entry_size_is_set(entry)) {
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
  }
  return absl::OkStatus();
}

// An archive on disk.
absl::Status ReadArchiveFile(const fs::path& path, const Format& format, const std::string& display,
                             const std::string& in_run, RunState& state,
                             const IntakeOptions* options) {
  absl::StatusOr<std::unique_ptr<Fd>> fd = OpenRegular(path, display);
  if (!fd.ok()) return fd.status();
  return ReadArchive(format, 1, (*fd)->get(), nullptr, display, in_run, state, options);
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
    Format format;
    std::string problem;  // not read: why (a problem line of the run)
  };
  std::vector<Item> items;
  fs::recursive_directory_iterator it(root, fs::directory_options::none, ec);
  if (ec) return absl::InvalidArgumentError(util::StrCat(given, ": cannot list: ", ec.message()));
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::directory_entry& entry = *it;
    const std::string name = entry.path().filename().string();
    const Format format = FormatOf(name);
    if (format.container == Container::kNone && format.unread.empty()) continue;
    const std::string rel = SafeName(entry.path().lexically_relative(root).generic_string());
    const std::string display = JoinPath(given, rel);
    fs::file_status status = entry.symlink_status(ec);
    if (ec) break;
    fs::path open_path = entry.path();
    if (fs::is_symlink(status)) {
      fs::path target = fs::canonical(entry.path(), ec);
      if (ec) {
        ec.clear();
        items.push_back({rel, {}, format, "a symbolic link to nothing"});
        continue;
      }
      if (!IsWithin(target, canonical_root)) {
        items.push_back({rel, {}, format, "a symbolic link out of the run's directory"});
        continue;
      }
      status = fs::status(target, ec);
      if (ec) break;
      open_path = target;
    }
    if (fs::is_directory(status)) continue;  // e.g. a folder named "x.xml": its files are read
    if (!format.unread.empty()) {
      items.push_back({rel, {}, format, format.unread});
      continue;
    }
    if (!fs::is_regular_file(status)) {
      return absl::InvalidArgumentError(
          util::StrCat(display, ": not a regular file (a FIFO, socket or device): refused"));
    }
    items.push_back({rel, open_path, format, ""});
  }
  if (ec) return absl::InvalidArgumentError(util::StrCat(given, ": cannot list: ", ec.message()));
  std::sort(items.begin(), items.end(), [](const Item& x, const Item& y) { return x.rel < y.rel; });
  for (const Item& item : items) {
    if (!item.problem.empty()) {
      NotRead(state, item.rel, item.problem);
      continue;
    }
    const std::string display = JoinPath(given, item.rel);
    absl::Status status =
        item.format.container == Container::kXml
            ? ReadXmlFile(item.path, display, item.rel, state, &options)
            : ReadArchiveFile(item.path, item.format, display, item.rel, state, &options);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

// "1 file", "2 files".
std::string Count(std::int64_t n, std::string_view one, std::string_view many) {
  return util::StrCat(n, " ", n == 1 ? one : many);
}

// A run that holds no model test record is not a nightly run's reports: what was found instead.
absl::Status EmptyRunError(const std::string& given, const v1::NightlyRun& run) {
  std::string found = util::StrCat(Count(run.files_size(), "file", "files"), ", ",
                                   Count(run.testcases(), "testcase", "testcases"));
  if (run.not_model_tests() > 0) {
    util::StrAppend(&found, ", ", run.not_model_tests(), " not model tests");
  }
  std::string message =
      util::StrCat(given, ": no model test testcase (", found, "): not a nightly run's reports");
  constexpr int kShown = 5;
  for (int i = 0; i < run.problems_size() && i < kShown; ++i) {
    util::StrAppend(&message, "; ", run.problems(i));
  }
  if (run.problems_size() > kShown) {
    util::StrAppend(&message, "; and ", run.problems_size() - kShown, " more problem lines");
  }
  return absl::InvalidArgumentError(message);
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
  const Format format = FormatOf(name);
  if (fs::is_directory(status)) {
    read = ReadDirectory(path, given, state, options);
  } else if (!format.unread.empty()) {
    read = absl::InvalidArgumentError(util::StrCat(given, ": ", format.unread, ": not read"));
  } else if (format.container == Container::kXml) {
    read = ReadXmlFile(path, given, SafeName(name), state, &options);
  } else if (format.archive()) {
    // A lone compressed report is named in the run like a plain one; an archive's members alone.
    const std::string in_run = format.container == Container::kRaw ? SafeName(name) : "";
    read = ReadArchiveFile(path, format, given, in_run, state, &options);
  } else if (!fs::is_regular_file(status)) {
    read = absl::InvalidArgumentError(
        util::StrCat(given, ": not a regular file (a FIFO, socket or device): refused"));
  } else {
    read = absl::InvalidArgumentError(
        util::StrCat(given, ": not a directory, a JUnit .xml file or an archive the intake reads (",
                     kFormatsRead, ")"));
  }
  if (!read.ok()) return read;
  if (run.records_size() == 0) return EmptyRunError(given, run);
  return run;
}

absl::Status ReadJUnitBytes(std::string_view xml, const std::string& name, v1::NightlyRun& run,
                            const IntakeLimits& limits) {
  RunState state;
  state.run = &run;
  state.limits = limits;
  IndexRecords(state);
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
