// A real night, whole, at tt-xla's size (docs/fixture.md, "make_night"): tt-xla's own
// test-config files (../shared/data/tt-xla/head: 13 files, about 2,000 entries, files without
// blank lines between entries) as a git checkout, two nights of the runner's JUnit on n150 and
// p150 made by make_night (every entry, every rule of docs/nightly.md), then a real coordinator
// and triagectl: sweep start --no-confirm, watch, status, patch, report, pr-body and
// apply --branch --commit. Checked:
//  1. Every changed entry lands: the landing's entries equal report.json's changed entries, and
//     nothing is left out (the checkout is the sweep's own commit).
//  2. report.md is valid UTF-8 without NUL, and each entry's diff block holds exactly that
//     entry's lines of the patch: the blocks of a file together are the file's patch lines.
//  3. The PR body is under 60,000 characters, so is the commit message.
//  4. The counts per kind agree in every view: sweep status, the last watch line, report.json,
//     report.md (totals and section headings), pr-body (its table and counts), the commit
//     message's title and the coordinator's /metrics.

#include <algorithm>
#include <csignal>
#include <cstring>
#include <iostream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "common/util/strings.h"
#include "common/util/text.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_support.h"

namespace triage {
namespace {

using nlohmann::json;
using Counts = std::map<std::string, long>;

const std::string kMakeNight = TRIAGE_BINARY_DIR "/tests/tools/make_night";

// The nightly kinds (docs/report.md, "Counting"), with their titles in report.md and the names
// the PR title gives the kinds with a change.
struct Kind {
  const char* id;
  const char* md_title;
  const char* pr_title;  // in the PR's table
  const char* pr_short;  // "" = not in the PR title
};
constexpr Kind kKinds[] = {
    {"promoted", "Promoted", "Promoted", "promoted"},
    {"demoted", "Demoted", "Demoted to KNOWN_FAILURE_XFAIL", "demoted"},
    {"skipped", "Skipped", "Skipped (NOT_SUPPORTED_SKIP)", "skipped"},
    {"unskipped", "Unskipped", "Unskipped (NOT_SUPPORTED_SKIP to KNOWN_FAILURE_XFAIL)",
     "unskipped"},
    {"skips_refreshed", "Skips refreshed", "Skips with refreshed reasons", "skips refreshed"},
    {"thresholds", "Thresholds changed", "Thresholds changed", "thresholds"},
    {"reasons", "Reasons refreshed", "Reasons refreshed", "reasons refreshed"},
    {"new_entries", "New entries", "New entries", "new entries"},
    {"flaky", "Flaky", "Flaky (not changed)", ""},
    {"unconfirmed", "Unconfirmed", "Unconfirmed (not changed)", ""},
    {"already", "Already at target state", "Already at target", ""},
    {"flagged", "Flagged for a person", "Flagged for a person (not changed)", ""},
};

bool IsKind(const std::string& s) {
  for (const auto& k : kKinds) {
    if (s == k.id) return true;
  }
  return false;
}

// Only the nightly kinds of a count map.
Counts KindsOf(const Counts& all) {
  Counts out;
  for (const auto& [k, n] : all) {
    if (IsKind(k) && n > 0) out[k] = n;
  }
  return out;
}

Counts FromJsonMap(const json& j) {
  Counts out;
  if (!j.is_object()) return out;
  for (const auto& [k, v] : j.items()) out[k] = v.get<long>();
  return out;
}

// "a=1 b=2" (sweep watch's counts).
Counts FromPairs(const std::string& text) {
  Counts out;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    const auto eq = word.find('=');
    if (eq == std::string::npos) continue;
    out[word.substr(0, eq)] = std::stol(word.substr(eq + 1));
  }
  return out;
}

// The patch's changed lines ('+' and '-', headers aside) per file of the tt-xla patch.
std::map<std::string, std::multiset<std::string>> PatchLines(const std::string& patch) {
  std::map<std::string, std::multiset<std::string>> out;
  std::string file;
  for (std::string_view line : util::SplitLines(patch)) {
    if (line.starts_with("+++ ")) {
      file = std::string(line.substr(line.starts_with("+++ b/") ? 6 : 4));
      continue;
    }
    if (line.starts_with("--- ") || line.starts_with("diff ") || line.starts_with("index ")) {
      continue;
    }
    if ((line.starts_with("+") || line.starts_with("-")) && !file.empty()) {
      // Blank lines move between entries: the entries' text is what is compared.
      if (util::TrimWhitespace(line.substr(1)).empty()) continue;
      out[file].insert(std::string(line));
    }
  }
  return out;
}

class RealNightTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::SetGitTestEnv();
    dir_ = tmp_.path();
  }
  void TearDown() override {
    if (coordinator_.running()) {
      coordinator_.Signal(SIGTERM);
      coordinator_.Wait(std::chrono::seconds(20));
    }
  }

  int Ctl(std::vector<std::string> args, std::string* out) {
    return testing::RunCtl(control_port_, std::move(args), dir_, out);
  }

  testing::TempDir tmp_;
  std::filesystem::path dir_;
  int control_port_ = 0;
  testing::ChildProcess coordinator_;
};

TEST_F(RealNightTest, EveryOutputIsRightAtTtXlasSize) {
  TRIAGE_REQUIRE_SHARED_DATA(shared);
  // tt-xla's test-config files as a checkout with a tt_forge_models submodule.
  std::map<std::string, std::string> yaml;
  const auto configs = shared / "head/tests/runner/test_config";
  for (const auto& f : std::filesystem::recursive_directory_iterator(configs)) {
    if (!f.is_regular_file()) continue;
    yaml["tests/runner/test_config/" + f.path().lexically_relative(configs).string()] =
        testing::ReadFileOrDie(f.path());
  }
  ASSERT_GE(yaml.size(), 10u);
  const auto repo = testing::MakeTtXlaRepo(dir_ / "src", yaml, {});
  ASSERT_FALSE(HasFailure());

  std::string out;
  ASSERT_EQ(testing::RunCommand({kMakeNight, "--repo", repo.string(), "--out",
                                 (dir_ / "nights").string(), "--nights", "2", "--archs",
                                 "n150,p150", "--summary", (dir_ / "summary.json").string()},
                                dir_, &out),
            0)
      << out;
  const json summary = json::parse(testing::ReadFileOrDie(dir_ / "summary.json"));
  EXPECT_GE(summary.value("testcases", 0), 7'000) << "two nights, two archs, every entry";

  const int agent_port = testing::FreePort();
  control_port_ = testing::FreePort();
  const int metrics_port = testing::FreePort();
  // As StartLoopbackCoordinator, with /metrics on.
  ASSERT_TRUE(coordinator_.Start(
      {testing::kCoordinatorBinary, "--insecure", "--data_dir", (dir_ / "cdata").string(),
       "--agent_address", "127.0.0.1:" + std::to_string(agent_port), "--control_address",
       "127.0.0.1:" + std::to_string(control_port_), "--metrics_address",
       "127.0.0.1:" + std::to_string(metrics_port)},
      dir_, dir_ / "coordinator.log", testing::GitTestEnv()));
  ASSERT_TRUE(testing::WaitForCoordinator(control_port_, dir_, std::chrono::seconds(15)))
      << testing::ReadFileOrDie(dir_ / "coordinator.log");

  ASSERT_EQ(
      Ctl({"sweep", "start", "--repo", repo.string(), "--nightly",
           (dir_ / "nights/night-1").string(), "--nightly", (dir_ / "nights/night-2").string(),
           "--no-confirm", "--reason", "real-size night", "-o", "json"},
          &out),
      0)
      << out;
  const json started = json::parse(out.substr(out.find('{')), nullptr, false);
  ASSERT_TRUE(started.is_object()) << out;
  const std::string id = started.value("id", "");
  ASSERT_FALSE(id.empty()) << out;
  std::string watch;
  ASSERT_EQ(Ctl({"sweep", "watch", id}, &watch), 0) << watch;

  // --- The views' counts.
  ASSERT_EQ(Ctl({"sweep", "status", id, "-o", "json"}, &out), 0) << out;
  const json status = json::parse(out.substr(out.find('{')));
  ASSERT_EQ(status.value("state", ""), "succeeded") << out;
  const Counts by_status = FromJsonMap(status["entries"]["by_outcome"]);

  std::string last_line;
  for (std::string_view l : util::SplitLines(watch)) {
    if (l.find("entries decided") != std::string_view::npos) last_line = std::string(l);
  }
  ASSERT_FALSE(last_line.empty()) << watch;
  const auto counts_at = last_line.find("entries decided") + std::strlen("entries decided");
  const Counts by_watch =
      FromPairs(last_line.substr(counts_at, last_line.find("review=") - counts_at));

  const auto report_dir = dir_ / "report";
  ASSERT_EQ(Ctl({"sweep", "report", id, "--out", report_dir.string()}, &out), 0) << out;
  const json report = json::parse(testing::ReadFileOrDie(report_dir / "report.json"));
  const Counts by_report_json = FromJsonMap(report["totals"]["by_outcome"]);
  const std::string md = testing::ReadFileOrDie(report_dir / "report.md");

  Counts by_report_md;
  {
    const auto totals = md.find("entries decided: ");
    ASSERT_NE(totals, std::string::npos);
    const auto end = md.find(". Flagged for review", totals);
    std::istringstream list(md.substr(totals + 17, end - totals - 17));
    std::string part;
    while (std::getline(list, part, ',')) {
      part = std::string(util::TrimWhitespace(std::string_view(part)));
      const auto sp = part.rfind(' ');
      by_report_md[part.substr(0, sp)] = std::stol(part.substr(sp + 1));
    }
  }
  Counts md_sections;
  for (const auto& k : kKinds) {
    const std::regex heading("\n### " + std::string(k.md_title) + " \\((\\d+)\\)\n");
    std::smatch m;
    if (std::regex_search(md, m, heading)) md_sections[k.id] = std::stol(m[1]);
  }

  ASSERT_EQ(Ctl({"sweep", "pr-body", id, "-o", "json"}, &out), 0) << out;
  const json pr = json::parse(out.substr(out.find('{')));
  EXPECT_FALSE(pr.contains("forge")) << "a nightly sweep changes nothing in tt-forge-models";
  const json& ttxla_pr = pr["tt-xla"];
  const Counts by_pr = FromJsonMap(ttxla_pr["counts"]);
  const std::string body = ttxla_pr.value("body", "");

  const auto land = dir_ / "land";
  ASSERT_EQ(testing::RunCommand(testing::GitTestArgv(dir_, {"clone", "-q", "--recurse-submodules",
                                                            repo.string(), land.string()}),
                                dir_, &out),
            0)
      << out;
  ASSERT_EQ(Ctl({"sweep", "apply", id, "--repo", land.string(), "--branch", "nightly-real",
                 "--commit", "-o", "json"},
                &out),
            0)
      << out;
  const json landed = json::parse(out.substr(out.find('{')));
  ASSERT_EQ(
      testing::RunCommand(testing::GitTestArgv(land, {"log", "-1", "--format=%B"}), land, &out), 0);
  const std::string commit_message = out;
  const std::string commit_title = commit_message.substr(0, commit_message.find('\n'));

  Counts by_title;
  for (const auto& k : kKinds) {
    if (*k.pr_short == '\0') continue;
    const std::regex count("(?:: |, )(\\d+) " + std::string(k.pr_short) + "(?:,|$)");
    std::smatch m;
    if (std::regex_search(commit_title, m, count)) by_title[k.id] = std::stol(m[1]);
  }

  ASSERT_EQ(testing::RunCommand(
                {"/usr/bin/python3", "-c",
                 "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], "
                 "timeout=10).read().decode())",
                 "http://127.0.0.1:" + std::to_string(metrics_port) + "/metrics"},
                dir_, &out),
            0)
      << out;
  Counts by_metrics;
  {
    const std::regex series(
        "triage_entry_outcomes_total\\{[^}]*outcome=\"([^\"]+)\"[^}]*\\} ([0-9.e+]+)");
    for (std::sregex_iterator it(out.begin(), out.end(), series), end; it != end; ++it) {
      by_metrics[(*it)[1]] += std::lround(std::stod((*it)[2]));
    }
  }

  // 4. One count, every view.
  const Counts kinds = KindsOf(by_report_json);
  ASSERT_FALSE(kinds.empty()) << report["totals"].dump();
  EXPECT_GE(kinds.size(), 6u) << "the night exercises most kinds: " << report["totals"].dump();
  EXPECT_EQ(by_status, by_report_json) << "sweep status vs report.json";
  EXPECT_EQ(by_watch, by_report_json) << "the last watch line vs report.json: " << last_line;
  EXPECT_EQ(by_report_md, by_report_json) << "report.md's totals vs report.json";
  EXPECT_EQ(by_metrics, by_report_json) << "/metrics vs report.json";
  EXPECT_EQ(KindsOf(md_sections), kinds) << "report.md's section headings";
  EXPECT_EQ(KindsOf(by_pr), kinds) << "pr-body's counts";
  Counts change_kinds;
  for (const auto& k : kKinds) {
    if (*k.pr_short != '\0' && kinds.count(k.id)) change_kinds[k.id] = kinds.at(k.id);
  }
  EXPECT_EQ(by_title, change_kinds) << "the commit's title: " << commit_title;
  for (const auto& [kind, n] : kinds) {
    for (const auto& k : kKinds) {
      if (kind != k.id) continue;
      EXPECT_NE(body.find(util::StrCat("| ", k.pr_title, " | ", n, " |\n")), std::string::npos)
          << kind << ": the PR's table";
    }
  }

  // 1. Every changed entry lands, none left out.
  std::set<std::string> changed;
  for (const auto& e : report["entries"]) {
    if (e.contains("outcome") && e["outcome"].is_object()) changed.insert(e.value("key", ""));
  }
  std::set<std::string> landed_keys;
  for (const auto& k : landed["landed"]) landed_keys.insert(k.get<std::string>());
  EXPECT_GT(changed.size(), 500u);
  EXPECT_EQ(landed_keys, changed);
  EXPECT_TRUE(landed["left_out"].empty()) << landed["left_out"].dump(1);
  EXPECT_TRUE(landed["problems"].empty()) << landed["problems"].dump(1);

  // 2. report.md: valid UTF-8, no NUL; each diff block is its entry's part of the patch.
  EXPECT_EQ(md.find('\0'), std::string::npos);
  std::size_t longest = 0;
  for (std::string_view line : util::SplitLines(md)) longest = std::max(longest, line.size());
  EXPECT_LT(longest, 4'000u) << "a table row a person can read (failure clusters cap theirs)";
  EXPECT_FALSE(util::FirstInvalidUtf8(md).has_value());
  ASSERT_EQ(Ctl({"sweep", "patch", id, "--out", (dir_ / "patch").string()}, &out), 0) << out;
  auto patch = PatchLines(testing::ReadFileOrDie(dir_ / "patch/tt-xla.patch"));
  std::map<std::string, std::string> file_of;
  for (const auto& e : report["entries"]) file_of[e.value("key", "")] = e.value("file", "");
  std::map<std::string, std::multiset<std::string>> blocks;
  std::set<std::string> with_block;
  {
    std::string key;
    bool in_block = false;
    for (std::string_view line : util::SplitLines(md)) {
      if (line.starts_with("- `")) {
        key = std::string(line.substr(3, line.find('`', 3) - 3));
        continue;
      }
      if (line == "    ```diff") {
        in_block = true;
        with_block.insert(key);
        continue;
      }
      if (in_block && line == "    ```") {
        in_block = false;
        continue;
      }
      if (in_block && line.size() > 5 && (line[4] == '+' || line[4] == '-')) {
        if (util::TrimWhitespace(line.substr(5)).empty()) continue;
        blocks[file_of[key]].insert(std::string(line.substr(4)));
      }
    }
  }
  EXPECT_EQ(with_block, changed) << "one diff block per changed entry";
  for (const auto& [file, lines] : patch) {
    std::vector<std::string> only_md, only_patch;
    std::set_difference(blocks[file].begin(), blocks[file].end(), lines.begin(), lines.end(),
                        std::back_inserter(only_md));
    std::set_difference(lines.begin(), lines.end(), blocks[file].begin(), blocks[file].end(),
                        std::back_inserter(only_patch));
    EXPECT_TRUE(only_md.empty() && only_patch.empty())
        << file << ": report.md's blocks vs the patch; only in report.md:\n  "
        << util::StrJoin(only_md, "\n  ") << "\nonly in the patch:\n  "
        << util::StrJoin(only_patch, "\n  ");
  }
  EXPECT_EQ(blocks.size(), patch.size());

  // The same sweep as one pull request per kind (--split-by kind): every changed entry lands in
  // exactly one part, each part on its own branch from the sweep's commit.
  const auto split = dir_ / "split";
  ASSERT_EQ(testing::RunCommand(testing::GitTestArgv(dir_, {"clone", "-q", "--recurse-submodules",
                                                            repo.string(), split.string()}),
                                dir_, &out),
            0)
      << out;
  ASSERT_EQ(Ctl({"sweep", "apply", id, "--repo", split.string(), "--branch", "night", "--commit",
                 "--split-by", "kind", "-o", "json"},
                &out),
            0)
      << out;
  const json parts = json::parse(out.substr(out.find('{')))["parts"];
  std::set<std::string> in_parts;
  std::size_t landed_in_parts = 0;
  Counts part_sizes;
  for (const auto& part : parts) {
    for (const auto& k : part["landed"]) in_parts.insert(k.get<std::string>());
    landed_in_parts += part["landed"].size();
    part_sizes[part.value("part", "")] = static_cast<long>(part["landed"].size());
    EXPECT_TRUE(part["left_out"].empty()) << part.dump(1);
    ASSERT_EQ(testing::RunCommand(testing::GitTestArgv(split, {"log", "-1", "--format=%B",
                                                               part.value("branch", "")}),
                                  split, &out),
              0)
        << out;
    EXPECT_LT(out.size(), 61'000u) << part.value("part", "");
    EXPECT_NE(out.find("(" + part.value("part", "") + ")"), std::string::npos)
        << out.substr(0, 200);
  }
  EXPECT_EQ(in_parts, changed);
  EXPECT_EQ(landed_in_parts, changed.size()) << "each entry in one part";
  EXPECT_EQ(part_sizes, change_kinds) << "a part per kind of change, of its count";

  // 3. Sizes a forge takes.
  EXPECT_LT(body.size(), 60'000u);
  EXPECT_LT(commit_message.size(), 60'000u + commit_title.size() + 2);
  EXPECT_NE(body.find("<details>"), std::string::npos);

  std::cout << "real night: " << summary.value("testcases", 0) << " testcases, "
            << report["entries"].size() << " entries in the sweep, " << changed.size()
            << " changed, " << landed_keys.size() << " landed; report.md " << md.size()
            << " bytes; PR body " << body.size() << " characters\n";
  const auto at = [](const Counts& c, const std::string& k) {
    const auto it = c.find(k);
    return it == c.end() ? 0L : it->second;
  };
  for (const auto& [kind, n] : kinds) {
    std::cout << "  " << kind << ": status " << at(by_status, kind) << ", watch "
              << at(by_watch, kind) << ", report.json " << n << ", report.md "
              << at(md_sections, kind) << ", pr-body " << at(by_pr, kind) << ", title "
              << at(by_title, kind) << ", /metrics " << at(by_metrics, kind) << "\n";
  }
}

}  // namespace
}  // namespace triage
