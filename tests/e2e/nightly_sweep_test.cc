// A nightly sweep (docs/nightly.md) on the ttxla-mini fixture with real processes, real torch and
// real pytest: the fixture's runner writes two nights of JUnit results on n150 and p150
// (tests/fixtures/make-nightly.sh), triagectl reads them, the coordinator plans the rules'
// candidates, and agents of both archs confirm them by running the tests again.
//  1. Every entry of ttxla-mini/nightly_truth.yaml ends as its `after` says once the patch is
//     applied; the report's sections hold exactly the confirmed, flaky and flagged candidates;
//     an issue link lands on the reason it names.
//  2. The fixture's own nightly run over the patched checkout fails only where the truth keeps a
//     failure (the flaky test at night, the host-memory kill flagged for a person).
//  3. The same sweep through the replay executor, answered from the evidence the native run
//     recorded, gives a byte-identical patch.
// And without agents: --no-confirm proposes from the nightly alone (truth's after_no_confirm).

#include <map>
#include <set>

#include "common/inventory/document.h"
#include "common/junit/junit.h"
#include "common/util/strings.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/fixture_farm.h"
#include "tests/support/test_support.h"
#include "tests/support/yaml_fields.h"
#include "yaml-cpp/yaml.h"

namespace triage {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string kSrc = TRIAGE_SOURCE_DIR;

YAML::Node Truth() {
  return YAML::LoadFile(kSrc + "/tests/fixtures/ttxla-mini/nightly_truth.yaml");
}

std::map<std::string, std::string> Fields(const YAML::Node& n) { return testing::YamlFields(n); }

class NightlySweepTest : public testing::FixtureFarmTest {
 protected:
  NightlySweepTest() : FixtureFarmTest({"--tick_ms", "200", "--heartbeat_interval_seconds", "2"}) {}

  void SetUp() override {
    FixtureFarmTest::SetUp();
    std::string out;
    ASSERT_EQ(testing::RunCommand({kSrc + "/tests/fixtures/make-nightly.sh", repo_.string(),
                                   (dir_ / "nightly").string()},
                                  dir_, &out),
              0)
        << out;
  }

  // One agent per arch (n150, p150), named <prefix>-<arch>, each with its own workspace and
  // emulated device.
  void StartAgents(const std::string& prefix, const std::string& executor,
                   const std::filesystem::path& replay_dir = {}) {
    for (const std::string arch : {"n150", "p150"}) {
      std::vector<std::string> more;
      if (!replay_dir.empty()) more = {"--replay_dir", replay_dir.string()};
      ASSERT_NO_FATAL_FAILURE(StartFixtureAgent(prefix + "-" + arch, arch, executor, more));
    }
  }

  // Starts a nightly sweep over both nights and waits for its end: the sweep id.
  std::string RunSweep(std::vector<std::string> extra) {
    std::vector<std::string> args = {"sweep",     "start",
                                     "--repo",    repo_.string(),
                                     "--nightly", (dir_ / "nightly/night-1").string(),
                                     "--nightly", (dir_ / "nightly/night-2").string(),
                                     "--reason",  "nightly maintenance",
                                     "-o",        "json"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::string out;
    EXPECT_EQ(Ctl(args, &out), 0) << out;
    auto j = json::parse(out.substr(out.find('{')), nullptr, false);
    const std::string id = j.is_object() ? j.value("id", "") : "";
    EXPECT_FALSE(id.empty()) << out;
    EXPECT_EQ(Ctl({"sweep", "watch", id}, &out), 0) << out;
    return id;
  }

  // The sweep's patch (optionally with issue links) and report, written under dir.
  void Outputs(const std::string& id, const std::filesystem::path& dir,
               const std::string& links = "") {
    std::string out;
    std::vector<std::string> patch = {"sweep", "patch", id, "--out", dir.string()};
    if (!links.empty()) patch.insert(patch.end(), {"--issue-links", links});
    ASSERT_EQ(Ctl(patch, &out), 0) << out;
    ASSERT_EQ(Ctl({"sweep", "report", id, "--out", dir.string()}, &out), 0) << out;
  }

  // A fresh clone of the checkout with the tt-xla patch applied.
  std::filesystem::path Patched(const std::filesystem::path& patch, const std::string& name) {
    const auto ws = testing::CloneFixtureWorkspace(repo_, dir_ / name);
    std::string out;
    EXPECT_EQ(testing::RunCommand({"git", "apply", patch.string()}, ws, &out), 0) << out;
    return ws;
  }

  // Every truth entry as the patched checkout holds it, against want(entry).
  void ExpectEntries(const std::filesystem::path& ws,
                     const std::function<YAML::Node(const YAML::Node&)>& want,
                     const std::map<std::string, std::string>& reason_suffix = {}) {
    for (const auto& item : Truth()["entries"]) {
      const std::string key = item.first.as<std::string>();
      SCOPED_TRACE(key);
      YAML::Node w = want(item.second);
      if (w.IsScalar() && w.as<std::string>() == "unchanged") w = item.second["before"];
      const std::string file = item.second["file"].as<std::string>();
      const inventory::Document doc =
          inventory::Document::Parse(file, testing::ReadFileOrDie(ws / file));
      ASSERT_TRUE(doc.ok());
      const inventory::Entry* e = doc.Find(key);
      if (w.IsNull()) {
        EXPECT_EQ(e, nullptr);
        continue;
      }
      ASSERT_NE(e, nullptr);
      auto want_fields = Fields(w);
      if (auto s = reason_suffix.find(key); s != reason_suffix.end()) {
        want_fields["reason"] += s->second;
      }
      EXPECT_EQ(Fields(YAML::Load(doc.EntryText(*e))[key]), want_fields);
    }
  }
};

// The section each (entry, arch) belongs in, by the truth's rule and confirmation.
std::set<std::tuple<std::string, std::string, std::string>> ExpectedSections() {
  static const std::map<std::string, std::string> kSectionOfKind = {
      {"promote", "promoted"},      {"demote_xfail", "demoted"},   {"demote_skip", "skipped"},
      {"lower_pcc", "thresholds"},  {"disable_pcc", "thresholds"}, {"raise_pcc", "thresholds"},
      {"enable_pcc", "thresholds"}, {"refresh_reason", "reasons"}, {"add_config", "new_entries"},
      {"capacity", "flagged"}};
  std::set<std::tuple<std::string, std::string, std::string>> out;
  for (const auto& item : Truth()["entries"]) {
    const YAML::Node e = item.second;
    for (const auto& arch : e["rule"]) {
      const std::string kind = arch.second["candidate"].as<std::string>();
      if (kind == "none") continue;
      const bool flaky = e["confirmation"] && e["confirmation"].as<std::string>() == "flaky";
      out.insert({item.first.as<std::string>(), arch.first.as<std::string>(),
                  flaky ? "flaky" : kSectionOfKind.at(kind)});
    }
  }
  return out;
}

TEST_F(NightlySweepTest, ConfirmedOnTheFleetAndReplayedToTheSamePatch) {
  StartAgents("native", "native");
  const std::string id = RunSweep({});
  // A tracking issue for one new failure, by its key.
  const std::string demoted = "unet_mini/pytorch-Base-single_device-inference";
  const std::string url = "https://github.com/example/ttxla-mini/issues/99";
  testing::WriteFileOrDie(dir_ / "links.yaml", demoted + ": " + url + "\n");
  Outputs(id, dir_ / "linked", (dir_ / "links.yaml").string());
  Outputs(id, dir_ / "out");

  // 1. The YAML, entry by entry, and the report's sections.
  const auto ws = Patched(dir_ / "linked/tt-xla.patch", "patched");
  ExpectEntries(ws, [](const YAML::Node& e) { return e["after"]; }, {{demoted, " - " + url}});
  const json report = json::parse(testing::ReadFileOrDie(dir_ / "out/report.json"));
  ASSERT_TRUE(report.contains("nightly")) << report.dump(2).substr(0, 2000);
  std::set<std::tuple<std::string, std::string, std::string>> got;
  for (const auto& [section, lines] : report["nightly"]["sections"].items()) {
    for (const auto& l : lines) got.insert({l["key"], l["arch"], section});
  }
  EXPECT_EQ(got, ExpectedSections());
  const json& intake = report["nightly"]["intake"];
  EXPECT_EQ(intake["runs"], 2);
  EXPECT_EQ(intake["contradictory"], 0);
  EXPECT_EQ(intake["unmapped"], 0);
  const std::string md = testing::ReadFileOrDie(dir_ / "out/report.md");
  for (const char* heading :
       {"### Promoted", "### Demoted", "### Skipped", "### Thresholds changed",
        "### Reasons refreshed", "### New entries", "### Flaky", "### Flagged for a person"}) {
    EXPECT_NE(md.find(heading), std::string::npos) << heading;
  }
  EXPECT_EQ(testing::ReadFileOrDie(dir_ / "out/tt-forge-models.patch"), "")
      << "a nightly sweep edits no loader";

  // 2. The fixture's nightly over the patched checkout fails only where the truth keeps a
  // failure.
  std::set<std::string> still_failing;
  for (const auto& item : Truth()["entries"]) {
    const YAML::Node e = item.second;
    if (e["confirmation"] && (e["confirmation"].as<std::string>() == "flaky" ||
                              e["confirmation"].as<std::string>() == "flagged")) {
      still_failing.insert(item.first.as<std::string>());
    }
  }
  std::string out;
  ASSERT_EQ(testing::RunCommand({kSrc + "/tests/fixtures/make-nightly.sh", ws.string(),
                                 (dir_ / "after-nightly").string(), "--nights", "1"},
                                dir_, &out),
            0)
      << out;
  int testcases = 0;
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir_ / "after-nightly")) {
    if (f.path().extension() != ".xml") continue;
    auto r = junit::ParseJUnitFile(f.path());
    ASSERT_TRUE(r.ok()) << r.status();
    for (const auto& tc : r->cases) {
      ++testcases;
      if (tc.outcome == junit::Outcome::kFailed || tc.outcome == junit::Outcome::kError) {
        EXPECT_TRUE(still_failing.count(tc.key)) << tc.key << " fails after the patch";
      }
    }
  }
  EXPECT_GT(testcases, 40);

  // 3. Replayed from the native sweep's evidence: the same patch, byte for byte.
  StopAgents();
  StartAgents("replay", "replay", dir_ / "out/evidence");
  const std::string replayed = RunSweep({"--executor", "replay"});
  Outputs(replayed, dir_ / "replayed");
  EXPECT_EQ(testing::ReadFileOrDie(dir_ / "replayed/tt-xla.patch"),
            testing::ReadFileOrDie(dir_ / "out/tt-xla.patch"));
}

TEST_F(NightlySweepTest, NoConfirmProposesFromTheNightlyAloneWithoutAnAgent) {
  // A policy file naming one knob at its default value: the same decisions, and the report says
  // where each knob came from: the file, the fixture's one maintenance round (a hang skipped as
  // tt-xla writes it: the default forms, so the same decisions), or the default.
  const std::string policy = (dir_ / "ops-policy.yaml").string();
  testing::WriteFileOrDie(policy, "# the grid this team writes\ngrid: 0.01\n");
  const std::string id = RunSweep({"--no-confirm", "--policy", policy});
  Outputs(id, dir_ / "out");
  const auto ws = Patched(dir_ / "out/tt-xla.patch", "patched");
  ExpectEntries(ws, [](const YAML::Node& e) {
    return e["after_no_confirm"] ? e["after_no_confirm"] : e["after"];
  });
  const json report = json::parse(testing::ReadFileOrDie(dir_ / "out/report.json"));
  for (const auto& [section, lines] : report["nightly"]["sections"].items()) {
    for (const auto& l : lines) {
      if (section != "flagged") {
        EXPECT_EQ(l["decision"], "no_confirm") << l.dump();
      }
      EXPECT_TRUE(l["confirmations"].empty());
    }
  }
  const std::string md = testing::ReadFileOrDie(dir_ / "out/report.md");
  EXPECT_NE(md.find("--no-confirm"), std::string::npos);
  // The source is the file as given (its path escaped for markdown).
  const auto grid = md.find("| `grid` | `0.01` | ");
  ASSERT_NE(grid, std::string::npos) << md;
  EXPECT_EQ(md.substr(grid, md.find('\n', grid) - grid).find("ops-policy.yaml:2 |"),
            md.find('\n', grid) - grid - 19)
      << md;
  EXPECT_NE(md.find("| `nonsense` | `disable_pcc` | default |\n"), std::string::npos) << md;
  for (const char* knob : {"| `hang_reason` | ", "| `skip_bringup` | "}) {
    const auto at = md.find(knob);
    ASSERT_NE(at, std::string::npos) << knob << "\n" << md;
    const std::string line = md.substr(at, md.find('\n', at) - at);
    EXPECT_NE(line.find("| learned from 1 change in 1 round, newest "), std::string::npos) << line;
    EXPECT_NE(line.find(" 2025-01-01 whisper\\_mini/pytorch-Turbo-single\\_device-inference |"),
              std::string::npos)
        << line;
  }
  EXPECT_EQ(report["nightly"]["options"]["policy"]["hang_reason"]["value"], "\"Hang\"");
  EXPECT_EQ(report["nightly"]["options"]["policy"]["grid"]["source"], policy + ":2");
}

}  // namespace
}  // namespace triage
