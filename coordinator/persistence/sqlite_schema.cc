// The tables of the coordinator's database, how list fields are stored in them, and the
// migrations that bring a database made by an older version up to the current schema.

#include <charconv>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/util/text.h"
#include "coordinator/persistence/sqlite_internal.h"
#include "nlohmann/json.hpp"

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

std::string EncodeList(const std::vector<std::string>& items) {
  return nlohmann::json(items).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool DecodeList(std::string_view text, std::vector<std::string>* items) {
  items->clear();
  if (text.empty()) return true;
  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_array()) return false;  // also what a parse error gives (a discarded value)
  for (const auto& item : json) {
    if (!item.is_string()) return false;
    items->push_back(item.get<std::string>());
  }
  return true;
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

// The schema's history, recorded in meta('schema'):
//   1  the tables of kSchema;
//   2  sweeps.details (v1::SweepDetails);
//   3  shards.infra_losses (ShardRecord::infra_losses);
//   4  list columns hold a JSON array of strings (EncodeList); before, the items joined by "\n";
//   5  backup leases: shards.backup_* (ShardRecord::backup), shards.lease_backup
//      (LeaseInfo::backup of the lease), attempts.backup (AttemptRecord::backup).
constexpr int kSchemaVersion = 5;
constexpr int kJsonListsSince = 4;

// Columns added after schema 1, as (table, column, type): added to older databases on open.
struct AddedColumn {
  const char* table;
  const char* column;
  const char* type;
};
constexpr AddedColumn kAddedColumns[] = {
    {"sweeps", "details", "BLOB"},                    // schema 2
    {"shards", "infra_losses", "INTEGER DEFAULT 0"},  // schema 3
    {"shards", "lease_backup", "INTEGER DEFAULT 0"},  // schema 5
    {"shards", "backup_lease_id", "TEXT"},
    {"shards", "backup_agent", "TEXT"},
    {"shards", "backup_session", "TEXT"},
    {"shards", "backup_token", "INTEGER"},
    {"shards", "backup_granted_ms", "INTEGER"},
    {"attempts", "backup", "INTEGER DEFAULT 0"},
};

// The columns that hold a list of strings.
struct ListColumn {
  const char* table;
  const char* column;
};
constexpr ListColumn kListColumns[] = {
    {"sweeps", "archs"},
    {"sweeps", "playbooks"},
    {"sweeps", "problems"},
    {"shards", "archs"},
};

// The items of a list as schemas 1 to 3 stored it, read back as those versions read it: one
// item per line.
std::vector<std::string> SplitLegacyList(std::string_view text) {
  std::vector<std::string> out;
  for (auto line : util::SplitLines(text)) out.emplace_back(line);
  return out;
}

absl::StatusOr<int> StoredVersion(sqlite3* db) {
  std::string value;
  auto st = Query(db, "SELECT value FROM meta WHERE key='schema'",
                  [&](sqlite3_stmt* q) { value = ColText(q, 0); });
  if (!st.ok()) return st;
  int version = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), version);
  if (ec != std::errc() || end != value.data() + value.size()) {
    return absl::DataLossError(util::StrCat("schema version '", value, "' is not a number"));
  }
  return version;
}

absl::Status AddMissingColumns(sqlite3* db) {
  for (const AddedColumn& c : kAddedColumns) {
    bool present = false;
    auto st = Query(db, util::StrCat("PRAGMA table_info(", c.table, ")").c_str(),
                    [&](sqlite3_stmt* q) { present |= ColText(q, 1) == c.column; });
    if (!st.ok()) return st;
    if (present) continue;
    const std::string add =
        util::StrCat("ALTER TABLE ", c.table, " ADD COLUMN ", c.column, " ", c.type);
    if (auto added = Exec(db, add.c_str()); !added.ok()) return added;
  }
  return absl::OkStatus();
}

// Schema 4: every list written joined by "\n" is rewritten as a JSON array of the same items.
absl::Status RewriteLegacyLists(sqlite3* db) {
  for (const ListColumn& c : kListColumns) {
    std::vector<std::pair<std::int64_t, std::string>> rows;
    auto st = Query(db,
                    util::StrCat("SELECT rowid, ", c.column, " FROM ", c.table, " WHERE ", c.column,
                                 " IS NOT NULL")
                        .c_str(),
                    [&](sqlite3_stmt* q) { rows.emplace_back(ColInt(q, 0), ColText(q, 1)); });
    if (!st.ok()) return st;
    Stmt update;
    st = update.Prepare(
        db, util::StrCat("UPDATE ", c.table, " SET ", c.column, "=?2 WHERE rowid=?1").c_str());
    if (!st.ok()) return st;
    for (const auto& [rowid, text] : rows) {
      st = update.Int(1, rowid).Text(2, EncodeList(SplitLegacyList(text))).Run(db);
      if (!st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

// The steps from version to the current schema; a database already at it (or made by a newer
// version) is left as it is.
absl::Status Upgrade(sqlite3* db) {
  auto version = StoredVersion(db);
  if (!version.ok()) return version.status();
  if (auto st = AddMissingColumns(db); !st.ok()) return st;
  if (*version >= kSchemaVersion) return absl::OkStatus();
  if (*version < kJsonListsSince) {
    if (auto st = RewriteLegacyLists(db); !st.ok()) return st;
  }
  return Exec(
      db, util::StrCat("UPDATE meta SET value='", kSchemaVersion, "' WHERE key='schema'").c_str());
}

}  // namespace
}  // namespace sqlite_internal

// All steps in one transaction: a database is migrated completely or not at all.
absl::Status SqliteStore::Migrate() {
  if (auto st = Exec("BEGIN IMMEDIATE"); !st.ok()) return st;
  absl::Status st = sqlite_internal::Upgrade(db_);
  if (st.ok()) st = Exec("COMMIT");
  if (!st.ok() && sqlite3_get_autocommit(db_) == 0) (void)Exec("ROLLBACK");
  return st;
}

}  // namespace triage::coord
