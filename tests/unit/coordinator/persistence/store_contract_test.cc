// What every Store must do (coordinator/persistence/store.h), as one suite run against each
// implementation: tickets, the group commit (staged is invisible until a Flush, Abort drops it),
// and the round trip of every record kind a Mutation carries through Load, Attempts and
// AuditLog. Cases that only concern one implementation (SQLite's file handling, migrations,
// damaged files, injected faults) live in that implementation's own test.

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/persistence/sqlite_store.h"
#include "coordinator/persistence/store.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::coord {
namespace {

// Whole milliseconds: the resolution every store keeps.
TimePoint At(int seconds) { return FromUnixMillis(1'700'000'000'000 + seconds * 1000LL + 250); }

// A store under test: a name for the test's label and how to open a fresh one in dir.
struct StoreFactory {
  std::string name;
  std::function<absl::StatusOr<std::unique_ptr<Store>>(const std::filesystem::path& dir)> open;
};

std::ostream& operator<<(std::ostream& os, const StoreFactory& f) { return os << f.name; }

absl::StatusOr<std::unique_ptr<Store>> Upcast(absl::StatusOr<std::unique_ptr<SqliteStore>> s) {
  if (!s.ok()) return s.status();
  return std::unique_ptr<Store>(std::move(*s));
}

const StoreFactory kSqliteFile{"SqliteFile", [](const std::filesystem::path& dir) {
                                 return Upcast(SqliteStore::Open(dir / "coordinator.db"));
                               }};
const StoreFactory kSqliteMemory{"SqliteInMemory", [](const std::filesystem::path&) {
                                   return Upcast(SqliteStore::Open(":memory:"));
                                 }};

SweepRecord Sweep(const std::string& id, std::int64_t seq) {
  SweepRecord s;
  s.id = id;
  s.seq = seq;
  s.state = SweepState::kRunning;
  s.request.set_repo_path("/repos/tt-xla");
  s.request.add_playbooks("dtype_bfloat16");
  s.request.add_archs("p150");
  s.request.set_executor("command");
  (*s.request.mutable_params())["command"] = R"(["tool", "{key}"])";
  s.request.set_priority(3);
  s.request.set_reason("nightly");
  s.repo = "/repos/tt-xla";
  s.ttxla_commit = std::string(40, 'a');
  s.forge_commit = std::string(40, 'b');
  s.archs = {"n150", "p150"};
  s.playbooks = {"dtype_bfloat16", "unpack_forward_output"};
  s.problems = {"tests/a.yaml: unknown field 'x'"};
  s.details.set_forge_gitlink_commit(std::string(40, 'c'));
  s.details.set_forge_source("gitlink");
  s.details.add_notes("pinned the submodule's gitlink");
  s.created_by = "alice";
  s.created_at = At(0);
  return s;
}

ShardRecord Shard(const std::string& id, const std::string& sweep, std::int64_t seq) {
  ShardRecord s;
  s.id = id;
  s.sweep_id = sweep;
  s.seq = seq;
  s.spec.set_shard_id(id);
  s.spec.set_sweep_id(sweep);
  s.spec.set_playbook("dtype_bfloat16");
  s.spec.set_loader("third_party/tt_forge_models/bert/loader.py");
  s.spec.set_phase(v1::PHASE_FULL);
  s.spec.set_arch("p150");
  s.spec.set_executor("command");
  (*s.spec.mutable_params())["per"] = "shard";
  s.spec.set_timeout_seconds(1800);
  auto* e = s.spec.add_entries();
  e->set_key("bert/training");
  e->set_file("tests/runner/test_config/torch/training.yaml");
  e->set_flavor("op_not_implemented");
  s.state = ShardState::kQueued;
  s.priority = 2;
  s.expected_seconds = 912.5;
  s.depends_on = "";
  s.enqueued_at = At(1);
  s.eligible_at = At(2);
  s.archs = {"p150", "n300"};
  s.cpu_ok = false;
  return s;
}

AgentRecord Agent(const std::string& id, const std::string& arch) {
  AgentRecord a;
  a.dims.set_agent_id(id);
  a.dims.set_arch(arch);
  a.dims.set_device_count(1);
  a.dims.set_pool("lab");
  a.dims.add_executors("native");
  a.dims.add_executors("command");
  a.dims.add_playbooks("dtype_bfloat16");
  a.dims.set_hostname(id + ".lab");
  a.session_id = "sess-" + id;
  a.registered_at = At(5);
  return a;
}

ResultRecord Result(const std::string& lease, const std::string& shard, const std::string& sweep,
                    std::int64_t token, int at) {
  ResultRecord r;
  r.lease_id = lease;
  r.shard_id = shard;
  r.sweep_id = sweep;
  r.token = token;
  r.accepted_at = At(at);
  r.result.set_status(v1::ShardResult::SUCCEEDED);
  r.result.set_exit_code(0);
  r.result.set_duration_seconds(12.5);
  auto* o = r.result.add_entries();
  o->set_key("bert/training");
  o->set_file("tests/runner/test_config/torch/training.yaml");
  o->set_arch("p150");
  o->set_verdict("pass");
  return r;
}

AttemptRecord Attempt(const std::string& shard, int attempt, const std::string& agent, int at) {
  AttemptRecord a;
  a.shard_id = shard;
  a.attempt = attempt;
  a.lease_id = shard + "-l" + std::to_string(attempt);
  a.agent_id = agent;
  a.token = attempt;
  a.granted_at = At(at);
  return a;
}

AuditRecord Audit(const std::string& action, const std::string& target, int at) {
  return AuditRecord{At(at), "bob", "operator", action, target, "reason for " + action};
}

// What the caller may expect back from a sweep: everything (a store keeps only ms).
void ExpectSameSweep(const SweepRecord& got, const SweepRecord& want) {
  EXPECT_EQ(got.id, want.id);
  EXPECT_EQ(got.seq, want.seq);
  EXPECT_EQ(got.state, want.state);
  EXPECT_EQ(got.request.SerializeAsString(), want.request.SerializeAsString());
  EXPECT_EQ(got.repo, want.repo);
  EXPECT_EQ(got.ttxla_commit, want.ttxla_commit);
  EXPECT_EQ(got.forge_commit, want.forge_commit);
  EXPECT_EQ(got.archs, want.archs);
  EXPECT_EQ(got.playbooks, want.playbooks);
  EXPECT_EQ(got.problems, want.problems);
  EXPECT_EQ(got.details.SerializeAsString(), want.details.SerializeAsString());
  EXPECT_EQ(got.created_by, want.created_by);
  EXPECT_EQ(got.error, want.error);
  EXPECT_EQ(got.created_at, want.created_at);
  EXPECT_EQ(got.finished_at, want.finished_at);
}

// A lease's persisted fields (not its deadline).
void ExpectSameLease(const std::optional<LeaseInfo>& got, const std::optional<LeaseInfo>& want,
                     const std::string& what) {
  ASSERT_EQ(got.has_value(), want.has_value()) << what;
  if (!want) return;
  EXPECT_EQ(got->lease_id, want->lease_id) << what;
  EXPECT_EQ(got->agent_id, want->agent_id) << what;
  EXPECT_EQ(got->session_id, want->session_id) << what;
  EXPECT_EQ(got->token, want->token) << what;
  EXPECT_EQ(got->granted_at, want->granted_at) << what;
  EXPECT_EQ(got->backup, want->backup) << what;
}

// A shard's persisted fields; the lease deadline and the progress fields live in memory only.
void ExpectSameShard(const ShardRecord& got, const ShardRecord& want) {
  EXPECT_EQ(got.id, want.id);
  EXPECT_EQ(got.sweep_id, want.sweep_id);
  EXPECT_EQ(got.seq, want.seq);
  EXPECT_EQ(got.spec.SerializeAsString(), want.spec.SerializeAsString());
  EXPECT_EQ(got.state, want.state);
  EXPECT_EQ(got.priority, want.priority);
  EXPECT_DOUBLE_EQ(got.expected_seconds, want.expected_seconds);
  EXPECT_EQ(got.attempts, want.attempts);
  EXPECT_EQ(got.infra_losses, want.infra_losses);
  EXPECT_EQ(got.token, want.token);
  EXPECT_EQ(got.depends_on, want.depends_on);
  EXPECT_EQ(got.enqueued_at, want.enqueued_at);
  EXPECT_EQ(got.eligible_at, want.eligible_at);
  EXPECT_EQ(got.last_error, want.last_error);
  EXPECT_EQ(got.archs, want.archs);
  EXPECT_EQ(got.cpu_ok, want.cpu_ok);
  ExpectSameLease(got.lease, want.lease, got.id + " lease");
  ExpectSameLease(got.backup, want.backup, got.id + " backup");
}

void ExpectSameAttempt(const AttemptRecord& got, const AttemptRecord& want) {
  EXPECT_EQ(got.shard_id, want.shard_id);
  EXPECT_EQ(got.attempt, want.attempt);
  EXPECT_EQ(got.lease_id, want.lease_id);
  EXPECT_EQ(got.agent_id, want.agent_id);
  EXPECT_EQ(got.token, want.token);
  EXPECT_EQ(got.granted_at, want.granted_at);
  EXPECT_EQ(got.ended_at, want.ended_at);
  EXPECT_EQ(got.outcome, want.outcome);
  EXPECT_EQ(got.reason, want.reason);
  EXPECT_EQ(got.backup, want.backup);
}

void ExpectSameAudit(const AuditRecord& got, const AuditRecord& want) {
  EXPECT_EQ(got.at, want.at);
  EXPECT_EQ(got.who, want.who);
  EXPECT_EQ(got.role, want.role);
  EXPECT_EQ(got.action, want.action);
  EXPECT_EQ(got.target, want.target);
  EXPECT_EQ(got.reason, want.reason);
}

template <typename Record, typename Key>
std::map<std::string, Record> ById(const std::vector<Record>& records, Key key) {
  std::map<std::string, Record> out;
  for (const auto& r : records) out.emplace(key(r), r);
  return out;
}

class StoreContractTest : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override {
    auto opened = GetParam().open(tmp_.path());
    ASSERT_TRUE(opened.ok()) << opened.status();
    store_ = std::move(*opened);
  }

  // Stages m and flushes; the ticket of m.
  std::uint64_t Commit(const Mutation& m) {
    auto ticket = store_->Stage(m);
    EXPECT_TRUE(ticket.ok()) << m.name << ": " << ticket.status();
    auto durable = store_->Flush();
    EXPECT_TRUE(durable.ok()) << m.name << ": " << durable.status();
    if (!ticket.ok() || !durable.ok()) return 0;
    EXPECT_GE(*durable, *ticket);
    return *ticket;
  }

  Snapshot LoadOrDie() {
    auto snap = store_->Load();
    EXPECT_TRUE(snap.ok()) << snap.status();
    return snap.ok() ? std::move(*snap) : Snapshot{};
  }

  // The sweep "sw-0001" with one shard "sw-0001-s1", committed.
  void CreateSweepAndShard() {
    const SweepRecord sweep = Sweep("sw-0001", 1);
    const ShardRecord shard = Shard("sw-0001-s1", "sw-0001", 2);
    Mutation m;
    m.name = "CreateSweep";
    m.sweeps.push_back(&sweep);
    m.shard_specs.push_back(&shard);
    Commit(m);
  }

  testing::TempDir tmp_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreContractTest, TicketsStartAtOneAndIncrease) {
  const SweepRecord sweep = Sweep("sw-0001", 1);
  Mutation m;
  m.name = "CreateSweep";
  m.sweeps.push_back(&sweep);
  EXPECT_EQ(*store_->Stage(m), 1u);
  EXPECT_EQ(*store_->Stage(m), 2u);
  EXPECT_EQ(*store_->Stage(m), 3u);
  EXPECT_EQ(*store_->Flush(), 3u);
  EXPECT_EQ(*store_->Stage(m), 4u) << "a flush does not restart the count";
  EXPECT_EQ(*store_->Flush(), 4u);
}

TEST_P(StoreContractTest, FlushReturnsTheHighestDurableTicket) {
  EXPECT_EQ(*store_->Flush(), 0u) << "nothing was ever staged";
  const SweepRecord sweep = Sweep("sw-0001", 1);
  Mutation m;
  m.name = "CreateSweep";
  m.sweeps.push_back(&sweep);
  ASSERT_TRUE(store_->Stage(m).ok());
  ASSERT_TRUE(store_->Stage(m).ok());
  EXPECT_EQ(*store_->Flush(), 2u);
  EXPECT_EQ(*store_->Flush(), 2u) << "nothing staged since: the same ticket";
  EXPECT_EQ(*store_->Flush(), 2u);
}

TEST_P(StoreContractTest, AStagedMutationIsInvisibleUntilFlushed) {
  const SweepRecord sweep = Sweep("sw-0001", 1);
  ShardRecord shard = Shard("sw-0001-s1", "sw-0001", 2);
  const AgentRecord agent = Agent("agent-1", "p150");
  Mutation m;
  m.name = "CreateSweep";
  m.sweeps.push_back(&sweep);
  m.shard_specs.push_back(&shard);
  m.agents.push_back(&agent);
  m.attempts.push_back(Attempt(shard.id, 1, "agent-1", 3));
  m.result = Result("sw-0001-s1-l1", shard.id, sweep.id, 1, 4);
  m.audit.push_back(Audit("start_sweep", sweep.id, 0));
  ASSERT_TRUE(store_->Stage(m).ok());

  Snapshot before = LoadOrDie();
  EXPECT_TRUE(before.sweeps.empty());
  EXPECT_TRUE(before.shards.empty());
  EXPECT_TRUE(before.agents.empty());
  EXPECT_TRUE(before.results.empty());
  EXPECT_TRUE(store_->Attempts(shard.id)->empty());
  EXPECT_TRUE(store_->AuditLog(10)->empty());

  EXPECT_EQ(*store_->Flush(), 1u);
  Snapshot after = LoadOrDie();
  EXPECT_EQ(after.sweeps.size(), 1u);
  EXPECT_EQ(after.shards.size(), 1u);
  EXPECT_EQ(after.agents.size(), 1u);
  EXPECT_EQ(after.results.size(), 1u);
  EXPECT_EQ(store_->Attempts(shard.id)->size(), 1u);
  EXPECT_EQ(store_->AuditLog(10)->size(), 1u);
}

// Stage takes what the mutation says at that moment: the caller's records may change right
// after (the scheduler moves its copies into its table).
TEST_P(StoreContractTest, StageTakesTheRecordsAsTheyAreThen) {
  SweepRecord sweep = Sweep("sw-0001", 1);
  ShardRecord shard = Shard("sw-0001-s1", "sw-0001", 2);
  Mutation m;
  m.name = "CreateSweep";
  m.sweeps.push_back(&sweep);
  m.shard_specs.push_back(&shard);
  ASSERT_TRUE(store_->Stage(m).ok());
  const SweepRecord sweep_staged = sweep;
  const ShardRecord shard_staged = shard;
  sweep.state = SweepState::kCancelled;
  sweep.error = "changed after staging";
  shard.state = ShardState::kCancelled;
  shard.spec.set_playbook("changed after staging");
  ASSERT_TRUE(store_->Flush().ok());
  Snapshot snap = LoadOrDie();
  ASSERT_EQ(snap.sweeps.size(), 1u);
  ExpectSameSweep(snap.sweeps[0], sweep_staged);
  ASSERT_EQ(snap.shards.size(), 1u);
  ExpectSameShard(snap.shards[0], shard_staged);
}

TEST_P(StoreContractTest, AbortDropsWhatIsStagedAndReturnsTheHighestTicketHandedOut) {
  EXPECT_EQ(store_->Abort(), 0u) << "nothing handed out yet";
  const SweepRecord first = Sweep("sw-0001", 1);
  const SweepRecord second = Sweep("sw-0002", 2);
  const SweepRecord third = Sweep("sw-0003", 3);
  Mutation m1, m2, m3;
  m1.sweeps.push_back(&first);
  m2.sweeps.push_back(&second);
  m3.sweeps.push_back(&third);
  EXPECT_EQ(Commit(m1), 1u);
  EXPECT_EQ(*store_->Stage(m2), 2u);
  EXPECT_EQ(*store_->Stage(m3), 3u);
  EXPECT_EQ(store_->Abort(), 3u);
  EXPECT_EQ(store_->Abort(), 3u) << "nothing staged: still the highest handed out";
  EXPECT_EQ(*store_->Flush(), 1u) << "the dropped tickets never become durable";
  Snapshot snap = LoadOrDie();
  ASSERT_EQ(snap.sweeps.size(), 1u);
  EXPECT_EQ(snap.sweeps[0].id, "sw-0001");

  // Tickets go on above the dropped ones.
  EXPECT_EQ(*store_->Stage(m3), 4u);
  EXPECT_EQ(*store_->Flush(), 4u);
  snap = LoadOrDie();
  ASSERT_EQ(snap.sweeps.size(), 2u);
}

TEST_P(StoreContractTest, SweepsRoundTripAndTheirOutcomeIsUpdated) {
  SweepRecord a = Sweep("sw-0001", 1);
  SweepRecord b = Sweep("sw-0002", 2);
  b.request.Clear();
  b.request.set_git_url("https://example.com/tt-xla.git");
  b.request.set_git_ref("main");
  b.archs = {"n150"};
  b.playbooks.clear();
  b.problems.clear();
  b.details.Clear();
  Mutation create;
  create.name = "CreateSweep";
  create.sweeps = {&a, &b};
  Commit(create);
  auto sweeps = ById(LoadOrDie().sweeps, [](const SweepRecord& s) { return s.id; });
  ASSERT_EQ(sweeps.size(), 2u);
  ExpectSameSweep(sweeps.at("sw-0001"), a);
  ExpectSameSweep(sweeps.at("sw-0002"), b);

  // The sweep ends: its state, error, end time and details change.
  a.state = SweepState::kFailed;
  a.error = "merge conflict in tests/a.yaml";
  a.finished_at = At(3600);
  a.details.mutable_final_entries()->set_total(7);
  a.details.mutable_final_entries()->set_done(5);
  (*a.details.mutable_final_entries()->mutable_by_outcome())["EXPECTED_PASSING"] = 4;
  a.details.add_notes("merged with 1 conflict");
  Mutation finish;
  finish.name = "FinishSweep";
  finish.sweeps.push_back(&a);
  Commit(finish);
  sweeps = ById(LoadOrDie().sweeps, [](const SweepRecord& s) { return s.id; });
  ASSERT_EQ(sweeps.size(), 2u);
  ExpectSameSweep(sweeps.at("sw-0001"), a);
  ExpectSameSweep(sweeps.at("sw-0002"), b);
  EXPECT_TRUE(sweeps.at("sw-0001").details.has_final_entries());
}

// The list fields of a sweep are lists of arbitrary text: an item with a line break (a problem
// quoting a multi-line value) or an empty item comes back as it was written.
TEST_P(StoreContractTest, SweepListItemsComeBackAsWritten) {
  SweepRecord s = Sweep("sw-0001", 1);
  s.problems = {"tests/a.yaml:3: bad reason 'first line\nsecond line'", "",
                "tests/b.yaml: entry 'x' left out"};
  Mutation m;
  m.name = "CreateSweep";
  m.sweeps.push_back(&s);
  Commit(m);
  Snapshot snap = LoadOrDie();
  ASSERT_EQ(snap.sweeps.size(), 1u);
  EXPECT_EQ(snap.sweeps[0].problems, s.problems);
}

TEST_P(StoreContractTest, ShardsRoundTripWithSpecStateLeaseAndCounters) {
  const SweepRecord sweep = Sweep("sw-0001", 1);
  ShardRecord probe = Shard("sw-0001-s1", sweep.id, 2);
  probe.spec.set_phase(v1::PHASE_PROBE);
  probe.spec.set_arch("");
  probe.archs.clear();
  probe.cpu_ok = true;
  ShardRecord verify = Shard("sw-0001-s2", sweep.id, 3);
  verify.spec.set_phase(v1::PHASE_VERIFY);
  verify.state = ShardState::kWaiting;
  verify.depends_on = probe.id;
  Mutation create;
  create.name = "CreateSweep";
  create.sweeps.push_back(&sweep);
  create.shard_specs = {&probe, &verify};
  Commit(create);
  auto shards = ById(LoadOrDie().shards, [](const ShardRecord& s) { return s.id; });
  ASSERT_EQ(shards.size(), 2u);
  ExpectSameShard(shards.at(probe.id), probe);
  ExpectSameShard(shards.at(verify.id), verify);

  // Granted: state, counters and the lease change (the spec is not in the mutation's specs).
  probe.state = ShardState::kLeased;
  probe.attempts = 2;
  probe.infra_losses = 1;
  probe.token = 3;
  probe.last_error = "lease sw-0001-s1-l2 expired (deadline) on agent agent-0";
  probe.lease = LeaseInfo{"sw-0001-s1-l3", "agent-1", "sess-agent-1", 3, At(10), At(70)};
  Mutation grant;
  grant.name = "GrantLease";
  grant.shards.push_back(&probe);
  Commit(grant);
  shards = ById(LoadOrDie().shards, [](const ShardRecord& s) { return s.id; });
  ExpectSameShard(shards.at(probe.id), probe);
  ExpectSameShard(shards.at(verify.id), verify);

  // A backup lease of the straggler on another agent (docs/farm.md, "Backup leases"), then the
  // first lease lost: the backup carries the shard on as its lease, still marked a backup.
  probe.token = 4;
  probe.backup = LeaseInfo{"sw-0001-s1-l4", "agent-2", "sess-agent-2", 4, At(15), At(75), true};
  Mutation backup;
  backup.name = "GrantBackup";
  backup.shards.push_back(&probe);
  Commit(backup);
  shards = ById(LoadOrDie().shards, [](const ShardRecord& s) { return s.id; });
  ExpectSameShard(shards.at(probe.id), probe);
  probe.lease = probe.backup;
  probe.backup.reset();
  Mutation handed;
  handed.name = "ExpireLeases";
  handed.shards.push_back(&probe);
  Commit(handed);
  shards = ById(LoadOrDie().shards, [](const ShardRecord& s) { return s.id; });
  ExpectSameShard(shards.at(probe.id), probe);
  EXPECT_TRUE(shards.at(probe.id).lease->backup);

  // Requeued with a backoff: the lease is gone.
  probe.state = ShardState::kQueued;
  probe.lease.reset();
  probe.enqueued_at = At(20);
  probe.eligible_at = At(40);
  probe.last_error = "exit 1";
  Mutation requeue;
  requeue.name = "FailAttempt";
  requeue.shards.push_back(&probe);
  Commit(requeue);
  shards = ById(LoadOrDie().shards, [](const ShardRecord& s) { return s.id; });
  ExpectSameShard(shards.at(probe.id), probe);

  // A new spec (the verify phase gets the probe's edits to pre-apply), and with it an estimate
  // for the entries left.
  auto* edit = verify.spec.add_pre_apply();
  edit->set_path("third_party/tt_forge_models/bert/loader.py");
  verify.state = ShardState::kQueued;
  verify.expected_seconds /= 2;
  Mutation respec;
  respec.name = "ProbeDone";
  respec.shard_specs.push_back(&verify);
  respec.shards.push_back(&verify);  // named in both: written once, whole
  Commit(respec);
  shards = ById(LoadOrDie().shards, [](const ShardRecord& s) { return s.id; });
  ExpectSameShard(shards.at(verify.id), verify);
  EXPECT_EQ(shards.at(verify.id).spec.pre_apply_size(), 1);
}

TEST_P(StoreContractTest, AgentsAreUpsertedAndRemoved) {
  AgentRecord a = Agent("agent-1", "p150");
  AgentRecord b = Agent("agent-2", "n150");
  b.dims.clear_executors();
  b.dims.clear_playbooks();
  b.draining = true;
  AgentRecord cpu = Agent("agent-3", "cpu");
  cpu.dims.set_cpu_only(true);
  Mutation reg;
  reg.name = "Register";
  reg.agents = {&a, &b, &cpu};
  Commit(reg);
  auto agents = ById(LoadOrDie().agents, [](const AgentRecord& r) { return r.dims.agent_id(); });
  ASSERT_EQ(agents.size(), 3u);
  for (const AgentRecord* want : {&a, &b, &cpu}) {
    const AgentRecord& got = agents.at(want->dims.agent_id());
    EXPECT_EQ(got.dims.SerializeAsString(), want->dims.SerializeAsString());
    EXPECT_EQ(got.session_id, want->session_id);
    EXPECT_EQ(got.draining, want->draining);
    EXPECT_EQ(got.registered_at, want->registered_at);
  }

  // Re-registered with a new session and drained; agent-2 undrained; agent-3 forgotten.
  a.session_id = "sess-agent-1-restarted";
  a.registered_at = At(100);
  a.draining = true;
  a.dims.set_version("2.0");
  b.draining = false;
  Mutation change;
  change.name = "Drain";
  change.agents = {&a, &b};
  change.removed_agents = {"agent-3"};
  Commit(change);
  agents = ById(LoadOrDie().agents, [](const AgentRecord& r) { return r.dims.agent_id(); });
  ASSERT_EQ(agents.size(), 2u);
  EXPECT_EQ(agents.count("agent-3"), 0u);
  EXPECT_EQ(agents.at("agent-1").session_id, "sess-agent-1-restarted");
  EXPECT_EQ(agents.at("agent-1").registered_at, At(100));
  EXPECT_TRUE(agents.at("agent-1").draining);
  EXPECT_EQ(agents.at("agent-1").dims.version(), "2.0");
  EXPECT_FALSE(agents.at("agent-2").draining);

  // Removing an agent that is not there is no error.
  Mutation again;
  again.name = "ForgetAgents";
  again.removed_agents = {"agent-3", "never-seen"};
  Commit(again);
  EXPECT_EQ(LoadOrDie().agents.size(), 2u);
}

TEST_P(StoreContractTest, AttemptsAreUpsertedByShardAndAttempt) {
  CreateSweepAndShard();
  const std::string shard = "sw-0001-s1";
  AttemptRecord first = Attempt(shard, 1, "agent-1", 10);
  Mutation grant;
  grant.name = "GrantLease";
  grant.attempts.push_back(first);
  Commit(grant);
  auto rows = store_->Attempts(shard);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  ExpectSameAttempt((*rows)[0], first);
  EXPECT_EQ((*rows)[0].outcome, "") << "open";

  // The same attempt ends (its row is updated, not added), and a second one starts.
  first.ended_at = At(70);
  first.outcome = "expired";
  first.reason = "lease expired (deadline)";
  const AttemptRecord second = Attempt(shard, 2, "agent-2", 80);
  Mutation expire;
  expire.name = "ExpireLease";
  expire.attempts = {first, second};
  Commit(expire);
  rows = store_->Attempts(shard);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  ExpectSameAttempt((*rows)[0], first);
  ExpectSameAttempt((*rows)[1], second);

  EXPECT_TRUE(store_->Attempts("sw-0001-s9")->empty()) << "another shard's attempts";

  // A backup's attempt row stays marked as one when it ends, whatever the ended row says.
  AttemptRecord backup = Attempt(shard, 3, "agent-3", 90);
  backup.backup = true;
  Mutation grant_backup;
  grant_backup.name = "GrantBackup";
  grant_backup.attempts.push_back(backup);
  Commit(grant_backup);
  AttemptRecord ended = backup;
  ended.backup = false;
  ended.ended_at = At(95);
  ended.outcome = "superseded";
  Mutation superseded;
  superseded.name = "RecordResult";
  superseded.attempts.push_back(ended);
  Commit(superseded);
  rows = store_->Attempts(shard);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 3u);
  ended.backup = true;
  ExpectSameAttempt((*rows)[2], ended);
}

TEST_P(StoreContractTest, ResultsComeBackInAcceptanceOrderOnePerLease) {
  CreateSweepAndShard();
  // Lease ids chosen so that acceptance order is not their alphabetical order.
  const ResultRecord later_name = Result("sw-0001-s1-l9", "sw-0001-s1", "sw-0001", 9, 10);
  ResultRecord earlier_name = Result("sw-0001-s1-l1", "sw-0001-s1", "sw-0001", 1, 20);
  earlier_name.result.set_status(v1::ShardResult::FAILED);
  earlier_name.result.set_error("workspace: disk full");
  earlier_name.result.set_exit_code(2);
  const ResultRecord* const accepted[] = {&later_name, &earlier_name};
  for (const ResultRecord* r : accepted) {
    Mutation m;
    m.name = "RecordResult";
    m.result = *r;
    Commit(m);
  }
  Snapshot snap = LoadOrDie();
  ASSERT_EQ(snap.results.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const ResultRecord& got = snap.results[i];
    const ResultRecord* const* want = accepted;
    EXPECT_EQ(got.lease_id, want[i]->lease_id);
    EXPECT_EQ(got.shard_id, want[i]->shard_id);
    EXPECT_EQ(got.sweep_id, want[i]->sweep_id);
    EXPECT_EQ(got.token, want[i]->token);
    EXPECT_EQ(got.accepted_at, want[i]->accepted_at);
    EXPECT_EQ(got.result.SerializeAsString(), want[i]->result.SerializeAsString());
  }

  // A second result for a lease never replaces the first (refused, or ignored).
  ResultRecord again = Result("sw-0001-s1-l9", "sw-0001-s1", "sw-0001", 9, 30);
  again.result.set_exit_code(77);
  Mutation dup;
  dup.name = "RecordResult";
  dup.result = again;
  if (store_->Stage(dup).ok() && !store_->Flush().ok()) store_->Abort();
  snap = LoadOrDie();
  ASSERT_EQ(snap.results.size(), 2u);
  EXPECT_EQ(snap.results[0].lease_id, "sw-0001-s1-l9");
  EXPECT_EQ(snap.results[0].result.exit_code(), 0);
  EXPECT_EQ(snap.results[0].accepted_at, At(10));
}

TEST_P(StoreContractTest, TheAuditLogKeepsTheLatestEntriesInOrder) {
  const std::vector<AuditRecord> written = {
      Audit("start_sweep", "sw-0001", 1), Audit("drain", "agent-1", 2),
      Audit("requeue_shard", "sw-0001-s1", 3), Audit("cancel_sweep", "sw-0001", 4)};
  Mutation first;
  first.name = "StartSweep";
  first.audit = {written[0]};
  Commit(first);
  Mutation rest;
  rest.name = "Operator";
  rest.audit = {written[1], written[2], written[3]};
  Commit(rest);

  auto all = store_->AuditLog(100);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), written.size());
  for (std::size_t i = 0; i < written.size(); ++i) ExpectSameAudit((*all)[i], written[i]);

  auto latest = store_->AuditLog(2);
  ASSERT_TRUE(latest.ok()) << latest.status();
  ASSERT_EQ(latest->size(), 2u) << "the newest two, oldest first";
  ExpectSameAudit((*latest)[0], written[2]);
  ExpectSameAudit((*latest)[1], written[3]);
}

// The store has no read path for a sweep's entries (they are rebuilt from the shard specs): a
// mutation carrying them commits, also when an entry is written again, and changes nothing
// else that Load returns.
TEST_P(StoreContractTest, EntriesAreAcceptedWithTheirSweep) {
  const SweepRecord sweep = Sweep("sw-0001", 1);
  const ShardRecord shard = Shard("sw-0001-s1", sweep.id, 2);
  Mutation m;
  m.name = "CreateSweep";
  m.sweeps.push_back(&sweep);
  m.shard_specs.push_back(&shard);
  for (const auto& e : shard.spec.entries()) m.entries.emplace_back(sweep.id, e);
  v1::ShardEntry other;
  other.set_key("gpt2/inference");
  other.set_file("tests/runner/test_config/torch/inference.yaml");
  other.set_status("KNOWN_FAILURE_XFAIL");
  other.add_captures("GPT2");
  m.entries.emplace_back(sweep.id, other);
  EXPECT_EQ(Commit(m), 1u);
  Mutation again;
  again.name = "Replan";
  again.entries.emplace_back(sweep.id, other);
  EXPECT_EQ(Commit(again), 2u);
  Snapshot snap = LoadOrDie();
  ASSERT_EQ(snap.sweeps.size(), 1u);
  ExpectSameSweep(snap.sweeps[0], sweep);
  ASSERT_EQ(snap.shards.size(), 1u);
  ExpectSameShard(snap.shards[0], shard);
}

TEST_P(StoreContractTest, AHealthyStoreChecksWithoutTouchingWhatIsStaged) {
  EXPECT_TRUE(store_->FileIntact());
  EXPECT_TRUE(store_->Check().ok());
  CreateSweepAndShard();
  const SweepRecord second = Sweep("sw-0002", 2);
  Mutation m;
  m.name = "CreateSweep";
  m.sweeps.push_back(&second);
  ASSERT_EQ(*store_->Stage(m), 2u);
  const absl::Status checked = store_->Check();
  EXPECT_TRUE(checked.ok()) << checked;
  EXPECT_TRUE(store_->FileIntact());
  EXPECT_EQ(LoadOrDie().sweeps.size(), 1u) << "a check commits nothing that was staged";
  EXPECT_EQ(*store_->Flush(), 2u) << "and drops nothing";
  EXPECT_EQ(LoadOrDie().sweeps.size(), 2u);
  EXPECT_TRUE(store_->Check().ok());
  EXPECT_TRUE(store_->FileIntact());
}

// Every Store in production. (The stores in group_commit_test.cc are test doubles.)
INSTANTIATE_TEST_SUITE_P(Stores, StoreContractTest, ::testing::Values(kSqliteFile, kSqliteMemory),
                         [](const ::testing::TestParamInfo<StoreFactory>& p) {
                           return p.param.name;
                         });

}  // namespace
}  // namespace triage::coord
