// Writing: the prepared statements, a Mutation encoded as statements with their values when it
// is staged, and those statements run when it is flushed.

#include <set>
#include <string>
#include <vector>

#include "coordinator/persistence/sqlite_internal.h"

namespace triage::coord {

using sqlite_internal::EncodeList;
using sqlite_internal::Stmt;

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
       "state=?3, request=?4, error=?12, finished_ms=?14, details=?15"},
      {&s.insert_entry,
       "INSERT OR IGNORE INTO entries(sweep_id, file, key, flavor, data) VALUES(?1,?2,?3,?4,?5)"},
      {&s.upsert_shard_full,
       "INSERT INTO shards(id, sweep_id, seq, state, priority, expected_s, attempts, token, "
       "depends_on, enqueued_ms, eligible_ms, last_error, archs, cpu_ok, spec, lease_id, "
       "lease_agent, lease_session, lease_token, lease_granted_ms, infra_losses, lease_backup, "
       "backup_lease_id, backup_agent, backup_session, backup_token, backup_granted_ms) "
       "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22,"
       "?23,?24,?25,?26,?27) "
       "ON CONFLICT(id) DO UPDATE SET state=?4, expected_s=?6, attempts=?7, token=?8, "
       "enqueued_ms=?10, "
       "eligible_ms=?11, last_error=?12, spec=?15, lease_id=?16, lease_agent=?17, "
       "lease_session=?18, lease_token=?19, lease_granted_ms=?20, infra_losses=?21, "
       "lease_backup=?22, backup_lease_id=?23, backup_agent=?24, backup_session=?25, "
       "backup_token=?26, backup_granted_ms=?27"},
      {&s.update_shard,
       "UPDATE shards SET state=?2, attempts=?3, token=?4, enqueued_ms=?5, eligible_ms=?6, "
       "last_error=?7, lease_id=?8, lease_agent=?9, lease_session=?10, lease_token=?11, "
       "lease_granted_ms=?12, infra_losses=?13, lease_backup=?14, backup_lease_id=?15, "
       "backup_agent=?16, backup_session=?17, backup_token=?18, backup_granted_ms=?19 "
       "WHERE id=?1"},
      {&s.upsert_attempt,
       "INSERT INTO attempts(shard_id, attempt, lease_id, agent_id, token, granted_ms, ended_ms, "
       "outcome, reason, backup) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10) ON CONFLICT(shard_id, "
       "attempt) DO UPDATE SET ended_ms=?7, outcome=?8, reason=?9, backup=MAX(backup, ?10)"},
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

SqliteStore::Op& SqliteStore::Statements::Add(std::vector<Op>* ops, Stmt& stmt) {
  ops->emplace_back();
  ops->back().stmt = &stmt;
  return ops->back();
}

void SqliteStore::Statements::BindLease(Op& op, int first, const std::optional<LeaseInfo>& l) {
  if (l) {
    op.Text(first, l->lease_id)
        .Text(first + 1, l->agent_id)
        .Text(first + 2, l->session_id)
        .Int(first + 3, l->token)
        .Int(first + 4, ToUnixMillis(l->granted_at));
  } else {
    op.Null(first).Null(first + 1).Null(first + 2).Null(first + 3).Null(first + 4);
  }
}

void SqliteStore::Statements::UpsertSweep(const SweepRecord& r, std::vector<Op>* ops) {
  std::string request;
  r.request.SerializeToString(&request);
  std::string details;
  r.details.SerializeToString(&details);
  Add(ops, upsert_sweep)
      .Text(1, r.id)
      .Int(2, r.seq)
      .Text(3, SweepStateName(r.state))
      .Blob(4, std::move(request))
      .Text(5, r.repo)
      .Text(6, r.ttxla_commit)
      .Text(7, r.forge_commit)
      .Text(8, EncodeList(r.archs))
      .Text(9, EncodeList(r.playbooks))
      .Text(10, EncodeList(r.problems))
      .Text(11, r.created_by)
      .Text(12, r.error)
      .Int(13, ToUnixMillis(r.created_at))
      .Int(14, ToUnixMillis(r.finished_at))
      .Blob(15, std::move(details));
}

void SqliteStore::Statements::InsertEntry(const std::string& sweep_id, const v1::ShardEntry& e,
                                          std::vector<Op>* ops) {
  std::string data;
  e.SerializeToString(&data);
  Add(ops, insert_entry)
      .Text(1, sweep_id)
      .Text(2, e.file())
      .Text(3, e.key())
      .Text(4, e.flavor())
      .Blob(5, std::move(data));
}

void SqliteStore::Statements::UpsertShardFull(const ShardRecord& r, std::vector<Op>* ops) {
  std::string spec;
  r.spec.SerializeToString(&spec);
  Op& op = Add(ops, upsert_shard_full)
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
               .Text(13, EncodeList(r.archs))
               .Int(14, r.cpu_ok ? 1 : 0)
               .Blob(15, std::move(spec));
  BindLease(op, 16, r.lease);
  op.Int(21, r.infra_losses).Int(22, r.lease && r.lease->backup ? 1 : 0);
  BindLease(op, 23, r.backup);
}

void SqliteStore::Statements::UpdateShard(const ShardRecord& r, std::vector<Op>* ops) {
  Op& op = Add(ops, update_shard)
               .Text(1, r.id)
               .Text(2, ShardStateName(r.state))
               .Int(3, r.attempts)
               .Int(4, r.token)
               .Int(5, ToUnixMillis(r.enqueued_at))
               .Int(6, ToUnixMillis(r.eligible_at))
               .Text(7, r.last_error);
  BindLease(op, 8, r.lease);
  op.Int(13, r.infra_losses).Int(14, r.lease && r.lease->backup ? 1 : 0);
  BindLease(op, 15, r.backup);
  op.must_change = util::StrCat("shard ", r.id);
}

void SqliteStore::Statements::UpsertAttempt(const AttemptRecord& a, std::vector<Op>* ops) {
  Add(ops, upsert_attempt)
      .Text(1, a.shard_id)
      .Int(2, a.attempt)
      .Text(3, a.lease_id)
      .Text(4, a.agent_id)
      .Int(5, a.token)
      .Int(6, ToUnixMillis(a.granted_at))
      .Int(7, ToUnixMillis(a.ended_at))
      .Text(8, a.outcome)
      .Text(9, a.reason)
      .Int(10, a.backup ? 1 : 0);
}

void SqliteStore::Statements::InsertResult(const ResultRecord& r, std::vector<Op>* ops) {
  std::string blob;
  r.result.SerializeToString(&blob);
  Add(ops, insert_result)
      .Text(1, r.lease_id)
      .Text(2, r.shard_id)
      .Text(3, r.sweep_id)
      .Int(4, r.token)
      .Int(5, ToUnixMillis(r.accepted_at))
      .Blob(6, std::move(blob));
}

void SqliteStore::Statements::UpsertAgent(const AgentRecord& a, std::vector<Op>* ops) {
  std::string dims;
  a.dims.SerializeToString(&dims);
  Add(ops, upsert_agent)
      .Text(1, a.dims.agent_id())
      .Text(2, a.session_id)
      .Blob(3, std::move(dims))
      .Int(4, a.draining ? 1 : 0)
      .Int(5, ToUnixMillis(a.registered_at));
}

void SqliteStore::Statements::DeleteAgent(const std::string& id, std::vector<Op>* ops) {
  Add(ops, delete_agent).Text(1, id);
}

void SqliteStore::Statements::InsertAudit(const AuditRecord& a, std::vector<Op>* ops) {
  Add(ops, insert_audit)
      .Int(1, ToUnixMillis(a.at))
      .Text(2, a.who)
      .Text(3, a.role)
      .Text(4, a.action)
      .Text(5, a.target)
      .Text(6, a.reason);
}

void SqliteStore::Encode(const Mutation& m, std::vector<Op>* ops) {
  Statements& s = *stmts_;
  for (const SweepRecord* r : m.sweeps) s.UpsertSweep(*r, ops);
  for (const auto& [sweep_id, e] : m.entries) s.InsertEntry(sweep_id, e, ops);
  // Shards whose spec changed (or that are new) are written whole; for the others only the
  // mutable columns, and their row must exist.
  std::set<std::string> written;
  for (const ShardRecord* r : m.shard_specs) {
    if (written.insert(r->id).second) s.UpsertShardFull(*r, ops);
  }
  for (const ShardRecord* r : m.shards) {
    if (!written.count(r->id)) s.UpdateShard(*r, ops);
  }
  for (const AttemptRecord& a : m.attempts) s.UpsertAttempt(a, ops);
  if (m.result) s.InsertResult(*m.result, ops);
  for (const ResultRecord& r : m.carried_results) s.InsertResult(r, ops);
  for (const AgentRecord* a : m.agents) s.UpsertAgent(*a, ops);
  for (const std::string& id : m.removed_agents) s.DeleteAgent(id, ops);
  for (const AuditRecord& a : m.audit) s.InsertAudit(a, ops);
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

}  // namespace triage::coord
