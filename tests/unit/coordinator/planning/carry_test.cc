// Incremental sweeps (docs/farm.md, "Incremental sweeps"): what an entry's input hash covers,
// which loaders an incremental sweep carries from its base, and how the copies are renumbered.

#include "coordinator/planning/carry.h"

#include <set>

#include "common/registry/registry_union.h"
#include "coordinator/planning/input_hash.h"
#include "coordinator/planning/waves.h"
#include "gtest/gtest.h"

namespace triage::coord {
namespace {

using Objects = std::map<std::string, git::Git::TreeObject>;

Objects TtxlaObjects() {
  return {{"", {"tree", "root0"}},
          {"tests", {"tree", "t0"}},
          {"tests/runner", {"tree", "r0"}},
          {"tests/runner/test_models.py", {"blob", "models0"}},
          {"tests/runner/conftest.py", {"blob", "conf0"}},
          {"tests/runner/test_config", {"tree", "cfg0"}},
          {"tests/runner/test_config/torch", {"tree", "cfgt0"}},
          {"tests/runner/test_config/torch/a.yaml", {"blob", "yaml0"}},
          {"tests/runner-notes.txt", {"blob", "n0"}},
          {"tests/torch/test_op.py", {"blob", "op0"}},
          {"pytest.ini", {"blob", "ini0"}},
          {"README.md", {"blob", "readme0"}}};
}

Objects ForgeObjects() {
  return {{"", {"tree", "f0"}},
          {"training_utils.py", {"blob", "tu0"}},
          {"base.py", {"blob", "base0"}},
          {"bert", {"tree", "bert0"}},
          {"bert/pytorch", {"tree", "bertpt0"}},
          {"bert/pytorch/loader.py", {"blob", "bertld0"}},
          {"vit", {"tree", "vit0"}},
          {"vit/pytorch", {"tree", "vitpt0"}},
          {"tools", {"tree", "tools0"}}};
}

TEST(InputTrees, SharedCoversTheRunnerButNotItsYamlNorOtherTests) {
  const InputTrees base = InputTreesFrom(TtxlaObjects(), ForgeObjects());
  EXPECT_EQ(base.forge_dirs.at("third_party/tt_forge_models/bert/pytorch"), "bertpt0");
  EXPECT_EQ(base.shared.size(), 64u);
  const std::set<std::string> lines(base.shared_lines.begin(), base.shared_lines.end());
  EXPECT_TRUE(lines.count("tests/runner/test_models.py models0"));
  EXPECT_TRUE(lines.count("pytest.ini ini0"));
  EXPECT_TRUE(lines.count("third_party/tt_forge_models/training_utils.py tu0"));
  EXPECT_TRUE(lines.count("third_party/tt_forge_models/tools tools0"));
  for (const auto& l : lines) {
    EXPECT_EQ(l.find("test_config"), std::string::npos) << l;
    EXPECT_EQ(l.find("bert"), std::string::npos) << l;  // a loader's tree is per entry
    EXPECT_NE(l.rfind("tests/runner ", 0), 0u) << "the runner's tree id covers its YAML: " << l;
  }

  auto changed = [&](Objects ttxla, Objects forge) {
    return InputTreesFrom(ttxla, forge).shared != base.shared;
  };
  Objects yaml = TtxlaObjects();
  yaml["tests/runner/test_config/torch/a.yaml"].id = "yaml1";
  yaml["tests/runner/test_config"].id = "cfg1";
  yaml["tests/runner"].id = "r1";
  EXPECT_FALSE(changed(yaml, ForgeObjects())) << "a YAML edit is hashed per entry";
  Objects other = TtxlaObjects();
  other["tests/torch/test_op.py"].id = "op1";
  other["README.md"].id = "readme1";
  other["tests/runner-notes.txt"].id = "n1";
  EXPECT_FALSE(changed(other, ForgeObjects()));
  Objects runner = TtxlaObjects();
  runner["tests/runner/test_models.py"].id = "models1";
  EXPECT_TRUE(changed(runner, ForgeObjects()));
  Objects ini = TtxlaObjects();
  ini.erase("pytest.ini");
  EXPECT_TRUE(changed(ini, ForgeObjects()));
  Objects registry = ForgeObjects();
  registry["training_utils.py"].id = "tu1";
  EXPECT_TRUE(changed(TtxlaObjects(), registry));
  Objects loader = ForgeObjects();
  loader["bert/pytorch"].id = "bertpt1";
  EXPECT_FALSE(changed(TtxlaObjects(), loader)) << "a loader's tree is per entry";
}

TEST(InputTrees, AnEntryHashChangesWithEachOfItsInputs) {
  const InputTrees trees = InputTreesFrom(TtxlaObjects(), ForgeObjects());
  v1::ShardEntry entry;
  entry.set_key("bert/pytorch-Base-single_device-training");
  entry.set_file("tests/runner/test_config/torch/a.yaml");
  entry.set_reason("AttributeError: ...");
  const std::map<std::string, std::string> params = {{"evidence", "/e"}};
  const std::vector<std::string> archs = {"n150", "p150"};
  EntryInputs in;
  in.entry_yaml = "  bert/pytorch-Base-single_device-training:\n    status: X\n";
  in.loader = "third_party/tt_forge_models/bert/pytorch/loader.py";
  in.playbook = "unpack_forward_output";
  in.playbook_version = "3";
  in.executor = "native";
  in.params = &params;
  in.archs = &archs;
  const std::string h = EntryInputHash(trees, entry, in);
  EXPECT_EQ(h, EntryInputHash(trees, entry, in)) << "deterministic";

  auto differs = [&](auto change) {
    InputTrees t = trees;
    v1::ShardEntry e = entry;
    EntryInputs i = in;
    std::map<std::string, std::string> p = params;
    std::vector<std::string> a = archs;
    i.params = &p;
    i.archs = &a;
    change(t, e, i, p, a);
    return EntryInputHash(t, e, i) != h;
  };
  EXPECT_TRUE(differs([](auto&, auto&, EntryInputs& i, auto&, auto&) {
    i.entry_yaml = "  bert/pytorch-Base-single_device-training:\n    status: Y\n";
  }));
  EXPECT_TRUE(differs([](InputTrees& t, auto&, auto&, auto&, auto&) {
    t.forge_dirs["third_party/tt_forge_models/bert/pytorch"] = "bertpt1";
  }));
  EXPECT_FALSE(differs([](InputTrees& t, auto&, auto&, auto&, auto&) {
    t.forge_dirs["third_party/tt_forge_models/vit/pytorch"] = "vitpt1";
  })) << "another loader's tree";
  EXPECT_TRUE(differs([](InputTrees& t, auto&, auto&, auto&, auto&) { t.shared = "x"; }));
  EXPECT_TRUE(differs(
      [](auto&, v1::ShardEntry& e, auto&, auto&, auto&) { e.set_reason("another reason"); }));
  EXPECT_TRUE(differs([](auto&, v1::ShardEntry& e, auto&, auto&, auto&) { e.add_captures("x"); }));
  EXPECT_TRUE(
      differs([](auto&, auto&, EntryInputs& i, auto&, auto&) { i.playbook_version = "4"; }));
  EXPECT_TRUE(differs([](auto&, auto&, EntryInputs& i, auto&, auto&) { i.executor = "replay"; }));
  EXPECT_TRUE(differs([](auto&, auto&, auto&, auto& p, auto&) { p["evidence"] = "/f"; }));
  EXPECT_TRUE(differs([](auto&, auto&, auto&, auto&, auto& a) {
    a = {"p150", "n150"};
  })) << "the first arch runs the playbook, the others verify";
  EXPECT_TRUE(differs([](auto&, auto&, auto&, auto&, auto& a) { a.pop_back(); }));
  // Length-prefixed fields: moving text from one field to the next is another input.
  EXPECT_TRUE(differs([](auto&, v1::ShardEntry& e, auto&, auto&, auto&) {
    e.set_key("bert/pytorch-Base-single_device-trainin");
    e.set_file("gtests/runner/test_config/torch/a.yaml");
  }));
}

// A sweep of loaders, each FULL on n150 then VERIFY on p150, with hashes "<loader>-h".
struct Sweep {
  std::string id;
  std::vector<ShardRecord> shards;
  std::vector<ResultRecord> results;
};

ShardRecord Shard(const std::string& sweep, int n, const std::string& loader, v1::ShardPhase phase,
                  const std::string& hash, int wave = 1) {
  ShardRecord s;
  s.id = sweep + "-s00" + std::to_string(n);
  s.sweep_id = sweep;
  s.state = ShardState::kSucceeded;
  s.spec.set_shard_id(s.id);
  s.spec.set_sweep_id(sweep);
  s.spec.set_playbook("unpack_forward_output");
  s.spec.set_loader("third_party/tt_forge_models/" + loader + "/pytorch/loader.py");
  s.spec.set_wave(wave);
  s.spec.set_phase(phase);
  s.spec.set_arch(phase == v1::PHASE_FULL ? "n150" : "p150");
  s.spec.set_ttxla_commit("old");
  auto* e = s.spec.add_entries();
  e->set_key(loader + "/pytorch-Base-single_device-training");
  e->set_file("a.yaml");
  e->set_input_hash(hash);
  s.archs = {s.spec.arch()};
  return s;
}

Sweep Planned(const std::string& id, const std::vector<std::pair<std::string, std::string>>& l) {
  Sweep sw;
  sw.id = id;
  int n = 0;
  for (const auto& [loader, hash] : l) {
    sw.shards.push_back(Shard(id, ++n, loader, v1::PHASE_FULL, hash));
    sw.shards.push_back(Shard(id, ++n, loader, v1::PHASE_VERIFY, hash));
    sw.shards.back().depends_on = sw.shards[sw.shards.size() - 2].id;
  }
  for (const auto& s : sw.shards) {
    ResultRecord r;
    r.shard_id = s.id;
    r.sweep_id = id;
    r.lease_id = s.id + "-l1";
    auto* o = r.result.add_entries();
    o->set_key(s.spec.entries(0).key());
    o->set_file("a.yaml");
    o->set_arch(s.spec.arch());
    o->set_verdict("pass");
    sw.results.push_back(r);
  }
  return sw;
}

CarryPlan Carry(Plan& plan, const Sweep& base, const std::string& to = "sw-0002") {
  CarryBase b{base.id, {}, &base.results};
  for (const auto& s : base.shards) b.shards.push_back(&s);
  return CarryForward(plan, b, {to, "new-tt", "new-forge", "url", TimePoint{}});
}

Plan PlanOf(const Sweep& sw) {
  Plan p;
  p.shards = sw.shards;
  for (auto& s : p.shards)
    s.state = s.depends_on.empty() ? ShardState::kQueued : ShardState::kWaiting;
  return p;
}

TEST(Carry, AnUnchangedSweepCarriesEveryLoaderAndSchedulesNothing) {
  const Sweep base = Planned("sw-0001", {{"bert", "bert-h"}, {"vit", "vit-h"}});
  Plan plan = PlanOf(Planned("sw-0002", {{"bert", "bert-h"}, {"vit", "vit-h"}}));
  const CarryPlan c = Carry(plan, base);
  EXPECT_TRUE(plan.shards.empty());
  EXPECT_EQ(c.summary.base(), "sw-0001");
  EXPECT_EQ(c.summary.loaders(), 2);
  EXPECT_EQ(c.summary.shards(), 4);
  EXPECT_EQ(c.summary.entries(), 2);
  EXPECT_EQ(c.summary.rerun_loaders(), 0);
  ASSERT_EQ(c.shards.size(), 4u);
  for (std::size_t i = 0; i < c.shards.size(); ++i) {
    const ShardRecord& s = c.shards[i];
    EXPECT_EQ(s.id, "sw-0002-s00" + std::to_string(i + 1));
    EXPECT_EQ(s.spec.shard_id(), s.id);
    EXPECT_EQ(s.sweep_id, "sw-0002");
    EXPECT_EQ(s.state, ShardState::kSucceeded);
    EXPECT_EQ(s.spec.wave(), 0) << "the base's last wave ends at 0";
    EXPECT_EQ(s.spec.ttxla_commit(), "new-tt");
    EXPECT_EQ(s.spec.carried_from().sweep_id(), "sw-0001");
    EXPECT_EQ(s.spec.carried_from().shard_id(), base.shards[i].id);
    EXPECT_EQ(s.spec.carried_from().wave(), 1);
  }
  EXPECT_EQ(c.shards[1].depends_on, "sw-0002-s001");
  ASSERT_EQ(c.results.size(), 4u);
  EXPECT_EQ(c.results[0].shard_id, "sw-0002-s001");
  EXPECT_EQ(c.results[0].sweep_id, "sw-0002");
  EXPECT_EQ(c.results[0].lease_id, "sw-0002-s001-carried-1");
  EXPECT_EQ(c.results[3].result.entries(0).arch(), "p150");
}

TEST(Carry, OnlyTheChangedLoaderRunsAndKeepsDenseIds) {
  const Sweep base = Planned("sw-0001", {{"bert", "bert-h"}, {"vit", "vit-h"}});
  Plan plan = PlanOf(Planned("sw-0002", {{"bert", "bert-h"}, {"vit", "vit-h2"}}));
  const CarryPlan c = Carry(plan, base);
  ASSERT_EQ(plan.shards.size(), 2u);
  EXPECT_EQ(plan.shards[0].id, "sw-0002-s001");
  EXPECT_EQ(plan.shards[0].spec.shard_id(), "sw-0002-s001");
  EXPECT_EQ(plan.shards[1].id, "sw-0002-s002");
  EXPECT_EQ(plan.shards[1].depends_on, "sw-0002-s001");
  EXPECT_EQ(plan.shards[0].spec.loader(), "third_party/tt_forge_models/vit/pytorch/loader.py");
  EXPECT_FALSE(plan.shards[0].spec.has_carried_from());
  ASSERT_EQ(c.shards.size(), 2u);
  EXPECT_EQ(c.shards[0].id, "sw-0002-s003");
  EXPECT_EQ(c.shards[1].depends_on, "sw-0002-s003");
  EXPECT_EQ(c.summary.rerun_loaders(), 1);
  EXPECT_NE(c.note.find("1 inputs changed"), std::string::npos) << c.note;
}

TEST(Carry, ALoaderIsRunWhenItsBaseDidNotSucceedOrHasNoHash) {
  Sweep base = Planned("sw-0001", {{"bert", "bert-h"}, {"vit", "vit-h"}, {"deit", ""}});
  base.shards[3].state = ShardState::kFailed;  // vit's VERIFY
  Plan plan = PlanOf(Planned("sw-0002", {{"bert", "bert-h"}, {"vit", "vit-h"}, {"deit", ""}}));
  const CarryPlan c = Carry(plan, base);
  EXPECT_EQ(c.summary.loaders(), 1);
  EXPECT_EQ(plan.shards.size(), 4u);
  EXPECT_NE(c.note.find("1 a base shard did not succeed"), std::string::npos) << c.note;
  EXPECT_NE(c.note.find("1 no input hash"), std::string::npos) << c.note;

  // A shard with no accepted result is no result to carry either.
  Sweep lost = Planned("sw-0001", {{"bert", "bert-h"}});
  lost.results.pop_back();
  Plan again = PlanOf(Planned("sw-0002", {{"bert", "bert-h"}}));
  EXPECT_EQ(Carry(again, lost).summary.loaders(), 0);
  // A VERIFY phase left with no entry succeeds without a result: nothing is missing.
  Sweep settled = Planned("sw-0001", {{"bert", "bert-h"}});
  settled.results.pop_back();
  settled.shards.back().spec.clear_entries();
  Plan fine = PlanOf(Planned("sw-0002", {{"bert", "bert-h"}}));
  EXPECT_EQ(Carry(fine, settled).summary.loaders(), 1);
  // A new entry of a loader changes the loader's entry set.
  Sweep one = Planned("sw-0001", {{"bert", "bert-h"}});
  Plan two = PlanOf(Planned("sw-0002", {{"bert", "bert-h"}}));
  auto* extra = two.shards[0].spec.add_entries();
  extra->set_key("bert/pytorch-Large-single_device-training");
  extra->set_file("a.yaml");
  extra->set_input_hash("large-h");
  EXPECT_EQ(Carry(two, one).summary.loaders(), 0);
}

TEST(Carry, ACarryOfACarryNamesTheSweepThatRanItAndKeepsWaveOrder) {
  Sweep base = Planned("sw-0001", {{"bert", "bert-h"}});
  // A second wave re-verified bert with a registry line.
  base.shards.push_back(Shard("sw-0001", 3, "bert", v1::PHASE_FULL, "bert-h", 2));
  base.results.push_back(base.results[0]);
  base.results.back().shard_id = base.shards.back().id;
  Plan p2 = PlanOf(Planned("sw-0002", {{"bert", "bert-h"}}));
  const CarryPlan c2 = Carry(p2, base);
  ASSERT_EQ(c2.shards.size(), 3u);
  EXPECT_EQ(c2.shards[0].spec.wave(), -1);
  EXPECT_EQ(c2.shards[2].spec.wave(), 0);
  EXPECT_EQ(c2.shards[2].spec.carried_from().wave(), 2);

  Sweep second{"sw-0002", c2.shards, c2.results};
  Plan p3 = PlanOf(Planned("sw-0003", {{"bert", "bert-h"}}));
  const CarryPlan c3 = Carry(p3, second, "sw-0003");
  ASSERT_EQ(c3.shards.size(), 3u);
  EXPECT_EQ(c3.shards[0].spec.carried_from().sweep_id(), "sw-0001");
  EXPECT_EQ(c3.shards[0].spec.carried_from().shard_id(), "sw-0001-s001");
  EXPECT_EQ(c3.shards[2].spec.carried_from().wave(), 2);
  EXPECT_EQ(c3.shards[0].spec.wave(), -1);
  EXPECT_EQ(c3.shards[2].spec.wave(), 0);
  EXPECT_EQ(c3.results.size(), 3u);
}

// Registry-global scope over carried entries (docs/farm.md, "Incremental sweeps").

struct WaveCase {
  std::vector<ShardRecord> shards;
  std::vector<ResultRecord> results;

  WavePlan Next() {
    std::vector<const ShardRecord*> ptrs;
    for (const auto& s : shards) ptrs.push_back(&s);
    return PlanNextWave("sw-0002", ptrs, results, {"n150"}, false,
                        static_cast<int>(shards.size()) + 1);
  }
};

// bert carried (verified in its sweep with `line` pre-applied, when given); vit run in this sweep
// proposing `proposed`, when given. Both return class Out.
WaveCase CarriedAndOwn(std::optional<v1::RegistryOp> line, std::optional<v1::RegistryOp> proposed) {
  WaveCase w;
  ShardRecord carried = Shard("sw-0002", 1, "bert", v1::PHASE_FULL, "bert-h", 0);
  carried.spec.mutable_carried_from()->set_sweep_id("sw-0001");
  if (line) *carried.spec.add_pre_registry() = *line;
  ShardRecord own = Shard("sw-0002", 2, "vit", v1::PHASE_FULL, "vit-h", 1);
  for (const ShardRecord* s : {&carried, &own}) {
    ResultRecord r;
    r.shard_id = s->id;
    auto* o = r.result.add_entries();
    o->set_key(s->spec.entries(0).key());
    o->set_file("a.yaml");
    o->set_arch("n150");
    o->set_output_class("Out");
    o->set_disposition(v1::EntryOutcome::DONE);
    if (s == &own && proposed) *r.result.add_registry_ops() = *proposed;
    if (s == &carried && line) *r.result.add_registry_ops() = *line;
    w.results.push_back(r);
  }
  w.shards = {carried, own};
  return w;
}

TEST(CarryWaves, ACarriedEntryIsReverifiedWhenThisSweepMergesANewLineForItsClass) {
  WaveCase w = CarriedAndOwn(std::nullopt, registry::AddOp("Out", "logits"));
  const WavePlan plan = w.Next();
  ASSERT_EQ(plan.shards.size(), 1u);
  const v1::ShardSpec& next = plan.shards[0].spec;
  EXPECT_EQ(next.loader(), "third_party/tt_forge_models/bert/pytorch/loader.py");
  EXPECT_EQ(next.wave(), 2) << "numbered after this sweep's own first wave";
  EXPECT_FALSE(next.has_carried_from());
  ASSERT_EQ(next.pre_registry_size(), 1);
}

TEST(CarryWaves, ACarriedEntryVerifiedWithTheSameLineStands) {
  WaveCase w = CarriedAndOwn(registry::AddOp("Out", "logits"), registry::AddOp("Out", "logits"));
  EXPECT_TRUE(w.Next().shards.empty());
  // The carried result proposes the line itself: only this sweep's vit (not verified with it)
  // goes to the next wave.
  WaveCase alone = CarriedAndOwn(registry::AddOp("Out", "logits"), std::nullopt);
  const WavePlan plan = alone.Next();
  ASSERT_EQ(plan.shards.size(), 1u);
  EXPECT_EQ(plan.shards[0].spec.loader(), "third_party/tt_forge_models/vit/pytorch/loader.py");
}

TEST(CarryWaves, ACarriedEntryVerifiedWithALineThisSweepDoesNotWriteIsReverified) {
  // Verified with Out->logits, which another (re-run) loader proposed in the base sweep and no
  // longer proposes: the carried verdict depended on a line the patch will not have.
  WaveCase w = CarriedAndOwn(registry::AddOp("Out", "logits"), std::nullopt);
  w.results[0].result.clear_registry_ops();
  const WavePlan plan = w.Next();
  ASSERT_EQ(plan.shards.size(), 1u);
  EXPECT_EQ(plan.shards[0].spec.pre_registry_size(), 0);
  // The same with another attribute now merged for the class.
  WaveCase other =
      CarriedAndOwn(registry::AddOp("Out", "logits"), registry::AddOp("Out", "pooled"));
  other.results[0].result.clear_registry_ops();
  ASSERT_EQ(other.Next().shards.size(), 1u);
}

TEST(CarryWaves, AnOwnReverificationIsNewerThanTheCarriedResult) {
  WaveCase w = CarriedAndOwn(std::nullopt, registry::AddOp("Out", "logits"));
  ShardRecord again = w.Next().shards.at(0);
  again.state = ShardState::kSucceeded;
  ResultRecord r = w.results[0];
  r.shard_id = again.id;
  w.shards.push_back(again);
  w.results.push_back(r);
  EXPECT_TRUE(w.Next().shards.empty()) << "bert was verified with the line in wave 2";
}

// Which earlier sweep's results can be carried at all: the same archs in order, executor and
// executor parameters, and a playbook in common.
TEST(CarryMismatch, NamesWhatKeepsEveryHashApart) {
  auto sweep = [](std::vector<std::string> archs, std::string executor,
                  std::map<std::string, std::string> params, std::vector<std::string> playbooks) {
    SweepRecord r;
    r.archs = std::move(archs);
    r.request.set_executor(executor);
    for (const auto& [k, v] : params) (*r.request.mutable_params())[k] = v;
    r.playbooks = std::move(playbooks);
    return r;
  };
  const SweepRecord like = sweep({"n150", "p150"}, "native", {}, {"unpack", "bf16"});
  struct Case {
    const char* name;
    SweepRecord base;
    std::string want;
  };
  const Case cases[] = {
      {"the same", sweep({"n150", "p150"}, "native", {}, {"unpack", "bf16"}), ""},
      {"a playbook in common", sweep({"n150", "p150"}, "native", {}, {"bf16", "inputs"}), ""},
      {"fewer archs", sweep({"n150"}, "native", {}, {"unpack"}), "archs n150, not n150,p150"},
      {"archs in another order", sweep({"p150", "n150"}, "native", {}, {"unpack"}),
       "archs p150,n150, not n150,p150"},
      {"another executor", sweep({"n150", "p150"}, "command", {}, {"unpack"}),
       "executor command, not native"},
      {"other parameters", sweep({"n150", "p150"}, "native", {{"verify", "false"}}, {"unpack"}),
       "other executor parameters"},
      {"no playbook in common", sweep({"n150", "p150"}, "native", {}, {"inputs"}),
       "playbooks inputs, none of unpack,bf16"},
  };
  for (const auto& c : cases) EXPECT_EQ(CarryMismatch(c.base, like), c.want) << c.name;
}

}  // namespace
}  // namespace triage::coord
