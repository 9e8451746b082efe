#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "coordinator/persistence/store.h"

struct sqlite3;

namespace triage::coord {

struct SqliteOptions {
  // NORMAL (default): a commit survives a crash of the coordinator process (SIGKILL), the
  // requirement; FULL also survives power loss, at an fsync per commit.
  bool synchronous_full = false;
  int busy_timeout_ms = 5000;
};

// The coordinator's durable state in one SQLite database (WAL mode): sweeps, entries, shards,
// attempts, results, agents and the audit log. Stage only encodes a mutation and queues it (no
// database access, so it is cheap under the coordinator's lock); Flush writes everything queued
// in one transaction, so one commit and one WAL write serve every mutation staged since the
// last Flush. If any statement fails the whole transaction is rolled back.
class SqliteStore : public Store {
 public:
  // path ":memory:" for a private in-memory database (tests).
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::filesystem::path& path,
                                                           const SqliteOptions& options = {});
  ~SqliteStore() override;

  absl::StatusOr<std::uint64_t> Stage(const Mutation& m) override;
  absl::StatusOr<std::uint64_t> Flush() override;
  std::uint64_t Abort() override;
  absl::StatusOr<Snapshot> Load() override;
  absl::StatusOr<std::vector<AttemptRecord>> Attempts(const std::string& shard_id) override;
  absl::StatusOr<std::vector<AuditRecord>> AuditLog(int limit) override;
  // Makes sure the file is still the one open (RecoverFileLocked), then commits a probe write.
  absl::Status Check() override;
  bool FileIntact() override;
  // Times the database file was found deleted and written back from the open connection.
  std::uint64_t file_restores() const { return restores_.load(); }

  // For fault-injection tests: the next n Stage calls fail (and Check, while n > 0).
  void FailNextAppliesForTest(int n);
  // For fault-injection tests: the next n Flush calls fail and lose what was staged.
  void FailNextFlushesForTest(int n);

 private:
  SqliteStore(sqlite3* db, std::filesystem::path path, SqliteOptions options);
  struct Statements;
  absl::Status Exec(const char* sql);
  // Connection settings (WAL, synchronous, foreign keys); at open and after a restore.
  absl::Status Configure();
  // (Re)prepares the statements on db_; staged Ops keep pointing at the same Stmt objects.
  absl::Status Prepare();
  // The file at path_ must be the one open. Deleted: the open connection still sees every
  // committed row, so they are copied (backup API) into a new file, which replaces the
  // connection; the coordinator loses nothing. Replaced by another file: an error (whose file
  // is the truth is for a person to decide). Called with mu_ held.
  absl::Status RecoverFileLocked();
  void RememberFileLocked();
  // Brings a database made by an older version up to the current schema, in one transaction
  // (sqlite_schema.cc).
  absl::Status Migrate();
  struct Op;
  struct Pending;
  // Encodes m as statements with their values (no database access).
  void Encode(const Mutation& m, std::vector<Op>* ops);
  absl::Status Run(const Op& op);

  sqlite3* db_;
  const std::filesystem::path path_;  // ":memory:" for an in-memory database
  const SqliteOptions options_;
  std::atomic<std::uint64_t> file_dev_{0}, file_ino_{0};  // of path_ when opened (0: none)
  std::atomic<std::uint64_t> restores_{0};
  std::unique_ptr<Statements> stmts_;
  std::mutex mu_;  // the connection: Flush and the reads
  // Staged mutations, in ticket order. Lock order: mu_, then queue_mu_.
  std::mutex queue_mu_;
  std::vector<Pending> pending_;
  std::uint64_t staged_ = 0;   // the last ticket handed out
  std::uint64_t durable_ = 0;  // the last ticket committed
  int fail_next_ = 0;
  int fail_flush_ = 0;
};

}  // namespace triage::coord
