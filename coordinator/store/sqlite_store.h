#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "coordinator/core/store.h"

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
  absl::Status Check() override;

  // For fault-injection tests: the next n Stage calls fail (and Check, while n > 0).
  void FailNextAppliesForTest(int n);
  // For fault-injection tests: the next n Flush calls fail and lose what was staged.
  void FailNextFlushesForTest(int n);

 private:
  explicit SqliteStore(sqlite3* db);
  struct Statements;
  absl::Status Exec(const char* sql);
  absl::Status Prepare();
  // Brings a database made by an older version up to the current schema (kAddedColumns).
  absl::Status Migrate();
  struct Op;
  struct Pending;
  // Encodes m as statements with their values (no database access).
  void Encode(const Mutation& m, std::vector<Op>* ops);
  absl::Status Run(const Op& op);

  sqlite3* db_;
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
