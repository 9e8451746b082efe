// The coordinator's scheduling rules with a fake clock (no sleeps) and a real SQLite store in
// memory: leases, renewals, expiry, backoff, quarantine, fencing, idempotency, drain, dead
// agents, matching, order, waves of dependent shards, operator actions and recovery.

#include "coordinator/core/coordinator.h"
#include "agent/playbooks/catalog.h"

#include <map>
#include <set>

#include "common/util/strings.h"
#include "coordinator/persistence/sqlite_store.h"
#include "coordinator/planning/planner.h"
#include "coordinator/planning/shared_wave.h"
#include "coordinator/planning/waves.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::coord {
namespace {

using namespace std::chrono_literals;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

constexpr char kTrainingFile[] =
    "tests/runner/test_config/torch/test_config_training_single_device.yaml";
constexpr char kTpFile[] =
    "tests/runner/test_config/torch/test_config_training_tensor_parallel.yaml";
constexpr char kUnpack[] =
    "tt-forge-models doesn't implement unpack_forward_output for this model.";
constexpr char kBf16[] = "RuntimeError: 'lu_cpu' not implemented for 'BFloat16'";

std::string Entry(const std::string& key, const std::string& reason) {
  return "  " + key +
         ":\n    status: NOT_SUPPORTED_SKIP\n    bringup_status: FAILED_FE_COMPILATION\n" +
         "    reason: \"" + reason + "\"\n";
}

// Two loaders with unpack entries (a: 2 variants, b: 1), one bf16 loader, one passing entry.
std::string TrainingYaml() {
  return "test_config:\n" + Entry("a/pytorch-V1-single_device-training", kUnpack) +
         Entry("a/pytorch-V2-single_device-training", kUnpack) +
         Entry("b/pytorch-single_device-training", kUnpack) +
         Entry("c/pytorch-X-single_device-training", kBf16) +
         "  d/pytorch-single_device-training:\n    status: EXPECTED_PASSING\n";
}

// A key whose model path leaves the repository is an invalid entry: never planned, and its file
// is left out like any file with validation errors.
TEST(Planner, KeyOutsideTheRepositoryIsNeverPlanned) {
  inventory::Inventory inv;
  inv.documents.push_back(inventory::Document::Parse(
      kTrainingFile, "test_config:\n" +
                         Entry("../../etc/x/pytorch-V-single_device-training", kUnpack) +
                         Entry("a/pytorch-V1-single_device-training", kUnpack)));
  inv.diagnostics = inv.documents.back().diagnostics();
  ASSERT_FALSE(inv.ok());
  EXPECT_THAT(inv.diagnostics.front().ToString(),
              HasSubstr(":2:3: key '../../etc/x/pytorch-V-single_device-training' names a model "
                        "path outside the repository"));
  Plan plan = PlanSweep(inv, playbooks::DefaultClassifier(), PlanOptions{}, "sw", "a", "b");
  EXPECT_TRUE(plan.entries.empty());
  EXPECT_TRUE(plan.shards.empty());
  for (const auto& shard : plan.shards) {
    EXPECT_EQ(shard.spec.loader().find(".."), std::string::npos) << shard.spec.loader();
  }
  ASSERT_EQ(plan.problems.size(), 1u);
  EXPECT_THAT(plan.problems[0], HasSubstr("a/pytorch-V1-single_device-training' left out"));
}

class RecordingMetrics : public CoordinatorMetrics {
 public:
  void LeaseExpired(std::string_view arch, std::string_view reason) override {
    ++expired[std::string(arch) + "/" + std::string(reason)];
  }
  void BackupLease(std::string_view arch, std::string_view outcome) override {
    ++backups[std::string(arch) + "/" + std::string(outcome)];
  }
  void BackupSeconds(std::string_view, double seconds) override { backup_seconds += seconds; }
  std::map<std::string, int> backups;
  double backup_seconds = 0;
  void Requeued(std::string_view, std::string_view source) override {
    ++requeued[std::string(source)];
  }
  void StaleResultRejected(std::string_view reason) override { ++stale[std::string(reason)]; }
  void ShardStateChanged(std::string_view arch, std::string_view from,
                         std::string_view to) override {
    if (!from.empty()) --shards[std::string(arch) + "/" + std::string(from)];
    if (!to.empty()) ++shards[std::string(arch) + "/" + std::string(to)];
  }
  void AgentStateChanged(std::string_view arch, std::string_view from,
                         std::string_view to) override {
    if (!from.empty()) --agents[std::string(arch) + "/" + std::string(from)];
    if (!to.empty()) ++agents[std::string(arch) + "/" + std::string(to)];
  }
  void UnservableShards(std::string_view arch, std::string_view reason, int n) override {
    unservable[std::string(arch) + "/" + std::string(reason)] = n;
  }
  void BlockedSweeps(int n) override { blocked = n; }
  void EntryStateChanged(std::string_view playbook, std::string_view from,
                         std::string_view to) override {
    if (!from.empty()) --entries[std::string(playbook) + "/" + std::string(from)];
    if (!to.empty()) ++entries[std::string(playbook) + "/" + std::string(to)];
  }
  void EntryDecided(std::string_view playbook, std::string_view outcome,
                    std::string_view stage) override {
    ++outcomes[std::string(playbook) + "/" + std::string(outcome) + "/" + std::string(stage)];
  }
  void EntryDone(std::string_view playbook) override { ++done[std::string(playbook)]; }
  void RunningSweeps(const std::vector<SweepProgress>& sweeps) override { running = sweeps; }
  void VerifyBatch(std::string_view arch, int n) override {
    verify_batches.push_back(std::string(arch) + "/" + std::to_string(n));
  }
  std::vector<std::string> verify_batches;  // arch/shards per verify grant, in order
  std::map<std::string, int> expired, requeued, stale, shards, agents, unservable, entries,
      outcomes, done;
  int blocked = 0;
  std::vector<SweepProgress> running;
};

// A probe's result r with every entry of class cls; with attr, the probe also proposes the
// class's registry line.
v1::ShardResult ProbedWithClass(v1::ShardResult r, const std::string& cls,
                                const std::string& attr = "") {
  for (auto& o : *r.mutable_entries()) o.set_output_class(cls);
  if (!attr.empty()) {
    auto* op = r.add_registry_ops();
    op->set_kind(v1::RegistryOp::ADD);
    op->set_cls(cls);
    op->set_attr(attr);
  }
  return r;
}

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = SqliteStore::Open(":memory:");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    yaml_[kTrainingFile] = TrainingYaml();
    Make();
  }

  // A coordinator over the SQLite database at path (the store replaced, the old coordinator
  // gone first): a fresh one, or after a "restart" of the same one, recovered from it.
  void OpenFileStore(const std::filesystem::path& path, bool recover) {
    coord_.reset();
    store_.reset();
    auto file_store = SqliteStore::Open(path);
    ASSERT_TRUE(file_store.ok()) << file_store.status();
    store_ = std::move(*file_store);
    Make();
    if (recover) {
      ASSERT_TRUE(coord_->Recover().ok());
    }
  }

  void Make() {
    coord_ = std::make_unique<Coordinator>(
        options_, store_.get(), &clock_, [this](const v1::StartSweepRequest&) { return Input(); },
        &metrics_);
  }

  absl::StatusOr<SweepInput> Input() {
    SweepInput in;
    in.repo = "/fake/tt-xla";
    in.ttxla_commit = std::string(40, 'a');
    in.forge_commit = std::string(40, 'b');
    in.agent_repo_url = "file:///fake/tt-xla";
    in.inputs = inputs_;
    in.checkout_durations = checkout_durations_;
    for (const auto& [path, text] : yaml_) {
      in.inventory.documents.push_back(inventory::Document::Parse(path, text));
      for (const auto& d : in.inventory.documents.back().diagnostics()) {
        in.inventory.diagnostics.push_back(d);
      }
    }
    return in;
  }

  std::string RegisterAgent(const std::string& id, const std::string& arch, bool cpu_only = false,
                            std::vector<std::string> executors = {}) {
    v1::RegisterRequest req;
    auto* d = req.mutable_dimensions();
    d->set_agent_id(id);
    d->set_arch(arch);
    d->set_cpu_only(cpu_only);
    for (auto& e : executors) d->add_executors(e);
    auto resp = coord_->Register(req);
    EXPECT_TRUE(resp.ok()) << resp.status();
    sessions_[id] = resp->session_id();
    return resp->session_id();
  }

  v1::Sweep Start(std::vector<std::string> archs = {}, int priority = 0, std::string durations = "",
                  std::vector<std::string> playbooks = {}) {
    v1::StartSweepRequest req;
    req.set_repo_path("/fake/tt-xla");
    for (auto& a : archs) req.add_archs(a);
    for (auto& p : playbooks) req.add_playbooks(p);
    req.set_priority(priority);
    req.set_durations_json(durations);
    req.set_reason("test");
    auto sweep = coord_->StartSweep(req, operator_);
    EXPECT_TRUE(sweep.ok()) << sweep.status();
    return sweep.ok() ? *sweep : v1::Sweep{};
  }

  // A Lease with no wait, answered before Lease returns (no committer thread here).
  // A Lease without waiting; max_batch > 1 asks for a batch of verify phases.
  absl::StatusOr<v1::LeaseResponse> TryLease(const std::string& agent, int max_batch = 0) {
    v1::LeaseRequest req;
    req.set_agent_id(agent);
    req.set_session_id(sessions_[agent]);
    req.set_max_batch(max_batch);
    absl::StatusOr<v1::LeaseResponse> got = absl::UnknownError("not called");
    coord_->Lease(req, [&](absl::StatusOr<v1::LeaseResponse> r) { got = std::move(r); });
    return got;
  }

  v1::LeaseResponse LeaseNow(const std::string& agent, int max_batch = 0) {
    auto got = TryLease(agent, max_batch);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? *got : v1::LeaseResponse{};
  }

  static v1::ShardResult Failed(const std::string& error) {
    v1::ShardResult r;
    r.set_status(v1::ShardResult::FAILED);
    r.set_error(error);
    return r;
  }

  // A CPU agent "cpu" and an n150 agent "n", probes on CPU agents only (device_probes off).
  void CpuAndDeviceAgent() {
    options_.device_probes = false;
    Make();
    RegisterAgent("cpu", "", true);
    RegisterAgent("n", "n150");
  }

  // Every probe phase the agent can take now, held, by loader.
  std::map<std::string, v1::LeaseResponse> LeaseEveryProbe(const std::string& agent) {
    std::map<std::string, v1::LeaseResponse> probes;
    for (auto l = LeaseNow(agent); l.granted(); l = LeaseNow(agent)) {
      EXPECT_EQ(l.shard().phase(), v1::PHASE_PROBE);
      probes[l.shard().loader()] = l;
    }
    return probes;
  }

  // A sweep of TrainingYaml's unpack and bf16 loaders (a, b, c) on n150 with CpuAndDeviceAgent,
  // the CPU agent holding every probe phase, by loader.
  std::map<std::string, v1::LeaseResponse> StartHoldingEveryProbe() {
    CpuAndDeviceAgent();
    Start({"n150"}, 0, "", {"unpack_forward_output", "dtype_bfloat16"});
    return LeaseEveryProbe("cpu");
  }

  // With StartHoldingEveryProbe's probes: c's model returns SharedOutput, then a's probe
  // proposes the line SharedOutput -> logits (c's entries are then verified again). Returns
  // the third loader, whose probe is still held.
  std::string ProbeCThenLineFromA(std::map<std::string, v1::LeaseResponse>& probes,
                                  const std::string& a, const std::string& c) {
    EXPECT_TRUE(CompleteLease("cpu", probes[c],
                              ProbedWithClass(Succeeded(probes[c].shard()), "SharedOutput"))
                    .accepted());
    EXPECT_TRUE(
        CompleteLease("cpu", probes[a],
                      ProbedWithClass(Succeeded(probes[a].shard()), "SharedOutput", "logits"))
            .accepted());
    for (const auto& [loader, l] : probes) {
      if (loader != a && loader != c) return loader;
    }
    return "";
  }

  // A sweep of both playbooks with one n150 agent "n", which leases the first shard of each of
  // the three loaders: the leases by loader.
  std::map<std::string, v1::LeaseResponse> StartAndLeaseEachLoader() {
    RegisterAgent("n", "n150");
    Start({}, 0, "", {"unpack_forward_output", "dtype_bfloat16"});
    std::map<std::string, v1::LeaseResponse> leases;
    for (int i = 0; i < 3; ++i) {
      auto l = LeaseNow("n");
      EXPECT_TRUE(l.granted()) << i;
      if (l.granted()) leases[l.shard().loader()] = l;
    }
    return leases;
  }

  // sw-0001's shards of one wave.
  std::vector<ShardRecord> ShardsOfWave(int wave) {
    std::vector<ShardRecord> out;
    auto all = coord_->Shards("sw-0001");
    EXPECT_TRUE(all.ok()) << all.status();
    if (!all.ok()) return out;
    for (const auto& s : *all) {
      if (s.spec.wave() == wave) out.push_back(s);
    }
    return out;
  }

  // The CPU agent leases until it gets a shard of wave 2 (one planned ahead) and completes it,
  // every entry returning SharedOutput.
  v1::LeaseResponse CompleteFirstShardOfWave2() {
    v1::LeaseResponse l;
    do {
      l = LeaseNow("cpu");
      EXPECT_TRUE(l.granted());
    } while (l.granted() && l.shard().wave() != 2);
    if (!l.granted()) return l;
    EXPECT_TRUE(
        CompleteLease("cpu", l, ProbedWithClass(Succeeded(l.shard()), "SharedOutput")).accepted());
    return l;
  }

  // The agent probes every loader, each probe phase succeeding with every entry ready.
  void ProbeEverything(const std::string& agent) {
    for (;;) {
      auto probe = LeaseNow(agent);
      if (!probe.granted()) break;
      ASSERT_EQ(probe.shard().phase(), v1::PHASE_PROBE);
      ASSERT_TRUE(CompleteLease(agent, probe, Succeeded(probe.shard())).accepted());
    }
  }

  v1::ShardResult Succeeded(const v1::ShardSpec& spec) {
    v1::ShardResult r;
    r.set_status(v1::ShardResult::SUCCEEDED);
    for (const auto& e : spec.entries()) {
      auto* o = r.add_entries();
      o->set_key(e.key());
      o->set_file(e.file());
      o->set_arch(spec.arch());
      o->set_verdict("pass");
      o->set_changed(true);
      auto* edit = o->mutable_edit();
      edit->set_file(e.file());
      edit->set_key(e.key());
      auto* f = edit->add_set();
      f->set_name("status");
      f->mutable_value()->set_string_value("EXPECTED_PASSING");
      edit->add_delete_("bringup_status");
      edit->add_delete_("reason");
    }
    return r;
  }

  v1::CompleteRequest CompleteRequest(const std::string& agent, const v1::LeaseResponse& lease,
                                      const v1::ShardResult& result) {
    v1::CompleteRequest req;
    req.set_agent_id(agent);
    req.set_session_id(sessions_[agent]);
    req.set_lease_id(lease.lease_id());
    req.set_fencing_token(lease.fencing_token());
    *req.mutable_result() = result;
    return req;
  }

  v1::CompleteResponse CompleteLease(const std::string& agent, const v1::LeaseResponse& lease,
                                     const v1::ShardResult& result) {
    auto resp = coord_->Complete(CompleteRequest(agent, lease, result));
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? *resp : v1::CompleteResponse{};
  }

  v1::HeartbeatResponse Beat(const std::string& agent, std::vector<std::string> leases = {}) {
    v1::HeartbeatRequest req;
    req.set_agent_id(agent);
    req.set_session_id(sessions_[agent]);
    for (auto& l : leases) req.add_lease_ids(l);
    auto resp = coord_->Heartbeat(req);
    EXPECT_TRUE(resp.ok());
    return *resp;
  }

  v1::Shard ShardById(const std::string& id) {
    v1::ListShardsRequest req;
    auto shards = coord_->ListShards(req);
    for (const auto& s : *shards) {
      if (s.id() == id) return s;
    }
    ADD_FAILURE() << "no shard " << id;
    return {};
  }

  // Completes every shard the agent can get until none is left.
  int Drain(const std::string& agent) {
    int n = 0;
    for (;;) {
      auto lease = LeaseNow(agent);
      if (!lease.granted()) return n;
      EXPECT_TRUE(CompleteLease(agent, lease, Succeeded(lease.shard())).accepted());
      ++n;
    }
  }

  CoordinatorOptions options_;
  FakeClock clock_;
  RecordingMetrics metrics_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<Coordinator> coord_;
  std::map<std::string, std::string> yaml_;
  std::optional<InputTrees> inputs_;  // what Input() reads besides the YAML
  std::string checkout_durations_;    // the checkout's .test_durations, as Input() reads it
  std::map<std::string, std::string> sessions_;
  Caller operator_{"alice", "operator"};
};

TEST_F(CoordinatorTest, PlansOneShardPerPlaybookAndLoader) {
  auto sweep = Start();
  EXPECT_EQ(sweep.state(), "running");
  EXPECT_EQ(sweep.entries().total(), 4);
  EXPECT_EQ(sweep.shards_by_state().at("queued"), 3);  // a (2 entries), b, c
  auto shards = coord_->ListShards({});
  ASSERT_TRUE(shards.ok());
  std::map<std::string, int> keys;
  for (const auto& s : *shards) keys[s.loader()] = s.keys_size();
  EXPECT_EQ(keys["third_party/tt_forge_models/a/pytorch/loader.py"], 2) << "loader-wide scope";
  EXPECT_EQ(keys["third_party/tt_forge_models/b/pytorch/loader.py"], 1);
  EXPECT_EQ(keys["third_party/tt_forge_models/c/pytorch/loader.py"], 1);
  EXPECT_EQ(metrics_.shards["n150/queued"], 3);
}

TEST_F(CoordinatorTest, GrantRenewExpireRequeueWithBackoff) {
  options_.agent_dead_after = 1h;  // only the lease deadline matters here
  Make();
  RegisterAgent("a1", "n150");
  Start({}, 0, "", {"dtype_bfloat16"});
  auto lease = LeaseNow("a1");
  ASSERT_TRUE(lease.granted());
  EXPECT_EQ(lease.fencing_token(), 1);
  EXPECT_EQ(lease.shard().playbook(), "dtype_bfloat16");
  EXPECT_EQ(ShardById(lease.shard().shard_id()).state(), "leased");

  // Heartbeats extend the lease past its original deadline.
  clock_.Advance(50s);
  Beat("a1", {lease.lease_id()});
  clock_.Advance(50s);
  coord_->Tick();
  EXPECT_EQ(ShardById(lease.shard().shard_id()).state(), "leased");

  // Silence past the deadline expires it; a lost lease is the farm's fault, not the work's:
  // the shard is requeued without a backoff.
  clock_.Advance(61s);
  coord_->Tick();
  auto s = ShardById(lease.shard().shard_id());
  EXPECT_EQ(s.state(), "queued");
  EXPECT_EQ(metrics_.expired["n150/deadline"], 1);
  EXPECT_EQ(metrics_.requeued["infra"], 1);
  auto again = LeaseNow("a1");
  ASSERT_TRUE(again.granted());
  EXPECT_EQ(again.fencing_token(), 2) << "fencing tokens are monotonic per shard";
  // The agent is told to stop the expired lease.
  auto hb = Beat("a1", {lease.lease_id(), again.lease_id()});
  ASSERT_EQ(hb.revoked_lease_ids_size(), 1);
  EXPECT_EQ(hb.revoked_lease_ids(0), lease.lease_id());
  // A failed attempt is requeued with a backoff.
  EXPECT_TRUE(CompleteLease("a1", again, Failed("probe failed")).accepted());
  EXPECT_EQ(metrics_.requeued["auto"], 1);
  EXPECT_FALSE(LeaseNow("a1").granted()) << "still in backoff";
  clock_.Advance(options_.backoff_base);
  EXPECT_TRUE(LeaseNow("a1").granted());
}

TEST_F(CoordinatorTest, QuarantineAfterMaxAttemptsThenOperatorRequeue) {
  options_.agent_dead_after = 1h;
  Make();
  RegisterAgent("a1", "n150");
  Start({}, 0, "", {"dtype_bfloat16"});
  std::string shard_id;
  for (int i = 0; i < 3; ++i) {
    auto lease = LeaseNow("a1");
    ASSERT_TRUE(lease.granted()) << "attempt " << i + 1;
    shard_id = lease.shard().shard_id();
    EXPECT_TRUE(CompleteLease("a1", lease, Failed("pytest crashed")).accepted());
    clock_.Advance(options_.backoff_max);
  }
  coord_->Tick();
  auto s = ShardById(shard_id);
  EXPECT_EQ(s.state(), "quarantined");
  EXPECT_EQ(s.attempts(), 3);
  EXPECT_FALSE(LeaseNow("a1").granted()) << "a quarantined shard waits for an operator";
  // Nothing left can progress: the sweep asks for a person and says which shard and why.
  auto blocked = coord_->GetSweep("sw-0001");
  EXPECT_EQ(blocked->state(), "blocked");
  ASSERT_EQ(blocked->problems_size(), 1);
  EXPECT_THAT(blocked->problems(0), HasSubstr(shard_id));
  EXPECT_THAT(blocked->problems(0), HasSubstr("quarantined"));
  EXPECT_THAT(blocked->problems(0), HasSubstr("pytest crashed"));
  EXPECT_EQ(blocked->eta_seconds(), -1);

  EXPECT_FALSE(coord_->RequeueShard(shard_id, "", operator_).ok()) << "a reason is required";
  auto requeued = coord_->RequeueShard(shard_id, "fixed the device", operator_);
  ASSERT_TRUE(requeued.ok()) << requeued.status();
  EXPECT_EQ(requeued->state(), "queued");
  EXPECT_EQ(requeued->attempts(), 0);
  EXPECT_EQ(metrics_.requeued["manual"], 1);
  coord_->Tick();
  EXPECT_EQ(coord_->GetSweep("sw-0001")->state(), "running");
  EXPECT_EQ(coord_->GetSweep("sw-0001")->problems_size(), 0);
  auto audit = store_->AuditLog(10);
  ASSERT_TRUE(audit.ok());
  ASSERT_GE(audit->size(), 2u);
  EXPECT_EQ(audit->back().who, "alice");
  EXPECT_EQ(audit->back().action, "requeue_shard");
  EXPECT_EQ(audit->back().target, shard_id);
  EXPECT_EQ(audit->back().reason, "fixed the device");
  auto lease = LeaseNow("a1");
  ASSERT_TRUE(lease.granted());
  EXPECT_TRUE(CompleteLease("a1", lease, Succeeded(lease.shard())).accepted());
  EXPECT_EQ(coord_->GetSweep("sw-0001")->state(), "succeeded");
  auto attempts = store_->Attempts(shard_id);
  ASSERT_TRUE(attempts.ok());
  EXPECT_EQ(attempts->size(), 4u);
  EXPECT_EQ(attempts->back().outcome, "succeeded");
}

TEST_F(CoordinatorTest, WorkNoLiveAgentCanTakeIsAProblemWithAReason) {
  Make();
  RegisterAgent("a1", "n150");
  Start({"p150"}, 0, "", {"dtype_bfloat16"});
  coord_->Tick();
  auto sweep = coord_->GetSweep("sw-0001");
  // One p150 shard, and only an n150 agent: nothing can progress.
  EXPECT_EQ(sweep->state(), "blocked");
  ASSERT_EQ(sweep->problems_size(), 1);
  EXPECT_THAT(sweep->problems(0), HasSubstr("1 shard needs arch p150 with executor native"));
  EXPECT_THAT(sweep->problems(0), HasSubstr("no agent of arch p150"));
  EXPECT_EQ(sweep->eta_seconds(), -1) << "no ETA for work nobody can take";
  EXPECT_EQ(metrics_.unservable["p150/arch"], 1);
  EXPECT_EQ(metrics_.blocked, 1);

  // A p150 agent that is drained does not help, and the problem names it.
  RegisterAgent("p1", "p150");
  ASSERT_TRUE(coord_->SetDraining("p1", true, "maintenance", operator_).ok());
  coord_->Tick();
  sweep = coord_->GetSweep("sw-0001");
  ASSERT_EQ(sweep->problems_size(), 1);
  EXPECT_THAT(sweep->problems(0), HasSubstr("p1 is drained"));
  EXPECT_EQ(metrics_.unservable["p150/arch"], 0);
  EXPECT_EQ(metrics_.unservable["p150/drained"], 1);

  // Watchers hear when it clears.
  std::vector<v1::SweepEvent> events;
  auto w = coord_->Watch("sw-0001", [&](const v1::SweepEvent& e) { events.push_back(e); });
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(coord_->SetDraining("p1", false, "back", operator_).ok());
  coord_->Tick();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().sweep().state(), "running");
  EXPECT_EQ(events.back().sweep().problems_size(), 0);
  EXPECT_EQ(metrics_.unservable["p150/drained"], 0);
  EXPECT_EQ(metrics_.blocked, 0);
  coord_->Unwatch(*w);
}

TEST_F(CoordinatorTest, UnservableWorkBesideServableWorkIsAProblemButNotBlocked) {
  Make();
  RegisterAgent("a1", "n150", false, {"replay"});
  Start({"n150"}, 0, "", {"dtype_bfloat16", "unpack_forward_output"});
  coord_->Tick();
  auto sweep = coord_->GetSweep("sw-0001");
  // The agent offers only the replay executor; the sweep's shards need native.
  EXPECT_EQ(sweep->state(), "blocked");
  ASSERT_EQ(sweep->problems_size(), 2);
  EXPECT_THAT(sweep->problems(0), HasSubstr("do not offer executor native"));
  RegisterAgent("a2", "n150");
  coord_->Tick();
  sweep = coord_->GetSweep("sw-0001");
  EXPECT_EQ(sweep->state(), "running");
  EXPECT_EQ(sweep->problems_size(), 0);
}

TEST_F(CoordinatorTest, EtaIsMeasuredOnTheSweepAndUnknownUntilThen) {
  yaml_[kTrainingFile] = "test_config:\n" + Entry("a/pytorch-single_device-training", kBf16) +
                         Entry("b/pytorch-single_device-training", kBf16) +
                         Entry("c/pytorch-single_device-training", kBf16) +
                         Entry("d/pytorch-single_device-training", kBf16) +
                         Entry("e/pytorch-single_device-training", kBf16);
  Make();
  RegisterAgent("a1", "n150");
  Start({"n150"}, 0, "", {"dtype_bfloat16"});
  coord_->Tick();
  EXPECT_EQ(coord_->GetSweep("sw-0001")->eta_seconds(), -1) << "no default estimate";
  // Three shards of 100 s each, one after the other: 5 shards, 3 done in 300 s.
  for (int i = 0; i < 3; ++i) {
    auto lease = LeaseNow("a1");
    ASSERT_TRUE(lease.granted());
    clock_.Advance(100s);
    auto result = Succeeded(lease.shard());
    result.set_duration_seconds(100);
    ASSERT_TRUE(CompleteLease("a1", lease, result).accepted());
    if (i < 2) {
      EXPECT_EQ(coord_->GetSweep("sw-0001")->eta_seconds(), -1) << "after " << i + 1;
    }
  }
  EXPECT_EQ(coord_->GetSweep("sw-0001")->eta_seconds(), 200);  // 2 left at 100 s each
}

TEST_F(CoordinatorTest, StaleTokenIsRejectedAndCountedAndCompleteIsIdempotent) {
  options_.agent_dead_after = 1h;
  Make();
  RegisterAgent("a1", "n150");
  RegisterAgent("a2", "n150");
  Start({}, 0, "", {"dtype_bfloat16"});
  auto old_lease = LeaseNow("a1");
  clock_.Advance(options_.lease_ttl + options_.backoff_base + 1s);
  coord_->Tick();
  clock_.Advance(options_.backoff_base);
  auto new_lease = LeaseNow("a2");
  ASSERT_TRUE(new_lease.granted());
  // The first agent wakes up and reports with its old lease.
  auto stale = CompleteLease("a1", old_lease, Succeeded(old_lease.shard()));
  EXPECT_FALSE(stale.accepted());
  EXPECT_NE(stale.rejected_reason().find("not current"), std::string::npos)
      << stale.rejected_reason();
  // Same shard, current lease id but an old token.
  v1::LeaseResponse forged = new_lease;
  forged.set_fencing_token(1);
  auto fenced = CompleteLease("a2", forged, Succeeded(new_lease.shard()));
  EXPECT_FALSE(fenced.accepted());
  EXPECT_NE(fenced.rejected_reason().find("stale fencing token 1"), std::string::npos);
  EXPECT_EQ(metrics_.stale["unknown_lease"], 1);
  EXPECT_EQ(metrics_.stale["fencing"], 1);

  auto first = CompleteLease("a2", new_lease, Succeeded(new_lease.shard()));
  EXPECT_TRUE(first.accepted());
  EXPECT_FALSE(first.duplicate());
  auto second = CompleteLease("a2", new_lease, Succeeded(new_lease.shard()));
  EXPECT_TRUE(second.accepted());
  EXPECT_TRUE(second.duplicate());
  EXPECT_EQ(coord_->Results("sw-0001")->size(), 1u) << "acknowledged once, stored once";
  EXPECT_EQ(store_->Load()->results.size(), 1u);
}

// A backup lease races its original (docs/farm.md, "Backup leases"): granted to an idle agent
// with nothing queued for it once the straggler is past its due time, stored, recovered after a
// restart; the first accepted result decides the shard and the other is fenced.
TEST_F(CoordinatorTest, ABackupRacesItsOriginalAndTheFirstResultDecidesOnce) {
  testing::TempDir tmp;
  options_.agent_dead_after = 10h;
  options_.lease_ttl = 10h;
  options_.backups = BackupPolicy{.after = 1.5, .slack = 60s};
  ASSERT_NO_FATAL_FAILURE(OpenFileStore(tmp.path() / "state.db", false));
  RegisterAgent("a1", "n150");
  RegisterAgent("a2", "n150");
  Start({}, 0, "", {"dtype_bfloat16"});
  const v1::LeaseResponse original = LeaseNow("a1");
  ASSERT_TRUE(original.granted());
  const std::string shard_id = original.shard().shard_id();
  EXPECT_FALSE(LeaseNow("a2").granted()) << "nothing queued, and the lease is not late yet";

  clock_.Advance(5h);
  const v1::LeaseResponse backup = LeaseNow("a2");
  ASSERT_TRUE(backup.granted());
  EXPECT_EQ(backup.shard().shard_id(), shard_id);
  EXPECT_NE(backup.lease_id(), original.lease_id());
  EXPECT_GT(backup.fencing_token(), original.fencing_token());
  const v1::Shard view = ShardById(shard_id);
  EXPECT_EQ(view.attempts(), 1) << "a backup is not an attempt of the work";
  EXPECT_EQ(view.agent_id(), "a1");
  EXPECT_EQ(view.backup_agent_id(), "a2");
  EXPECT_EQ(view.backup_lease_id(), backup.lease_id());
  std::map<std::string, std::vector<std::string>> shards_of;  // agent -> its shards
  for (const auto& a : coord_->ListAgents()) {
    shards_of[a.dimensions().agent_id()].assign(a.shard_ids().begin(), a.shard_ids().end());
  }
  EXPECT_THAT(shards_of["a1"], ElementsAre(shard_id));
  EXPECT_THAT(shards_of["a2"], ElementsAre(shard_id));

  // A restart keeps both leases; each agent re-attaches.
  ASSERT_NO_FATAL_FAILURE(OpenFileStore(tmp.path() / "state.db", true));
  coord_->StartGrace();
  EXPECT_TRUE(Beat("a1", {original.lease_id()}).revoked_lease_ids().empty());
  EXPECT_TRUE(Beat("a2", {backup.lease_id()}).revoked_lease_ids().empty());

  // The backup's result comes first and decides the shard; the original is told to stop and
  // its result, when it comes anyway, is refused.
  clock_.Advance(10min);
  EXPECT_TRUE(CompleteLease("a2", backup, Succeeded(backup.shard())).accepted());
  EXPECT_THAT(Beat("a1", {original.lease_id()}).revoked_lease_ids(),
              ElementsAre(original.lease_id()));
  const auto late = CompleteLease("a1", original, Succeeded(original.shard()));
  EXPECT_FALSE(late.accepted());
  EXPECT_THAT(late.rejected_reason(), HasSubstr("not current"));
  EXPECT_EQ(coord_->Results("sw-0001")->size(), 1u);
  EXPECT_EQ(store_->Load()->results.size(), 1u) << "decided once";
  // The metrics count the race (the restart's coordinator saw the win) and the backup's time.
  EXPECT_THAT(metrics_.backups, ElementsAre(Pair("n150/granted", 1), Pair("n150/won", 1)));
  EXPECT_DOUBLE_EQ(metrics_.backup_seconds, 600) << "granted 10 minutes before its result";
  auto attempts = store_->Attempts(shard_id);
  ASSERT_TRUE(attempts.ok()) << attempts.status();
  std::map<std::string, std::pair<std::string, bool>> by_lease;  // lease -> (outcome, backup)
  for (const auto& a : *attempts) by_lease[a.lease_id] = {a.outcome, a.backup};
  EXPECT_THAT(by_lease,
              UnorderedElementsAre(Pair(original.lease_id(), std::make_pair("superseded", false)),
                                   Pair(backup.lease_id(), std::make_pair("succeeded", true))));
}

// A backup gives its agent back when work is queued that no idle agent takes (docs/farm.md,
// "Backup leases"): the coordinator's tick ends it as yielded, the agent is told to stop it at
// its heartbeat and leases the new work; the first attempt decides the shard.
TEST_F(CoordinatorTest, ABackupYieldsItsAgentToWorkQueuedLater) {
  options_.agent_dead_after = 10h;
  options_.lease_ttl = 10h;
  options_.backups = BackupPolicy{.after = 1.5, .slack = 60s};
  Make();
  RegisterAgent("a1", "n150");
  RegisterAgent("a2", "n150");
  Start({"n150"}, 0, "", {"dtype_bfloat16"});
  const v1::LeaseResponse original = LeaseNow("a1");
  ASSERT_TRUE(original.granted());
  clock_.Advance(5h);
  const v1::LeaseResponse backup = LeaseNow("a2");
  ASSERT_TRUE(backup.granted());
  ASSERT_EQ(backup.shard().shard_id(), original.shard().shard_id());
  coord_->Tick();
  EXPECT_TRUE(Beat("a2", {backup.lease_id()}).revoked_lease_ids().empty())
      << "nothing queued: the backup runs on";

  const v1::Sweep second = Start({"n150"}, 0, "", {"dtype_bfloat16"});
  coord_->Tick();
  EXPECT_THAT(Beat("a2", {backup.lease_id()}).revoked_lease_ids(), ElementsAre(backup.lease_id()));
  EXPECT_TRUE(Beat("a1", {original.lease_id()}).revoked_lease_ids().empty());
  const v1::LeaseResponse next = LeaseNow("a2");
  ASSERT_TRUE(next.granted());
  EXPECT_EQ(next.shard().sweep_id(), second.id());
  EXPECT_EQ(ShardById(original.shard().shard_id()).backup_agent_id(), "");
  EXPECT_FALSE(CompleteLease("a2", backup, Succeeded(backup.shard())).accepted());
  EXPECT_TRUE(CompleteLease("a1", original, Succeeded(original.shard())).accepted());
  EXPECT_THAT(metrics_.backups, ElementsAre(Pair("n150/granted", 1), Pair("n150/yielded", 1)));
  auto attempts = store_->Attempts(original.shard().shard_id());
  ASSERT_TRUE(attempts.ok()) << attempts.status();
  std::map<std::string, std::string> by_lease;
  for (const auto& a : *attempts) by_lease[a.lease_id] = a.outcome;
  EXPECT_THAT(by_lease, UnorderedElementsAre(Pair(original.lease_id(), "succeeded"),
                                             Pair(backup.lease_id(), "yielded")));
}

TEST_F(CoordinatorTest, OnlyTheHolderMayComplete) {
  RegisterAgent("a1", "n150");
  RegisterAgent("a2", "n150");
  Start({}, 0, "", {"dtype_bfloat16"});
  auto lease = LeaseNow("a1");
  v1::CompleteRequest req;
  req.set_agent_id("a2");
  req.set_session_id(sessions_["a2"]);
  req.set_lease_id(lease.lease_id());
  req.set_fencing_token(lease.fencing_token());
  *req.mutable_result() = Succeeded(lease.shard());
  auto resp = coord_->Complete(req);
  EXPECT_TRUE(absl::IsPermissionDenied(resp.status())) << resp.status();
}

TEST_F(CoordinatorTest, ResultsMayOnlyTouchOwnedFiles) {
  RegisterAgent("a1", "n150");
  Start({}, 0, "", {"dtype_bfloat16"});
  auto lease = LeaseNow("a1");
  struct Case {
    std::string name;
    std::function<void(v1::ShardResult&)> mutate;
    std::string want;
  };
  const Case cases[] = {
      {"foreign entry",
       [](v1::ShardResult& r) {
         r.mutable_entries(0)->set_key("a/pytorch-V1-single_device-training");
       },
       "not in shard"},
      {"other loader",
       [](v1::ShardResult& r) {
         auto* fe = r.add_file_edits();
         fe->set_repo("tt_forge_models");
         fe->set_path("a/pytorch/loader.py");
         fe->set_diff("--- a/a/pytorch/loader.py\n+++ b/a/pytorch/loader.py\n");
       },
       "outside the shard's loader directory c/pytorch/"},
      {"path escape",
       [](v1::ShardResult& r) {
         auto* fe = r.add_file_edits();
         fe->set_repo("tt_forge_models");
         fe->set_path("c/pytorch/../../etc/passwd");
       },
       "unsafe path"},
      {"raw diff (the agent lifts it)",
       [](v1::ShardResult& r) {
         r.set_ttxla_diff("diff --git a/setup.py b/setup.py\n--- a/setup.py\n+++ b/setup.py\n");
       },
       "result carries unlifted raw diffs"},
      {"tt-xla file outside the YAML",
       [](v1::ShardResult& r) {
         auto* fe = r.add_file_edits();
         fe->set_repo("tt-xla");
         fe->set_path("setup.py");
         fe->set_diff("diff --git a/setup.py b/setup.py\n--- a/setup.py\n+++ b/setup.py\n");
       },
       "file edit in repo 'tt-xla' (setup.py)"},
      {"registry injection",
       [](v1::ShardResult& r) {
         auto* op = r.add_registry_ops();
         op->set_kind(v1::RegistryOp::ADD);
         op->set_cls("X\")\nimport os");
         op->set_attr("logits");
       },
       "invalid names"},
  };
  options_.default_max_attempts = 100;
  for (const auto& c : cases) {
    v1::ShardResult r = Succeeded(lease.shard());
    c.mutate(r);
    auto resp = CompleteLease("a1", lease, r);
    EXPECT_FALSE(resp.accepted()) << c.name;
    EXPECT_NE(resp.rejected_reason().find(c.want), std::string::npos)
        << c.name << ": " << resp.rejected_reason();
    // The attempt failed; take the shard again for the next case.
    clock_.Advance(options_.backoff_max);
    lease = LeaseNow("a1");
    if (!lease.granted()) break;
  }
  EXPECT_GE(metrics_.stale["disallowed_file"], 3);
}

TEST_F(CoordinatorTest, DrainLetsTheCurrentShardFinishAndHandsOutNothing) {
  RegisterAgent("a1", "n150");
  Start();
  auto lease = LeaseNow("a1");
  ASSERT_TRUE(lease.granted());
  ASSERT_TRUE(coord_->SetDraining("a1", true, "maintenance", operator_).ok());
  auto next = LeaseNow("a1");
  EXPECT_FALSE(next.granted());
  EXPECT_TRUE(next.draining());
  EXPECT_TRUE(Beat("a1", {lease.lease_id()}).draining());
  EXPECT_TRUE(CompleteLease("a1", lease, Succeeded(lease.shard())).accepted());
  ASSERT_TRUE(coord_->SetDraining("a1", false, "done", operator_).ok());
  EXPECT_TRUE(LeaseNow("a1").granted());
}

// Leases lost to the farm (an agent that died, stopped or restarted) say nothing about the work:
// they do not use up max_attempts, and the shard is offered again at once. A shard that keeps
// losing its agents stops at max_infra_losses.
TEST_F(CoordinatorTest, LeasesLostToTheFarmDoNotCountAsAttempts) {
  options_.agent_dead_after = 1h;
  options_.max_infra_losses = 5;
  Make();
  RegisterAgent("a1", "n150");
  Start({}, 0, "", {"dtype_bfloat16"});
  std::string shard_id;
  for (int i = 0; i < 4; ++i) {
    auto lease = LeaseNow("a1");
    ASSERT_TRUE(lease.granted()) << "lease " << i + 1 << ": no backoff after a lost lease";
    shard_id = lease.shard().shard_id();
    clock_.Advance(options_.lease_ttl + 1s);
    coord_->Tick();
  }
  auto s = ShardById(shard_id);
  EXPECT_EQ(s.state(), "queued") << "4 lost leases are more than max_attempts (3), not a failure";
  EXPECT_EQ(s.attempts(), 0);
  EXPECT_EQ(metrics_.requeued["infra"], 4);
  EXPECT_EQ(metrics_.requeued["auto"], 0);
  // A restart of the agent fences its lease: also the farm's loss.
  auto fenced = LeaseNow("a1");
  ASSERT_TRUE(fenced.granted());
  RegisterAgent("a1", "n150");
  s = ShardById(shard_id);
  EXPECT_EQ(s.state(), "quarantined") << "the fifth loss reaches max_infra_losses";
  EXPECT_THAT(s.last_error(), HasSubstr("5 leases lost"));
  // The count survives a restart of the coordinator, and an operator requeue resets it.
  coord_.reset();
  Make();
  ASSERT_TRUE(coord_->Recover().ok());
  EXPECT_EQ(ShardById(shard_id).state(), "quarantined");
  ASSERT_TRUE(coord_->RequeueShard(shard_id, "agents fixed", operator_).ok());
  RegisterAgent("a1", "n150");
  auto lease = LeaseNow("a1");
  ASSERT_TRUE(lease.granted());
  clock_.Advance(options_.lease_ttl + 1s);
  coord_->Tick();
  EXPECT_EQ(ShardById(shard_id).state(), "queued") << "a fresh budget after the requeue";
}

// A work failure still counts: one failed attempt, then a lost lease, then two failures more.
TEST_F(CoordinatorTest, OnlyWorkFailuresFillTheAttemptBudget) {
  options_.agent_dead_after = 1h;
  Make();
  RegisterAgent("a1", "n150");
  Start({}, 0, "", {"dtype_bfloat16"});
  const v1::ShardResult failed = Failed("probe failed");
  std::string shard_id;
  for (const bool lose : {false, true, false, false}) {
    auto lease = LeaseNow("a1");
    ASSERT_TRUE(lease.granted());
    shard_id = lease.shard().shard_id();
    if (lose) {
      clock_.Advance(options_.lease_ttl + 1s);
      coord_->Tick();
    } else {
      EXPECT_TRUE(CompleteLease("a1", lease, failed).accepted());
    }
    clock_.Advance(options_.backoff_max);
  }
  EXPECT_EQ(ShardById(shard_id).state(), "quarantined");
  EXPECT_EQ(ShardById(shard_id).attempts(), 3);
  auto attempts = store_->Attempts(shard_id);
  ASSERT_TRUE(attempts.ok());
  EXPECT_EQ(attempts->size(), 4u) << "every lease is still in the attempt history";
}

// An agent that restarts with finished results on disk names their leases when it registers:
// those are kept (its other leases are fenced), and the results it re-sends are accepted.
TEST_F(CoordinatorTest, ARestartedAgentKeepsTheLeasesOfTheResultsItHolds) {
  options_.agent_dead_after = 1h;  // only the lease deadline matters here
  Make();
  RegisterAgent("a1", "n150");
  Start({}, 0, "", {"dtype_bfloat16", "unpack_forward_output"});
  auto held = LeaseNow("a1");
  auto other = LeaseNow("a1");
  ASSERT_TRUE(held.granted());
  ASSERT_TRUE(other.granted());
  v1::RegisterRequest req;
  req.mutable_dimensions()->set_agent_id("a1");
  req.mutable_dimensions()->set_arch("n150");
  req.add_held_lease_ids(held.lease_id());
  auto resp = coord_->Register(req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_FALSE(resp->resumed());
  sessions_["a1"] = resp->session_id();
  EXPECT_EQ(ShardById(held.shard().shard_id()).state(), "leased");
  EXPECT_EQ(ShardById(other.shard().shard_id()).state(), "queued");
  // Its life starts again at the registration, and heartbeats of the new session extend it.
  clock_.Advance(options_.lease_ttl - 1s);
  Beat("a1", {held.lease_id()});
  clock_.Advance(options_.lease_ttl - 1s);
  coord_->Tick();
  EXPECT_TRUE(CompleteLease("a1", held, Succeeded(held.shard())).accepted());
  EXPECT_EQ(ShardById(held.shard().shard_id()).state(), "succeeded");
  EXPECT_FALSE(CompleteLease("a1", other, Succeeded(other.shard())).accepted())
      << "a lease it did not name was fenced";
}

// After a restart the agents' grace period counts from when the coordinator serves again, not
// from when it read its state.
TEST_F(CoordinatorTest, RestartGraceStartsWhenServing) {
  options_.agent_dead_after = 1h;
  Make();
  RegisterAgent("a1", "n150");
  Start({}, 0, "", {"dtype_bfloat16"});
  auto lease = LeaseNow("a1");
  ASSERT_TRUE(lease.granted());
  coord_.reset();
  Make();
  ASSERT_TRUE(coord_->Recover().ok());
  clock_.Advance(options_.lease_ttl + 1s);  // a slow start: listeners not up yet
  coord_->StartGrace();
  coord_->Tick();
  EXPECT_EQ(ShardById(lease.shard().shard_id()).state(), "leased");
  Beat("a1", {lease.lease_id()});
  EXPECT_TRUE(CompleteLease("a1", lease, Succeeded(lease.shard())).accepted());
}

// Health follows commits: staging succeeds on a full disk, so only a commit that succeeds makes
// the coordinator healthy again.
TEST_F(CoordinatorTest, HealthFollowsCommitsNotStaging) {
  RegisterAgent("n", "n150");
  Start({}, 0, "", {"dtype_bfloat16"});
  store_->FailNextFlushesForTest(2);
  EXPECT_TRUE(absl::IsUnavailable(TryLease("n").status()));
  EXPECT_FALSE(coord_->healthy());
  // The next operation stages fine, but its commit fails too: still unhealthy.
  EXPECT_TRUE(absl::IsUnavailable(TryLease("n").status()));
  EXPECT_FALSE(coord_->healthy());
  // A commit succeeds: healthy.
  EXPECT_TRUE(LeaseNow("n").granted());
  EXPECT_TRUE(coord_->healthy());
}

TEST_F(CoordinatorTest, SilentAgentGoesOfflineAndItsLeaseExpires) {
  RegisterAgent("a1", "n150");
  Start({}, 0, "", {"dtype_bfloat16"});
  auto lease = LeaseNow("a1");
  clock_.Advance(options_.agent_dead_after + 1s);
  coord_->Tick();
  EXPECT_EQ(metrics_.expired["n150/heartbeat_timeout"], 1);
  EXPECT_EQ(metrics_.agents["n150/offline"], 1);
  auto agents = coord_->ListAgents();
  ASSERT_EQ(agents.size(), 1u);
  EXPECT_EQ(agents[0].state(), "offline");
  // It comes back: heartbeat revives it and tells it to drop the old lease.
  auto hb = Beat("a1", {lease.lease_id()});
  EXPECT_EQ(hb.revoked_lease_ids_size(), 1);
  EXPECT_EQ(coord_->ListAgents()[0].state(), "idle");
}

TEST_F(CoordinatorTest, OfflineAgentsAreForgottenAfterTheirRetention) {
  options_.offline_retention = 1h;
  Make();
  RegisterAgent("a1", "n150");
  RegisterAgent("a2", "n150");
  clock_.Advance(options_.agent_dead_after + 1s);
  Beat("a2");
  coord_->Tick();
  EXPECT_EQ(coord_->ListAgents()[0].state(), "offline") << "listed as offline until then";
  clock_.Advance(1h);
  Beat("a2");
  coord_->Tick();
  auto agents = coord_->ListAgents();
  ASSERT_EQ(agents.size(), 1u);
  EXPECT_EQ(agents[0].dimensions().agent_id(), "a2");
  EXPECT_EQ(metrics_.agents["n150/offline"], 0);
  // Gone from the store too: a restarted coordinator does not bring it back.
  Make();
  ASSERT_TRUE(coord_->Recover().ok());
  ASSERT_EQ(coord_->ListAgents().size(), 1u);
  EXPECT_EQ(coord_->ListAgents()[0].dimensions().agent_id(), "a2");
}

TEST_F(CoordinatorTest, ReregisteredAgentGetsANewSessionAndItsLeasesAreFenced) {
  RegisterAgent("a1", "n150");
  Start({}, 0, "", {"dtype_bfloat16"});
  auto lease = LeaseNow("a1");
  const std::string old_session = sessions_["a1"];
  const std::string new_session = RegisterAgent("a1", "n150");
  EXPECT_NE(new_session, old_session);
  EXPECT_EQ(ShardById(lease.shard().shard_id()).state(), "queued");
  EXPECT_EQ(metrics_.expired["n150/agent_restart"], 1);
  auto resp = CompleteLease("a1", lease, Succeeded(lease.shard()));
  EXPECT_FALSE(resp.accepted());
  // An old session is told to register again.
  sessions_["a1"] = old_session;
  EXPECT_TRUE(LeaseNow("a1").reregister());
}

TEST_F(CoordinatorTest, MatchesDimensions) {
  yaml_[kTpFile] = "test_config:\n" + Entry("t/pytorch-Big-tensor_parallel-training", kUnpack);
  Make();
  RegisterAgent("p", "p150");
  RegisterAgent("n", "n150", false, {"command"});
  RegisterAgent("llm", "n300-llmbox");
  RegisterAgent("n2", "n150");
  Start({"n150"});
  EXPECT_FALSE(LeaseNow("p").granted()) << "p150 is not a target arch";
  EXPECT_FALSE(LeaseNow("n").granted()) << "the agent does not run the native executor";
  auto tp = LeaseNow("llm");
  ASSERT_TRUE(tp.granted());
  EXPECT_EQ(tp.shard().loader(), "third_party/tt_forge_models/t/pytorch/loader.py");
  EXPECT_EQ(tp.shard().arch(), "n300-llmbox");
  EXPECT_FALSE(LeaseNow("llm").granted()) << "only tensor_parallel shards need the llmbox";
  EXPECT_EQ(Drain("n2"), 3);
}

TEST_F(CoordinatorTest, PriorityThenLongestExpectedFirst) {
  // b is the slowest, then c; a's two entries have no trusted durations.
  const std::string durations = R"({
    "tests/runner/test_models.py::test_all_models_torch[b/pytorch-single_device-training]": 5000,
    "tests/runner/test_models.py::test_all_models_torch[c/pytorch-X-single_device-training]": 2500,
    "tests/runner/test_models.py::test_all_models_torch[a/pytorch-V1-single_device-training]": 0.01
  })";
  options_.playbook_estimates = {{"unpack_forward_output", 100}, {"dtype_bfloat16", 100}};
  Make();
  RegisterAgent("a1", "n150");
  Start({}, 0, durations);
  std::vector<std::string> order;
  for (int i = 0; i < 3; ++i) {
    auto lease = LeaseNow("a1");
    ASSERT_TRUE(lease.granted());
    order.push_back(lease.shard().loader());
    // Each entry says what was planned for it: a trusted duration, or (a) the estimate.
    const bool a = lease.shard().loader().find("/a/") != std::string::npos;
    for (const auto& e : lease.shard().entries()) {
      EXPECT_EQ(e.estimated(), a) << e.key();
      EXPECT_EQ(e.expected_seconds(), a ? 100 : e.key()[0] == 'b' ? 5000 : 2500) << e.key();
    }
    CompleteLease("a1", lease, Succeeded(lease.shard()));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"third_party/tt_forge_models/b/pytorch/loader.py",
                                             "third_party/tt_forge_models/c/pytorch/loader.py",
                                             "third_party/tt_forge_models/a/pytorch/loader.py"}));
  // A higher-priority sweep goes first.
  Start({}, 0);
  auto urgent = Start({}, 5);
  auto lease = LeaseNow("a1");
  EXPECT_EQ(lease.shard().sweep_id(), urgent.id());
}

TEST_F(CoordinatorTest, LongPollIsServedWhenWorkArrivesAndEndsAtItsLimit) {
  RegisterAgent("a1", "n150");
  v1::LeaseRequest req;
  req.set_agent_id("a1");
  req.set_session_id(sessions_["a1"]);
  req.set_wait_ms(10'000);
  int calls = 0;
  v1::LeaseResponse got;
  auto id = coord_->Lease(req, [&](absl::StatusOr<v1::LeaseResponse> r) {
    ++calls;
    got = *r;
  });
  EXPECT_GT(id, 0);
  EXPECT_EQ(calls, 0) << "waiting";
  Start();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(got.granted());
  // Another wait with nothing eligible ends at the server's limit.
  calls = 0;
  coord_->Lease(req, [&](absl::StatusOr<v1::LeaseResponse> r) {
    ++calls;
    got = *r;
  });
  Drain("a1");  // serves the rest to nobody else... the waiter gets one of them first
  EXPECT_EQ(calls, 1);
  calls = 0;
  coord_->Lease(req, [&](absl::StatusOr<v1::LeaseResponse> r) {
    ++calls;
    got = *r;
  });
  clock_.Advance(options_.lease_wait_limit + 1s);
  Beat("a1");
  coord_->Tick();
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(got.granted());
  // A cancelled wait answers CANCELLED.
  absl::Status status;
  auto wait = coord_->Lease(req, [&](absl::StatusOr<v1::LeaseResponse> r) { status = r.status(); });
  coord_->CancelLease(wait);
  EXPECT_TRUE(absl::IsCancelled(status));
}

TEST_F(CoordinatorTest, RetriedLeaseGetsTheSameGrant) {
  RegisterAgent("a1", "n150");
  Start();
  v1::LeaseRequest req;
  req.set_agent_id("a1");
  req.set_session_id(sessions_["a1"]);
  req.set_request_id("r-1");
  v1::LeaseResponse first, second;
  coord_->Lease(req, [&](absl::StatusOr<v1::LeaseResponse> r) { first = *r; });
  coord_->Lease(req, [&](absl::StatusOr<v1::LeaseResponse> r) { second = *r; });
  ASSERT_TRUE(first.granted());
  EXPECT_EQ(first.lease_id(), second.lease_id());
  EXPECT_EQ(coord_->GetSweep("sw-0001")->shards_by_state().at("leased"), 1);
}

TEST_F(CoordinatorTest, SecondArchVerifiesWithTheFirstArchsEditsPreApplied) {
  RegisterAgent("n", "n150");
  RegisterAgent("p", "p150");
  Start({"n150", "p150"}, 0, "", {"dtype_bfloat16"});
  EXPECT_FALSE(LeaseNow("p").granted()) << "p150 verification waits for the n150 shard";
  // Requeueing the waiting shard explains what waiting means and what to do instead.
  v1::ListShardsRequest waiting;
  waiting.set_state("waiting");
  auto rows = coord_->ListShards(waiting);
  ASSERT_EQ(rows->size(), 1u);
  auto requeue = coord_->RequeueShard(rows->front().id(), "impatient", operator_);
  ASSERT_FALSE(requeue.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(requeue.status()));
  EXPECT_THAT(std::string(requeue.status().message()), HasSubstr("is waiting: it runs once shard"));
  EXPECT_THAT(std::string(requeue.status().message()), HasSubstr("shard cancel"));
  auto full = LeaseNow("n");
  ASSERT_TRUE(full.granted());
  EXPECT_EQ(full.shard().phase(), v1::PHASE_FULL);
  v1::ShardResult r = Succeeded(full.shard());
  auto* fe = r.add_file_edits();
  fe->set_repo("tt_forge_models");
  fe->set_path("c/pytorch/loader.py");
  fe->set_diff("--- a/c/pytorch/loader.py\n+++ b/c/pytorch/loader.py\n@@ -1 +1 @@\n-x\n+y\n");
  ASSERT_TRUE(CompleteLease("n", full, r).accepted());
  auto verify = LeaseNow("p");
  ASSERT_TRUE(verify.granted());
  EXPECT_EQ(verify.shard().phase(), v1::PHASE_VERIFY);
  EXPECT_EQ(verify.shard().arch(), "p150");
  ASSERT_EQ(verify.shard().pre_apply_size(), 1);
  EXPECT_EQ(verify.shard().pre_apply(0).path(), "c/pytorch/loader.py");
  ASSERT_TRUE(CompleteLease("p", verify, Succeeded(verify.shard())).accepted());
  EXPECT_EQ(coord_->GetSweep("sw-0001")->state(), "succeeded");
}

// Fix once, verify many and the shared scope's conflict rule (docs/remediation.md), through the
// front door: a --failing command sweep of the training file. a's two entries and b's share a
// failure cluster: a leads, b's shard waits for it and is released with a's shared helper edit
// pre-applied; c's result then changes the same helper differently and runs again on top of it.
TEST_F(CoordinatorTest, AClustersFollowerGetsTheLeadsSharedFixAndADifferentEditRunsAgainOnTop) {
  RegisterAgent("n", "n150", false, {"command"});
  v1::StartSweepRequest req;
  req.set_repo_path("/fake/tt-xla");
  req.set_executor("command");
  (*req.mutable_params())["command"] = R"(["fix","{key}"])";
  req.set_reason("test");
  req.mutable_selection()->set_failing(true);
  ASSERT_TRUE(coord_->StartSweep(req, operator_).ok());
  v1::ListShardsRequest waiting;
  waiting.set_state("waiting");
  auto rows = coord_->ListShards(waiting);
  ASSERT_EQ(rows->size(), 2u) << "b's entry follows a's; a's wave waits for it";

  auto edit = [](const std::string& diff) {
    v1::FileEdit fe;
    fe.set_repo("tt_forge_models");
    fe.set_path("tools/h.py");
    fe.set_diff(diff);
    fe.set_against_pinned(true);
    return fe;
  };
  const v1::FileEdit first = edit("--- a/tools/h.py\n+++ b/tools/h.py\n@@ -1 +1 @@\n-x\n+y\n");
  const v1::FileEdit other = edit("--- a/tools/h.py\n+++ b/tools/h.py\n@@ -1 +1 @@\n-x\n+z\n");
  std::map<std::string, v1::LeaseResponse> leases;
  for (int i = 0; i < 2; ++i) {
    auto l = LeaseNow("n");
    ASSERT_TRUE(l.granted());
    leases[l.shard().loader().substr(28, 1)] = l;
  }
  ASSERT_TRUE(leases.count("a") && leases.count("c"));
  v1::ShardResult lead = Succeeded(leases["a"].shard());
  for (auto& o : *lead.mutable_entries()) o.set_command_check("verified by the farm");
  *lead.add_file_edits() = first;
  ASSERT_TRUE(CompleteLease("n", leases["a"], lead).accepted());

  // The follower and the lead's wave are released; the wave checks with a's change pre-applied.
  std::optional<v1::LeaseResponse> follower_lease, wave;
  for (int i = 0; i < 2; ++i) {
    auto l = LeaseNow("n");
    ASSERT_TRUE(l.granted());
    (IsWaveShard(l.shard()) ? wave : follower_lease) = l;
  }
  ASSERT_TRUE(wave && follower_lease);
  EXPECT_EQ(wave->shard().entries_size(), 0);
  EXPECT_THAT(wave->shard().fan_out().shared_files(), ElementsAre("tt_forge_models:tools/h.py"));
  ASSERT_EQ(wave->shard().pre_apply_size(), 1);
  EXPECT_EQ(wave->shard().pre_apply(0).diff(), first.diff());
  ASSERT_TRUE(CompleteLease("n", *wave, Succeeded(wave->shard())).accepted());
  const v1::LeaseResponse follower = *follower_lease;
  EXPECT_THAT(follower.shard().loader(), HasSubstr("/b/"));
  EXPECT_TRUE(follower.shard().fan_out().lead_fixed());
  ASSERT_EQ(follower.shard().pre_apply_size(), 1);
  EXPECT_EQ(follower.shard().pre_apply(0).diff(), first.diff());
  ASSERT_TRUE(CompleteLease("n", follower, Succeeded(follower.shard())).accepted());

  // c changed the helper beside a's accepted edit: not recorded, c runs again on top of it.
  v1::ShardResult beside = Succeeded(leases["c"].shard());
  *beside.add_file_edits() = other;
  ASSERT_TRUE(CompleteLease("n", leases["c"], beside).accepted());
  auto again = LeaseNow("n");
  ASSERT_TRUE(again.granted()) << "given back, not backed off";
  EXPECT_EQ(again.shard().shard_id(), leases["c"].shard().shard_id());
  ASSERT_EQ(again.shard().pre_apply_size(), 1);
  EXPECT_EQ(again.shard().pre_apply(0).diff(), first.diff());
  // Made on top of a's edit now: recorded, and the sweep ends.
  v1::ShardResult on_top = Succeeded(again.shard());
  *on_top.add_file_edits() =
      edit("--- a/tools/h.py\n+++ b/tools/h.py\n@@ -1 +1,2 @@\n-x\n+y\n+z\n");
  ASSERT_TRUE(CompleteLease("n", again, on_top).accepted());
  EXPECT_EQ(coord_->GetSweep("sw-0001")->state(), "succeeded");
}

TEST_F(CoordinatorTest, CpuOnlyAgentsTakeProbePhases) {
  CpuAndDeviceAgent();
  Start({"n150"}, 0, "", {"dtype_bfloat16"});
  EXPECT_FALSE(LeaseNow("n").granted()) << "verification waits for the probe";
  auto probe = LeaseNow("cpu");
  ASSERT_TRUE(probe.granted());
  EXPECT_EQ(probe.shard().phase(), v1::PHASE_PROBE);
  ASSERT_TRUE(CompleteLease("cpu", probe, Succeeded(probe.shard())).accepted());
  auto verify = LeaseNow("n");
  ASSERT_TRUE(verify.granted());
  EXPECT_EQ(verify.shard().phase(), v1::PHASE_VERIFY);
  EXPECT_FALSE(LeaseNow("cpu").granted());
}

// An idle device agent takes a probe phase (device_probes, the default); its verification then
// goes to the device agents as usual, and the estimate of a verification follows the entries
// the probe left for it.
TEST_F(CoordinatorTest, IdleDeviceAgentsTakeProbesAndVerifyEstimatesFollowTheEntriesLeft) {
  RegisterAgent("cpu", "", true);  // a CPU agent serving: the sweep splits its probes
  RegisterAgent("n", "n150");
  Start({"n150"}, 0, "", {"unpack_forward_output"});
  auto probe = LeaseNow("n");
  ASSERT_TRUE(probe.granted()) << "nothing of its arch is queued yet";
  EXPECT_EQ(probe.shard().phase(), v1::PHASE_PROBE);
  // Loader a has two entries; let its probe stop one of them.
  while (probe.shard().entries_size() != 2) {
    ASSERT_TRUE(CompleteLease("n", probe, Succeeded(probe.shard())).accepted());
    probe = LeaseNow("n");
    ASSERT_TRUE(probe.granted());
  }
  double planned = 0;
  std::string dependent;
  auto shards = coord_->Shards(probe.shard().sweep_id());
  ASSERT_TRUE(shards.ok()) << shards.status();
  for (const auto& s : *shards) {
    if (s.depends_on == probe.shard().shard_id()) {
      planned = s.expected_seconds;
      dependent = s.id;
    }
  }
  ASSERT_FALSE(dependent.empty());
  v1::ShardResult r = Succeeded(probe.shard());
  r.mutable_entries(1)->set_verdict("not_reproduced");
  r.mutable_entries(1)->set_disposition(v1::EntryOutcome::NEEDS_REVIEW);
  r.mutable_entries(1)->set_changed(false);
  r.mutable_entries(1)->clear_edit();
  ASSERT_TRUE(CompleteLease("n", probe, r).accepted());
  EXPECT_DOUBLE_EQ(ShardById(dependent).expected_seconds(), planned / 2);
  auto verify = LeaseNow("n");
  ASSERT_TRUE(verify.granted());
  EXPECT_EQ(verify.shard().phase(), v1::PHASE_VERIFY) << "its own arch's work comes first";
  EXPECT_EQ(verify.shard().entries_size(), 1);
}

TEST_F(CoordinatorTest, ASweepsOwnMeasurementsStandInForEstimatesInTheBatchCap) {
  // Planned at 100 s an entry, a's verification (two entries) is over the 150 s cap alone.
  options_.playbook_estimates = {{"unpack_forward_output", 100}};
  options_.verify_batch_max = 150s;
  options_.learn_estimates_after = 2;
  Make();
  RegisterAgent("cpu", "", true);
  RegisterAgent("n", "n150");
  RegisterAgent("p", "p150");
  Start({"n150", "p150"}, 0, "", {"unpack_forward_output"});
  ProbeEverything("cpu");
  // p150 verifies a: its two entries, planned at the estimate, took 3 s and 7 s.
  auto a = LeaseNow("p");
  ASSERT_TRUE(a.granted());
  ASSERT_EQ(a.shard().entries_size(), 2);
  for (const auto& e : a.shard().entries()) {
    EXPECT_TRUE(e.estimated()) << e.key();
    EXPECT_EQ(e.expected_seconds(), 100) << e.key();
  }
  v1::ShardResult measured = Succeeded(a.shard());
  measured.mutable_entries(0)->set_duration_seconds(3);
  measured.mutable_entries(1)->set_duration_seconds(7);
  ASSERT_TRUE(CompleteLease("p", a, measured).accepted());
  // On n150 the two verifications now count 5 s an entry (the mean): one batch.
  auto got = LeaseNow("n", 8);
  ASSERT_TRUE(got.granted());
  EXPECT_EQ(got.shard().entries_size(), 2) << "a, the longest, heads the batch";
  EXPECT_EQ(got.batch_size(), 1) << "b joins it";
}

TEST_F(CoordinatorTest, ALeaseGrantsABatchOfVerifyShardsEachWithItsOwnLease) {
  options_.verify_batch_max = 24h;  // the playbook estimates (900 s an entry) all fit
  Make();
  RegisterAgent("cpu", "", true);
  RegisterAgent("n", "n150");
  Start({"n150"}, 0, "", {"unpack_forward_output"});
  // The CPU agent probes every loader; their verifications queue for the one n150 agent.
  std::set<std::string> verify_ids;
  ProbeEverything("cpu");
  auto listed = coord_->ListShards({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  for (const auto& s : *listed) {
    if (s.phase() == v1::PHASE_VERIFY && s.state() == "queued") verify_ids.insert(s.id());
  }
  ASSERT_GE(verify_ids.size(), 2u);

  v1::LeaseRequest req;
  req.set_agent_id("n");
  req.set_session_id(sessions_["n"]);
  req.set_request_id("req-1");
  req.set_max_batch(8);
  v1::LeaseResponse got;
  coord_->Lease(req, [&](absl::StatusOr<v1::LeaseResponse> r) {
    ASSERT_TRUE(r.ok()) << r.status();
    got = *r;
  });
  ASSERT_TRUE(got.granted());
  EXPECT_EQ(got.shard().phase(), v1::PHASE_VERIFY);
  // One agent serves the arch: every queued verification comes in the one grant.
  std::set<std::string> granted{got.shard().shard_id()}, leases{got.lease_id()};
  for (const auto& b : got.batch()) {
    granted.insert(b.shard().shard_id());
    leases.insert(b.lease_id());
    EXPECT_EQ(b.shard().phase(), v1::PHASE_VERIFY);
    EXPECT_GT(b.fencing_token(), 0);
  }
  EXPECT_EQ(granted, verify_ids);
  EXPECT_EQ(leases.size(), verify_ids.size()) << "a lease per shard";
  EXPECT_THAT(metrics_.verify_batches,
              ::testing::ElementsAre("n150/" + std::to_string(verify_ids.size())))
      << "triage_verify_batch_shards observes the grant once";
  for (const auto& id : verify_ids) EXPECT_EQ(ShardById(id).state(), "leased") << id;

  // A retried request gets the same grant back, the head first.
  v1::LeaseResponse again;
  coord_->Lease(req, [&](absl::StatusOr<v1::LeaseResponse> r) {
    ASSERT_TRUE(r.ok()) << r.status();
    again = *r;
  });
  EXPECT_EQ(again.lease_id(), got.lease_id());
  ASSERT_EQ(again.batch_size(), got.batch_size());
  for (int i = 0; i < got.batch_size(); ++i) {
    EXPECT_EQ(again.batch(i).lease_id(), got.batch(i).lease_id());
  }

  // Heartbeats keep every lease of the batch; each completes on its own.
  EXPECT_EQ(Beat("n", {leases.begin(), leases.end()}).revoked_lease_ids_size(), 0);
  ASSERT_TRUE(CompleteLease("n", got, Succeeded(got.shard())).accepted());
  for (const auto& b : got.batch()) {
    v1::LeaseResponse one;
    one.set_lease_id(b.lease_id());
    one.set_fencing_token(b.fencing_token());
    *one.mutable_shard() = b.shard();
    ASSERT_TRUE(CompleteLease("n", one, Succeeded(b.shard())).accepted()) << b.lease_id();
  }
  EXPECT_EQ(coord_->GetSweep("sw-0001")->state(), "succeeded");

  // Without max_batch, one shard per lease, as before.
  Start({"n150"}, 0, "", {"unpack_forward_output"});
  ProbeEverything("cpu");
  auto single = LeaseNow("n");
  ASSERT_TRUE(single.granted());
  EXPECT_EQ(single.batch_size(), 0);
  EXPECT_EQ(metrics_.verify_batches.back(), "n150/1") << "a head alone is a batch of 1";
}

TEST_F(CoordinatorTest, CancelShardCascadesAndCancelSweepRevokes) {
  RegisterAgent("n", "n150");
  Start({"n150", "p150"}, 0, "", {"dtype_bfloat16"});
  auto shards = *coord_->ListShards({});
  ASSERT_EQ(shards.size(), 2u);
  auto cancelled = coord_->CancelShard(shards[0].id(), "not needed", operator_);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(ShardById(shards[1].id()).state(), "cancelled") << "its dependent too";
  EXPECT_EQ(coord_->GetSweep("sw-0001")->state(), "succeeded")
      << "operator cancellations end a sweep without failing it";

  Start();
  auto lease = LeaseNow("n");
  ASSERT_TRUE(lease.granted());
  auto sweep = coord_->CancelSweep(lease.shard().sweep_id(), "wrong commit", operator_);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->state(), "cancelled");
  EXPECT_EQ(Beat("n", {lease.lease_id()}).revoked_lease_ids_size(), 1);
  EXPECT_FALSE(CompleteLease("n", lease, Succeeded(lease.shard())).accepted());
  EXPECT_FALSE(coord_->CancelSweep(lease.shard().sweep_id(), "again", operator_).ok());
}

// triage_entries{state}: once a sweep has ended, its entries are counted done only, however it
// ended (every shard run, its shards cancelled, the sweep cancelled) and after a restart.
TEST_F(CoordinatorTest, EntriesOfAnEndedSweepAreCountedDoneOnly) {
  RegisterAgent("cpu", "", true);
  RegisterAgent("n", "n150");
  auto nonzero = [](std::map<std::string, int> m) {
    std::erase_if(m, [](const auto& kv) { return kv.second == 0; });
    return m;
  };
  auto only_done = [&](const std::string& when) {
    for (const auto& [k, v] : nonzero(metrics_.entries)) {
      EXPECT_TRUE(k.ends_with("/done")) << when << ": " << k << "=" << v;
    }
  };
  const v1::Sweep first = Start({"n150", "p150"});
  ProbeEverything("cpu");
  for (int i = 0; i < 50; ++i) {
    auto lease = LeaseNow("n");
    if (!lease.granted()) break;
    ASSERT_TRUE(CompleteLease("n", lease, Succeeded(lease.shard())).accepted());
  }
  // p150 has no agent: its verify shards stay queued until cancelled by hand.
  const auto listed = coord_->ListShards({});
  ASSERT_TRUE(listed.ok());
  for (const auto& s : *listed) {
    if (s.state() == "queued" || s.state() == "waiting") {
      (void)coord_->CancelShard(s.id(), "no p150 today", operator_);
    }
  }
  ASSERT_EQ(coord_->GetSweep(first.id())->state(), "succeeded");
  only_done("after the first sweep");
  int done = 0;
  for (const auto& [k, v] : metrics_.entries) done += v;
  EXPECT_EQ(done, first.entries().total());

  const v1::Sweep second = Start({"n150"});
  auto lease = LeaseNow("cpu");
  ASSERT_TRUE(lease.granted());
  ASSERT_TRUE(coord_->CancelSweep(second.id(), "wrong commit", operator_).ok());
  only_done("after a cancelled sweep");
  Make();  // a restart rebuilds the gauge from the store
  only_done("after a restart");
}

// triage_entry_outcomes_total counts decided entries, once each and under the label the
// sweep's counts (and so its report) use, when the sweep's counts settle: not once per arch and
// per phase, and not again when a restart replays the store. triage_entries_done_total counts
// them as they are done.
TEST_F(CoordinatorTest, EntryOutcomesCountEachDecidedEntryOnce) {
  RegisterAgent("cpu", "", true);
  RegisterAgent("n", "n150");
  RegisterAgent("p", "p150");
  const v1::Sweep sweep = Start({"n150", "p150"});
  ProbeEverything("cpu");
  for (int i = 0; i < 50; ++i) {
    bool granted = false;
    for (const std::string agent : {"n", "p"}) {
      auto lease = LeaseNow(agent);
      if (!lease.granted()) continue;
      granted = true;
      ASSERT_TRUE(CompleteLease(agent, lease, Succeeded(lease.shard())).accepted());
    }
    if (!granted) break;
  }
  const auto ended = coord_->GetSweep(sweep.id());
  ASSERT_TRUE(ended.ok());
  ASSERT_EQ(ended->state(), "succeeded");
  ASSERT_GT(ended->entries().decided(), 0);
  EXPECT_TRUE(metrics_.outcomes.empty()) << "counted when the counts settle, not before";
  // The sweep's outputs settle its counts (with the merge's labels; none differ here), twice
  // as a restart that builds the outputs again would: counted once.
  ASSERT_TRUE(coord_->SettleCounts(sweep.id(), {}).ok());
  ASSERT_TRUE(coord_->SettleCounts(sweep.id(), {}).ok());
  std::map<std::string, int> by_label;
  int counted = 0;
  for (const auto& [k, v] : metrics_.outcomes) {
    const std::string label = k.substr(k.find('/') + 1, k.rfind('/') - k.find('/') - 1);
    by_label[label] += v;
    counted += v;
  }
  EXPECT_EQ(counted, ended->entries().decided());
  for (const auto& [label, n] : ended->entries().by_outcome()) {
    EXPECT_EQ(by_label[label], n) << label;
  }
  int done = 0;
  for (const auto& [playbook, n] : metrics_.done) done += n;
  EXPECT_EQ(done, ended->entries().decided()) << "every entry done with a result, once";
  const auto before = metrics_.outcomes;
  const auto done_before = metrics_.done;
  Make();  // a restart replays the results: nothing is counted twice
  EXPECT_EQ(metrics_.outcomes, before);
  EXPECT_EQ(metrics_.done, done_before);
}

// triage_running_sweep_entries: each running sweep's entries, as its status counts them; an
// ended sweep leaves the board.
TEST_F(CoordinatorTest, RunningSweepsAreExportedUntilTheyEnd) {
  RegisterAgent("cpu", "", true);
  const v1::Sweep first = Start({"n150"});
  const v1::Sweep second = Start({"n150"});
  auto lease = LeaseNow("cpu");
  ASSERT_TRUE(lease.granted());
  coord_->Tick();
  ASSERT_EQ(metrics_.running.size(), 2u);
  for (const auto& s : metrics_.running) {
    const auto status = coord_->GetSweep(s.sweep_id);
    ASSERT_TRUE(status.ok()) << s.sweep_id;
    EXPECT_EQ(s.queued, status->entries().queued()) << s.sweep_id;
    EXPECT_EQ(s.running, status->entries().running()) << s.sweep_id;
    EXPECT_EQ(s.done, status->entries().done()) << s.sweep_id;
    EXPECT_EQ(s.queued + s.running + s.done, status->entries().total()) << s.sweep_id;
  }
  EXPECT_EQ(metrics_.running[0].sweep_id, first.id()) << "the oldest first";
  EXPECT_GT(metrics_.running[0].running, 0) << "the leased shard's entries";
  ASSERT_TRUE(coord_->CancelSweep(first.id(), "wrong commit", operator_).ok());
  coord_->Tick();
  ASSERT_EQ(metrics_.running.size(), 1u);
  EXPECT_EQ(metrics_.running[0].sweep_id, second.id());
}

TEST_F(CoordinatorTest, StuckShardsAreListed) {
  RegisterAgent("n", "n150");
  Start({}, 0, "", {"dtype_bfloat16"});
  auto lease = LeaseNow("n");
  v1::ProgressRequest p;
  p.set_agent_id("n");
  p.set_session_id(sessions_["n"]);
  p.set_lease_id(lease.lease_id());
  p.set_fencing_token(lease.fencing_token());
  p.set_step("verify");
  p.set_entry("c/pytorch-X-single_device-training");
  p.add_log_tail("collected 1 item");
  ASSERT_FALSE(coord_->ReportProgress(p)->revoked());
  // The sweep's shard counts follow the leased -> running move progress makes.
  auto by_state = coord_->GetSweep("sw-0001")->shards_by_state();
  EXPECT_EQ(by_state.count("leased"), 0u);
  EXPECT_EQ(by_state.at("running"), 1);
  v1::ListShardsRequest stuck;
  stuck.set_stuck_seconds(600);
  EXPECT_TRUE(coord_->ListShards(stuck)->empty());
  clock_.Advance(601s);
  Beat("n", {lease.lease_id()});  // alive, but no progress
  auto rows = coord_->ListShards(stuck);
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].agent_id(), "n");
  EXPECT_EQ((*rows)[0].last_step(), "verify");
  EXPECT_EQ((*rows)[0].state(), "running");
  EXPECT_EQ((*rows)[0].log_tail(0), "collected 1 item");
  v1::ListShardsRequest bad;
  bad.set_state("stuck");
  EXPECT_TRUE(absl::IsInvalidArgument(coord_->ListShards(bad).status()));
}

TEST_F(CoordinatorTest, StoreFailureChangesNothingAndIsReported) {
  RegisterAgent("n", "n150");
  Start({}, 0, "", {"dtype_bfloat16"});
  store_->FailNextAppliesForTest(1);
  auto got = TryLease("n");
  EXPECT_TRUE(absl::IsUnavailable(got.status())) << got.status();
  EXPECT_FALSE(coord_->healthy());
  EXPECT_EQ(coord_->GetSweep("sw-0001")->shards_by_state().at("queued"), 1);
  coord_->Tick();  // the store check succeeds again
  EXPECT_TRUE(coord_->healthy());
  EXPECT_TRUE(LeaseNow("n").granted());
}

// A failed commit loses everything staged since the last good one: the operations in it are
// answered UNAVAILABLE and the coordinator reloads its state from the database.
TEST_F(CoordinatorTest, LostGrantIsAnsweredUnavailableAndTheShardStaysQueued) {
  RegisterAgent("n", "n150");
  Start({}, 0, "", {"dtype_bfloat16"});
  const auto before = metrics_.shards;
  store_->FailNextFlushesForTest(1);
  auto got = TryLease("n");
  EXPECT_TRUE(absl::IsUnavailable(got.status())) << got.status();
  EXPECT_FALSE(coord_->healthy());
  EXPECT_EQ(coord_->GetSweep("sw-0001")->shards_by_state().at("queued"), 1);
  auto nonzero = [](std::map<std::string, int> m) {
    std::erase_if(m, [](const auto& kv) { return kv.second == 0; });
    return m;
  };
  EXPECT_EQ(nonzero(metrics_.shards), nonzero(before)) << "the reload keeps the gauges right";
  EXPECT_EQ(metrics_.agents["n150/idle"], 1);
  coord_->Tick();
  EXPECT_TRUE(coord_->healthy());
  auto lease = LeaseNow("n");
  ASSERT_TRUE(lease.granted());
  EXPECT_EQ(lease.fencing_token(), 1) << "the lost grant left no trace";
  EXPECT_TRUE(CompleteLease("n", lease, Succeeded(lease.shard())).accepted());
  EXPECT_EQ(coord_->GetSweep("sw-0001")->state(), "succeeded");
}

TEST_F(CoordinatorTest, LostResultIsAnsweredUnavailableAndTheRetryIsAccepted) {
  RegisterAgent("n", "n150");
  Start({}, 0, "", {"dtype_bfloat16"});
  auto lease = LeaseNow("n");
  ASSERT_TRUE(lease.granted());
  store_->FailNextFlushesForTest(1);
  const v1::CompleteRequest req = CompleteRequest("n", lease, Succeeded(lease.shard()));
  auto lost = coord_->Complete(req);
  EXPECT_TRUE(absl::IsUnavailable(lost.status())) << lost.status();
  // Reloaded: the lease (committed earlier) still holds, the result is not there.
  EXPECT_EQ(ShardById(lease.shard().shard_id()).state(), "leased");
  EXPECT_TRUE(coord_->Results("sw-0001")->empty());
  // The agent keeps the result and sends it again: accepted once, not as a duplicate.
  auto again = coord_->Complete(req);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->accepted());
  EXPECT_FALSE(again->duplicate());
  EXPECT_EQ(coord_->Results("sw-0001")->size(), 1u);
  EXPECT_TRUE(coord_->Complete(req)->duplicate());
  // And it is in the database: a restarted coordinator sees the sweep finished.
  coord_.reset();
  Make();
  ASSERT_TRUE(coord_->Recover().ok());
  EXPECT_EQ(coord_->Results("sw-0001")->size(), 1u);
  EXPECT_EQ(coord_->GetSweep("sw-0001")->state(), "succeeded");
}

TEST_F(CoordinatorTest, RecoversFromTheStoreAfterARestart) {
  testing::TempDir tmp;
  ASSERT_NO_FATAL_FAILURE(OpenFileStore(tmp.path() / "state.db", false));
  RegisterAgent("n", "n150");
  Start();
  auto done = LeaseNow("n");
  ASSERT_TRUE(CompleteLease("n", done, Succeeded(done.shard())).accepted());
  auto open = LeaseNow("n");
  ASSERT_TRUE(open.granted());

  // "Restart": a new coordinator over the same database.
  ASSERT_NO_FATAL_FAILURE(OpenFileStore(tmp.path() / "state.db", true));
  auto sweep = coord_->GetSweep("sw-0001");
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->shards_by_state().at("succeeded"), 1);
  EXPECT_EQ(sweep->shards_by_state().at("leased"), 1);
  // The agent re-attaches with its session: its lease is still valid.
  EXPECT_FALSE(Beat("n", {open.lease_id()}).reregister());
  auto again = CompleteLease("n", done, Succeeded(done.shard()));
  EXPECT_TRUE(again.duplicate()) << "a result accepted before the restart is not counted twice";
  EXPECT_TRUE(CompleteLease("n", open, Succeeded(open.shard())).accepted());
  EXPECT_EQ(Drain("n"), 1);
  EXPECT_EQ(coord_->GetSweep("sw-0001")->state(), "succeeded");
  EXPECT_EQ(coord_->Results("sw-0001")->size(), 3u);
  // New ids continue after the recovered ones.
  EXPECT_EQ(Start().id(), "sw-0002");
}

TEST_F(CoordinatorTest, InvalidSweepsAreRefused) {
  v1::StartSweepRequest req;
  EXPECT_TRUE(absl::IsInvalidArgument(coord_->StartSweep(req, operator_).status()));
  req.set_repo_path("/x");
  req.add_archs("n151");
  EXPECT_TRUE(absl::IsInvalidArgument(coord_->StartSweep(req, operator_).status()));
  req.clear_archs();
  req.add_playbooks("nope");
  EXPECT_TRUE(absl::IsInvalidArgument(coord_->StartSweep(req, operator_).status()));
  req.clear_playbooks();
  req.set_executor("command");
  EXPECT_TRUE(absl::IsInvalidArgument(coord_->StartSweep(req, operator_).status()));
  req.set_executor("native");
  req.set_durations_json("{");
  EXPECT_TRUE(absl::IsInvalidArgument(coord_->StartSweep(req, operator_).status()));
  req.clear_durations_json();
  for (int bad : {-1, 1001}) {
    req.set_max_attempts(bad);
    auto st = coord_->StartSweep(req, operator_).status();
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << bad;
    EXPECT_NE(st.message().find("max_attempts must be between 1 and 1000"), std::string::npos)
        << st;
  }
}

TEST_F(CoordinatorTest, FilesWithErrorsAreLeftOut) {
  yaml_["tests/runner/test_config/torch/test_config_inference_single_device.yaml"] =
      "test_config:\n  x/pytorch-single_device-inference:\n    status: BROKEN\n";
  Make();
  auto sweep = Start();
  EXPECT_EQ(sweep.entries().total(), 4);
  ASSERT_GE(sweep.problems_size(), 1);
  EXPECT_NE(sweep.problems(0).find("invalid value 'BROKEN'"), std::string::npos);
}

TEST_F(CoordinatorTest, WatchSeesProgressUntilTheEnd) {
  RegisterAgent("n", "n150");
  Start({}, 0, "", {"dtype_bfloat16"});
  std::vector<v1::SweepEvent> events;
  auto id = coord_->Watch("sw-0001", [&](const v1::SweepEvent& e) { events.push_back(e); });
  ASSERT_TRUE(id.ok());
  Drain("n");
  coord_->Unwatch(*id);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.front().sweep().state(), "running");
  EXPECT_EQ(events.back().sweep().state(), "succeeded");
  EXPECT_EQ(events.back().sweep().entries().done(), 1);
  EXPECT_EQ(events.back().sweep().entries().by_outcome().at("EXPECTED_PASSING"), 1);
  EXPECT_FALSE(coord_->Watch("sw-9999", [](const v1::SweepEvent&) {}).ok());
}

TEST_F(CoordinatorTest, RegistryLinesStartAWaveForEntriesVerifiedWithoutThem) {
  std::map<std::string, v1::LeaseResponse> leases = StartAndLeaseEachLoader();
  ASSERT_EQ(leases.size(), 3u);
  const std::string a = "third_party/tt_forge_models/a/pytorch/loader.py";
  const std::string b = "third_party/tt_forge_models/b/pytorch/loader.py";
  const std::string c = "third_party/tt_forge_models/c/pytorch/loader.py";
  // a proposes a registry line for its class; c's model returns the same class but its
  // (bfloat16) playbook stopped: unpack_forward_output failed for it.
  v1::ShardResult ra = Succeeded(leases[a].shard());
  for (auto& o : *ra.mutable_entries()) o.set_output_class("SharedOutput");
  auto* op = ra.add_registry_ops();
  op->set_kind(v1::RegistryOp::ADD);
  op->set_cls("SharedOutput");
  op->set_attr("logits");
  v1::ShardResult rc = Succeeded(leases[c].shard());
  for (auto& o : *rc.mutable_entries()) {
    o.set_output_class("SharedOutput");
    o.set_verdict("needs_unpack");
    o.set_changed(false);
    o.clear_edit();
  }
  ASSERT_TRUE(CompleteLease("n", leases[a], ra).accepted());
  ASSERT_TRUE(CompleteLease("n", leases[c], rc).accepted());
  ASSERT_TRUE(CompleteLease("n", leases[b], Succeeded(leases[b].shard())).accepted());
  EXPECT_EQ(coord_->GetSweep("sw-0001")->state(), "running") << "a second wave follows";
  auto wave2 = LeaseNow("n");
  ASSERT_TRUE(wave2.granted());
  EXPECT_EQ(wave2.shard().wave(), 2);
  EXPECT_EQ(wave2.shard().loader(), c);
  EXPECT_EQ(wave2.shard().playbook(), "dtype_bfloat16");
  ASSERT_EQ(wave2.shard().pre_registry_size(), 1);
  EXPECT_EQ(wave2.shard().pre_registry(0).cls(), "SharedOutput");
  EXPECT_FALSE(LeaseNow("n").granted()) << "a's own entries were verified with the line";
  ASSERT_TRUE(CompleteLease("n", wave2, Succeeded(wave2.shard())).accepted());
  EXPECT_EQ(coord_->GetSweep("sw-0001")->state(), "succeeded");
}

// Progress never goes back: an entry a later registry wave reopens stays counted decided, under
// its latest decision, and is counted as being rechecked until that wave decides it again.
TEST_F(CoordinatorTest, DecidedEntriesReopenedByALaterWaveStayDecided) {
  std::map<std::string, v1::LeaseResponse> leases = StartAndLeaseEachLoader();
  ASSERT_EQ(leases.size(), 3u);
  const std::string a = "third_party/tt_forge_models/a/pytorch/loader.py";
  const std::string b = "third_party/tt_forge_models/b/pytorch/loader.py";
  const std::string c = "third_party/tt_forge_models/c/pytorch/loader.py";
  v1::ShardResult ra = ProbedWithClass(Succeeded(leases[a].shard()), "SharedOutput", "logits");
  v1::ShardResult rc = ProbedWithClass(Succeeded(leases[c].shard()), "SharedOutput");
  for (auto& o : *rc.mutable_entries()) {
    o.set_verdict("needs_unpack");
    o.set_changed(false);
    o.clear_edit();
  }
  int decided = 0;
  auto progress = [&](const std::string& when) {
    const auto s = coord_->GetSweep("sw-0001");
    ASSERT_TRUE(s.ok());
    EXPECT_GE(s->entries().decided(), decided) << when;
    decided = s->entries().decided();
    EXPECT_EQ(s->entries().queued() + s->entries().running() + s->entries().done(),
              s->entries().total())
        << when;
  };
  ASSERT_TRUE(CompleteLease("n", leases[c], rc).accepted());
  progress("c decided unchanged");
  const int after_c = decided;
  EXPECT_GT(after_c, 0);
  ASSERT_TRUE(CompleteLease("n", leases[a], ra).accepted());
  progress("a proposed the line that reopens c");
  ASSERT_TRUE(CompleteLease("n", leases[b], Succeeded(leases[b].shard())).accepted());
  progress("b decided");
  auto wave2 = LeaseNow("n");
  ASSERT_TRUE(wave2.granted());
  ASSERT_EQ(wave2.shard().loader(), c);
  progress("c's second wave leased");
  const auto reopened = coord_->GetSweep("sw-0001");
  EXPECT_EQ(reopened->entries().rechecking(), wave2.shard().entries_size());
  EXPECT_EQ(reopened->entries().by_outcome().at("unchanged"), wave2.shard().entries_size())
      << "counted under its latest decision";
  ASSERT_TRUE(CompleteLease("n", wave2, Succeeded(wave2.shard())).accepted());
  progress("c decided again");
  const auto ended = coord_->GetSweep("sw-0001");
  EXPECT_EQ(ended->state(), "succeeded");
  EXPECT_EQ(ended->entries().rechecking(), 0);
  EXPECT_EQ(ended->entries().by_outcome().count("unchanged"), 0u);
}

constexpr char kLoaderA[] = "third_party/tt_forge_models/a/pytorch/loader.py";
constexpr char kLoaderC[] = "third_party/tt_forge_models/c/pytorch/loader.py";

// Which entries a registry wave verifies again, and with what, is read from the first phases
// (a native verify phase proposes no line and edits no loader): the next wave is planned when
// the probes of the wave before have ended, beside its verifications. A verification of the
// wave before that has not started, for an entry the next wave verifies again, is not run
// (superseded); one that runs on is outdone by the later wave whichever result arrives first.
TEST_F(CoordinatorTest, ARegistryWaveStartsWhenTheProbesOfTheWaveBeforeHaveEnded) {
  CpuAndDeviceAgent();
  RegisterAgent("p", "p150");
  Start({"n150", "p150"}, 0, "", {"unpack_forward_output", "dtype_bfloat16"});
  const std::string a = kLoaderA, c = kLoaderC;
  std::map<std::string, v1::LeaseResponse> probes = LeaseEveryProbe("cpu");
  ASSERT_EQ(probes.size(), 3u);
  auto shards = [&] {
    auto all = coord_->Shards("sw-0001");
    EXPECT_TRUE(all.ok()) << all.status();
    return all.ok() ? *all : std::vector<ShardRecord>{};
  };
  auto open_in_wave = [&](int wave) {
    int open = 0;
    for (const auto& s : shards()) {
      open += s.spec.wave() == wave && !IsTerminal(s.state);
    }
    return open;
  };
  // c's model returns the class a's probe will propose a line for; c's n150 verification
  // starts before a's probe ends.
  ASSERT_TRUE(
      CompleteLease("cpu", probes[c], ProbedWithClass(Succeeded(probes[c].shard()), "SharedOutput"))
          .accepted());
  v1::LeaseResponse held;
  std::vector<v1::LeaseResponse> wave1;  // other verifications the agent took
  do {
    held = LeaseNow("n");
    ASSERT_TRUE(held.granted());
    if (held.shard().loader() != c) wave1.push_back(held);
  } while (held.shard().loader() != c);
  std::string c_on_p150;  // c's p150 verification, still queued
  for (const auto& s : shards()) {
    if (s.spec.loader() == c && s.spec.arch() == "p150") c_on_p150 = s.id;
  }
  ASSERT_FALSE(c_on_p150.empty());
  for (const auto& [loader, l] : probes) {
    if (loader != a && loader != c) {
      ASSERT_TRUE(CompleteLease("cpu", l, Succeeded(l.shard())).accepted());
    }
  }
  EXPECT_EQ(open_in_wave(2), 0) << "a probe of wave 1 may still propose a line";
  ASSERT_TRUE(CompleteLease("cpu", probes[a],
                            ProbedWithClass(Succeeded(probes[a].shard()), "SharedOutput", "logits"))
                  .accepted());
  EXPECT_EQ(open_in_wave(2), 3) << "c again, with a's line: a probe and two verifications";
  const v1::Shard superseded = ShardById(c_on_p150);
  EXPECT_EQ(superseded.state(), "succeeded");
  EXPECT_THAT(superseded.last_error(), HasSubstr("superseded: wave 2 verifies its entries again"));
  EXPECT_EQ(ShardById(held.shard().shard_id()).state(), "leased") << "a started one runs on";
  auto probe2 = LeaseNow("cpu");
  ASSERT_TRUE(probe2.granted());
  EXPECT_EQ(probe2.shard().wave(), 2);
  EXPECT_EQ(probe2.shard().loader(), c);
  ASSERT_EQ(probe2.shard().pre_registry_size(), 1);
  EXPECT_EQ(probe2.shard().pre_registry(0).cls(), "SharedOutput");
  ASSERT_TRUE(CompleteLease("cpu", probe2, Succeeded(probe2.shard())).accepted());

  // On p150 only wave 1's a and b and wave 2's c are left.
  for (;;) {
    auto l = LeaseNow("p");
    if (!l.granted()) break;
    EXPECT_TRUE(l.shard().loader() != c || l.shard().wave() == 2) << l.shard().shard_id();
    ASSERT_TRUE(CompleteLease("p", l, Succeeded(l.shard())).accepted());
  }
  // c's n150 verification of wave 2 ends first; the one of wave 1, verified without the line
  // and unchanged, ends after it and does not replace it.
  for (;;) {
    auto l = LeaseNow("n");
    ASSERT_TRUE(l.granted());
    if (l.shard().wave() == 2) {
      ASSERT_TRUE(CompleteLease("n", l, Succeeded(l.shard())).accepted());
      break;
    }
    wave1.push_back(l);
  }
  v1::ShardResult unchanged = Succeeded(held.shard());
  for (auto& o : *unchanged.mutable_entries()) {
    o.set_verdict("xfail");
    o.set_changed(false);
    o.clear_edit();
  }
  ASSERT_TRUE(CompleteLease("n", held, unchanged).accepted());
  EXPECT_EQ(coord_->GetSweep("sw-0001")->entries().by_outcome().count("unchanged"), 0u)
      << "wave 2 decided c";
  for (auto& l : wave1) ASSERT_TRUE(CompleteLease("n", l, Succeeded(l.shard())).accepted());
  Drain("n");
  EXPECT_EQ(coord_->GetSweep("sw-0001")->state(), "succeeded");
}

// A verification that was running when the next wave was planned, and is queued again (here a
// failed attempt), leaves out the entries that wave verifies again: its retry would verify them
// without the line, and its outcome would be replaced.
TEST_F(CoordinatorTest, AVerificationQueuedAgainAfterTheNextWaveWasPlannedIsSuperseded) {
  std::map<std::string, v1::LeaseResponse> probes = StartHoldingEveryProbe();
  ASSERT_EQ(probes.size(), 3u);
  const std::string a = kLoaderA, c = kLoaderC;
  ASSERT_TRUE(
      CompleteLease("cpu", probes[c], ProbedWithClass(Succeeded(probes[c].shard()), "SharedOutput"))
          .accepted());
  v1::LeaseResponse held;
  do {
    held = LeaseNow("n");
    ASSERT_TRUE(held.granted());
  } while (held.shard().loader() != c);
  for (const auto& [loader, l] : probes) {
    if (loader != a && loader != c) {
      ASSERT_TRUE(CompleteLease("cpu", l, Succeeded(l.shard())).accepted());
    }
  }
  ASSERT_TRUE(CompleteLease("cpu", probes[a],
                            ProbedWithClass(Succeeded(probes[a].shard()), "SharedOutput", "logits"))
                  .accepted());
  ASSERT_EQ(ShardById(held.shard().shard_id()).state(), "leased") << "a started one runs on";

  ASSERT_TRUE(CompleteLease("n", held, Failed("pytest crashed")).accepted());
  const v1::Shard retried = ShardById(held.shard().shard_id());
  EXPECT_EQ(retried.state(), "succeeded") << "not queued again for entries wave 2 verifies";
  EXPECT_THAT(retried.last_error(), HasSubstr("superseded: wave 2 verifies its entries again"));
  // A failed verification of wave 1 whose entries wave 2 does not touch is retried as before.
  v1::LeaseResponse other;
  do {
    other = LeaseNow("n");
    ASSERT_TRUE(other.granted());
  } while (other.shard().wave() != 1 || other.shard().phase() != v1::PHASE_VERIFY);
  ASSERT_NE(other.shard().loader(), c);
  ASSERT_TRUE(CompleteLease("n", other, Failed("pytest crashed")).accepted());
  EXPECT_EQ(ShardById(other.shard().shard_id()).state(), "queued");
}

// A queued verification with some entries whose class got a line elsewhere in the wave, and
// some without, is split when the line arrives: the first kind move to a shard of their own,
// queued behind the others, which the next wave supersedes; the rest run without waiting.
TEST_F(CoordinatorTest, AVerificationWithSomeEntriesOfALinedClassIsSplit) {
  std::map<std::string, v1::LeaseResponse> probes = StartHoldingEveryProbe();
  ASSERT_EQ(probes.size(), 3u);
  const std::string a = kLoaderA, c = kLoaderC;
  // a's V1 returns the class c's probe will propose a line for; V2 another.
  v1::ShardResult probed_a = Succeeded(probes[a].shard());
  for (auto& o : *probed_a.mutable_entries()) {
    o.set_output_class(o.key().find("V1") != std::string::npos ? "Lined" : "Other");
  }
  ASSERT_TRUE(CompleteLease("cpu", probes[a], probed_a).accepted());
  auto verifications_of_a = [&] {
    std::vector<ShardRecord> out;
    auto all = coord_->Shards("sw-0001");
    EXPECT_TRUE(all.ok()) << all.status();
    for (const auto& s : *all) {
      if (s.spec.loader() == a && s.spec.phase() == v1::PHASE_VERIFY && s.spec.wave() == 1) {
        out.push_back(s);
      }
    }
    return out;
  };
  ASSERT_EQ(verifications_of_a().size(), 1u);
  ASSERT_EQ(verifications_of_a()[0].spec.entries_size(), 2);

  std::vector<std::string> events;
  auto watch =
      coord_->Watch("sw-0001", [&](const v1::SweepEvent& e) { events.push_back(e.message()); });
  ASSERT_TRUE(watch.ok());
  ASSERT_TRUE(CompleteLease("cpu", probes[c],
                            ProbedWithClass(Succeeded(probes[c].shard()), "Lined", "logits"))
                  .accepted());
  coord_->Unwatch(*watch);
  std::vector<ShardRecord> split = verifications_of_a();
  ASSERT_EQ(split.size(), 2u) << "a's verification is split";
  std::string kept_id, moved_id;
  for (const auto& s : split) {
    ASSERT_EQ(s.state, ShardState::kQueued);
    ASSERT_EQ(s.spec.entries_size(), 1);
    EXPECT_EQ(s.spec.wave(), 1);
    const bool moved = s.spec.entries(0).key().find("V1") != std::string::npos;
    EXPECT_EQ(s.likely_superseded, moved) << s.id;
    (moved ? moved_id : kept_id) = s.id;
  }
  EXPECT_EQ(kept_id, split[0].id) << "the shard keeps its place, the new one comes after";
  EXPECT_THAT(events, Contains(HasSubstr("shard " + kept_id + ": 1 entry split off to " + moved_id +
                                         ", queued last")));

  // When the wave's last probe ends, the next wave verifies V1 again with the line: the moved
  // part is superseded before any device ran it; the kept part is still to run.
  for (const auto& [loader, l] : probes) {
    if (loader != a && loader != c) {
      ASSERT_TRUE(CompleteLease("cpu", l, Succeeded(l.shard())).accepted());
    }
  }
  EXPECT_EQ(ShardById(moved_id).state(), "succeeded");
  EXPECT_THAT(ShardById(moved_id).last_error(),
              HasSubstr("superseded: wave 2 verifies its entries again"));
  EXPECT_EQ(ShardById(kept_id).state(), "queued");
  bool v1_in_wave2 = false;
  auto all = coord_->Shards("sw-0001");
  ASSERT_TRUE(all.ok());
  for (const auto& s : *all) {
    if (s.spec.wave() != 2) continue;
    for (const auto& e : s.spec.entries()) v1_in_wave2 |= e.key().find("a/pytorch-V1") == 0;
  }
  EXPECT_TRUE(v1_in_wave2);
}

// Loader a's two variants, V1 and V2, with durations as given, on n150.
class LongEntryTest : public CoordinatorTest {
 protected:
  const std::string v1_ = "a/pytorch-V1-single_device-training";
  const std::string v2_ = "a/pytorch-V2-single_device-training";

  std::string Durations(int v1_seconds, int v2_seconds) const {
    return util::StrCat("{\"", NodeId(kTrainingFile, v1_), "\": ", v1_seconds, ", \"",
                        NodeId(kTrainingFile, v2_), "\": ", v2_seconds, "}");
  }

  // Starts the sweep with n150 agents "n" and "n2" (or only "n") and completes a's probe (the
  // sweep's events meanwhile into `events`); a's wave-1 verifications then, in shard order.
  std::vector<ShardRecord> VerificationsOfAAfterItsProbe(const std::string& durations,
                                                         std::vector<std::string>* events = nullptr,
                                                         bool two_agents = true) {
    CpuAndDeviceAgent();
    if (two_agents) RegisterAgent("n2", "n150");
    Start({"n150"}, 0, durations, {"unpack_forward_output"});
    std::map<std::string, v1::LeaseResponse> probes = LeaseEveryProbe("cpu");
    EXPECT_TRUE(probes.count(kLoaderA));
    auto watch = coord_->Watch("sw-0001", [&](const v1::SweepEvent& e) {
      if (events != nullptr) events->push_back(e.message());
    });
    EXPECT_TRUE(watch.ok());
    EXPECT_TRUE(
        CompleteLease("cpu", probes[kLoaderA], Succeeded(probes[kLoaderA].shard())).accepted());
    if (watch.ok()) coord_->Unwatch(*watch);
    std::vector<ShardRecord> out;
    for (const auto& s : ShardsOfWave(1)) {
      if (s.spec.loader() == kLoaderA && s.spec.phase() == v1::PHASE_VERIFY) out.push_back(s);
    }
    return out;
  }
};

// Without --durations, the checkout's own .test_durations plans the sweep (tt-xla keeps one at its
// root), and the notes say so; durations the request brings win.
TEST_F(LongEntryTest, TheCheckoutsOwnDurationsPlanASweepThatBringsNone) {
  checkout_durations_ = Durations(3000, 100);
  RegisterAgent("n", "n150");
  const v1::Sweep sweep = Start({"n150"}, 0, "", {"unpack_forward_output"});
  EXPECT_THAT(
      util::StrJoin(sweep.notes(), "\n"),
      HasSubstr("durations: the checkout's .test_durations (2 tests, 2 of them at least 5 s "
                "and so trusted)"));
  double planned = 0;
  for (const auto& s : ShardsOfWave(1)) {
    if (s.spec.loader() != kLoaderA || s.spec.phase() == v1::PHASE_VERIFY) continue;
    for (const auto& e : s.spec.entries()) EXPECT_FALSE(e.estimated()) << e.key();
    planned = std::max(planned, s.expected_seconds);
  }
  EXPECT_GE(planned, 0.2 * 3100 - 1) << "a's first phase from the checkout's durations";

  checkout_durations_ = "[not an object]";
  const v1::Sweep bad = Start({"n150"}, 0, "", {"unpack_forward_output"});
  EXPECT_THAT(util::StrJoin(bad.notes(), "\n"),
              HasSubstr("the checkout's .test_durations is not used: durations: "));

  checkout_durations_ = Durations(3000, 100);
  const v1::Sweep own = Start({"n150"}, 0, Durations(7, 7), {"unpack_forward_output"});
  EXPECT_THAT(util::StrJoin(own.notes(), "\n"), Not(HasSubstr(".test_durations")));
}

// An entry known to run over verify_batch_shard_max_seconds leaves its loader's verification
// when that is released and the shard is longer than each agent's share of its arch's queued
// work, so that a loader's long variants run on several agents at once; the loader's other
// entries stay together.
TEST_F(LongEntryTest, AnEntryKnownToRunLongIsVerifiedApartFromItsLoadersOthers) {
  std::vector<std::string> events;
  std::vector<ShardRecord> split = VerificationsOfAAfterItsProbe(Durations(3000, 100), &events);
  ASSERT_EQ(split.size(), 2u) << "the long entry apart";
  for (const auto& s : split) {
    EXPECT_EQ(s.state, ShardState::kQueued) << s.id;
    ASSERT_EQ(s.spec.entries_size(), 1) << s.id;
  }
  EXPECT_EQ(split[0].spec.entries(0).key(), v2_) << "the shard keeps its place and the rest";
  EXPECT_EQ(split[1].spec.entries(0).key(), v1_);
  EXPECT_DOUBLE_EQ(split[0].expected_seconds, 100) << "each expects its own entries' seconds";
  EXPECT_DOUBLE_EQ(split[1].expected_seconds, 3000);
  EXPECT_THAT(events, Contains(HasSubstr("shard " + split[0].id + ": " + v1_ + " split off to " +
                                         split[1].id +
                                         ": known to run 3000 s, over "
                                         "verify_batch_shard_max_seconds (600 s)")));
  // Both run at once, each on its own lease, the longest first.
  v1::LeaseResponse first = LeaseNow("n"), second = LeaseNow("n2");
  ASSERT_TRUE(first.granted() && second.granted());
  EXPECT_EQ(first.shard().entries(0).key(), v1_);
  EXPECT_EQ(second.shard().entries(0).key(), v2_);
  ASSERT_TRUE(CompleteLease("n", first, Succeeded(first.shard())).accepted());
  ASSERT_TRUE(CompleteLease("n2", second, Succeeded(second.shard())).accepted());
}

// Every entry long: the first stays, the others leave.
TEST_F(LongEntryTest, EveryEntryLongLeavesTheFirstInPlace) {
  std::vector<ShardRecord> split = VerificationsOfAAfterItsProbe(Durations(3000, 4000));
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(split[0].spec.entries(0).key(), v1_);
  EXPECT_EQ(split[1].spec.entries(0).key(), v2_);
  EXPECT_DOUBLE_EQ(split[1].expected_seconds, 4000);
}

// With one agent for the arch, the shard is within that agent's share of the arch's work: whole,
// it ends no later, and a split would only add a session.
TEST_F(LongEntryTest, AShardWithinEachAgentsShareStaysWhole) {
  std::vector<ShardRecord> whole = VerificationsOfAAfterItsProbe(Durations(3000, 100), nullptr,
                                                                 /*two_agents=*/false);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].spec.entries_size(), 2);
}

TEST_F(LongEntryTest, AnEstimateSplitsNothing) {
  std::vector<ShardRecord> whole = VerificationsOfAAfterItsProbe("");
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].spec.entries_size(), 2);
}

TEST_F(LongEntryTest, NothingIsSplitWithoutALimitOnABatchedShard) {
  options_.verify_batch_shard_max = Duration::zero();
  std::vector<ShardRecord> whole = VerificationsOfAAfterItsProbe(Durations(3000, 4000));
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].spec.entries_size(), 2);
}

// A verification queued before a probe elsewhere in its wave proposes a line for its entries'
// class, or released after one did, waits behind the others: the next wave will verify those
// entries again with the line.
TEST_F(CoordinatorTest, AVerificationOfAClassThatGotALineElsewhereWaitsForTheNextWave) {
  std::map<std::string, v1::LeaseResponse> probes = StartHoldingEveryProbe();
  ASSERT_EQ(probes.size(), 3u);
  const std::string a = kLoaderA, c = kLoaderC;
  auto likely = [&] {
    std::map<std::string, bool> out;  // loader of a queued verification -> likely superseded
    auto all = coord_->Shards("sw-0001");
    EXPECT_TRUE(all.ok()) << all.status();
    for (const auto& s : *all) {
      if (s.state == ShardState::kQueued && s.spec.wave() == 1) {
        out[s.spec.loader()] = s.likely_superseded;
      }
    }
    return out;
  };
  ASSERT_TRUE(
      CompleteLease("cpu", probes[c], ProbedWithClass(Succeeded(probes[c].shard()), "SharedOutput"))
          .accepted());
  EXPECT_THAT(likely(), ElementsAre(Pair(c, false))) << "no line for its class yet";
  ASSERT_TRUE(CompleteLease("cpu", probes[a],
                            ProbedWithClass(Succeeded(probes[a].shard()), "SharedOutput", "logits"))
                  .accepted());
  EXPECT_THAT(likely(), UnorderedElementsAre(Pair(a, false), Pair(c, true)))
      << "a pre-applies its own line; c was verified without it";
}

// The next wave's shards of a loader are planned ahead once the loader's probes have ended and
// its entries' classes have lines, while other probes of the wave still run; the wave, when it
// is planned, keeps them (their inputs are what it would give them) instead of planning their
// entries again.
TEST_F(CoordinatorTest, ANextWaveShardIsPlannedAheadOnceItsLoadersProbesEndedAndKeptByTheWave) {
  std::map<std::string, v1::LeaseResponse> probes = StartHoldingEveryProbe();
  ASSERT_EQ(probes.size(), 3u);
  const std::string a = kLoaderA, c = kLoaderC;
  auto wave2 = [&] { return ShardsOfWave(2); };
  std::vector<std::string> events;
  auto watch =
      coord_->Watch("sw-0001", [&](const v1::SweepEvent& e) { events.push_back(e.message()); });
  ASSERT_TRUE(watch.ok());
  const std::string b = ProbeCThenLineFromA(probes, a, c);
  std::vector<ShardRecord> ahead = wave2();
  ASSERT_FALSE(ahead.empty()) << "c's probe has ended and its class has a line: b's still runs";
  std::set<std::string> ahead_ids;
  for (const auto& s : ahead) {
    EXPECT_EQ(s.spec.loader(), c);
    EXPECT_TRUE(s.spec.ahead()) << s.id;
    ASSERT_EQ(s.spec.pre_registry_size(), 1);
    EXPECT_EQ(s.spec.pre_registry(0).attr(), "logits");
    ahead_ids.insert(s.id);
  }
  EXPECT_THAT(events, Contains(HasSubstr("planned ahead for " + c)));

  // The shard planned ahead runs before the wave is planned.
  const v1::LeaseResponse ahead_probe = CompleteFirstShardOfWave2();
  ASSERT_TRUE(ahead_probe.granted());
  EXPECT_TRUE(ahead_probe.shard().ahead());

  ASSERT_TRUE(CompleteLease("cpu", probes[b], Succeeded(probes[b].shard())).accepted());
  coord_->Unwatch(*watch);
  std::map<std::string, int> probed;  // entry key -> wave-2 first phases holding it
  for (const auto& s : wave2()) {
    EXPECT_TRUE(ahead_ids.count(s.id)) << s.id << ": c's entries are not planned again";
    EXPECT_FALSE(s.spec.ahead()) << s.id << " joined its wave";
    EXPECT_NE(s.state, ShardState::kCancelled) << s.id;
    if (s.spec.phase() != v1::PHASE_VERIFY) {
      for (const auto& e : s.spec.entries()) probed[e.key()]++;
    }
  }
  EXPECT_FALSE(probed.empty());
  for (const auto& [key, n] : probed) EXPECT_EQ(n, 1) << key;
  EXPECT_THAT(events, Contains(HasSubstr("wave 2: 0 shard(s) re-verify entries touched by "
                                         "registry lines, " +
                                         std::to_string(ahead_ids.size()) +
                                         " planned ahead kept, 0 discarded")));
}

// The flag is kept with the shard's spec: a coordinator restarted before the wave is planned
// still counts the shards planned ahead for nothing, plans the wave when the last probe ends,
// and adopts them then.
TEST_F(CoordinatorTest, ShardsPlannedAheadAreAdoptedAfterARestart) {
  testing::TempDir tmp;
  ASSERT_NO_FATAL_FAILURE(OpenFileStore(tmp.path() / "state.db", false));
  std::map<std::string, v1::LeaseResponse> probes = StartHoldingEveryProbe();
  ASSERT_EQ(probes.size(), 3u);
  const std::string b = ProbeCThenLineFromA(probes, kLoaderA, kLoaderC);
  ASSERT_TRUE(CompleteFirstShardOfWave2().granted());

  ASSERT_NO_FATAL_FAILURE(OpenFileStore(tmp.path() / "state.db", true));
  auto wave2 = [&] { return ShardsOfWave(2); };
  ASSERT_FALSE(wave2().empty());
  for (const auto& s : wave2()) EXPECT_TRUE(s.spec.ahead()) << s.id;
  ASSERT_TRUE(CompleteLease("cpu", probes[b], Succeeded(probes[b].shard())).accepted());
  for (const auto& s : wave2()) {
    EXPECT_FALSE(s.spec.ahead()) << s.id << " joined its wave";
    EXPECT_EQ(s.spec.loader(), kLoaderC) << s.id << ": nothing was planned again";
  }
}

// A shard planned ahead whose class line does not survive the wave (a later probe proposes
// another attribute for the class: no line is written) is discarded when the wave is planned:
// one still to run is cancelled, one that ran keeps its flag, so its result never counts, and
// the entries are not verified again (their class has no line).
TEST_F(CoordinatorTest, AShardPlannedAheadIsDiscardedWhenItsClassLineDoesNotSurvive) {
  std::map<std::string, v1::LeaseResponse> probes = StartHoldingEveryProbe();
  ASSERT_EQ(probes.size(), 3u);
  const std::string a = kLoaderA, c = kLoaderC;
  const std::string b = ProbeCThenLineFromA(probes, a, c);
  const v1::LeaseResponse ahead_probe = CompleteFirstShardOfWave2();
  ASSERT_TRUE(ahead_probe.granted());
  ASSERT_TRUE(ahead_probe.shard().ahead());
  // b's model returns the class too, and its probe proposes another attribute: a conflict. It
  // also proposes a line for an unrelated class, which is written.
  v1::ShardResult probed_b =
      ProbedWithClass(Succeeded(probes[b].shard()), "SharedOutput", "last_hidden_state");
  auto* unrelated = probed_b.add_registry_ops();
  unrelated->set_kind(v1::RegistryOp::ADD);
  unrelated->set_cls("UnrelatedOutput");
  unrelated->set_attr("logits");
  ASSERT_TRUE(CompleteLease("cpu", probes[b], probed_b).accepted());
  auto all = coord_->Shards("sw-0001");
  ASSERT_TRUE(all.ok());
  int wave2 = 0;
  for (const auto& s : *all) {
    if (s.spec.wave() != 2) continue;
    ++wave2;
    EXPECT_TRUE(s.spec.ahead()) << s.id << ": nothing of wave 2 was planned or kept";
    if (s.id == ahead_probe.shard().shard_id()) {
      EXPECT_EQ(s.state, ShardState::kSucceeded) << "it ran; its result never counts";
    } else {
      EXPECT_EQ(s.state, ShardState::kCancelled) << s.id;
      EXPECT_THAT(s.last_error, HasSubstr("discarded: wave 2 was planned with other registry"));
    }
  }
  EXPECT_GE(wave2, 2) << "the probe planned ahead and its verification";
  // An on-call requeue of a discarded shard is refused: its results would never count.
  for (const auto& s : *all) {
    if (s.spec.wave() != 2 || s.state != ShardState::kCancelled) continue;
    auto requeued = coord_->RequeueShard(s.id, "stuck?", operator_);
    EXPECT_TRUE(absl::IsFailedPrecondition(requeued.status())) << requeued.status();
    EXPECT_THAT(std::string(requeued.status().message()), HasSubstr("discarded"));
  }
}

// A command executor's verify phase runs an operator's command, which may change the registry:
// its sweeps plan a wave when every shard of the wave before has ended.
TEST_F(CoordinatorTest, ACommandSweepsRegistryWaveWaitsForEveryShardOfTheWaveBefore) {
  options_.device_probes = false;
  Make();
  RegisterAgent("cpu", "", true, {"command"});
  RegisterAgent("n", "n150", false, {"command"});
  v1::StartSweepRequest req;
  req.set_repo_path("/fake/tt-xla");
  req.add_archs("n150");
  req.add_playbooks("unpack_forward_output");
  req.add_playbooks("dtype_bfloat16");
  req.set_executor("command");
  (*req.mutable_params())["command"] = R"(["fix", "{key}"])";
  ASSERT_TRUE(coord_->StartSweep(req, operator_).ok());
  const std::string a = "third_party/tt_forge_models/a/pytorch/loader.py";
  for (;;) {
    auto l = LeaseNow("cpu");
    if (!l.granted()) break;
    ASSERT_TRUE(CompleteLease("cpu", l,
                              ProbedWithClass(Succeeded(l.shard()), "SharedOutput",
                                              l.shard().loader() == a ? "logits" : ""))
                    .accepted());
  }
  auto verify = LeaseNow("n");
  ASSERT_TRUE(verify.granted());
  EXPECT_EQ(verify.shard().wave(), 1);
  auto shards = coord_->Shards("sw-0001");
  ASSERT_TRUE(shards.ok()) << shards.status();
  for (const auto& s : *shards) EXPECT_EQ(s.spec.wave(), 1) << s.id;
  Drain("n");
  ASSERT_TRUE(CompleteLease("n", verify, Succeeded(verify.shard())).accepted());
  auto probe2 = LeaseNow("cpu");
  ASSERT_TRUE(probe2.granted()) << "wave 2 once wave 1 has ended";
  EXPECT_EQ(probe2.shard().wave(), 2);
}

// Registry waves rely on it: a native verify phase that edits a loader or proposes a registry
// line is refused, naming what it carried.
TEST_F(CoordinatorTest, ANativeVerifyPhaseThatProposesARegistryLineIsRefused) {
  CpuAndDeviceAgent();
  Start({"n150"}, 0, "", {"dtype_bfloat16"});
  auto probe = LeaseNow("cpu");
  ASSERT_TRUE(CompleteLease("cpu", probe, Succeeded(probe.shard())).accepted());
  auto verify = LeaseNow("n");
  ASSERT_EQ(verify.shard().phase(), v1::PHASE_VERIFY);
  ASSERT_FALSE(CompleteLease("n", verify, ProbedWithClass(Succeeded(verify.shard()), "X", "logits"))
                   .accepted());
  EXPECT_THAT(ShardById(verify.shard().shard_id()).last_error(),
              HasSubstr("verify phase changes only YAML entries, but this result carries 0 file "
                        "edit(s) and 1 registry line(s)"));
}

TEST_F(CoordinatorTest, DifferentAttributesForOneClassAreAConflictWithoutAWave) {
  std::vector<ResultRecord> results(2);
  for (int i = 0; i < 2; ++i) {
    auto* op = results[i].result.add_registry_ops();
    op->set_kind(v1::RegistryOp::ADD);
    op->set_cls("X");
    op->set_attr(i == 0 ? "logits" : "pred");
  }
  WavePlan plan = MergeRegistry(results);
  EXPECT_TRUE(plan.merged.empty());
  ASSERT_EQ(plan.conflicts.size(), 1u);
  EXPECT_NE(plan.conflicts[0].find("class X: attributes logits, pred"), std::string::npos);
  // Identical proposals collapse.
  results[1].result.mutable_registry_ops(0)->set_attr("logits");
  plan = MergeRegistry(results);
  ASSERT_EQ(plan.merged.size(), 1u);
  EXPECT_TRUE(plan.conflicts.empty());
}

TEST_F(CoordinatorTest, LaterPhasesOnlyVerifyEntriesLeftForVerification) {
  RegisterAgent("n", "n150");
  RegisterAgent("p", "p150");
  Start({"n150", "p150"}, 0, "", {"unpack_forward_output"});
  v1::LeaseResponse full;
  do {
    full = LeaseNow("n");
    ASSERT_TRUE(full.granted());
    if (full.shard().entries_size() == 2) break;
    ASSERT_TRUE(CompleteLease("n", full, Succeeded(full.shard())).accepted());
  } while (true);
  v1::ShardResult r = Succeeded(full.shard());
  r.mutable_entries(1)->set_verdict("not_reproduced");
  r.mutable_entries(1)->set_changed(false);
  ASSERT_TRUE(CompleteLease("n", full, r).accepted());
  for (;;) {
    auto v = LeaseNow("p");
    ASSERT_TRUE(v.granted());
    if (v.shard().loader() != full.shard().loader()) {
      CompleteLease("p", v, Succeeded(v.shard()));
      continue;
    }
    ASSERT_EQ(v.shard().entries_size(), 1);
    EXPECT_EQ(v.shard().entries(0).key(), full.shard().entries(0).key());
    break;
  }
}

// ---------------------------------------------------------------------------------------------
// Weekly sweeps: the idempotency key and the failure budget.

v1::StartSweepRequest WeeklyRequest(const std::string& request_id) {
  v1::StartSweepRequest req;
  req.set_repo_path("/fake/tt-xla");
  req.set_request_id(request_id);
  req.set_reason("weekly");
  return req;
}

TEST_F(CoordinatorTest, TheSameRequestIdReturnsTheFirstSweep) {
  auto first = coord_->StartSweep(WeeklyRequest("weekly-2026-11-23"), operator_);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->existing());
  EXPECT_EQ(first->request_id(), "weekly-2026-11-23");

  // A retried job: the same key (and another reason, which is no option) gives the same sweep.
  v1::StartSweepRequest again = WeeklyRequest("weekly-2026-11-23");
  again.set_reason("retried pod");
  auto second = coord_->StartSweep(again, operator_);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->id(), first->id());
  EXPECT_TRUE(second->existing());
  EXPECT_EQ(coord_->ListSweeps().size(), 1u);

  // The same key with other options is refused, naming them.
  v1::StartSweepRequest other = WeeklyRequest("weekly-2026-11-23");
  other.add_archs("p150");
  other.set_max_failed_shards(4);
  auto refused = coord_->StartSweep(other, operator_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(refused.status().message(), HasSubstr("already started sweep " + first->id()));
  EXPECT_THAT(refused.status().message(), HasSubstr("archs, max_failed_shards differ"));

  // Another key, another sweep; no key, always a new one.
  auto next_week = coord_->StartSweep(WeeklyRequest("weekly-2026-11-30"), operator_);
  ASSERT_TRUE(next_week.ok());
  EXPECT_NE(next_week->id(), first->id());
  Start();
  Start();
  EXPECT_EQ(coord_->ListSweeps().size(), 4u);

  // The key is kept with the sweep: after a restart it still finds it.
  coord_.reset();
  Make();
  ASSERT_TRUE(coord_->Recover().ok());
  auto after_restart = coord_->StartSweep(WeeklyRequest("weekly-2026-11-23"), operator_);
  ASSERT_TRUE(after_restart.ok());
  EXPECT_EQ(after_restart->id(), first->id());
  EXPECT_EQ(coord_->ListSweeps().size(), 4u);

  // Keys are short printable words.
  auto bad = coord_->StartSweep(WeeklyRequest("weekly 1"), operator_);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("request_id: character 7 (0x20)"));
}

// The result with every entry it verified on a device crashed instead.
v1::ShardResult AllCrashed(v1::ShardResult r) {
  for (auto& o : *r.mutable_entries()) {
    o.set_verdict("crash");
    o.set_reason("crashed with signal 6 (SIGABRT)");
    o.set_changed(false);
    o.clear_edit();
  }
  return r;
}

// The budget counts farm failures: attempts that ended without a usable result (the agent
// reported a failure, the result was rejected) and quarantined shards, each shard once. A
// shard whose every entry crashed on the device decided those entries: it does not count.
TEST_F(CoordinatorTest, TheFailureBudgetStopsLeasingUntilAPersonActs) {
  RegisterAgent("a1", "n150");
  v1::StartSweepRequest req = WeeklyRequest("budget");
  req.set_max_attempts(3);
  req.set_max_failed_shards(1);
  auto sweep = coord_->StartSweep(req, operator_);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  ASSERT_EQ(sweep->shards_by_state().at("queued"), 3);

  // One shard's attempt failed (it is retried later): within the budget of 1.
  auto l1 = LeaseNow("a1");
  ASSERT_TRUE(l1.granted());
  CompleteLease("a1", l1, Failed("workspace broken"));
  EXPECT_EQ(ShardById(l1.shard().shard_id()).state(), "queued");
  auto view = coord_->GetSweep(sweep->id());
  EXPECT_EQ(view->failed_shards(), 1);
  EXPECT_FALSE(view->over_budget());

  // A shard whose every verified entry crashed: the entries' outcome, not a farm failure.
  auto crashed = LeaseNow("a1");
  ASSERT_TRUE(crashed.granted());
  ASSERT_NE(crashed.shard().shard_id(), l1.shard().shard_id()) << "l1 waits out its backoff";
  EXPECT_TRUE(CompleteLease("a1", crashed, AllCrashed(Succeeded(crashed.shard()))).accepted());
  EXPECT_EQ(coord_->GetSweep(sweep->id())->failed_shards(), 1);

  // A rejected result (a file the shard does not own): past the budget.
  auto l2 = LeaseNow("a1");
  ASSERT_TRUE(l2.granted());
  ASSERT_NE(l2.shard().shard_id(), l1.shard().shard_id());
  v1::ShardResult foreign = Succeeded(l2.shard());
  auto* fe = foreign.add_file_edits();
  fe->set_repo("tt-xla");
  fe->set_path("setup.py");
  fe->set_diff("diff --git a/setup.py b/setup.py\n--- a/setup.py\n+++ b/setup.py\n");
  EXPECT_FALSE(CompleteLease("a1", l2, foreign).accepted());
  view = coord_->GetSweep(sweep->id());
  EXPECT_EQ(view->failed_shards(), 2);
  EXPECT_TRUE(view->over_budget());
  EXPECT_FALSE(LeaseNow("a1").granted()) << "a sweep past its budget leases nothing";
  coord_->Tick();
  view = coord_->GetSweep(sweep->id());
  EXPECT_EQ(view->state(), "blocked");
  EXPECT_EQ(metrics_.blocked, 1);
  ASSERT_GE(view->problems_size(), 1);
  EXPECT_THAT(view->problems(view->problems_size() - 1),
              HasSubstr("failure budget spent: 2 shards failed on the farm (max 1"));
  EXPECT_THAT(view->problems(view->problems_size() - 1),
              HasSubstr(util::StrCat(": ", l1.shard().shard_id(), ", ", l2.shard().shard_id(),
                                     ", so no more shards")));
  EXPECT_THAT(view->problems(view->problems_size() - 1), HasSubstr("does not count"));

  // Derived from the stored records (the attempts): a restart keeps it stopped.
  coord_.reset();
  Make();
  ASSERT_TRUE(coord_->Recover().ok());
  RegisterAgent("a1", "n150");
  EXPECT_TRUE(coord_->GetSweep(sweep->id())->over_budget());
  EXPECT_EQ(coord_->GetSweep(sweep->id())->failed_shards(), 2);
  EXPECT_FALSE(LeaseNow("a1").granted());

  // A person sets a budget above the failed shards (a budget at or below them is refused).
  auto low = coord_->ResumeSweep(sweep->id(), 2, "agents replaced", operator_);
  ASSERT_FALSE(low.ok());
  EXPECT_THAT(low.status().message(), HasSubstr("above the sweep's 2 failed shards"));
  auto resumed = coord_->ResumeSweep(sweep->id(), 5, "agents replaced", operator_);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_FALSE(resumed->over_budget());
  EXPECT_EQ(resumed->max_failed_shards(), 5);
  clock_.Advance(options_.backoff_max);  // the failed shards' backoff
  auto l3 = LeaseNow("a1");
  ASSERT_TRUE(l3.granted()) << "leasing again";
  CompleteLease("a1", l3, Succeeded(l3.shard()));
  auto audit = store_->AuditLog(10);
  ASSERT_TRUE(audit.ok());
  bool audited = false;
  for (const auto& a : *audit) {
    audited |= a.action == "resume_sweep" && a.reason.find("1 -> 5") != std::string::npos;
  }
  EXPECT_TRUE(audited);
  // The new budget is stored with the sweep.
  coord_.reset();
  Make();
  ASSERT_TRUE(coord_->Recover().ok());
  EXPECT_EQ(coord_->GetSweep(sweep->id())->max_failed_shards(), 5);
}

// A crash among passes is the model's, not the device's: it does not count.
TEST_F(CoordinatorTest, OneCrashAmongPassesIsNotAFailedShard) {
  RegisterAgent("a1", "n150");
  v1::StartSweepRequest req = WeeklyRequest("");
  req.set_max_failed_shards(1);
  auto sweep = coord_->StartSweep(req, operator_);
  ASSERT_TRUE(sweep.ok());
  for (int i = 0; i < 3; ++i) {
    auto lease = LeaseNow("a1");
    ASSERT_TRUE(lease.granted()) << i;
    v1::ShardResult r = Succeeded(lease.shard());
    if (r.entries_size() > 1) r.mutable_entries(0)->set_verdict("crash");
    CompleteLease("a1", lease, r);
  }
  EXPECT_EQ(coord_->GetSweep(sweep->id())->failed_shards(), 0);
}

// Incremental sweeps (docs/farm.md, "Incremental sweeps"): an unchanged repository carries
// every loader and leases nothing; one changed entry re-runs only its loader; the carry
// survives a restart; `since` must name a finished sweep of the same repository.
TEST_F(CoordinatorTest, AnIncrementalSweepRunsOnlyTheLoadersWhoseInputsChanged) {
  testing::TempDir tmp;
  ASSERT_NO_FATAL_FAILURE(OpenFileStore(tmp.path() / "state.db", false));
  inputs_ = InputTrees{};
  inputs_->shared = "shared-0";
  inputs_->forge_dirs = {{"third_party/tt_forge_models/a/pytorch", "tree-a"},
                         {"third_party/tt_forge_models/b/pytorch", "tree-b"},
                         {"third_party/tt_forge_models/c/pytorch", "tree-c"}};
  RegisterAgent("n", "n150");
  const v1::Sweep first = Start();
  EXPECT_EQ(Drain("n"), 3);
  ASSERT_EQ(coord_->GetSweep(first.id())->state(), "succeeded");

  v1::StartSweepRequest req;
  req.set_repo_path("/fake/tt-xla");
  req.set_incremental(true);
  auto second = coord_->StartSweep(req, operator_);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->carry().base(), first.id());
  EXPECT_EQ(second->carry().loaders(), 3);
  EXPECT_EQ(second->carry().shards(), 3);
  EXPECT_EQ(second->carry().entries(), 4);
  EXPECT_EQ(second->carry().rerun_loaders(), 0);
  EXPECT_FALSE(LeaseNow("n").granted()) << "nothing to run";
  EXPECT_EQ(coord_->GetSweep(second->id())->state(), "succeeded");
  EXPECT_EQ(coord_->Results(second->id())->size(), 3u);

  // b's loader tree changes: b runs again, a and c are carried from the first sweep.
  inputs_->forge_dirs["third_party/tt_forge_models/b/pytorch"] = "tree-b2";
  auto third = coord_->StartSweep(req, operator_);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(third->carry().base(), second->id()) << "the latest succeeded sweep";
  EXPECT_EQ(third->carry().loaders(), 2);
  EXPECT_EQ(third->carry().rerun_loaders(), 1);
  EXPECT_EQ(third->state(), "running");
  auto lease = LeaseNow("n");
  ASSERT_TRUE(lease.granted());
  EXPECT_EQ(lease.shard().loader(), "third_party/tt_forge_models/b/pytorch/loader.py");
  EXPECT_EQ(lease.shard().shard_id(), third->id() + "-s001");
  EXPECT_FALSE(lease.shard().has_carried_from());
  EXPECT_FALSE(LeaseNow("n").granted());

  // `since` is checked before anything is planned.
  v1::StartSweepRequest since = req;
  since.set_since("sw-0042");
  EXPECT_TRUE(absl::IsNotFound(coord_->StartSweep(since, operator_).status()));
  since.set_since(third->id());
  auto running = coord_->StartSweep(since, operator_);
  EXPECT_TRUE(absl::IsFailedPrecondition(running.status())) << running.status();
  // Another repository (the fake reader reads the same files whatever it is asked).
  since.set_since(first.id());
  since.clear_repo_path();
  since.set_git_url("https://example.invalid/tt-xla.git");
  auto other = coord_->StartSweep(since, operator_);
  EXPECT_TRUE(absl::IsInvalidArgument(other.status())) << other.status();

  // Restart: the carried shards and results come back, and b's result finishes the sweep.
  ASSERT_NO_FATAL_FAILURE(OpenFileStore(tmp.path() / "state.db", true));
  auto recovered = coord_->GetSweep(third->id());
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(recovered->carry().loaders(), 2);
  EXPECT_EQ(recovered->shards_by_state().at("succeeded"), 2);
  int carried = 0;
  v1::ListShardsRequest list;
  list.set_sweep_id(third->id());
  auto shards = coord_->ListShards(list);
  ASSERT_TRUE(shards.ok()) << shards.status();
  for (const auto& s : *shards) {
    if (!s.has_carried_from()) continue;
    ++carried;
    EXPECT_EQ(s.carried_from().sweep_id(), first.id()) << "the sweep that ran it";
    EXPECT_EQ(s.state(), "succeeded");
  }
  EXPECT_EQ(carried, 2);
  EXPECT_FALSE(Beat("n", {lease.lease_id()}).reregister());
  ASSERT_TRUE(CompleteLease("n", lease, Succeeded(lease.shard())).accepted());
  EXPECT_EQ(coord_->GetSweep(third->id())->state(), "succeeded");
  EXPECT_EQ(coord_->Results(third->id())->size(), 3u);
}

// Without --since, the base is the latest succeeded sweep whose work can be carried: a later one
// with other archs (or executor, or no playbook in common) is passed over, and the notes say so.
TEST_F(CoordinatorTest, AnIncrementalSweepCarriesFromTheLatestSweepWithTheSameArchs) {
  inputs_ = InputTrees{};
  inputs_->shared = "shared-0";
  inputs_->forge_dirs = {{"third_party/tt_forge_models/a/pytorch", "tree-a"},
                         {"third_party/tt_forge_models/b/pytorch", "tree-b"},
                         {"third_party/tt_forge_models/c/pytorch", "tree-c"}};
  RegisterAgent("n", "n150");
  RegisterAgent("p", "p150");
  const v1::Sweep on_n150 = Start({"n150"});
  EXPECT_EQ(Drain("n"), 3);
  const v1::Sweep on_p150 = Start({"p150"});
  EXPECT_EQ(Drain("p"), 3);
  ASSERT_EQ(coord_->GetSweep(on_p150.id())->state(), "succeeded");

  v1::StartSweepRequest req;
  req.set_repo_path("/fake/tt-xla");
  req.add_archs("n150");
  req.set_incremental(true);
  auto next = coord_->StartSweep(req, operator_);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->carry().base(), on_n150.id());
  EXPECT_EQ(next->carry().loaders(), 3) << "everything carried";
  const std::string notes = util::StrJoin(next->notes(), "\n");
  EXPECT_THAT(notes, HasSubstr(util::StrCat("carries from ", on_n150.id())));
  EXPECT_THAT(notes,
              HasSubstr(util::StrCat("passed over ", on_p150.id(), " (archs p150, not n150)")));

  // No sweep with these archs: nothing is carried, and the notes say which were looked at.
  req.clear_archs();
  req.add_archs("n150");
  req.add_archs("p150");
  auto both = coord_->StartSweep(req, operator_);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->carry().base(), "");
  EXPECT_THAT(util::StrJoin(both->notes(), "\n"),
              HasSubstr("no earlier succeeded sweep of this repository has the same archs"));

  // An explicit --since is honoured, and says it can carry nothing.
  req.set_since(on_p150.id());
  auto since = coord_->StartSweep(req, operator_);
  ASSERT_TRUE(since.ok()) << since.status();
  EXPECT_EQ(since->carry().base(), on_p150.id());
  EXPECT_THAT(util::StrJoin(since->notes(), "\n"),
              HasSubstr("ran archs p150, not n150,p150: none of its results can be carried"));
}

TEST_F(CoordinatorTest, AnIncrementalSweepWithoutHashesOrBaseRunsEverything) {
  RegisterAgent("n", "n150");
  v1::StartSweepRequest req;
  req.set_repo_path("/fake/tt-xla");
  req.set_incremental(true);
  auto lone = coord_->StartSweep(req, operator_);
  ASSERT_TRUE(lone.ok()) << lone.status();
  EXPECT_EQ(lone->carry().base(), "");
  bool noted = false;
  for (const auto& n : lone->notes())
    noted |= n.find("no earlier succeeded sweep") != std::string::npos;
  EXPECT_TRUE(noted);
  EXPECT_EQ(Drain("n"), 3);
  // No input trees were read (inputs_ unset): no entry has a hash, nothing is carried.
  auto again = coord_->StartSweep(req, operator_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->carry().base(), lone->id());
  EXPECT_EQ(again->carry().loaders(), 0);
  EXPECT_EQ(again->carry().rerun_loaders(), 3);
  EXPECT_EQ(Drain("n"), 3);
}

// A nightly sweep (docs/nightly.md) through the front door: with --no-confirm every candidate is
// decided when planned, so the sweep ends at once without a lease; its intake and results
// survive a restart; and it is another kind of work: a playbook sweep's incremental base and
// previous week are playbook sweeps only.
TEST_F(CoordinatorTest, ANightlySweepIsDecidedWhenPlannedAndIsNoPlaybookSweepsBase) {
  testing::TempDir tmp;
  ASSERT_NO_FATAL_FAILURE(OpenFileStore(tmp.path() / "state.db", false));
  RegisterAgent("n", "n150");
  const v1::Sweep playbooks = Start();
  EXPECT_EQ(Drain("n"), 3);

  v1::StartSweepRequest req;
  req.set_repo_path("/fake/tt-xla");
  req.mutable_nightly_options()->set_no_confirm(true);
  v1::NightlyRecord failed;
  failed.set_test_function("test_all_models_torch");
  failed.set_key("d/pytorch-single_device-training");
  failed.set_arch("n150");
  failed.set_outcome(v1::NightlyRecord::FAILED);
  failed.set_bringup_status("FAILED_RUNTIME");
  failed.set_error_message("TT_FATAL @ buffer.cpp:12: bad page");
  *req.add_nightly()->add_records() = failed;
  auto nightly = coord_->StartSweep(req, operator_);
  ASSERT_TRUE(nightly.ok()) << nightly.status();
  EXPECT_EQ(nightly->playbooks(0), "nightly");
  EXPECT_EQ(nightly->nightly().candidates().at("demote_xfail"), 1);
  EXPECT_EQ(coord_->GetSweep(nightly->id())->state(), "succeeded");
  EXPECT_FALSE(LeaseNow("n").granted()) << "nothing to confirm";
  auto results = coord_->Results(nightly->id());
  ASSERT_TRUE(results.ok());
  ASSERT_EQ(results->size(), 1u);
  EXPECT_EQ(results->at(0).result.entries(0).nightly().decision(), "no_confirm");
  EXPECT_TRUE(coord_->SweepInfo(nightly->id())->request.nightly().empty())
      << "the runs are not kept, their digest is";

  ASSERT_NO_FATAL_FAILURE(OpenFileStore(tmp.path() / "state.db", true));
  auto recovered = coord_->GetSweep(nightly->id());
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(recovered->nightly().candidates().at("demote_xfail"), 1);
  EXPECT_EQ(coord_->Results(nightly->id())->size(), 1u);

  v1::StartSweepRequest incremental;
  incremental.set_repo_path("/fake/tt-xla");
  incremental.set_incremental(true);
  auto again = coord_->StartSweep(incremental, operator_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->carry().base(), playbooks.id()) << "not the later nightly sweep";
}

// A nightly sweep whose runs came by UploadNightly (docs/nightly.md, "How the runs reach the
// coordinator"): CheckSweep starts nothing; StartSweep takes the caller's upload once, keeps the
// same digest as the runs inline, and a repeated request id compares it.
TEST_F(CoordinatorTest, ANightlySweepTakesItsUploadOnceAndKeepsTheRunsDigest) {
  v1::StartSweepRequest req;
  req.set_repo_path("/fake/tt-xla");
  req.set_request_id("nightly-1");
  req.mutable_nightly_options()->set_no_confirm(true);
  v1::NightlyRun run;
  run.set_label("night-1");
  v1::NightlyRecord* failed = run.add_records();
  failed->set_test_function("test_all_models_torch");
  failed->set_key("d/pytorch-single_device-training");
  failed->set_arch("n150");
  failed->set_outcome(v1::NightlyRecord::FAILED);
  failed->set_bringup_status("FAILED_RUNTIME");

  v1::CheckSweepRequest check;
  *check.mutable_sweep() = req;
  check.set_nightly_to_come(true);
  auto checked = coord_->CheckSweep(check, operator_);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(checked->ttxla_commit(), std::string(40, 'a'));
  EXPECT_TRUE(checked->id().empty());
  EXPECT_TRUE(coord_->ListSweeps().empty()) << "a check starts nothing";
  check.set_nightly_to_come(false);
  EXPECT_THAT(std::string(coord_->CheckSweep(check, operator_).status().message()),
              ::testing::HasSubstr("nightly_options are for a nightly sweep"));

  // Uploads run as one chunk (its header and its record) and the last chunk.
  auto upload = [&](const v1::NightlyRun& r, const Caller& who) {
    auto id = coord_->uploads().Begin(who.name);
    EXPECT_TRUE(id.ok()) << id.status();
    v1::NightlyChunk chunk;
    chunk.set_begin_run(true);
    chunk.set_run_records(r.records_size());
    *chunk.mutable_run() = r;
    EXPECT_TRUE(coord_->uploads().Add(*id, chunk).ok());
    v1::NightlyChunk last;
    last.set_last(true);
    last.set_runs(1);
    EXPECT_TRUE(coord_->uploads().Add(*id, last).ok());
    auto done = coord_->uploads().Finish(*id);
    EXPECT_TRUE(done.ok()) << done.status();
    return done.ok() ? *done : v1::NightlyUpload{};
  };
  const v1::NightlyUpload first = upload(run, operator_);
  Caller other = operator_;
  other.name = "someone-else";
  v1::StartSweepRequest by_upload = req;
  by_upload.set_nightly_upload(first.upload_id());
  EXPECT_TRUE(absl::IsNotFound(coord_->StartSweep(by_upload, other).status()))
      << "an upload is its caller's";
  auto sweep = coord_->StartSweep(by_upload, operator_);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->nightly().records(), 1);
  const SweepRecord kept = *coord_->SweepInfo(sweep->id());
  EXPECT_EQ(kept.request.nightly_digest(), first.nightly_digest());
  EXPECT_TRUE(kept.request.nightly_upload().empty());
  EXPECT_EQ(coord_->uploads().held(), 0) << "taken";
  auto twice = coord_->StartSweep(by_upload, operator_);
  EXPECT_TRUE(absl::IsNotFound(twice.status())) << twice.status();

  // The same runs inline under the same request id: the same sweep (same digest).
  v1::StartSweepRequest inline_runs = req;
  *inline_runs.add_nightly() = run;
  auto same = coord_->StartSweep(inline_runs, operator_);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->id(), sweep->id());
  EXPECT_TRUE(same->existing());
  // A check of the retry passes (the runs are compared once they came) ...
  check.set_nightly_to_come(true);
  auto recheck = coord_->CheckSweep(check, operator_);
  ASSERT_TRUE(recheck.ok()) << recheck.status();
  EXPECT_TRUE(recheck->existing());
  // ... but other runs under that id are refused, naming the digest.
  run.mutable_records(0)->set_arch("p150");
  v1::StartSweepRequest other_runs = req;
  other_runs.set_nightly_upload(upload(run, operator_).upload_id());
  auto refused = coord_->StartSweep(other_runs, operator_);
  EXPECT_TRUE(absl::IsAlreadyExists(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("nightly_digest"));
  EXPECT_EQ(coord_->uploads().held(), 0) << "taken, though no sweep started";
}

}  // namespace
}  // namespace triage::coord
