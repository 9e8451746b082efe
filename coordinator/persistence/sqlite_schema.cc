// The tables of the coordinator's database, how list fields are stored in them, and the
// migration that brings a database made by an older version up to the current schema.

#include <string>
#include <string_view>
#include <vector>

#include "common/util/text.h"
#include "coordinator/persistence/sqlite_internal.h"

namespace triage::coord {
namespace sqlite_internal {

extern const char kSchema[] = R"sql(
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

std::string JoinList(const std::vector<std::string>& items) { return util::StrJoin(items, "\n"); }

std::vector<std::string> SplitList(std::string_view text) {
  std::vector<std::string> out;
  for (auto line : util::SplitLines(text)) out.emplace_back(line);
  return out;
}

absl::Status Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err != nullptr ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    return absl::InternalError(util::StrCat("sqlite: ", msg));
  }
  return absl::OkStatus();
}

namespace {

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

}  // namespace
}  // namespace sqlite_internal

absl::Status SqliteStore::Migrate() {
  using sqlite_internal::AddedColumn;
  for (const AddedColumn& c : sqlite_internal::kAddedColumns) {
    bool present = false;
    auto st = sqlite_internal::Query(
        db_, util::StrCat("PRAGMA table_info(", c.table, ")").c_str(),
        [&](sqlite3_stmt* q) { present |= sqlite_internal::ColText(q, 1) == c.column; });
    if (!st.ok()) return st;
    if (present) continue;
    if (auto add = Exec(
            util::StrCat("ALTER TABLE ", c.table, " ADD COLUMN ", c.column, " ", c.type).c_str());
        !add.ok()) {
      return add;
    }
  }
  return Exec(util::StrCat("UPDATE meta SET value='", sqlite_internal::kSchemaVersion,
                           "' WHERE key='schema'")
                  .c_str());
}

}  // namespace triage::coord
