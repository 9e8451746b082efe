#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

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
// attempts, results, agents and the audit log. Every Mutation is one transaction.
class SqliteStore : public Store {
 public:
  // path ":memory:" for a private in-memory database (tests).
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::filesystem::path& path,
                                                           const SqliteOptions& options = {});
  ~SqliteStore() override;

  absl::Status Apply(const Mutation& m) override;
  absl::StatusOr<Snapshot> Load() override;
  absl::StatusOr<std::vector<AttemptRecord>> Attempts(const std::string& shard_id) override;
  absl::StatusOr<std::vector<AuditRecord>> AuditLog(int limit) override;
  absl::Status Check() override;

  // For fault-injection tests: the next n Apply calls fail.
  void FailNextAppliesForTest(int n);

 private:
  explicit SqliteStore(sqlite3* db);
  struct Statements;
  absl::Status Exec(const char* sql);
  absl::Status Prepare();
  absl::Status ApplyLocked(const Mutation& m);

  sqlite3* db_;
  std::unique_ptr<Statements> stmts_;
  std::mutex mu_;
  int fail_next_ = 0;
};

}  // namespace triage::coord
