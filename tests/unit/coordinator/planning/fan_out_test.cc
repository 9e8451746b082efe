// Fix once, verify many (coordinator/planning/fan_out.h): what a cluster's follower learns from
// its lead when the lead ends.

#include "coordinator/planning/fan_out.h"
#include "coordinator/planning/shared_wave.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace triage::coord {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kCluster[] = "c-0123abcd";

ShardRecord Lead() {
  ShardRecord s;
  s.id = "sw-s001";
  s.state = ShardState::kSucceeded;
  s.spec.set_loader("third_party/tt_forge_models/patch_mini/pytorch/loader.py");
  s.spec.set_arch("n150");
  for (const char* key : {"patch/X", "patch/Y"}) {
    auto* e = s.spec.add_entries();
    e->set_key(key);
    e->set_file("f.yaml");
    e->set_cluster(key == std::string("patch/X") ? kCluster : "c-ffffffff");
  }
  return s;
}

ShardRecord Follower() {
  ShardRecord s;
  s.id = "sw-s009";
  s.state = ShardState::kWaiting;
  s.depends_on = "sw-s001";
  s.spec.mutable_fan_out()->set_lead_shard("sw-s001");
  s.spec.mutable_fan_out()->set_cluster(kCluster);
  return s;
}

v1::ShardResult LeadResult(const std::string& verdict, const std::string& check) {
  v1::ShardResult r;
  auto* o = r.add_entries();
  o->set_key("patch/X");
  o->set_file("f.yaml");
  o->set_arch("n150");
  o->set_verdict(verdict);
  o->set_command_check(check);
  o->mutable_summary()->set_fingerprint("mini-images-drops-channels");
  auto* other = r.add_entries();  // another cluster's entry: never the follower's business
  other->set_key("patch/Y");
  other->set_file("f.yaml");
  other->set_arch("n150");
  other->set_verdict("pass");
  for (const char* path : {"tools/mini_images.py", "patch_mini/pytorch/loader.py"}) {
    auto* fe = r.add_file_edits();
    fe->set_repo("tt_forge_models");
    fe->set_path(path);
    fe->set_diff("--- a/x\n+++ b/x\n");
  }
  auto* op = r.add_registry_ops();
  op->set_cls("MiniOutput");
  return r;
}

TEST(FanOut, AnAcceptedLeadFixPreAppliesItsSharedEditsAndRegistryLines) {
  ShardRecord f = Follower();
  const v1::ShardResult r = LeadResult("pass", "verified by the farm");
  const std::string line = ReleaseFollower(Lead(), &r, f, TimePoint{});
  EXPECT_EQ(f.state, ShardState::kQueued);
  EXPECT_TRUE(f.spec.fan_out().released());
  EXPECT_TRUE(f.spec.fan_out().lead_fixed());
  EXPECT_THAT(f.spec.fan_out().lead_fixed_keys(), ElementsAre("patch/X"));
  EXPECT_EQ(f.spec.fan_out().lead_summary().fingerprint(), "mini-images-drops-channels");
  // The shared helper, not the lead's own loader.
  ASSERT_EQ(f.spec.pre_apply_size(), 1);
  EXPECT_EQ(f.spec.pre_apply(0).path(), "tools/mini_images.py");
  EXPECT_THAT(f.spec.fan_out().shared_files(), ElementsAre("tt_forge_models:tools/mini_images.py"));
  EXPECT_EQ(f.spec.pre_registry_size(), 1);
  EXPECT_THAT(line, HasSubstr("verified with tt_forge_models:tools/mini_images.py pre-applied"));
}

TEST(FanOut, ALeadTheFarmOverruledOrThatFailedLeavesTheFollowersTheirOwnRuns) {
  for (const auto& [verdict, check] :
       {std::pair{"pass", "replaced by the farm's decision"}, std::pair{"failure", ""}}) {
    ShardRecord f = Follower();
    const v1::ShardResult r = LeadResult(verdict, check);
    const std::string line = ReleaseFollower(Lead(), &r, f, TimePoint{});
    EXPECT_EQ(f.state, ShardState::kQueued);
    EXPECT_FALSE(f.spec.fan_out().lead_fixed()) << verdict;
    EXPECT_THAT(f.spec.pre_apply(), IsEmpty());
    EXPECT_THAT(f.spec.pre_registry(), IsEmpty());
    // The lead's summary is still the hint.
    EXPECT_EQ(f.spec.fan_out().lead_summary().fingerprint(), "mini-images-drops-channels");
    EXPECT_THAT(line, HasSubstr("own runs"));
  }
  ShardRecord lead = Lead();
  lead.state = ShardState::kFailed;
  ShardRecord f = Follower();
  EXPECT_THAT(ReleaseFollower(lead, nullptr, f, TimePoint{}), HasSubstr("failed"));
  EXPECT_EQ(f.state, ShardState::kQueued);
  EXPECT_FALSE(f.spec.fan_out().lead_fixed());
}

// The shared scope's conflict rule: an edit of a shared file accepted first stands; a later
// result that changed it differently without starting from it runs again on top of it.
TEST(FanOut, ADifferentEditOfASharedFileAcceptedEarlierIsBuiltOn) {
  auto edit = [](const std::string& path, const std::string& diff) {
    v1::FileEdit fe;
    fe.set_repo("tt_forge_models");
    fe.set_path(path);
    fe.set_diff(diff);
    return fe;
  };
  auto spec = [](const std::string& id, const std::string& loader) {
    v1::ShardSpec s;
    s.set_shard_id(id);
    s.set_loader("third_party/tt_forge_models/" + loader + "/pytorch/loader.py");
    return s;
  };
  auto result = [](std::vector<v1::FileEdit> edits, bool accepted) {
    v1::ShardResult r;
    for (auto& e : edits) *r.add_file_edits() = e;
    auto* o = r.add_entries();
    o->set_changed(accepted);
    o->set_command_check(accepted ? "verified by the farm" : "replaced by the farm's decision");
    return r;
  };
  const v1::FileEdit first = edit("tools/h.py", "first"), second = edit("tools/h.py", "second");
  const v1::ShardSpec a = spec("s1", "a"), b = spec("s2", "b");
  const v1::ShardResult ra = result({first, edit("a/pytorch/loader.py", "x")}, true);
  const std::vector<AcceptedResult> earlier = {{&a, &ra}};
  // A different change of the helper: runs again on top of the first (not of a's loader).
  auto got = SharedEditsToBuildOn(b, result({second}, true), earlier);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].diff(), "first");
  // The same change, or one that started from the first: no conflict.
  EXPECT_THAT(SharedEditsToBuildOn(b, result({first}, true), earlier), IsEmpty());
  v1::ShardSpec on_top = b;
  *on_top.add_pre_apply() = first;
  EXPECT_THAT(SharedEditsToBuildOn(on_top, result({second}, true), earlier), IsEmpty());
  // An earlier result whose edits do not land (the farm overruled it, nothing accepted).
  const v1::ShardResult rejected = result({first}, false);
  EXPECT_FALSE(CommandEditsLand(rejected));
  EXPECT_THAT(SharedEditsToBuildOn(b, result({second}, true), {{&a, &rejected}}), IsEmpty());
  // A loader file is never shared: b's own loader edit builds on nothing.
  EXPECT_THAT(SharedEditsToBuildOn(b, result({edit("b/pytorch/loader.py", "y")}, true), earlier),
              IsEmpty());
}

// The shared fix's wave (coordinator/planning/shared_wave.h): queued with the lead's whole change
// pre-applied when the lead made a shared fix that lands; done with nothing to check otherwise.
TEST(FanOut, ALeadsWaveRunsOnlyWhenItsSharedFixLands) {
  ShardRecord wave = Follower();
  (*wave.spec.mutable_params())[std::string(kWaveParam)] = "{}";
  ASSERT_TRUE(IsWaveShard(wave.spec));
  const v1::ShardResult fixed = LeadResult("pass", "verified by the farm");
  ShardRecord checked = wave;
  EXPECT_THAT(ReleaseWave(Lead(), &fixed, checked, TimePoint{}),
              HasSubstr("the wave of tt_forge_models:tools/mini_images.py"));
  EXPECT_EQ(checked.state, ShardState::kQueued);
  EXPECT_EQ(checked.spec.pre_apply_size(), 2) << "the lead's loader edit too: what lands";
  EXPECT_EQ(checked.spec.pre_registry_size(), 1);
  EXPECT_THAT(checked.spec.fan_out().shared_files(),
              ElementsAre("tt_forge_models:tools/mini_images.py"));

  // Overruled and nothing accepted: its edits do not land, nothing to check.
  const v1::ShardResult overruled = LeadResult("fail", "replaced by the farm's decision");
  ShardRecord idle = wave;
  EXPECT_THAT(ReleaseWave(Lead(), &overruled, idle, TimePoint{}), HasSubstr("no wave to run"));
  EXPECT_EQ(idle.state, ShardState::kSucceeded);
  EXPECT_THAT(idle.spec.pre_apply(), IsEmpty());
  ShardRecord failed_lead = wave;
  ShardRecord lead = Lead();
  lead.state = ShardState::kFailed;
  ReleaseWave(lead, nullptr, failed_lead, TimePoint{});
  EXPECT_EQ(failed_lead.state, ShardState::kSucceeded);
}

}  // namespace
}  // namespace triage::coord
