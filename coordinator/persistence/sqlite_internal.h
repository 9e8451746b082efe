#pragma once

// What the source files of SqliteStore share, and nothing outside them uses:
//   sqlite_store.cc   opening, the group commit, the file kept in place, Check;
//   sqlite_schema.cc  the tables, the migrations between schema versions, how lists are stored;
//   sqlite_write.cc   the prepared statements and a Mutation encoded as statements;
//   sqlite_read.cc    the Snapshot, the attempts and the audit log read back.

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/util/strings.h"
#include "coordinator/persistence/sqlite_store.h"

namespace triage::coord {
namespace sqlite_internal {

// The tables as schema 1 created them (CREATE ... IF NOT EXISTS); Migrate brings them up to
// date.
extern const char kSchema[];

// List fields (archs, playbooks, problems) in their TEXT column: a JSON array of strings, so any
// item (one with a line break, an empty one) comes back as written. Text that is not valid
// UTF-8 is stored with U+FFFD in its place.
std::string EncodeList(const std::vector<std::string>& items);
// False when text is neither empty (a NULL column: no items) nor a JSON array of strings.
bool DecodeList(std::string_view text, std::vector<std::string>* items);

// Runs one or more statements that return no rows.
absl::Status Exec(sqlite3* db, const char* sql);

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

inline std::string ColText(sqlite3_stmt* s, int i) {
  const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
  return t == nullptr ? "" : std::string(t, static_cast<std::size_t>(sqlite3_column_bytes(s, i)));
}
inline std::string ColBlob(sqlite3_stmt* s, int i) {
  const auto* b = static_cast<const char*>(sqlite3_column_blob(s, i));
  return b == nullptr ? "" : std::string(b, static_cast<std::size_t>(sqlite3_column_bytes(s, i)));
}
inline std::int64_t ColInt(sqlite3_stmt* s, int i) { return sqlite3_column_int64(s, i); }

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

}  // namespace sqlite_internal

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
  sqlite_internal::Stmt* stmt = nullptr;
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

// The prepared statements of a connection (SqliteStore::Prepare), and for each statement that
// writes a record, the function that appends it with the record's values to a staged mutation
// (sqlite_write.cc, beside the SQL whose parameters they bind).
struct SqliteStore::Statements {
  using Stmt = sqlite_internal::Stmt;
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

  void UpsertSweep(const SweepRecord& r, std::vector<Op>* ops);
  void InsertEntry(const std::string& sweep_id, const v1::ShardEntry& e, std::vector<Op>* ops);
  // Every column; an existing row keeps its planning columns (see Mutation::shard_specs).
  void UpsertShardFull(const ShardRecord& r, std::vector<Op>* ops);
  // The mutable columns of a row that must exist.
  void UpdateShard(const ShardRecord& r, std::vector<Op>* ops);
  void UpsertAttempt(const AttemptRecord& a, std::vector<Op>* ops);
  void InsertResult(const ResultRecord& r, std::vector<Op>* ops);
  void UpsertAgent(const AgentRecord& a, std::vector<Op>* ops);
  void DeleteAgent(const std::string& id, std::vector<Op>* ops);
  void InsertAudit(const AuditRecord& a, std::vector<Op>* ops);

 private:
  // A new Op on stmt at the end of ops, for its values to be bound.
  static Op& Add(std::vector<Op>* ops, Stmt& stmt);
  // The five lease columns from first on: the shard's lease, or NULLs when it has none.
  static void BindLease(Op& op, int first, const std::optional<LeaseInfo>& lease);
};

}  // namespace triage::coord
