#include "coordinator/persistence/sqlite_store.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "common/util/strings.h"
#include "common/util/text.h"
#include "spdlog/spdlog.h"

namespace triage::coord {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sweeps(
  id TEXT PRIMARY KEY, seq INTEGER NOT NULL, state TEXT NOT NULL, request BLOB NOT NULL,
  repo TEXT, ttxla_commit TEXT, forge_commit TEXT, archs TEXT, playbooks TEXT, problems TEXT,
  created_by TEXT, error TEXT, created_ms INTEGER, finished_ms INTEGER, details BLOB);
CREATE TABLE IF NOT EXISTS entries(
  sweep_id TEXT NOT NULL, file TEXT NOT NULL, key TEXT NOT NULL, flavor TEXT, data BLOB,
  PRIMARY KEY(sweep_id, file, key));
CREATE TABLE IF NOT EXISTS shards(
  id TEXT PRIMARY KEY, sweep_id TEXT NOT NULL, seq INTEGER NOT NULL, state TEXT NOT NULL,
  priority INTEGER, expected_s REAL, attempts INTEGER, token INTEGER, depends_on TEXT,
  enqueued_ms INTEGER, eligible_ms INTEGER, last_error TEXT, archs TEXT, cpu_ok INTEGER,
  spec BLOB, lease_id TEXT, lease_agent TEXT, lease_session TEXT, lease_token INTEGER,
  lease_granted_ms INTEGER);
CREATE INDEX IF NOT EXISTS shards_by_sweep ON shards(sweep_id);
CREATE TABLE IF NOT EXISTS attempts(
  shard_id TEXT NOT NULL, attempt INTEGER NOT NULL, lease_id TEXT, agent_id TEXT, token INTEGER,
  granted_ms INTEGER, ended_ms INTEGER, outcome TEXT, reason TEXT,
  PRIMARY KEY(shard_id, attempt));
CREATE TABLE IF NOT EXISTS results(
  lease_id TEXT PRIMARY KEY, shard_id TEXT NOT NULL, sweep_id TEXT NOT NULL, token INTEGER,
  accepted_ms INTEGER, result BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS agents(
  id TEXT PRIMARY KEY, session TEXT, dims BLOB, draining INTEGER, registered_ms INTEGER);
CREATE TABLE IF NOT EXISTS audit(
  id INTEGER PRIMARY KEY AUTOINCREMENT, ts_ms INTEGER, who TEXT, role TEXT, action TEXT,
  target TEXT, reason TEXT);
INSERT OR IGNORE INTO meta(key, value) VALUES('schema', '1');
)sql";

// Columns added after schema 1, as (table, column, type): added to older databases on open.
struct AddedColumn {
  const char* table;
  const char* column;
  const char* type;
};
constexpr AddedColumn kAddedColumns[] = {
    {"sweeps", "details", "BLOB"},                    // schema 2: v1::SweepDetails
    {"shards", "infra_losses", "INTEGER DEFAULT 0"},  // schema 3: ShardRecord::infra_losses
};
constexpr const char* kSchemaVersion = "3";

std::string Join(const std::vector<std::string>& v) { return util::StrJoin(v, "\n"); }
std::vector<std::string> Split(std::string_view s) {
  std::vector<std::string> out;
  for (auto line : util::SplitLines(s)) out.emplace_back(line);
  return out;
}

// A prepared statement with positional binding helpers.
class Stmt {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() { sqlite3_finalize(s_); }
  void Finalize() {
    sqlite3_finalize(s_);
    s_ = nullptr;
  }
  absl::Status Prepare(sqlite3* db, const char* sql) {
    Finalize();
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s_, nullptr) != SQLITE_OK) {
      return absl::InternalError(util::StrCat("sqlite prepare: ", sqlite3_errmsg(db), ": ", sql));
    }
    return absl::OkStatus();
  }
  Stmt& Text(int i, std::string_view v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Blob(int i, const std::string& v) {
    sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Int(int i, std::int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& Real(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  Stmt& Null(int i) {
    sqlite3_bind_null(s_, i);
    return *this;
  }
  absl::Status Run(sqlite3* db) {
    int rc = sqlite3_step(s_);
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
      return absl::InternalError(util::StrCat("sqlite: ", sqlite3_errmsg(db)));
    }
    return absl::OkStatus();
  }
  sqlite3_stmt* get() { return s_; }

 private:
  sqlite3_stmt* s_ = nullptr;
};

std::string ColText(sqlite3_stmt* s, int i) {
  const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
  return t == nullptr ? "" : std::string(t, static_cast<std::size_t>(sqlite3_column_bytes(s, i)));
}
std::string ColBlob(sqlite3_stmt* s, int i) {
  const auto* b = static_cast<const char*>(sqlite3_column_blob(s, i));
  return b == nullptr ? "" : std::string(b, static_cast<std::size_t>(sqlite3_column_bytes(s, i)));
}
std::int64_t ColInt(sqlite3_stmt* s, int i) { return sqlite3_column_int64(s, i); }

// Runs a query, calling row(stmt) per row.
template <typename F>
absl::Status Query(sqlite3* db, const char* sql, F row, std::string_view arg = {},
                   bool has_arg = false, int limit = -1) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) {
    return absl::InternalError(util::StrCat("sqlite prepare: ", sqlite3_errmsg(db)));
  }
  if (has_arg) sqlite3_bind_text(s, 1, arg.data(), static_cast<int>(arg.size()), SQLITE_TRANSIENT);
  if (limit >= 0) sqlite3_bind_int(s, has_arg ? 2 : 1, limit);
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) row(s);
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE) return absl::InternalError(util::StrCat("sqlite: ", sqlite3_errmsg(db)));
  return absl::OkStatus();
}

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

struct SqliteStore::Statements {
  Stmt begin, commit, rollback;
  Stmt upsert_sweep, insert_entry, upsert_shard_full, update_shard, upsert_attempt, insert_result,
      upsert_agent, delete_agent, insert_audit;
  void Finalize() {
    for (Stmt* s : {&begin, &commit, &rollback, &upsert_sweep, &insert_entry, &upsert_shard_full,
                    &update_shard, &upsert_attempt, &insert_result, &upsert_agent, &delete_agent,
                    &insert_audit}) {
      s->Finalize();
    }
  }
};

// One statement of a staged mutation, with its values: a mutation is encoded when it is staged
// (so the caller's records may change afterwards) and executed when it is flushed.
struct SqliteStore::Op {
  struct Value {
    enum class Kind : std::uint8_t { kNull, kInt, kReal, kText, kBlob };
    Kind kind = Kind::kNull;
    std::int64_t i = 0;
    double d = 0;
    std::string s;
  };
  Stmt* stmt = nullptr;
  std::vector<Value> values;
  std::string must_change;  // non-empty: an UPDATE that must find its row (named here)

  Value& At(int i) {
    if (values.size() < static_cast<std::size_t>(i)) values.resize(static_cast<std::size_t>(i));
    return values[static_cast<std::size_t>(i) - 1];
  }
  Op& Text(int i, std::string_view v) {
    At(i) = {Value::Kind::kText, 0, 0, std::string(v)};
    return *this;
  }
  Op& Blob(int i, std::string v) {
    At(i) = {Value::Kind::kBlob, 0, 0, std::move(v)};
    return *this;
  }
  Op& Int(int i, std::int64_t v) {
    At(i) = {Value::Kind::kInt, v, 0, {}};
    return *this;
  }
  Op& Real(int i, double v) {
    At(i) = {Value::Kind::kReal, 0, v, {}};
    return *this;
  }
  Op& Null(int i) {
    At(i) = {};
    return *this;
  }
};

struct SqliteStore::Pending {
  std::uint64_t ticket = 0;
  std::string name;
  std::vector<Op> ops;
};

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
  if (auto st = store->Exec(kSchema); !st.ok()) {
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

absl::Status SqliteStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err != nullptr ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    return absl::InternalError(util::StrCat("sqlite: ", msg));
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::Migrate() {
  for (const AddedColumn& c : kAddedColumns) {
    bool present = false;
    auto st = Query(db_, util::StrCat("PRAGMA table_info(", c.table, ")").c_str(),
                    [&](sqlite3_stmt* q) { present |= ColText(q, 1) == c.column; });
    if (!st.ok()) return st;
    if (present) continue;
    if (auto add = Exec(
            util::StrCat("ALTER TABLE ", c.table, " ADD COLUMN ", c.column, " ", c.type).c_str());
        !add.ok()) {
      return add;
    }
  }
  return Exec(
      util::StrCat("UPDATE meta SET value='", kSchemaVersion, "' WHERE key='schema'").c_str());
}

absl::Status SqliteStore::Prepare() {
  if (!stmts_) stmts_ = std::make_unique<Statements>();
  Statements& s = *stmts_;
  struct {
    Stmt* stmt;
    const char* sql;
  } all[] = {
      {&s.begin, "BEGIN IMMEDIATE"},
      {&s.commit, "COMMIT"},
      {&s.rollback, "ROLLBACK"},
      {&s.upsert_sweep,
       "INSERT INTO sweeps(id, seq, state, request, repo, ttxla_commit, forge_commit, archs, "
       "playbooks, problems, created_by, error, created_ms, finished_ms, details) "
       "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15) ON CONFLICT(id) DO UPDATE SET "
       "state=?3, error=?12, finished_ms=?14, details=?15"},
      {&s.insert_entry,
       "INSERT OR IGNORE INTO entries(sweep_id, file, key, flavor, data) VALUES(?1,?2,?3,?4,?5)"},
      {&s.upsert_shard_full,
       "INSERT INTO shards(id, sweep_id, seq, state, priority, expected_s, attempts, token, "
       "depends_on, enqueued_ms, eligible_ms, last_error, archs, cpu_ok, spec, lease_id, "
       "lease_agent, lease_session, lease_token, lease_granted_ms, infra_losses) "
       "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21) "
       "ON CONFLICT(id) DO UPDATE SET state=?4, attempts=?7, token=?8, enqueued_ms=?10, "
       "eligible_ms=?11, last_error=?12, spec=?15, lease_id=?16, lease_agent=?17, "
       "lease_session=?18, lease_token=?19, lease_granted_ms=?20, infra_losses=?21"},
      {&s.update_shard,
       "UPDATE shards SET state=?2, attempts=?3, token=?4, enqueued_ms=?5, eligible_ms=?6, "
       "last_error=?7, lease_id=?8, lease_agent=?9, lease_session=?10, lease_token=?11, "
       "lease_granted_ms=?12, infra_losses=?13 WHERE id=?1"},
      {&s.upsert_attempt,
       "INSERT INTO attempts(shard_id, attempt, lease_id, agent_id, token, granted_ms, ended_ms, "
       "outcome, reason) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9) ON CONFLICT(shard_id, attempt) DO "
       "UPDATE SET ended_ms=?7, outcome=?8, reason=?9"},
      {&s.insert_result,
       "INSERT INTO results(lease_id, shard_id, sweep_id, token, accepted_ms, result) "
       "VALUES(?1,?2,?3,?4,?5,?6)"},
      {&s.upsert_agent,
       "INSERT INTO agents(id, session, dims, draining, registered_ms) VALUES(?1,?2,?3,?4,?5) "
       "ON CONFLICT(id) DO UPDATE SET session=?2, dims=?3, draining=?4, registered_ms=?5"},
      {&s.delete_agent, "DELETE FROM agents WHERE id=?1"},
      {&s.insert_audit,
       "INSERT INTO audit(ts_ms, who, role, action, target, reason) VALUES(?1,?2,?3,?4,?5,?6)"},
  };
  for (auto& a : all) {
    if (auto st = a.stmt->Prepare(db_, a.sql); !st.ok()) return st;
  }
  return absl::OkStatus();
}

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

absl::Status SqliteStore::Run(const Op& op) {
  sqlite3_stmt* st = op.stmt->get();
  for (std::size_t i = 0; i < op.values.size(); ++i) {
    const auto& v = op.values[i];
    const int col = static_cast<int>(i) + 1;
    switch (v.kind) {
      case Op::Value::Kind::kNull:
        sqlite3_bind_null(st, col);
        break;
      case Op::Value::Kind::kInt:
        sqlite3_bind_int64(st, col, v.i);
        break;
      case Op::Value::Kind::kReal:
        sqlite3_bind_double(st, col, v.d);
        break;
      case Op::Value::Kind::kText:
        sqlite3_bind_text(st, col, v.s.data(), static_cast<int>(v.s.size()), SQLITE_STATIC);
        break;
      case Op::Value::Kind::kBlob:
        sqlite3_bind_blob(st, col, v.s.data(), static_cast<int>(v.s.size()), SQLITE_STATIC);
        break;
    }
  }
  if (auto r = op.stmt->Run(db_); !r.ok()) return r;
  if (!op.must_change.empty() && sqlite3_changes(db_) == 0) {
    return absl::InternalError(util::StrCat("no row for ", op.must_change));
  }
  return absl::OkStatus();
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

void SqliteStore::Encode(const Mutation& m, std::vector<Op>* ops) {
  Statements& s = *stmts_;
  auto add = [&](Stmt& stmt) -> Op& {
    ops->emplace_back();
    ops->back().stmt = &stmt;
    return ops->back();
  };
  for (const SweepRecord* r : m.sweeps) {
    std::string request;
    r->request.SerializeToString(&request);
    std::string details;
    r->details.SerializeToString(&details);
    add(s.upsert_sweep)
        .Text(1, r->id)
        .Int(2, r->seq)
        .Text(3, SweepStateName(r->state))
        .Blob(4, std::move(request))
        .Text(5, r->repo)
        .Text(6, r->ttxla_commit)
        .Text(7, r->forge_commit)
        .Text(8, Join(r->archs))
        .Text(9, Join(r->playbooks))
        .Text(10, Join(r->problems))
        .Text(11, r->created_by)
        .Text(12, r->error)
        .Int(13, ToUnixMillis(r->created_at))
        .Int(14, ToUnixMillis(r->finished_at))
        .Blob(15, std::move(details));
  }
  for (const auto& [sweep_id, e] : m.entries) {
    std::string data;
    e.SerializeToString(&data);
    add(s.insert_entry)
        .Text(1, sweep_id)
        .Text(2, e.file())
        .Text(3, e.key())
        .Text(4, e.flavor())
        .Blob(5, std::move(data));
  }
  auto bind_lease = [](Op& op, int first, const ShardRecord& r) {
    if (r.lease) {
      op.Text(first, r.lease->lease_id)
          .Text(first + 1, r.lease->agent_id)
          .Text(first + 2, r.lease->session_id)
          .Int(first + 3, r.lease->token)
          .Int(first + 4, ToUnixMillis(r.lease->granted_at));
    } else {
      op.Null(first).Null(first + 1).Null(first + 2).Null(first + 3).Null(first + 4);
    }
  };
  auto write_full = [&](const ShardRecord& r) {
    std::string spec;
    r.spec.SerializeToString(&spec);
    Op& op = add(s.upsert_shard_full)
                 .Text(1, r.id)
                 .Text(2, r.sweep_id)
                 .Int(3, r.seq)
                 .Text(4, ShardStateName(r.state))
                 .Int(5, r.priority)
                 .Real(6, r.expected_seconds)
                 .Int(7, r.attempts)
                 .Int(8, r.token)
                 .Text(9, r.depends_on)
                 .Int(10, ToUnixMillis(r.enqueued_at))
                 .Int(11, ToUnixMillis(r.eligible_at))
                 .Text(12, r.last_error)
                 .Text(13, Join(r.archs))
                 .Int(14, r.cpu_ok ? 1 : 0)
                 .Blob(15, std::move(spec));
    bind_lease(op, 16, r);
    op.Int(21, r.infra_losses);
  };
  // Shards whose spec changed (or that are new) are written whole; for the others only the
  // mutable columns, and their row must exist.
  std::set<std::string> written;
  for (const ShardRecord* r : m.shard_specs) {
    if (written.insert(r->id).second) write_full(*r);
  }
  for (const ShardRecord* r : m.shards) {
    if (written.count(r->id)) continue;
    Op& op = add(s.update_shard)
                 .Text(1, r->id)
                 .Text(2, ShardStateName(r->state))
                 .Int(3, r->attempts)
                 .Int(4, r->token)
                 .Int(5, ToUnixMillis(r->enqueued_at))
                 .Int(6, ToUnixMillis(r->eligible_at))
                 .Text(7, r->last_error);
    bind_lease(op, 8, *r);
    op.Int(13, r->infra_losses);
    op.must_change = util::StrCat("shard ", r->id);
  }
  for (const AttemptRecord& a : m.attempts) {
    add(s.upsert_attempt)
        .Text(1, a.shard_id)
        .Int(2, a.attempt)
        .Text(3, a.lease_id)
        .Text(4, a.agent_id)
        .Int(5, a.token)
        .Int(6, ToUnixMillis(a.granted_at))
        .Int(7, ToUnixMillis(a.ended_at))
        .Text(8, a.outcome)
        .Text(9, a.reason);
  }
  if (m.result) {
    std::string blob;
    m.result->result.SerializeToString(&blob);
    add(s.insert_result)
        .Text(1, m.result->lease_id)
        .Text(2, m.result->shard_id)
        .Text(3, m.result->sweep_id)
        .Int(4, m.result->token)
        .Int(5, ToUnixMillis(m.result->accepted_at))
        .Blob(6, std::move(blob));
  }
  for (const AgentRecord* a : m.agents) {
    std::string dims;
    a->dims.SerializeToString(&dims);
    add(s.upsert_agent)
        .Text(1, a->dims.agent_id())
        .Text(2, a->session_id)
        .Blob(3, std::move(dims))
        .Int(4, a->draining ? 1 : 0)
        .Int(5, ToUnixMillis(a->registered_at));
  }
  for (const std::string& id : m.removed_agents) add(s.delete_agent).Text(1, id);
  for (const AuditRecord& a : m.audit) {
    add(s.insert_audit)
        .Int(1, ToUnixMillis(a.at))
        .Text(2, a.who)
        .Text(3, a.role)
        .Text(4, a.action)
        .Text(5, a.target)
        .Text(6, a.reason);
  }
}

absl::StatusOr<Snapshot> SqliteStore::Load() {
  std::lock_guard lock(mu_);
  Snapshot snap;
  absl::Status bad = absl::OkStatus();
  auto st =
      Query(db_,
            "SELECT id, seq, state, request, repo, ttxla_commit, forge_commit, archs, "
            "playbooks, problems, created_by, error, created_ms, finished_ms, details FROM sweeps "
            "ORDER BY seq",
            [&](sqlite3_stmt* q) {
              SweepRecord r;
              r.id = ColText(q, 0);
              r.seq = ColInt(q, 1);
              auto state = ParseSweepState(ColText(q, 2));
              if (!state) bad = absl::DataLossError(util::StrCat("sweep ", r.id, ": bad state"));
              r.state = state.value_or(SweepState::kFailed);
              r.request.ParseFromString(ColBlob(q, 3));
              r.repo = ColText(q, 4);
              r.ttxla_commit = ColText(q, 5);
              r.forge_commit = ColText(q, 6);
              r.archs = Split(ColText(q, 7));
              r.playbooks = Split(ColText(q, 8));
              r.problems = Split(ColText(q, 9));
              r.created_by = ColText(q, 10);
              r.error = ColText(q, 11);
              r.created_at = FromUnixMillis(ColInt(q, 12));
              r.finished_at = FromUnixMillis(ColInt(q, 13));
              if (!r.details.ParseFromString(ColBlob(q, 14)))
                bad = absl::DataLossError(util::StrCat("sweep ", r.id, ": bad details"));
              snap.sweeps.push_back(std::move(r));
            });
  if (!st.ok()) return st;
  st = Query(db_,
             "SELECT id, sweep_id, seq, state, priority, expected_s, attempts, token, depends_on, "
             "enqueued_ms, eligible_ms, last_error, archs, cpu_ok, spec, lease_id, lease_agent, "
             "lease_session, lease_token, lease_granted_ms, infra_losses FROM shards ORDER BY seq",
             [&](sqlite3_stmt* q) {
               ShardRecord r;
               r.id = ColText(q, 0);
               r.sweep_id = ColText(q, 1);
               r.seq = ColInt(q, 2);
               auto state = ParseShardState(ColText(q, 3));
               if (!state) bad = absl::DataLossError(util::StrCat("shard ", r.id, ": bad state"));
               r.state = state.value_or(ShardState::kFailed);
               r.priority = static_cast<int>(ColInt(q, 4));
               r.expected_seconds = sqlite3_column_double(q, 5);
               r.attempts = static_cast<int>(ColInt(q, 6));
               r.token = ColInt(q, 7);
               r.depends_on = ColText(q, 8);
               r.enqueued_at = FromUnixMillis(ColInt(q, 9));
               r.eligible_at = FromUnixMillis(ColInt(q, 10));
               r.last_error = ColText(q, 11);
               r.archs = Split(ColText(q, 12));
               r.cpu_ok = ColInt(q, 13) != 0;
               if (!r.spec.ParseFromString(ColBlob(q, 14))) {
                 bad = absl::DataLossError(util::StrCat("shard ", r.id, ": unreadable spec"));
               }
               if (sqlite3_column_type(q, 15) != SQLITE_NULL) {
                 LeaseInfo l;
                 l.lease_id = ColText(q, 15);
                 l.agent_id = ColText(q, 16);
                 l.session_id = ColText(q, 17);
                 l.token = ColInt(q, 18);
                 l.granted_at = FromUnixMillis(ColInt(q, 19));
                 r.lease = l;
               }
               r.infra_losses = static_cast<int>(ColInt(q, 20));
               snap.shards.push_back(std::move(r));
             });
  if (!st.ok()) return st;
  st = Query(db_, "SELECT id, session, dims, draining, registered_ms FROM agents",
             [&](sqlite3_stmt* q) {
               AgentRecord a;
               a.session_id = ColText(q, 1);
               a.dims.ParseFromString(ColBlob(q, 2));
               a.draining = ColInt(q, 3) != 0;
               a.registered_at = FromUnixMillis(ColInt(q, 4));
               snap.agents.push_back(std::move(a));
             });
  if (!st.ok()) return st;
  st = Query(db_,
             "SELECT lease_id, shard_id, sweep_id, token, accepted_ms, result FROM results "
             "ORDER BY rowid",
             [&](sqlite3_stmt* q) {
               ResultRecord r;
               r.lease_id = ColText(q, 0);
               r.shard_id = ColText(q, 1);
               r.sweep_id = ColText(q, 2);
               r.token = ColInt(q, 3);
               r.accepted_at = FromUnixMillis(ColInt(q, 4));
               if (!r.result.ParseFromString(ColBlob(q, 5))) {
                 bad = absl::DataLossError(util::StrCat("result ", r.lease_id, ": unreadable"));
               }
               snap.results.push_back(std::move(r));
             });
  if (!st.ok()) return st;
  if (!bad.ok()) return bad;
  return snap;
}

absl::StatusOr<std::vector<AttemptRecord>> SqliteStore::Attempts(const std::string& shard_id) {
  std::lock_guard lock(mu_);
  std::vector<AttemptRecord> out;
  auto st = Query(
      db_,
      "SELECT shard_id, attempt, lease_id, agent_id, token, granted_ms, ended_ms, outcome, "
      "reason FROM attempts WHERE shard_id = ?1 ORDER BY attempt, rowid",
      [&](sqlite3_stmt* q) {
        AttemptRecord a;
        a.shard_id = ColText(q, 0);
        a.attempt = static_cast<int>(ColInt(q, 1));
        a.lease_id = ColText(q, 2);
        a.agent_id = ColText(q, 3);
        a.token = ColInt(q, 4);
        a.granted_at = FromUnixMillis(ColInt(q, 5));
        a.ended_at = FromUnixMillis(ColInt(q, 6));
        a.outcome = ColText(q, 7);
        a.reason = ColText(q, 8);
        out.push_back(std::move(a));
      },
      shard_id, true);
  if (!st.ok()) return st;
  return out;
}

absl::StatusOr<std::vector<AuditRecord>> SqliteStore::AuditLog(int limit) {
  std::lock_guard lock(mu_);
  std::vector<AuditRecord> out;
  auto st = Query(
      db_, "SELECT ts_ms, who, role, action, target, reason FROM audit ORDER BY id DESC LIMIT ?1",
      [&](sqlite3_stmt* q) {
        AuditRecord a;
        a.at = FromUnixMillis(ColInt(q, 0));
        a.who = ColText(q, 1);
        a.role = ColText(q, 2);
        a.action = ColText(q, 3);
        a.target = ColText(q, 4);
        a.reason = ColText(q, 5);
        out.push_back(std::move(a));
      },
      {}, false, limit);
  if (!st.ok()) return st;
  std::reverse(out.begin(), out.end());
  return out;
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
