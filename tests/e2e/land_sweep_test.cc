// Landing a fixture sweep (docs/landing.md) with real processes: a native sweep of ttxla-mini on
// n150 and p150, then `triagectl sweep apply --branch --commit --push` into two bare "remote"
// repositories. A fresh clone of the tt-xla branch, with its submodule, holds exactly what the
// patches make of the sweep's commits. Then the same sweep onto a later main where one of its
// entries was edited upstream: that entry is left out and named, the rest lands; and its pull
// request text.

#include <set>

#include "common/inventory/document.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/fixture_farm.h"
#include "tests/support/test_support.h"

namespace triage {
namespace {

using nlohmann::json;

const std::string kTraining =
    "tests/runner/test_config/torch/test_config_training_single_device.yaml";

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  for (auto l : util::SplitLines(text)) out.emplace_back(l);
  return out;
}

class LandSweepTest : public testing::FixtureFarmTest {
 protected:
  LandSweepTest() : FixtureFarmTest({"--tick_ms", "200", "--heartbeat_interval_seconds", "2"}) {}

  // git in dir (the test's identity and options); trimmed stdout.
  std::string Git(const std::filesystem::path& dir, const std::vector<std::string>& args,
                  int want_rc = 0) {
    std::string out;
    const int rc = testing::RunCommand(testing::GitTestArgv(dir, args), dir, &out);
    EXPECT_EQ(rc, want_rc) << "git " << util::StrJoin(args, " ") << ": " << out;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  }

  // A checkout of the remote tt-xla (at branch, "" = its default) with its submodule from the
  // remote tt-forge-models.
  std::filesystem::path Checkout(const std::string& name, const std::string& branch = "") {
    const auto dest = dir_ / name;
    std::vector<std::string> clone = {"clone", "-q"};
    if (!branch.empty()) clone.insert(clone.end(), {"--branch", branch});
    clone.insert(clone.end(), {(dir_ / "remote/tt-xla.git").string(), dest.string()});
    Git(dir_, clone);
    Git(dest, {"config", "submodule.third_party/tt_forge_models.url",
               (dir_ / "remote/tt-forge-models.git").string()});
    Git(dest, {"submodule", "update", "-q", "--init"});
    return dest;
  }

  // The entries' text of a YAML file, by key.
  static std::map<std::string, std::string> Entries(const std::filesystem::path& file) {
    const auto doc = inventory::Document::Parse(kTraining, testing::ReadFileOrDie(file));
    std::map<std::string, std::string> out;
    for (const auto& e : doc.entries()) out[e.key] = doc.EntryText(e);
    return out;
  }
};

TEST_F(LandSweepTest, ASweepLandsAsTwoBranchesAndOntoALaterMainEntryByEntry) {
  ASSERT_NO_FATAL_FAILURE(StartFixtureAgents("native", "native", {"cpu", "n150", "p150"}));
  std::string out;
  ASSERT_EQ(Ctl({"sweep", "start", "--repo", repo_.string(), "--arch", "n150,p150", "--reason",
                 "land", "-o", "json"},
                &out),
            0)
      << out;
  const std::string id = json::parse(out, nullptr, false).value("id", "");
  ASSERT_FALSE(id.empty()) << out;
  ASSERT_EQ(Ctl({"sweep", "watch", id}, &out), 0) << out;
  ASSERT_EQ(Ctl({"sweep", "report", id, "--out", (dir_ / "out").string()}, &out), 0) << out;
  const json report = json::parse(testing::ReadFileOrDie(dir_ / "out/report.json"));

  // What the patches make of the sweep's commits: the reference.
  const auto patched = testing::CloneFixtureWorkspace(repo_, dir_ / "patched");
  ASSERT_EQ(Ctl({"sweep", "apply", id, "--repo", patched.string()}, &out), 0) << out;
  std::vector<std::string> ttxla_files = Lines(Git(patched, {"diff", "--name-only"}));
  const auto patched_forge = patched / "third_party/tt_forge_models";
  std::vector<std::string> forge_files = Lines(Git(patched_forge, {"diff", "--name-only"}));
  ASSERT_FALSE(forge_files.empty());
  ASSERT_NE(std::find(ttxla_files.begin(), ttxla_files.end(), kTraining), ttxla_files.end());

  // Two bare remotes and a checkout of them at the sweep's commits.
  Git(dir_, {"clone", "-q", "--bare", repo_.string(), (dir_ / "remote/tt-xla.git").string()});
  Git(dir_, {"clone", "-q", "--bare", (repo_ / "third_party/tt_forge_models").string(),
             (dir_ / "remote/tt-forge-models.git").string()});
  const auto work = Checkout("work");
  const std::string branch = "triage/" + id;
  ASSERT_EQ(Ctl({"sweep", "apply", id, "--repo", work.string(), "--branch", branch, "--commit",
                 "--push", "origin", "--author", "Triage Farm <farm@example.com>", "-o", "json"},
                &out),
            0)
      << out;
  const json landed = json::parse(out.substr(out.find('{')), nullptr, false);
  ASSERT_TRUE(landed.is_object()) << out;
  EXPECT_TRUE(landed["left_out"].empty()) << out;
  const std::string forge_commit = landed["commits"].value("tt_forge_models", "");
  ASSERT_EQ(forge_commit.size(), 40u) << out;

  // Pushed: tt-forge-models' branch has one commit on the sweep's, tt-xla's one commit that
  // moves the submodule to it.
  const auto forge_remote = dir_ / "remote/tt-forge-models.git";
  const auto ttxla_remote = dir_ / "remote/tt-xla.git";
  EXPECT_EQ(Git(forge_remote, {"rev-parse", branch}), forge_commit);
  EXPECT_EQ(Git(forge_remote, {"rev-parse", branch + "^"}),
            report["commits"].value("tt_forge_models", ""));
  EXPECT_EQ(Git(ttxla_remote, {"rev-parse", branch + "^"}), report["commits"].value("tt-xla", ""));
  EXPECT_EQ(Git(ttxla_remote, {"rev-parse", branch + ":third_party/tt_forge_models"}),
            forge_commit);
  EXPECT_EQ(Git(ttxla_remote, {"log", "-1", "--format=%an <%ae>", branch}),
            "Triage Farm <farm@example.com>");
  const std::string message = Git(ttxla_remote, {"log", "-1", "--format=%B", branch});
  EXPECT_TRUE(message.starts_with("Triage sweep " + id + ": ")) << message;
  EXPECT_NE(message.find("## Changes by kind"), std::string::npos) << message;
  EXPECT_NE(message.find("### Promoted to EXPECTED_PASSING"), std::string::npos) << message;
  EXPECT_NE(message.find(forge_commit), std::string::npos) << message;
  const std::string forge_message = Git(forge_remote, {"log", "-1", "--format=%B", branch});
  EXPECT_NE(forge_message.find("### Registry lines in training_utils.py"), std::string::npos)
      << forge_message;
  // Only the files the patches change, in each repository.
  std::vector<std::string> changed =
      Lines(Git(ttxla_remote, {"diff", "--name-only", branch + "^", branch}));
  std::set<std::string> want(ttxla_files.begin(), ttxla_files.end());
  want.insert("third_party/tt_forge_models");
  EXPECT_EQ(std::set<std::string>(changed.begin(), changed.end()), want);
  changed = Lines(Git(forge_remote, {"diff", "--name-only", branch + "^", branch}));
  EXPECT_EQ(std::set<std::string>(changed.begin(), changed.end()),
            std::set<std::string>(forge_files.begin(), forge_files.end()));

  // A fresh clone of the branch, with its submodule: the patches' result, byte for byte.
  const auto fresh = Checkout("fresh", branch);
  for (const auto& f : ttxla_files) {
    EXPECT_EQ(testing::ReadFileOrDie(fresh / f), testing::ReadFileOrDie(patched / f)) << f;
  }
  for (const auto& f : forge_files) {
    EXPECT_EQ(testing::ReadFileOrDie(fresh / "third_party/tt_forge_models" / f),
              testing::ReadFileOrDie(patched_forge / f))
        << f;
  }

  // The branch exists now: landing again is refused unless --force, and nothing changes.
  const std::string head = Git(work, {"rev-parse", "HEAD"});
  EXPECT_EQ(
      Ctl({"sweep", "apply", id, "--repo", work.string(), "--branch", branch, "--commit"}, &out), 1)
      << out;
  EXPECT_NE(out.find("has a branch " + branch + " already: pass --force"), std::string::npos)
      << out;
  EXPECT_EQ(Git(work, {"rev-parse", "HEAD"}), head);

  // ---- onto a later main: upstream edited one entry the sweep changes (its status line) and
  // added a comment on top of the file.
  std::string edited_key;
  for (const auto& e : report["entries"]) {
    if (e["outcome"].is_object() && e.value("file", "") == kTraining &&
        e.value("fix_path", "") == "none" && e["review"].empty()) {
      edited_key = e.value("key", "");
      break;
    }
  }
  ASSERT_FALSE(edited_key.empty());
  const auto main_checkout = Checkout("upstream");
  std::string yaml = testing::ReadFileOrDie(main_checkout / kTraining);
  const std::size_t key_at = yaml.find("  " + edited_key + ":\n");
  ASSERT_NE(key_at, std::string::npos);
  const std::size_t status_end = yaml.find('\n', yaml.find('\n', key_at) + 1);
  yaml.insert(status_end, "  # checked upstream");
  yaml.insert(yaml.find('\n') + 1, "  # a line added upstream\n");
  testing::WriteFileOrDie(main_checkout / kTraining, yaml);
  Git(main_checkout, {"commit", "-q", "-am", "upstream edit"});
  Git(main_checkout, {"push", "-q", "origin", "HEAD:main"});

  const auto later = Checkout("later");
  ASSERT_EQ(Ctl({"sweep", "apply", id, "--repo", later.string(), "--onto", "origin/main",
                 "--branch", "onto-main", "--commit", "--exclude-review", "-o", "json"},
                &out),
            0)
      << out;
  const json onto = json::parse(out.substr(out.find('{')), nullptr, false);
  ASSERT_TRUE(onto.is_object()) << out;
  ASSERT_TRUE(onto["left_out"].contains(edited_key)) << out;
  EXPECT_NE(
      onto["left_out"][edited_key].get<std::string>().find("changed upstream since the sweep"),
      std::string::npos)
      << out;
  const auto after = Entries(later / kTraining);
  const auto reference = Entries(patched / kTraining);
  const auto upstream = Entries(main_checkout / kTraining);
  int flagged = 0;
  for (const auto& e : report["entries"]) {
    const std::string key = e.value("key", "");
    if (e.value("file", "") != kTraining || !e["outcome"].is_object()) continue;
    if (!e["review"].empty()) {  // flagged, with a change: left out by --exclude-review
      ++flagged;
      EXPECT_TRUE(onto["left_out"].contains(key)) << key;
      EXPECT_NE(onto["left_out"].value(key, "").find("flagged for a person"), std::string::npos);
    }
    if (onto["left_out"].contains(key)) {
      EXPECT_EQ(after.at(key), upstream.at(key)) << key;
    } else {
      EXPECT_EQ(after.at(key), reference.at(key)) << key;
    }
  }
  EXPECT_GT(flagged, 0);
  EXPECT_EQ(onto["left_out"].size(), static_cast<std::size_t>(flagged + 1)) << out;
  EXPECT_NE(testing::ReadFileOrDie(later / kTraining).find("  # a line added upstream\n"),
            std::string::npos);
  const std::string onto_message = Git(later, {"log", "-1", "--format=%B"});
  EXPECT_NE(onto_message.find("## Left out of this PR"), std::string::npos) << onto_message;
  EXPECT_NE(onto_message.find("Applied entry by entry onto tt-xla"), std::string::npos);

  // The pull-request text, as `sweep pr-body` prints it.
  ASSERT_EQ(Ctl({"sweep", "pr-body", id, "--repo", "tt-xla"}, &out), 0) << out;
  EXPECT_TRUE(out.starts_with("# Triage sweep " + id)) << out;
  EXPECT_NE(out.find(report["commits"].value("tt-xla", "").substr(0, 12)), std::string::npos);
  EXPECT_NE(out.find("## Needs a person"), std::string::npos) << out;
  EXPECT_EQ(Ctl({"sweep", "pr-body", id, "--exclude", "no/such/key"}, &out), 1) << out;
  EXPECT_NE(out.find("has no entry no/such/key"), std::string::npos) << out;
}

}  // namespace
}  // namespace triage
