// Reading: the Snapshot a restarted coordinator is rebuilt from, a shard's attempts and the
// audit log.

#include <algorithm>
#include <string>
#include <vector>

#include "coordinator/persistence/sqlite_internal.h"

namespace triage::coord {
namespace {

using sqlite_internal::ColBlob;
using sqlite_internal::ColInt;
using sqlite_internal::ColText;
using sqlite_internal::DecodeList;
using sqlite_internal::Query;

// Each row reader below records a value it cannot read in *bad (the last one wins) and reads
// on; Load then fails with it.

// A list column of a record named what, into *items.
void ListFromColumn(sqlite3_stmt* q, int i, std::string_view what, std::string_view column,
                    std::vector<std::string>* items, absl::Status* bad) {
  if (!DecodeList(ColText(q, i), items)) {
    *bad = absl::DataLossError(util::StrCat(what, ": unreadable ", column));
  }
}

constexpr const char* kSelectSweeps =
    "SELECT id, seq, state, request, repo, ttxla_commit, forge_commit, archs, playbooks, "
    "problems, created_by, error, created_ms, finished_ms, details FROM sweeps ORDER BY seq";

SweepRecord SweepFromRow(sqlite3_stmt* q, absl::Status* bad) {
  SweepRecord r;
  r.id = ColText(q, 0);
  const std::string what = util::StrCat("sweep ", r.id);
  r.seq = ColInt(q, 1);
  auto state = ParseSweepState(ColText(q, 2));
  if (!state) *bad = absl::DataLossError(util::StrCat(what, ": bad state"));
  r.state = state.value_or(SweepState::kFailed);
  r.request.ParseFromString(ColBlob(q, 3));
  r.repo = ColText(q, 4);
  r.ttxla_commit = ColText(q, 5);
  r.forge_commit = ColText(q, 6);
  ListFromColumn(q, 7, what, "archs", &r.archs, bad);
  ListFromColumn(q, 8, what, "playbooks", &r.playbooks, bad);
  ListFromColumn(q, 9, what, "problems", &r.problems, bad);
  r.created_by = ColText(q, 10);
  r.error = ColText(q, 11);
  r.created_at = FromUnixMillis(ColInt(q, 12));
  r.finished_at = FromUnixMillis(ColInt(q, 13));
  if (!r.details.ParseFromString(ColBlob(q, 14))) {
    *bad = absl::DataLossError(util::StrCat(what, ": bad details"));
  }
  return r;
}

constexpr const char* kSelectShards =
    "SELECT id, sweep_id, seq, state, priority, expected_s, attempts, token, depends_on, "
    "enqueued_ms, eligible_ms, last_error, archs, cpu_ok, spec, lease_id, lease_agent, "
    "lease_session, lease_token, lease_granted_ms, infra_losses, lease_backup, backup_lease_id, "
    "backup_agent, backup_session, backup_token, backup_granted_ms FROM shards ORDER BY seq";

// The lease stored in the five columns from first (lease id, agent, session, token, granted).
std::optional<LeaseInfo> LeaseFromColumns(sqlite3_stmt* q, int first) {
  if (sqlite3_column_type(q, first) == SQLITE_NULL) return std::nullopt;
  LeaseInfo l;
  l.lease_id = ColText(q, first);
  l.agent_id = ColText(q, first + 1);
  l.session_id = ColText(q, first + 2);
  l.token = ColInt(q, first + 3);
  l.granted_at = FromUnixMillis(ColInt(q, first + 4));
  return l;
}

ShardRecord ShardFromRow(sqlite3_stmt* q, absl::Status* bad) {
  ShardRecord r;
  r.id = ColText(q, 0);
  const std::string what = util::StrCat("shard ", r.id);
  r.sweep_id = ColText(q, 1);
  r.seq = ColInt(q, 2);
  auto state = ParseShardState(ColText(q, 3));
  if (!state) *bad = absl::DataLossError(util::StrCat(what, ": bad state"));
  r.state = state.value_or(ShardState::kFailed);
  r.priority = static_cast<int>(ColInt(q, 4));
  r.expected_seconds = sqlite3_column_double(q, 5);
  r.attempts = static_cast<int>(ColInt(q, 6));
  r.token = ColInt(q, 7);
  r.depends_on = ColText(q, 8);
  r.enqueued_at = FromUnixMillis(ColInt(q, 9));
  r.eligible_at = FromUnixMillis(ColInt(q, 10));
  r.last_error = ColText(q, 11);
  ListFromColumn(q, 12, what, "archs", &r.archs, bad);
  r.cpu_ok = ColInt(q, 13) != 0;
  if (!r.spec.ParseFromString(ColBlob(q, 14))) {
    *bad = absl::DataLossError(util::StrCat(what, ": unreadable spec"));
  }
  r.lease = LeaseFromColumns(q, 15);
  r.infra_losses = static_cast<int>(ColInt(q, 20));
  if (r.lease) r.lease->backup = ColInt(q, 21) != 0;
  r.backup = LeaseFromColumns(q, 22);
  if (r.backup) r.backup->backup = true;
  return r;
}

AgentRecord AgentFromRow(sqlite3_stmt* q) {
  AgentRecord a;
  a.session_id = ColText(q, 1);
  a.dims.ParseFromString(ColBlob(q, 2));
  a.draining = ColInt(q, 3) != 0;
  a.registered_at = FromUnixMillis(ColInt(q, 4));
  return a;
}

ResultRecord ResultFromRow(sqlite3_stmt* q, absl::Status* bad) {
  ResultRecord r;
  r.lease_id = ColText(q, 0);
  r.shard_id = ColText(q, 1);
  r.sweep_id = ColText(q, 2);
  r.token = ColInt(q, 3);
  r.accepted_at = FromUnixMillis(ColInt(q, 4));
  if (!r.result.ParseFromString(ColBlob(q, 5))) {
    *bad = absl::DataLossError(util::StrCat("result ", r.lease_id, ": unreadable"));
  }
  return r;
}

}  // namespace

absl::StatusOr<Snapshot> SqliteStore::Load() {
  std::lock_guard lock(mu_);
  Snapshot snap;
  absl::Status bad = absl::OkStatus();
  auto st = Query(db_, kSelectSweeps,
                  [&](sqlite3_stmt* q) { snap.sweeps.push_back(SweepFromRow(q, &bad)); });
  if (!st.ok()) return st;
  st = Query(db_, kSelectShards,
             [&](sqlite3_stmt* q) { snap.shards.push_back(ShardFromRow(q, &bad)); });
  if (!st.ok()) return st;
  st = Query(db_, "SELECT id, session, dims, draining, registered_ms FROM agents",
             [&](sqlite3_stmt* q) { snap.agents.push_back(AgentFromRow(q)); });
  if (!st.ok()) return st;
  st = Query(db_,
             "SELECT lease_id, shard_id, sweep_id, token, accepted_ms, result FROM results "
             "ORDER BY rowid",
             [&](sqlite3_stmt* q) { snap.results.push_back(ResultFromRow(q, &bad)); });
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
      "reason, backup FROM attempts WHERE shard_id = ?1 ORDER BY attempt, rowid",
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
        a.backup = ColInt(q, 9) != 0;
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

}  // namespace triage::coord
