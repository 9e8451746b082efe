// Which outcomes go on to verification: read from the disposition, and from the verdict name
// only for outcomes recorded without one (docs/playbooks.md, "Dispositions").

#include "coordinator/planning/waves.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace triage::coord {
namespace {

v1::EntryOutcome Outcome(const std::string& verdict, v1::EntryOutcome::Disposition d) {
  v1::EntryOutcome o;
  o.set_verdict(verdict);
  o.set_disposition(d);
  return o;
}

TEST(Waves, NeedsVerificationReadsTheDisposition) {
  struct Row {
    std::string verdict;
    v1::EntryOutcome::Disposition disposition;
    bool needs_verification;
    bool awaits_verification;
  };
  const Row rows[] = {
      // With a disposition the verdict name does not matter.
      {"pass", v1::EntryOutcome::DONE, true, false},
      {"escalate", v1::EntryOutcome::DONE, true, false},
      {"command", v1::EntryOutcome::DONE, true, false},
      {"ready", v1::EntryOutcome::VERIFY, true, true},
      {"pass", v1::EntryOutcome::VERIFY, true, true},
      {"needs_unpack", v1::EntryOutcome::NEEDS_PLAYBOOK, false, false},
      {"pass", v1::EntryOutcome::NEEDS_PLAYBOOK, false, false},
      {"no_fix", v1::EntryOutcome::NEEDS_REVIEW, false, false},
      {"", v1::EntryOutcome::NEEDS_REVIEW, false, false},
      {"ready", v1::EntryOutcome::NEEDS_REVIEW, false, false},
      // Without one (older agents): the verdict names.
      {"pass", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, true, false},
      {"command", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, true, false},
      {"ready", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, true, true},
      {"", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, true, false},
      {"not_reproduced", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
      {"escalate", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
      {"needs_unpack", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
      {"gate_misfired", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
      {"no_fix", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
      {"probe_failed", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
      {"conflict", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
      {"fix_failed", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
      {"no_evidence", v1::EntryOutcome::DISPOSITION_UNSPECIFIED, false, false},
  };
  for (const Row& r : rows) {
    const auto o = Outcome(r.verdict, r.disposition);
    const std::string what = r.verdict + " / " + v1::EntryOutcome::Disposition_Name(r.disposition);
    EXPECT_EQ(NeedsVerification(o), r.needs_verification) << what;
    EXPECT_EQ(AwaitsVerification(o), r.awaits_verification) << what;
  }
}

// A registry line joins the registry-global waves whichever playbook proposed it: here the
// unpack_forward_output step of a dtype_bfloat16 shard's chain (docs/playbooks.md, "Chaining").
TEST(Waves, ARegistryLineFromAChainedPlaybookReverifiesTheClassElsewhere) {
  auto shard = [](const std::string& id, const std::string& playbook, const std::string& model) {
    ShardRecord s;
    s.id = id;
    s.sweep_id = "sw";
    s.archs = {"n150"};
    s.spec.set_shard_id(id);
    s.spec.set_sweep_id("sw");
    s.spec.set_playbook(playbook);
    s.spec.set_loader("third_party/tt_forge_models/" + model + "/pytorch/loader.py");
    s.spec.set_wave(1);
    s.spec.set_phase(v1::PHASE_FULL);
    s.spec.set_arch("n150");
    auto* e = s.spec.add_entries();
    e->set_key(model + "/pytorch-Base-single_device-training");
    e->set_file("t.yaml");
    return s;
  };
  auto result = [](const ShardRecord& s, v1::EntryOutcome::Disposition d) {
    ResultRecord r;
    r.shard_id = s.id;
    r.sweep_id = "sw";
    auto* o = r.result.add_entries();
    o->set_key(s.spec.entries(0).key());
    o->set_file("t.yaml");
    o->set_output_class("MiniRankerOutput");
    o->set_disposition(d);
    return r;
  };
  const ShardRecord chained = shard("sw-s001", "dtype_bfloat16", "ranker_mini");
  const ShardRecord other = shard("sw-s002", "unpack_forward_output", "ranker2_mini");
  std::vector<ResultRecord> results = {result(chained, v1::EntryOutcome::DONE),
                                       result(other, v1::EntryOutcome::NEEDS_REVIEW)};
  results[0].result.mutable_entries(0)->add_playbooks("dtype_bfloat16");
  results[0].result.mutable_entries(0)->add_playbooks("unpack_forward_output");
  auto* op = results[0].result.add_registry_ops();
  op->set_kind(v1::RegistryOp::ADD);
  op->set_cls("MiniRankerOutput");
  op->set_attr("logits");

  const WavePlan plan = PlanNextWave("sw", {&chained, &other}, results, {"n150"}, false, 3);
  ASSERT_EQ(plan.merged.size(), 1u);
  EXPECT_EQ(plan.merged[0].cls(), "MiniRankerOutput");
  ASSERT_EQ(plan.shards.size(), 1u) << "the chain's own entry was verified with its line";
  const v1::ShardSpec& next = plan.shards[0].spec;
  EXPECT_EQ(next.wave(), 2);
  EXPECT_EQ(next.playbook(), "unpack_forward_output");
  ASSERT_EQ(next.entries_size(), 1);
  EXPECT_EQ(next.entries(0).key(), "ranker2_mini/pytorch-Base-single_device-training");
  ASSERT_EQ(next.pre_registry_size(), 1);
  EXPECT_EQ(next.pre_registry(0).attr(), "logits");
}

// A next wave's shards expect their share of the origin's estimate: the entries verified again,
// and kProbeShare of it for a probe phase (the origin itself may be a probe phase). Each shard
// pre-applies its own loader's edits, not another loader's.
TEST(Waves, NextWaveEstimatesFollowTheEntriesAndThePhase) {
  auto probe = [](const std::string& id, const std::string& model, int entries, double expected) {
    ShardRecord s;
    s.id = id;
    s.sweep_id = "sw";
    s.cpu_ok = true;
    s.expected_seconds = expected;
    s.spec.set_shard_id(id);
    s.spec.set_sweep_id("sw");
    s.spec.set_playbook("unpack_forward_output");
    s.spec.set_loader("third_party/tt_forge_models/" + model + "/pytorch/loader.py");
    s.spec.set_wave(1);
    s.spec.set_phase(v1::PHASE_PROBE);
    for (int i = 0; i < entries; ++i) {
      auto* e = s.spec.add_entries();
      e->set_key(model + "/pytorch-V" + std::to_string(i) + "-single_device-training");
      e->set_file("t.yaml");
    }
    return s;
  };
  // a: four entries, 0.2 x 1000 s; one of them returns the class that gets a line. b proposes it.
  const ShardRecord a = probe("sw-s001", "a", 4, 200);
  const ShardRecord b = probe("sw-s002", "b", 1, 20);
  std::vector<ResultRecord> results(2);
  for (int i = 0; i < 2; ++i) {
    const ShardRecord& s = i == 0 ? a : b;
    results[i].shard_id = s.id;
    results[i].sweep_id = "sw";
    for (const auto& e : s.spec.entries()) {
      auto* o = results[i].result.add_entries();
      o->set_key(e.key());
      o->set_file(e.file());
      o->set_disposition(v1::EntryOutcome::VERIFY);
      o->set_output_class(&e == &s.spec.entries(0) ? "SharedOutput" : "OwnOutput");
    }
    auto* fe = results[i].result.add_file_edits();
    fe->set_repo("tt_forge_models");
    fe->set_path(i == 0 ? "a/pytorch/loader.py" : "b/pytorch/loader.py");
  }
  auto* op = results[1].result.add_registry_ops();
  op->set_kind(v1::RegistryOp::ADD);
  op->set_cls("SharedOutput");
  op->set_attr("logits");

  const WavePlan plan = PlanNextWave("sw", {&a, &b}, results, {"n150"}, true, 3);
  ASSERT_EQ(plan.shards.size(), 2u) << "a probe and a verification of a's one entry";
  EXPECT_EQ(plan.shards[0].spec.phase(), v1::PHASE_PROBE);
  EXPECT_DOUBLE_EQ(plan.shards[0].expected_seconds, 1000 * 0.25 * 0.2);
  EXPECT_EQ(plan.shards[1].spec.phase(), v1::PHASE_VERIFY);
  EXPECT_DOUBLE_EQ(plan.shards[1].expected_seconds, 1000 * 0.25);
  for (const auto& s : plan.shards) {
    ASSERT_EQ(s.spec.pre_apply_size(), 1);
    EXPECT_EQ(s.spec.pre_apply(0).path(), "a/pytorch/loader.py");
  }
}

// Which entries of a queued verification the next registry wave will most likely verify again
// (they wait behind the others, or move to a shard of their own): table cases, no Coordinator.
TEST(AtRisk, EntriesWhoseClassGotALineElsewhereInTheirWave) {
  auto verify = [](int wave, std::vector<std::string> classes) {
    v1::ShardSpec s;
    s.set_phase(v1::PHASE_VERIFY);
    s.set_wave(wave);
    for (const auto& c : classes) s.add_entries()->set_output_class(c);
    return s;
  };
  const std::set<std::pair<int, std::string>> proposed = {{1, "Out"}, {2, "Later"}};
  using V = std::vector<bool>;
  struct Case {
    const char* name;
    v1::ShardSpec spec;
    bool enabled;
    std::set<std::string> fresh;
    V want;
  };
  v1::ShardSpec pre = verify(1, {"Out", "Other"});
  pre.add_pre_registry()->set_cls("Out");
  v1::ShardSpec probe = verify(1, {"Out"});
  probe.set_phase(v1::PHASE_PROBE);
  v1::ShardSpec carried = verify(1, {"Out"});
  carried.mutable_carried_from()->set_sweep_id("sw-0001");
  const Case cases[] = {
      {"a line for its class in its wave",
       verify(1, {"Out", "Other", ""}),
       true,
       {},
       V{true, false, false}},
      {"a line of another wave", verify(1, {"Later"}), true, {}, V{false}},
      {"a fresh line, not yet applied", verify(1, {"New", "Other"}), true, {"New"}, V{true, false}},
      {"the line is pre-applied", pre, true, {}, V{false, false}},
      {"early waves off", verify(1, {"Out"}), false, {}, V{false}},
      {"a probe phase", probe, true, {}, V{false}},
      {"a carried shard", carried, true, {}, V{false}},
      {"the last wave", verify(3, {"Out"}), true, {"Out"}, V{false}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(AtRisk(c.spec, c.enabled, 3, proposed, c.fresh), c.want) << c.name;
  }
}

// Which entries of a released verification run apart (docs/farm.md, "Long entries run apart").
TEST(LongEntriesToSplit, RecordedLongEntriesLeaveAShardOverItsFairShare) {
  // Entries by expected seconds; a negative one is an estimate of that many seconds.
  auto verify = [](std::vector<double> seconds) {
    v1::ShardSpec s;
    s.set_phase(v1::PHASE_VERIFY);
    for (double x : seconds) {
      auto* e = s.add_entries();
      e->set_expected_seconds(x < 0 ? -x : x);
      e->set_estimated(x < 0);
    }
    return s;
  };
  struct Case {
    const char* name;
    v1::ShardSpec spec;
    double fair_share;
    double limit;
    std::vector<int> want;
  };
  v1::ShardSpec probe = verify({900, 10});
  probe.set_phase(v1::PHASE_PROBE);
  const Case cases[] = {
      {"one long entry", verify({10, 900, 20}), 100, 600, {1}},
      {"two, from the last", verify({700, 10, 900}), 100, 600, {2, 0}},
      {"every entry long: the first stays", verify({700, 800, 900}), 100, 600, {2, 1}},
      {"an estimate is not known to be long", verify({10, -900}), 100, 600, {}},
      {"at the limit is not over it", verify({600, 10}), 100, 600, {}},
      {"within its fair share", verify({10, 900}), 2000, 600, {}},
      {"no limit", verify({10, 900}), 100, 0, {}},
      {"one entry", verify({900}), 100, 600, {}},
      {"not a verify phase", probe, 100, 600, {}},
  };
  for (const auto& c : cases) {
    double seconds = 0;
    for (const auto& e : c.spec.entries()) seconds += e.expected_seconds();
    EXPECT_EQ(LongEntriesToSplit(c.spec, seconds, c.fair_share, c.limit), c.want) << c.name;
  }
}

// A verification the next wave verifies again gives up those entries (docs/farm.md, "Registry
// waves start early").
TEST(DropEntriesVerifiedAgain, KeepsTheRestOrEndsTheShardSuperseded) {
  auto shard = [] {
    ShardRecord u;
    u.spec.set_phase(v1::PHASE_VERIFY);
    u.spec.set_wave(1);
    for (const char* k : {"a", "b", "c", "d"}) {
      auto* e = u.spec.add_entries();
      e->set_file("f.yaml");
      e->set_key(k);
    }
    u.expected_seconds = 400;
    u.state = ShardState::kQueued;
    return u;
  };
  ShardRecord none = shard();
  EXPECT_FALSE(DropEntriesVerifiedAgain(none, {"f.yaml\nx", "g.yaml\na"}));
  EXPECT_EQ(none.spec.entries_size(), 4);
  EXPECT_EQ(none.expected_seconds, 400);

  ShardRecord some = shard();
  EXPECT_TRUE(DropEntriesVerifiedAgain(some, {"f.yaml\nb", "f.yaml\nd"}));
  ASSERT_EQ(some.spec.entries_size(), 2);
  EXPECT_EQ(some.spec.entries(0).key(), "a");
  EXPECT_EQ(some.spec.entries(1).key(), "c");
  EXPECT_EQ(some.expected_seconds, 200) << "follows the entries left";
  EXPECT_EQ(some.state, ShardState::kQueued);

  ShardRecord all = shard();
  EXPECT_TRUE(DropEntriesVerifiedAgain(all, {"f.yaml\na", "f.yaml\nb", "f.yaml\nc", "f.yaml\nd"}));
  EXPECT_EQ(all.spec.entries_size(), 0);
  EXPECT_EQ(all.state, ShardState::kSucceeded);
  EXPECT_EQ(all.last_error,
            "superseded: wave 2 verifies its entries again with the merged registry "
            "lines");
}

// Gating ahead (docs/farm.md, "Registry waves start early"): the longest verification per loader
// that the next wave repeats, and the first phases that take it as what they gate.
TEST(GateAhead, TheLongestVerificationAgainPerLoaderGoesToItsQueuedFirstPhases) {
  auto shard = [](const std::string& sweep, const std::string& loader, v1::ShardPhase phase,
                  int wave, double seconds, bool superseded, ShardState state) {
    ShardRecord s;
    s.sweep_id = sweep;
    s.spec.set_loader(loader);
    s.spec.set_phase(phase);
    s.spec.set_wave(wave);
    s.expected_seconds = seconds;
    s.likely_superseded = superseded;
    s.state = state;
    return s;
  };
  const auto q = ShardState::kQueued;
  const std::vector<ShardRecord> shards = {
      shard("sw-1", "a", v1::PHASE_VERIFY, 1, 300, true, q),
      shard("sw-1", "a", v1::PHASE_VERIFY, 1, 900, true, q),                     // a's longest
      shard("sw-1", "a", v1::PHASE_VERIFY, 1, 5000, false, q),                   // not repeated
      shard("sw-1", "b", v1::PHASE_VERIFY, 1, 700, true, ShardState::kRunning),  // not queued
      shard("sw-2", "c", v1::PHASE_VERIFY, 1, 400, true, q),                     // another sweep's
      shard("sw-1", "d", v1::PHASE_VERIFY, 1, 200, true, q),
  };
  EXPECT_EQ(VerificationsAgainByLoader(shards, "sw-1"),
            (std::map<std::string, double>{{"a", 900}, {"d", 200}}));
  EXPECT_TRUE(VerificationsAgainByLoader({}, "sw-1").empty());

  struct Row {
    ShardRecord q;
    bool takes;
  };
  ShardRecord ahead = shard("sw-1", "a", v1::PHASE_PROBE, 1, 60, false, q);
  ahead.spec.set_ahead(true);
  ShardRecord gating_more = shard("sw-1", "a", v1::PHASE_PROBE, 1, 60, false, q);
  gating_more.gates_seconds = 1200;
  ShardRecord gating_less = gating_more;
  gating_less.gates_seconds = 100;
  const std::vector<Row> rows = {
      {shard("sw-1", "a", v1::PHASE_PROBE, 1, 60, false, q), true},
      {shard("sw-1", "a", v1::PHASE_FULL, 1, 60, false, q), true},
      {shard("sw-1", "a", v1::PHASE_VERIFY, 1, 60, false, q), false},  // gates nothing
      {shard("sw-1", "a", v1::PHASE_PROBE, 2, 60, false, q), false},   // another wave
      {shard("sw-1", "a", v1::PHASE_PROBE, 1, 60, false, ShardState::kLeased), false},
      {ahead, false},
      {gating_more, false},
      {gating_less, true},
  };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(TakesGate(rows[i].q, 1, 900), rows[i].takes) << "row " << i;
  }
}

TEST(PlanAhead, OnlyLoadersWithAClassThatGotALine) {
  const std::map<std::string, std::set<std::string>> classes = {
      {"a", {"Logits", "Tuple"}}, {"b", {"Tensor"}}, {"c", {}}};
  const std::set<std::pair<int, std::string>> proposed = {{1, "Tuple"}, {2, "Other"}};
  EXPECT_EQ(LoadersWithLines({"a", "b", "c", "unknown"}, classes, proposed),
            (std::set<std::string>{"a"}));
  EXPECT_TRUE(LoadersWithLines({"a"}, classes, {}).empty());
  EXPECT_TRUE(LoadersWithLines({}, classes, proposed).empty());
  EXPECT_EQ(LoadersWithLines({"a", "b"}, classes, {{3, "Tensor"}, {1, "Logits"}}),
            (std::set<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace triage::coord
