// What lands where (docs/landing.md, "Onto a later main"): a table of bases that moved on since
// the sweep, and what each leaves out.

#include "coordinator/triagectl/land_plan.h"

#include "common/diff/unified_diff.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace triage::ctl::land {
namespace {

using nlohmann::json;

constexpr char kYaml[] = "tests/runner/test_config/torch/test_config_training_single_device.yaml";

std::string Entry(const std::string& key, const std::string& status, const std::string& reason) {
  std::string s = "  " + key + ":\n    status: " + status + "\n";
  if (!reason.empty()) s += "    reason: \"" + reason + "\"\n";
  return s;
}

struct Sweep {
  std::string yaml_before, yaml_after;
  std::map<std::string, std::string> forge_before, forge_after;  // path -> text
  json report;
  std::string ttxla_patch, forge_patch;
};

// a and b were xfails; the sweep promotes both, b with a loader fix. loaders: key -> loader dir.
Sweep MakeSweep(const std::map<std::string, std::string>& loaders) {
  Sweep s;
  s.yaml_before = "test_config:\n" + Entry("a/pytorch-A", "KNOWN_FAILURE_XFAIL", "x") +
                  Entry("b/pytorch-B", "KNOWN_FAILURE_XFAIL", "y");
  s.yaml_after = "test_config:\n" + Entry("a/pytorch-A", "EXPECTED_PASSING", "") +
                 Entry("b/pytorch-B", "EXPECTED_PASSING", "");
  const std::vector<diff::Region> regions = {{1, 4, 1, 3}, {4, 7, 3, 5}};
  s.ttxla_patch = diff::UnifiedDiffOfRegions(kYaml, s.yaml_before, s.yaml_after, regions,
                                             {.index_line = true, .hunk_per_region = true});
  s.report = {{"sweep", "sw-1"}, {"commits", json::object()}, {"entries", json::array()}};
  for (const auto& [key, loader] : loaders) {
    s.report["entries"].push_back(
        {{"key", key},
         {"file", kYaml},
         {"loader", "third_party/tt_forge_models/" + loader + "/loader.py"},
         {"fix_path", key == "b/pytorch-B" ? "loader_dtype" : "none"},
         {"review", json::array()}});
  }
  const std::string path = loaders.at("b/pytorch-B") + "/loader.py";
  s.forge_before[path] = "class ModelLoader:\n    def load_model(self):\n        return M()\n";
  s.forge_after[path] =
      "class ModelLoader:\n    def load_model(self, dtype_override=None):\n        return M()\n";
  s.forge_patch =
      diff::UnifiedDiff(path, s.forge_before[path], s.forge_after[path], {.index_line = true});
  return s;
}

ReadFile Files(std::map<std::string, std::string> files) {
  return [files](const std::string& path) -> absl::StatusOr<std::string> {
    auto it = files.find(path);
    return it == files.end() ? std::string() : it->second;
  };
}

Plan Land(const Sweep& s, const std::string& yaml_target,
          const std::map<std::string, std::string>& forge_target,
          std::map<std::string, std::string> excluded = {}) {
  PlanInput in;
  in.ttxla_patch = s.ttxla_patch;
  in.forge_patch = s.forge_patch;
  in.report = &s.report;
  in.ttxla_at_sweep = Files({{kYaml, s.yaml_before}});
  in.ttxla_target = Files({{kYaml, yaml_target}});
  in.forge_target = Files(forge_target);
  in.excluded = std::move(excluded);
  auto plan = PlanLanding(in);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : Plan{};
}

std::string YamlOf(const Plan& p) { return p.ttxla.empty() ? "" : p.ttxla.front().text; }

TEST(PlanLanding, AtTheSweepsCommitsEverythingLands) {
  const Sweep s = MakeSweep({{"a/pytorch-A", "a/pytorch"}, {"b/pytorch-B", "b/pytorch"}});
  const Plan p = Land(s, s.yaml_before, s.forge_before);
  EXPECT_EQ(YamlOf(p), s.yaml_after);
  ASSERT_EQ(p.forge.size(), 1u);
  EXPECT_EQ(p.forge[0].text, s.forge_after.begin()->second);
  EXPECT_EQ(p.landed, (std::set<std::string>{"a/pytorch-A", "b/pytorch-B"}));
  EXPECT_TRUE(p.left_out.empty());
}

// A remediation sweep's shared fixes (docs/remediation.md): a helper file serves the entries it
// fixed, lands with them and stays out with them; a shared tt-xla file is a whole-file unit, not
// YAML.
TEST(PlanLanding, ASharedFixLandsWithTheEntriesItFixedAndStaysOutWithThem) {
  Sweep s = MakeSweep({{"a/pytorch-A", "a/pytorch"}, {"b/pytorch-B", "b/pytorch"}});
  const std::string helper = "tools/h.py", package = "python_package/backend.py";
  s.forge_before[helper] = "x = 1\n";
  s.forge_after[helper] = "x = 2\n";
  s.forge_patch += diff::UnifiedDiff(helper, "x = 1\n", "x = 2\n", {.index_line = true});
  s.ttxla_patch += diff::UnifiedDiff(package, "y = 1\n", "y = 2\n", {.index_line = true});
  s.report["shared_fixes"] = json::array(
      {{{"file", "tt_forge_models/tools/h.py"}, {"fixed", {"a/pytorch-A"}}, {"landed", true}},
       {{"file", "tt-xla/python_package/backend.py"},
        {"fixed", {"a/pytorch-A"}},
        {"landed", true}}});
  PlanInput in;
  in.ttxla_patch = s.ttxla_patch;
  in.forge_patch = s.forge_patch;
  in.report = &s.report;
  const auto ttxla = Files({{kYaml, s.yaml_before}, {package, "y = 1\n"}});
  in.ttxla_at_sweep = ttxla;
  in.ttxla_target = ttxla;
  in.forge_target = Files(s.forge_before);
  auto all = PlanLanding(in);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->forge.size(), 2u);
  ASSERT_EQ(all->ttxla.size(), 2u);
  EXPECT_EQ(all->ttxla[0].path, package);
  EXPECT_EQ(all->ttxla[0].text, "y = 2\n");
  // Without the entry it fixed, neither shared fix lands.
  in.excluded = {{"a/pytorch-A", "--exclude"}};
  auto without = PlanLanding(in);
  ASSERT_TRUE(without.ok()) << without.status();
  ASSERT_EQ(without->forge.size(), 1u);
  EXPECT_EQ(without->forge[0].path, "b/pytorch/loader.py");
  ASSERT_EQ(without->ttxla.size(), 1u);
  EXPECT_EQ(without->ttxla[0].path, kYaml);
  // A helper that no longer applies leaves out the entries it fixed.
  in.excluded.clear();
  in.forge_target =
      Files({{helper, "x = 9\n"}, {"b/pytorch/loader.py", s.forge_before["b/pytorch/loader.py"]}});
  auto moved = PlanLanding(in);
  ASSERT_TRUE(moved.ok()) << moved.status();
  ASSERT_EQ(moved->left_out.count("a/pytorch-A"), 1u);
  EXPECT_NE(moved->left_out.at("a/pytorch-A").find("the shared fix of tt_forge_models/tools/h.py"),
            std::string::npos)
      << moved->left_out.at("a/pytorch-A");
}

TEST(PlanLanding, AnEntryEditedUpstreamIsLeftOutWithTheLoaderOnlyItNeeded) {
  const Sweep s = MakeSweep({{"a/pytorch-A", "a/pytorch"}, {"b/pytorch-B", "b/pytorch"}});
  std::string later = s.yaml_before;
  later.replace(later.find("\"y\""), 3, "\"y (tracked in #7)\"");
  later.insert(later.find("  a/"), "  # moved on\n");
  const Plan p = Land(s, later, s.forge_before);
  ASSERT_EQ(p.left_out.count("b/pytorch-B"), 1u);
  EXPECT_NE(p.left_out.at("b/pytorch-B").find("changed upstream since the sweep"),
            std::string::npos);
  EXPECT_TRUE(p.forge.empty()) << "b's loader fix lands only with b";
  EXPECT_EQ(YamlOf(p), "test_config:\n  # moved on\n" +
                           Entry("a/pytorch-A", "EXPECTED_PASSING", "") +
                           Entry("b/pytorch-B", "KNOWN_FAILURE_XFAIL", "y (tracked in #7)"));
}

TEST(PlanLanding, ALoaderChangedUpstreamLeavesOutItsEntrysYaml) {
  const Sweep s = MakeSweep({{"a/pytorch-A", "a/pytorch"}, {"b/pytorch-B", "b/pytorch"}});
  auto forge = s.forge_before;
  forge.begin()->second =
      "class ModelLoader:\n    def load_model(self, **kw):\n        return M()\n";
  const Plan p = Land(s, s.yaml_before, forge);
  ASSERT_EQ(p.left_out.count("b/pytorch-B"), 1u);
  EXPECT_NE(p.left_out.at("b/pytorch-B").find("its loader change (b/pytorch/loader.py)"),
            std::string::npos)
      << p.left_out.at("b/pytorch-B");
  EXPECT_TRUE(p.forge.empty());
  EXPECT_EQ(YamlOf(p), "test_config:\n" + Entry("a/pytorch-A", "EXPECTED_PASSING", "") +
                           Entry("b/pytorch-B", "KNOWN_FAILURE_XFAIL", "y"));
}

TEST(PlanLanding, ASharedLoaderLandsForTheEntryThatStays) {
  const Sweep s = MakeSweep({{"a/pytorch-A", "ab/pytorch"}, {"b/pytorch-B", "ab/pytorch"}});
  Plan p = Land(s, s.yaml_before, s.forge_before, {{"a/pytorch-A", "excluded (--exclude)"}});
  EXPECT_EQ(p.left_out,
            (std::map<std::string, std::string>{{"a/pytorch-A", "excluded (--exclude)"}}));
  EXPECT_EQ(p.forge.size(), 1u) << "the loader serves b too";
  EXPECT_EQ(YamlOf(p), "test_config:\n" + Entry("a/pytorch-A", "KNOWN_FAILURE_XFAIL", "x") +
                           Entry("b/pytorch-B", "EXPECTED_PASSING", ""));
  // Both excluded: nothing of either lands.
  p = Land(s, s.yaml_before, s.forge_before,
           {{"a/pytorch-A", "excluded"}, {"b/pytorch-B", "excluded"}});
  EXPECT_TRUE(p.forge.empty());
  EXPECT_TRUE(p.ttxla.empty());
  EXPECT_TRUE(p.landed.empty());
}

TEST(PlanLanding, AnEntryRemovedUpstreamIsNamed) {
  const Sweep s = MakeSweep({{"a/pytorch-A", "a/pytorch"}, {"b/pytorch-B", "b/pytorch"}});
  const std::string later = "test_config:\n" + Entry("b/pytorch-B", "KNOWN_FAILURE_XFAIL", "y");
  const Plan p = Land(s, later, s.forge_before);
  ASSERT_EQ(p.left_out.count("a/pytorch-A"), 1u);
  EXPECT_NE(p.left_out.at("a/pytorch-A").find("removed upstream"), std::string::npos);
  EXPECT_EQ(YamlOf(p), "test_config:\n" + Entry("b/pytorch-B", "EXPECTED_PASSING", ""));
}

// A file without blank lines between entries (tt-xla's training files): a field appended to a's
// end lies right before b's key, so one hunk holds a's change and b's. Each entry lands as its
// own unit, and an upstream edit of one entry leaves out that entry only.
struct Adjacent {
  std::string before =
      "test_config:\n  a/pytorch-A:\n    status: KNOWN_FAILURE_XFAIL\n    markers: [x]\n"
      "  b/pytorch-B:\n    status: KNOWN_FAILURE_XFAIL\n  c/pytorch-C:\n"
      "    status: KNOWN_FAILURE_XFAIL\n";
  std::string after =
      "test_config:\n  a/pytorch-A:\n    status: KNOWN_FAILURE_XFAIL\n    markers: [x]\n"
      "    arch_overrides:\n      p150:\n        status: EXPECTED_PASSING\n"
      "  b/pytorch-B:\n    status: KNOWN_FAILURE_XFAIL\n    reason: \"new\"\n  c/pytorch-C:\n"
      "    status: KNOWN_FAILURE_XFAIL\n  d/pytorch-D:\n    status: EXPECTED_PASSING\n";
  Sweep sweep;
  Adjacent() {
    const std::vector<diff::Region> regions = {{1, 4, 1, 7}, {4, 6, 7, 10}, {8, 8, 12, 14}};
    sweep.ttxla_patch = diff::UnifiedDiffOfRegions(kYaml, before, after, regions,
                                                   {.index_line = true, .hunk_per_region = true});
    sweep.report = {{"sweep", "sw-1"}, {"commits", json::object()}, {"entries", json::array()}};
    for (const char* key : {"a/pytorch-A", "b/pytorch-B", "d/pytorch-D"}) {
      sweep.report["entries"].push_back(
          {{"key", key}, {"file", kYaml}, {"fix_path", "none"}, {"review", json::array()}});
    }
    sweep.yaml_before = before;
  }
};

TEST(PlanLanding, EntriesWithoutBlankLinesBetweenThemLandEachAsItsOwn) {
  const Adjacent a;
  // a's hunk adds lines before b's key, its trailing context.
  ASSERT_NE(a.sweep.ttxla_patch.find("+        status: EXPECTED_PASSING\n   b/pytorch-B:\n"),
            std::string::npos)
      << a.sweep.ttxla_patch;
  Plan p = Land(a.sweep, a.before, {});
  EXPECT_EQ(YamlOf(p), a.after);
  EXPECT_EQ(p.landed, (std::set<std::string>{"a/pytorch-A", "b/pytorch-B", "d/pytorch-D"}));
  EXPECT_TRUE(p.left_out.empty());
  EXPECT_TRUE(p.problems.empty());

  // b edited upstream: only b is left out, and a still gets its override.
  std::string later = a.before;
  later.insert(later.find("  c/"), "    markers: [push]\n");
  p = Land(a.sweep, later, {});
  EXPECT_EQ(p.landed, (std::set<std::string>{"a/pytorch-A", "d/pytorch-D"}));
  ASSERT_EQ(p.left_out.size(), 1u);
  EXPECT_EQ(p.left_out.count("b/pytorch-B"), 1u);
  EXPECT_NE(YamlOf(p).find("    markers: [x]\n    arch_overrides:\n      p150:\n"),
            std::string::npos)
      << YamlOf(p);
  EXPECT_EQ(YamlOf(p).find("reason: \"new\""), std::string::npos);

  // a edited upstream (a field after its last one): a is left out, b lands.
  later = a.before;
  later.insert(later.find("  b/"), "    supported_archs: [n150]\n");
  p = Land(a.sweep, later, {});
  EXPECT_EQ(p.landed, (std::set<std::string>{"b/pytorch-B", "d/pytorch-D"}));
  EXPECT_EQ(p.left_out.count("a/pytorch-A"), 1u);
  EXPECT_NE(YamlOf(p).find("    reason: \"new\"\n"), std::string::npos) << YamlOf(p);
}

TEST(PlanLanding, AHunkThatSpansTwoEntriesIsSplitBetweenThem) {
  // One hunk for a's appended override and b's field right under its key (as `git diff` writes
  // it): each part lands with its own entry.
  Adjacent a;
  a.sweep.ttxla_patch = std::string("diff --git a/") + kYaml + " b/" + kYaml + "\n--- a/" + kYaml +
                        "\n+++ b/" + kYaml +
                        "\n@@ -2,5 +2,9 @@\n   a/pytorch-A:\n     status: KNOWN_FAILURE_XFAIL\n"
                        "     markers: [x]\n+    arch_overrides:\n+      p150:\n"
                        "+        status: EXPECTED_PASSING\n   b/pytorch-B:\n"
                        "+    bringup_status: FAILED_RUNTIME\n     status: KNOWN_FAILURE_XFAIL\n";
  Plan p = Land(a.sweep, a.before, {});
  EXPECT_EQ(p.landed, (std::set<std::string>{"a/pytorch-A", "b/pytorch-B"}));
  EXPECT_TRUE(p.left_out.empty());
  // b's key line edited upstream (quoted): b is left out, a lands.
  std::string later = a.before;
  later.replace(later.find("  b/pytorch-B:"), 14, "  \"b/pytorch-B\":");
  p = Land(a.sweep, later, {});
  EXPECT_EQ(p.landed, (std::set<std::string>{"a/pytorch-A"}));
  EXPECT_EQ(p.left_out.count("b/pytorch-B"), 1u);
  EXPECT_NE(YamlOf(p).find("        status: EXPECTED_PASSING\n  \"b/pytorch-B\":\n    status:"),
            std::string::npos)
      << YamlOf(p);
}

TEST(PlanLanding, ANewEntryWithItsBlankLineIsOnlyItsOwn) {
  // An inference file (a blank line after each entry): the new entry's hunk adds a blank line
  // and the entry after the file's last entry, which the sweep left alone.
  Sweep s;
  s.yaml_before = "test_config:\n  a/pytorch-A:\n    status: EXPECTED_PASSING\n";
  const std::string after = s.yaml_before + "\n  d/pytorch-D:\n    status: EXPECTED_PASSING\n";
  s.ttxla_patch = diff::UnifiedDiff(kYaml, s.yaml_before, after, {.index_line = true});
  s.report = {{"sweep", "sw-1"},
              {"commits", json::object()},
              {"entries", json::array({{{"key", "d/pytorch-D"}, {"file", kYaml}}})}};
  const Plan p = Land(s, s.yaml_before, {});
  EXPECT_EQ(YamlOf(p), after);
  EXPECT_EQ(p.landed, (std::set<std::string>{"d/pytorch-D"}));
}

}  // namespace
}  // namespace triage::ctl::land
