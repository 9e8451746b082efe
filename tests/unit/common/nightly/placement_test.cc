// Placement of a nightly sweep's confirmed changes (docs/nightly.md, section 4): the archs'
// targets against the entry as it is, applied with the editor, compared as YAML text.

#include "common/nightly/placement.h"

#include "common/inventory/editor.h"
#include "gtest/gtest.h"
#include "tests/unit/common/nightly/nightly_test_support.h"

namespace triage::nightly {
namespace {

using namespace testing;  // NOLINT

constexpr char kKey[] = "m/pytorch-Base-single_device-inference";

ArchTarget Target(std::string arch, std::vector<std::pair<std::string, v1::YamlValue>> set,
                  std::vector<std::string> del = {}, std::string comment = "") {
  ArchTarget t;
  t.arch = std::move(arch);
  t.edit.set_key(kKey);
  for (auto& [name, value] : set) {
    auto* f = t.edit.add_set();
    f->set_name(name);
    *f->mutable_value() = value;
  }
  for (auto& d : del) t.edit.add_delete_(d);
  t.pcc_comment = std::move(comment);
  return t;
}

v1::YamlValue Str(std::string s) {
  v1::YamlValue v;
  v.set_string_value(std::move(s));
  return v;
}
v1::YamlValue Num(double d) {
  v1::YamlValue v;
  v.set_float_value(d);
  return v;
}
v1::YamlValue Bool(bool b) {
  v1::YamlValue v;
  v.set_bool_value(b);
  return v;
}

ArchTarget Promote(std::string arch) {
  return Target(std::move(arch), {{"status", Str("EXPECTED_PASSING")}},
                {"reason", "bringup_status"});
}

// The entry's fields after placing the targets over these archs (the text below its key).
std::string Placed(const std::string& fields, const std::vector<std::string>& archs,
                   const std::vector<ArchTarget>& targets, Placement* out = nullptr) {
  OneEntry e = Entry(fields, kKey);
  EXPECT_TRUE(e.doc.ok());
  Placement p = Place(*e.entry(), archs, targets);
  if (out != nullptr) *out = p;
  auto text = inventory::ApplyEdits(e.doc, p.edits);
  EXPECT_TRUE(text.ok()) << text.status();
  if (!text.ok()) return "";
  const std::string head = std::string("test_config:\n  ") + kKey + ":\n";
  return text->substr(head.size());
}

constexpr char kXfail[] =
    "    status: KNOWN_FAILURE_XFAIL\n    bringup_status: FAILED_RUNTIME\n"
    "    reason: \"TT_FATAL @ buffer.cpp:12: bad page\"\n";

TEST(NightlyPlacement, EveryArchPromotedGoesToTheTopLevel) {
  Placement p;
  EXPECT_EQ(Placed(kXfail, {"n150", "p150"}, {Promote("n150"), Promote("p150")}, &p),
            "    status: EXPECTED_PASSING\n");
  EXPECT_FALSE(p.per_arch);
  EXPECT_TRUE(p.review.empty());
}

TEST(NightlyPlacement, OnlyTheArchThatDiffersGetsAnOverride) {
  // The archs disagree on the status: the top level takes the state without a reason, and the
  // arch still failing keeps its reason in its own override (it would otherwise inherit one).
  EXPECT_EQ(Placed(kXfail, {"n150", "p150"}, {Promote("p150")}),
            "    status: EXPECTED_PASSING\n    arch_overrides:\n      n150:\n"
            "        status: KNOWN_FAILURE_XFAIL\n        bringup_status: FAILED_RUNTIME\n"
            "        reason: \"TT_FATAL @ buffer.cpp:12: bad page\"\n");
  EXPECT_EQ(
      Placed("    status: EXPECTED_PASSING\n", {"n150", "p150"},
             {Target("n150", {{"status", Str("KNOWN_FAILURE_XFAIL")},
                              {"bringup_status", Str("FAILED_TTMLIR_COMPILATION")},
                              {"reason", Str("error: 'ttir.conv2d' op expected bias shape")}})}),
      "    status: EXPECTED_PASSING\n    arch_overrides:\n      n150:\n"
      "        status: KNOWN_FAILURE_XFAIL\n"
      "        bringup_status: FAILED_TTMLIR_COMPILATION\n"
      "        reason: \"error: 'ttir.conv2d' op expected bias shape\"\n");
  // Other fields: the top level keeps its value while an arch still wants it.
  const std::string off = "    status: EXPECTED_PASSING\n    assert_pcc: false\n";
  EXPECT_EQ(Placed(off, {"n150", "p150"}, {Target("p150", {{"assert_pcc", Bool(false)}})}), off);
}

TEST(NightlyPlacement, OverridesCollapseWhenTheArchsConverge) {
  const std::string split =
      "    arch_overrides:\n"
      "      n150:\n        status: KNOWN_FAILURE_XFAIL\n        reason: \"x\"\n"
      "      p150:\n        status: KNOWN_FAILURE_XFAIL\n        reason: \"y\"\n";
  EXPECT_EQ(Placed(split, {"n150", "p150"}, {Promote("n150"), Promote("p150")}),
            "    status: EXPECTED_PASSING\n");
}

TEST(NightlyPlacement, ASharedThresholdIsTheLowestOfTheArchsThatShareIt) {
  // p150 has no candidate: it keeps the check it passes, n150 alone is lowered.
  EXPECT_EQ(Placed("    status: EXPECTED_PASSING\n", {"n150", "p150"},
                   {Target("n150", {{"required_pcc", Num(0.97)}}, {}, "pcc 0.9734 on n150")}),
            "    status: EXPECTED_PASSING\n    arch_overrides:\n      n150:\n"
            "        required_pcc: 0.97 # pcc 0.9734 on n150\n");
  // Both lowered: one value, both figures in the comment.
  EXPECT_EQ(Placed("    status: EXPECTED_PASSING\n", {"n150", "p150"},
                   {Target("n150", {{"required_pcc", Num(0.97)}}, {}, "pcc 0.9734 on n150"),
                    Target("p150", {{"required_pcc", Num(0.98)}}, {}, "pcc 0.9851 on p150")}),
            "    status: EXPECTED_PASSING\n"
            "    required_pcc: 0.97 # pcc 0.9734 on n150; pcc 0.9851 on p150\n");
}

TEST(NightlyPlacement, ArchsWithTheSameFigureShareItInTheComment) {
  EXPECT_EQ(Placed("    status: EXPECTED_PASSING\n", {"n150", "p150"},
                   {Target("n150", {{"assert_pcc", Bool(false)}}, {}, "pcc 0.5000 on n150"),
                    Target("p150", {{"assert_pcc", Bool(false)}}, {}, "pcc 0.5000 on p150")}),
            "    status: EXPECTED_PASSING\n    assert_pcc: false # pcc 0.5000 on n150, p150\n");
}

TEST(NightlyPlacement, ARaiseNeedsEveryArchThatSharesTheField) {
  const std::string lowered = "    status: EXPECTED_PASSING\n    required_pcc: 0.95 # #12\n";
  // Only n150 can go back to the default; p150 still needs 0.95.
  EXPECT_EQ(Placed(lowered, {"n150", "p150"}, {Target("n150", {}, {"required_pcc"})}), lowered);
  // Both: the field (and its comment) goes.
  EXPECT_EQ(Placed(lowered, {"n150", "p150"},
                   {Target("n150", {}, {"required_pcc"}), Target("p150", {}, {"required_pcc"})}),
            "    status: EXPECTED_PASSING\n");
}

TEST(NightlyPlacement, AnArchWithItsOwnThresholdKeepsIt) {
  const std::string own =
      "    status: EXPECTED_PASSING\n    arch_overrides:\n      p150:\n"
      "        required_pcc: 0.95\n";
  EXPECT_EQ(Placed(own, {"n150", "p150"},
                   {Target("p150", {{"required_pcc", Num(0.97)}}, {}, "pcc 0.975 on p150")}),
            "    status: EXPECTED_PASSING\n    arch_overrides:\n      p150:\n"
            "        required_pcc: 0.97 # pcc 0.975 on p150\n");
}

TEST(NightlyPlacement, AnOverrideWritesTheDefaultItCannotInherit) {
  const std::string off = "    status: EXPECTED_PASSING\n    assert_pcc: false\n";
  EXPECT_EQ(
      Placed(off, {"n150", "p150"}, {Target("n150", {}, {"assert_pcc"}, "pcc 0.999 on n150")}),
      off + "    arch_overrides:\n      n150:\n        assert_pcc: true # pcc 0.999 on n150\n");
}

TEST(NightlyPlacement, ATopLevelChangeNamesTheArchsNoRunCovered) {
  Placement p;
  Placed(kXfail, {"n150"}, {Promote("n150")}, &p);
  ASSERT_EQ(p.review.size(), 1u);
  EXPECT_EQ(p.review[0], "top-level change also reaches p150, where no run recorded the test");
  Placed("    supported_archs: [\"p150\"]\n" + std::string(kXfail), {"p150"}, {Promote("p150")},
         &p);
  EXPECT_TRUE(p.review.empty());
}

TEST(NightlyPlacement, NewEntryHasTheTargetsFields) {
  ArchTarget t = Target("n150", {{"status", Str("EXPECTED_PASSING")}});
  inventory::EntryEdit e = NewEntry("n/pytorch-X-single_device-inference", t.edit);
  EXPECT_TRUE(e.create);
  ASSERT_EQ(e.set.size(), 1u);
  EXPECT_EQ(e.set[0].first, "status");
}

// A new test that runs on one arch and fails on the other: the top level passes, the failing
// arch has its override, in one batch (as tt-xla's engineers add such an entry).
TEST(NightlyPlacement, ANewEntryWhoseArchsDifferGetsOverrides) {
  const std::string key = "n/pytorch-X-single_device-inference";
  OneEntry file = Entry("    status: EXPECTED_PASSING\n");
  const std::vector<ArchTarget> same = {Target("n150", {{"status", Str("EXPECTED_PASSING")}}),
                                        Target("p150", {{"status", Str("EXPECTED_PASSING")}})};
  auto one = PlaceNew(key, {"n150", "p150"}, same);
  ASSERT_TRUE(one.has_value());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_TRUE(one->front().create);

  const std::vector<ArchTarget> mixed = {
      Target("n150", {{"status", Str("KNOWN_FAILURE_XFAIL")},
                      {"reason", Str("Out of Memory: Not enough space to allocate")},
                      {"bringup_status", Str("FAILED_RUNTIME")}}),
      Target("p150", {{"status", Str("EXPECTED_PASSING")}})};
  auto edits = PlaceNew(key, {"n150", "p150"}, mixed);
  ASSERT_TRUE(edits.has_value());
  auto text = inventory::ApplyEdits(file.doc, *edits);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("  n/pytorch-X-single_device-inference:\n"
                       "    status: EXPECTED_PASSING\n"
                       "    arch_overrides:\n"
                       "      n150:\n"
                       "        status: KNOWN_FAILURE_XFAIL\n"
                       "        reason: \"Out of Memory: Not enough space to allocate\"\n"
                       "        bringup_status: FAILED_RUNTIME\n"),
            std::string::npos)
      << *text;
}

}  // namespace
}  // namespace triage::nightly
