// Opening the database, the group commit (Stage, Flush, Abort), the file kept in place while it
// is open, and the health check. The schema is in sqlite_schema.cc, the statements a Mutation
// becomes in sqlite_write.cc and the reads in sqlite_read.cc.

#include "coordinator/persistence/sqlite_store.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "common/util/strings.h"
#include "coordinator/persistence/sqlite_internal.h"
#include "spdlog/spdlog.h"

namespace triage::coord {
namespace {

// What a coordinator.db that SQLite cannot read is, and what to do about it.
constexpr const char* kDamaged =
    "not a SQLite database (corrupt or truncated); restore it from a backup or move it away";

// A database file shorter than the page count its header records was cut short (a partial copy,
// a full disk). Only checked when there is no WAL to replay: a WAL may hold the missing pages.
absl::Status CheckNotTruncated(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return absl::OkStatus();
  if (std::filesystem::is_directory(path, ec)) {
    return absl::FailedPreconditionError(
        util::StrCat(path.string(), ": is a directory, not a SQLite database"));
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return absl::OkStatus();  // unreadable: SQLite says why; empty: new
  auto wal = path;
  wal += "-wal";
  if (std::filesystem::exists(wal, ec) && std::filesystem::file_size(wal, ec) > 0) {
    return absl::OkStatus();
  }
  std::string header(100, '\0');
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return absl::OkStatus();
  const std::size_t n = std::fread(header.data(), 1, header.size(), f);
  std::fclose(f);
  if (n < header.size() || !header.starts_with(std::string_view("SQLite format 3\0", 16))) {
    return absl::FailedPreconditionError(util::StrCat(path.string(), ": ", kDamaged));
  }
  auto be = [&](std::size_t at, int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(header[at + i]);
    return v;
  };
  std::uint64_t page_size = be(16, 2);
  if (page_size == 1) page_size = 65536;
  const std::uint64_t pages = be(28, 4);
  // The header's page count is valid only when its change counter matches (SQLite's rule).
  if (be(24, 4) != be(92, 4) || pages == 0) return absl::OkStatus();
  if (size < pages * page_size) {
    return absl::FailedPreconditionError(util::StrCat(path.string(), ": ", kDamaged, " (", size,
                                                      " bytes, its header records ",
                                                      pages * page_size, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::filesystem::path& path,
                                                               const SqliteOptions& options) {
  if (path != ":memory:") {
    if (auto st = CheckNotTruncated(path); !st.ok()) return st;
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::UnavailableError(util::StrCat("cannot open database ", path.string(), ": ", msg));
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore(db, path, options));
  // A failure while opening names the file; a damaged file says so and what to do.
  auto failed = [&](const absl::Status& st, std::string_view doing) {
    const int code = sqlite3_errcode(db) & 0xff;
    if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT) {
      return absl::FailedPreconditionError(util::StrCat(path.string(), ": ", kDamaged));
    }
    return absl::FailedPreconditionError(
        util::StrCat(path.string(), ": ", doing, ": ", util::MessageOf(st)));
  };
  if (auto st = store->Configure(); !st.ok()) return failed(st, "cannot configure");
  if (auto st = store->Exec(sqlite_internal::kSchema); !st.ok()) {
    return failed(st, "not a triage-farm database or unreadable");
  }
  if (auto st = store->Migrate(); !st.ok()) return failed(st, "cannot upgrade the schema");
  if (auto st = store->Prepare(); !st.ok()) return failed(st, "cannot prepare statements");
  store->RememberFileLocked();
  return store;
}

SqliteStore::SqliteStore(sqlite3* db, std::filesystem::path path, SqliteOptions options)
    : db_(db), path_(std::move(path)), options_(options) {}

absl::Status SqliteStore::Configure() {
  sqlite3_busy_timeout(db_, options_.busy_timeout_ms);
  if (path_ != ":memory:") {
    if (auto st = Exec("PRAGMA journal_mode=WAL;"); !st.ok()) return st;
  }
  if (auto st = Exec(options_.synchronous_full ? "PRAGMA synchronous=FULL;"
                                               : "PRAGMA synchronous=NORMAL;");
      !st.ok()) {
    return st;
  }
  return Exec("PRAGMA foreign_keys=ON;");
}

void SqliteStore::RememberFileLocked() {
  struct stat st {};
  if (path_ == ":memory:" || ::stat(path_.c_str(), &st) != 0) return;
  file_dev_.store(static_cast<std::uint64_t>(st.st_dev));
  file_ino_.store(static_cast<std::uint64_t>(st.st_ino));
}

bool SqliteStore::FileIntact() {
  const std::uint64_t ino = file_ino_.load();
  if (ino == 0) return true;
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return false;
  return static_cast<std::uint64_t>(st.st_ino) == ino &&
         static_cast<std::uint64_t>(st.st_dev) == file_dev_.load();
}

absl::Status SqliteStore::RecoverFileLocked() {
  if (FileIntact()) return absl::OkStatus();
  struct stat now {};
  if (::stat(path_.c_str(), &now) == 0) {
    return absl::DataLossError(util::StrCat(
        path_.string(),
        " was replaced by another file while the coordinator had it open; refusing to write "
        "to either. Stop the coordinator and keep the right one"));
  }
  // Deleted. Copy what the open connection sees into a new file beside it, then switch.
  const std::filesystem::path tmp = path_.string() + ".restoring";
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  sqlite3* copy = nullptr;
  auto fail = [&](std::string what) {
    if (copy != nullptr) sqlite3_close(copy);
    std::filesystem::remove(tmp, ec);
    return absl::UnavailableError(util::StrCat(path_.string(),
                                               " was deleted while open and cannot be written "
                                               "back: ",
                                               what));
  };
  if (sqlite3_open_v2(tmp.c_str(), &copy, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    return fail(copy != nullptr ? sqlite3_errmsg(copy) : "out of memory");
  }
  sqlite3_backup* backup = sqlite3_backup_init(copy, "main", db_, "main");
  if (backup == nullptr) return fail(sqlite3_errmsg(copy));
  const int step = sqlite3_backup_step(backup, -1);
  sqlite3_backup_finish(backup);
  if (step != SQLITE_DONE) return fail(sqlite3_errstr(step));
  if (sqlite3_exec(copy, "PRAGMA journal_mode=WAL;", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return fail(sqlite3_errmsg(copy));
  }
  sqlite3_close(copy);
  copy = nullptr;
  // The old connection goes; closing it also removes the WAL and shared-memory files under the
  // old name, which belong to the deleted file.
  stmts_->Finalize();
  sqlite3_close(db_);
  db_ = nullptr;
  // A WAL left under the name would be replayed into the new file: it must not survive.
  for (const char* suffix : {"-wal", "-shm"}) {
    std::filesystem::remove(path_.string() + suffix, ec);
  }
  std::filesystem::rename(tmp, path_, ec);
  const std::filesystem::path opened = ec ? tmp : path_;
  if (sqlite3_open_v2(opened.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    // Nothing is left to write to: the process cannot go on safely.
    spdlog::critical("sqlite store: cannot reopen {} after writing it back: {}", opened.string(),
                     db_ != nullptr ? sqlite3_errmsg(db_) : "out of memory");
    std::abort();
  }
  if (ec) {
    spdlog::critical("sqlite store: cannot move {} to {}: {}", tmp.string(), path_.string(),
                     ec.message());
    std::abort();
  }
  if (auto st = Configure(); !st.ok()) return st;
  if (auto st = Prepare(); !st.ok()) return st;
  RememberFileLocked();
  restores_.fetch_add(1);
  spdlog::error(
      "sqlite store: {} was deleted while open; every committed row was written back to a new "
      "file there",
      path_.string());
  return absl::OkStatus();
}

SqliteStore::~SqliteStore() {
  stmts_.reset();
  sqlite3_close(db_);
}

absl::Status SqliteStore::Exec(const char* sql) { return sqlite_internal::Exec(db_, sql); }

void SqliteStore::FailNextAppliesForTest(int n) {
  std::lock_guard lock(queue_mu_);
  fail_next_ = n;
}

void SqliteStore::FailNextFlushesForTest(int n) {
  std::lock_guard lock(queue_mu_);
  fail_flush_ = n;
}

absl::StatusOr<std::uint64_t> SqliteStore::Stage(const Mutation& m) {
  Pending p;
  p.name = m.name;
  Encode(m, &p.ops);
  std::lock_guard lock(queue_mu_);
  if (fail_next_ > 0) {
    --fail_next_;
    return absl::UnavailableError(util::StrCat("injected failure of ", m.name));
  }
  p.ticket = ++staged_;
  pending_.push_back(std::move(p));
  return staged_;
}

absl::StatusOr<std::uint64_t> SqliteStore::Flush() {
  std::lock_guard lock(mu_);  // the one writer
  std::vector<Pending> batch;
  bool inject = false;
  {
    std::lock_guard queue(queue_mu_);
    batch.swap(pending_);
    if (batch.empty()) return durable_;
    inject = fail_flush_ > 0;
    if (inject) --fail_flush_;
  }
  absl::Status st =
      inject ? absl::UnavailableError("injected commit failure") : RecoverFileLocked();
  Statements& s = *stmts_;
  if (st.ok()) st = s.begin.Run(db_);
  for (const Pending& p : batch) {
    for (const Op& op : p.ops) {
      if (!st.ok()) break;
      st = Run(op);
      if (!st.ok()) st = absl::InternalError(util::StrCat(p.name, ": ", util::MessageOf(st)));
    }
  }
  if (st.ok()) st = s.commit.Run(db_);
  if (!st.ok()) {
    // SQLite rolls back by itself after most commit errors; make sure nothing stays open.
    if (sqlite3_get_autocommit(db_) == 0) (void)s.rollback.Run(db_);
    return absl::InternalError(
        util::StrCat("commit of ", batch.size(), " mutation(s): ", util::MessageOf(st)));
  }
  std::lock_guard queue(queue_mu_);
  durable_ = batch.back().ticket;
  return durable_;
}

std::uint64_t SqliteStore::Abort() {
  std::lock_guard lock(queue_mu_);
  pending_.clear();
  return staged_;
}

absl::Status SqliteStore::Check() {
  std::lock_guard lock(mu_);
  {
    std::lock_guard queue(queue_mu_);
    if (fail_next_ > 0) return absl::UnavailableError("injected failure");
  }
  if (auto recovered = RecoverFileLocked(); !recovered.ok()) return recovered;
  auto st = Exec("BEGIN IMMEDIATE; UPDATE meta SET value = value WHERE key = 'schema'; COMMIT;");
  if (!st.ok()) (void)Exec("ROLLBACK;");
  return st;
}

}  // namespace triage::coord
