// The whole farm on the ttxla-mini fixture with real processes, real torch and real pytest:
// a coordinator, three agents (n150, p150, cpu_only) and triagectl.
//  1. Every entry reaches its ground-truth outcome per arch (tests/fixtures/ttxla-mini/
//     ground_truth.yaml), with the expected registry lines, loader edits, the second wave and
//     the playbooks that ran on it (a chain: dtype_bfloat16, then unpack_forward_output).
//  2. The patches apply to a fresh copy, and the fixture's own pytest with the new YAML (no
//     --force-run, no --runxfail) passes every EXPECTED_PASSING entry, xfails every
//     KNOWN_FAILURE_XFAIL entry, and nothing errors.
//  3. The same sweep through the replay executor, answered from the evidence the native run
//     recorded, gives the same outcomes and byte-identical patches, and records the evidence it
//     answered from like a native run: every decided entry links its evidence, and the replay's
//     own evidence/ replays again to the same outcomes and patches.
//  Between 1 and 2, `sweep durations` writes what the native sweep measured (a .test_durations
//  file per arch); the replay sweep is planned with it and measures the same durations.
// Then week over week: a second native sweep after a change of the emulated device (one fixed
// entry now fails, one failing entry now passes); `triagectl sweep diff` and the second report's
// week-over-week section name exactly those transitions.

#include <algorithm>
#include <iostream>
#include <set>
#include <thread>

#include "common/inventory/document.h"
#include "common/junit/junit.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/fixture_farm.h"
#include "tests/support/test_support.h"
#include "yaml-cpp/yaml.h"

namespace triage {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string kSrc = TRIAGE_SOURCE_DIR;
const std::string kTraining =
    "tests/runner/test_config/torch/test_config_training_single_device.yaml";

class FixtureSweepTest : public testing::FixtureFarmTest {
 protected:
  FixtureSweepTest() : FixtureFarmTest({"--tick_ms", "200", "--heartbeat_interval_seconds", "2"}) {}

  // Three agents (cpu, n150, p150) named <name>-<arch>.
  void StartAgents(const std::string& executor, const std::filesystem::path& replay_dir,
                   const std::string& name = "") {
    std::vector<std::string> more;
    if (!replay_dir.empty()) more = {"--replay_dir", replay_dir.string()};
    ASSERT_NO_FATAL_FAILURE(StartFixtureAgents(name.empty() ? executor : name, executor,
                                               {"cpu", "n150", "p150"}, more));
  }

  // Starts a sweep (planned with a .test_durations file when given) and follows it to its end;
  // returns the sweep id.
  std::string RunSweep(const std::string& executor, const std::filesystem::path& durations = {}) {
    std::string out;
    std::vector<std::string> args = {"sweep",    "start",     "--repo",     repo_.string(),
                                     "--arch",   "n150,p150", "--executor", executor,
                                     "--reason", "e2e",       "-o",         "json"};
    if (!durations.empty()) args.insert(args.end(), {"--durations", durations.string()});
    EXPECT_EQ(Ctl(args, &out), 0) << out;
    const std::string id = json::parse(out, nullptr, false).value("id", "");
    EXPECT_FALSE(id.empty()) << out;
    EXPECT_EQ(Ctl({"sweep", "watch", id}, &out), 0)
        << out << testing::ReadFileOrDie(dir_ / "coordinator.log");
    // The last progress line (before "sweep ... succeeded").
    const auto lines = util::SplitLines(out);
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
      if (it->starts_with("[")) {
        last_watch_line_ = std::string(*it);
        break;
      }
    }
    return id;
  }

  json Report(const std::string& id, const std::filesystem::path& out_dir) {
    std::string out;
    EXPECT_EQ(Ctl({"sweep", "report", id, "--out", out_dir.string()}, &out), 0) << out;
    EXPECT_EQ(Ctl({"sweep", "patch", id, "--out", out_dir.string()}, &out), 0) << out;
    json report = json::parse(testing::ReadFileOrDie(out_dir / "report.json"), nullptr, false);
    // One count everywhere: the report's totals, `sweep status` and the last watch line.
    EXPECT_EQ(Ctl({"sweep", "status", id, "-o", "json"}, &out), 0) << out;
    const json entries = json::parse(out, nullptr, false)["entries"];
    const json& totals = report["totals"];
    EXPECT_EQ(entries.value("by_outcome", json::object()), totals["by_outcome"]) << out;
    EXPECT_EQ(entries.value("review", 0), totals["review"]) << out;
    EXPECT_EQ(entries.value("total", 0), totals["entries"]) << out;
    EXPECT_NE(last_watch_line_.find(util::StrCat(totals["decided"].get<int>(), "/",
                                                 totals["entries"].get<int>(), " entries decided")),
              std::string::npos)
        << last_watch_line_;
    EXPECT_NE(last_watch_line_.find(util::StrCat("review=", totals["review"].get<int>())),
              std::string::npos)
        << last_watch_line_;
    return report;
  }

  // `sweep durations ID --arch A --out FILE`: the file's durations (node id -> seconds).
  json Durations(const std::string& id, const std::string& arch,
                 const std::filesystem::path& file) {
    std::string out;
    EXPECT_EQ(Ctl({"sweep", "durations", id, "--arch", arch, "--out", file.string()}, &out), 0)
        << out;
    return json::parse(testing::ReadFileOrDie(file), nullptr, false);
  }

  std::string last_watch_line_;
};

// The expected fields of ground_truth.yaml as report.json writes them (null when absent).
json Expected(const YAML::Node& n) {
  if (n["unchanged"] && n["unchanged"].as<bool>()) return nullptr;
  json o;
  for (const char* f : {"status", "bringup_status", "reason"}) {
    o[f] = n[f] && !n[f].IsNull() ? json(n[f].as<std::string>()) : json(nullptr);
  }
  o["assert_pcc"] = n["assert_pcc"] && !n["assert_pcc"].IsNull() ? json(n["assert_pcc"].as<bool>())
                                                                 : json(nullptr);
  if (n["markers"] && n["markers"].IsSequence()) {
    o["markers"] = json::array();
    for (const auto& m : n["markers"]) o["markers"].push_back(m.as<std::string>());
  } else {
    o["markers"] = nullptr;
  }
  return o;
}

TEST_F(FixtureSweepTest, NativeSweepReachesTheGroundTruthAndReplayAgrees) {
  const YAML::Node truth = YAML::LoadFile(kSrc + "/tests/fixtures/ttxla-mini/ground_truth.yaml");

  // ---- 1. the native sweep
  StartAgents("native", {});
  const std::string native = RunSweep("native");
  const json report = Report(native, dir_ / "out-native");
  ASSERT_TRUE(report.is_object());
  {
    // Models that crash or time out on the device decide their entries: no farm failure.
    std::string out;
    ASSERT_EQ(Ctl({"sweep", "status", native, "-o", "json"}, &out), 0) << out;
    EXPECT_EQ(json::parse(out, nullptr, false).value("failed_shards", -1), 0) << out;
  }
  std::map<std::string, json> entries;
  for (const auto& e : report["entries"]) entries[e["key"]] = e;
  int checked = 0, chained = 0;
  for (const auto& kv : truth["entries"]) {
    const std::string key = kv.first.as<std::string>();
    SCOPED_TRACE(key);
    ASSERT_TRUE(entries.count(key)) << "the sweep did not take " << key;
    const json& e = entries[key];
    EXPECT_EQ(e["playbook"], kv.second["playbook"].as<std::string>());
    EXPECT_EQ(e["flavor"], kv.second["flavor"].as<std::string>());
    EXPECT_EQ(e["wave"], kv.second["wave"].as<int>()) << "the wave whose result is final";
    json chain = json::array({kv.second["playbook"].as<std::string>()});
    if (kv.second["playbooks"]) {
      chain = json::array();
      for (const auto& p : kv.second["playbooks"]) chain.push_back(p.as<std::string>());
    }
    EXPECT_EQ(e["playbooks"], chain) << "the playbooks that ran on it, in order";
    chained += chain.size() > 1;
    // A fixed entry whose fix made a judgment call (docs/playbooks.md) carries the flag.
    if (kv.second["review"] && kv.second["review"].as<bool>()) {
      EXPECT_FALSE(e["review"].empty()) << "the fix is flagged for review";
    }
    for (const auto& arch : kv.second["expected"]) {
      const std::string a = arch.first.as<std::string>();
      EXPECT_EQ(e["arch_outcomes"][a], Expected(arch.second))
          << a << ": " << e.dump(2).substr(0, 1500);
      if (arch.second["review"] && arch.second["review"].as<bool>()) {
        EXPECT_FALSE(e["review"].empty()) << a << ": flagged for review";
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 36);
  EXPECT_GE(chained, 1) << "no entry of the fixture was chained";
  for (const auto& k : truth["not_selected"]) {
    EXPECT_FALSE(entries.count(k.as<std::string>())) << k.as<std::string>() << " was touched";
  }
  // Every outcome the patch leaves failing is in exactly one failure cluster (docs/report.md).
  std::map<std::string, int> clustered;  // key + ' ' + arch -> clusters naming it
  int cluster_size_sum = 0;
  for (const auto& c : report["clusters"]) {
    cluster_size_sum += c["size"].get<int>();
    for (const auto& m : c["entries"]) {
      for (const auto& a : m["archs"])
        clustered[m["key"].get<std::string>() + " " + a.get<std::string>()]++;
    }
  }
  int failing = 0;
  for (const auto& [key, e] : entries) {
    for (const auto& [arch, o] : e["arch_outcomes"].items()) {
      if (!o.is_object()) continue;
      const std::string status = o.value("status", "");
      if (status != "KNOWN_FAILURE_XFAIL" && status != "NOT_SUPPORTED_SKIP") continue;
      ++failing;
      EXPECT_EQ(clustered[key + " " + arch], 1) << key << " on " << arch;
    }
  }
  EXPECT_GT(failing, 0) << "the fixture leaves failures to cluster";
  EXPECT_LE(cluster_size_sum, failing);
  // The inference YAML is never edited; an inference entry the fix makes stale is named for review.
  const std::string xla_patch = testing::ReadFileOrDie(dir_ / "out-native/tt-xla.patch");
  EXPECT_EQ(xla_patch.find("inference"), std::string::npos) << xla_patch.substr(0, 2000);
  for (const auto& k : truth["inference"]["review"]) {
    const std::string inference_key = k.as<std::string>();
    bool named = false;
    for (const auto& [key, e] : entries) {
      named |= e["inference"].is_string() &&
               e["inference"].get<std::string>().find(inference_key) != std::string::npos;
    }
    EXPECT_TRUE(named) << inference_key << " is not named in any entry's inference note";
  }
  // Registry lines and loader edits.
  std::set<std::string> added, removed;
  for (const auto& r : report["registry"]) {
    if (r["op"] == "add") {
      added.insert(r["class"].get<std::string>() + "." + r["attr"].get<std::string>());
    } else {
      removed.insert(r["class"].get<std::string>());
    }
  }
  std::set<std::string> want_added, want_removed, want_files;
  for (const auto& kv : truth["entries"]) {
    for (const auto& a : kv.second["registry"]["add"]) want_added.insert(a.as<std::string>());
    for (const auto& r : kv.second["registry"]["remove"]) want_removed.insert(r.as<std::string>());
    for (const auto& f : kv.second["files"]) want_files.insert(f.as<std::string>());
  }
  EXPECT_EQ(added, want_added);
  EXPECT_EQ(removed, want_removed);
  const std::string forge_patch = testing::ReadFileOrDie(dir_ / "out-native/tt-forge-models.patch");
  for (const auto& f : want_files) {
    EXPECT_NE(forge_patch.find("diff --git a/" + f + " b/" + f), std::string::npos) << f;
  }
  for (const auto& kv : truth["entries"]) {
    if (kv.second["override"]) {
      // One statement, or a block of them (lines joined with \n, relative to the method body).
      const std::string statements = kv.second["override"].as<std::string>();
      for (auto line : util::SplitLines(statements)) {
        EXPECT_NE(forge_patch.find("\n+        " + std::string(line) + "\n"), std::string::npos)
            << kv.first.as<std::string>() << ": " << line;
      }
    }
    for (const char* field : {"loader_edit", "chained_loader_edit"}) {
      if (!kv.second[field]) continue;
      // Every line the edit adds (an edit may span several lines) is an added line of the patch.
      const std::string before = kv.second[field]["before"].as<std::string>();
      const std::string after = kv.second[field]["after"].as<std::string>();
      const auto before_lines = util::SplitLines(before);
      for (auto line : util::SplitLines(after)) {
        if (std::find(before_lines.begin(), before_lines.end(), line) != before_lines.end()) {
          continue;
        }
        EXPECT_NE(forge_patch.find("\n+" + std::string(line) + "\n"), std::string::npos)
            << kv.first.as<std::string>() << ": " << line;
      }
    }
  }

  // ---- 1b. measured durations: every entry verified from a testcase on an arch has its time,
  // written as the .test_durations file the next sweep plans with (the replay below).
  std::string out;
  std::map<std::string, json> measured;  // arch -> the written file's object
  for (const std::string arch : {"n150", "p150"}) {
    SCOPED_TRACE(arch);
    const auto file = dir_ / (arch + ".test_durations");
    const json d = Durations(native, arch, file);
    ASSERT_TRUE(d.is_object()) << testing::ReadFileOrDie(file);
    int timed = 0;
    for (const auto& [key, e] : entries) {
      if (!e["verdicts"].contains(arch)) continue;
      const std::string verdict = e["verdicts"][arch].value("verdict", "");
      const std::string node = e.value("node_id", "");
      EXPECT_EQ(node, "tests/runner/test_models.py::test_all_models_torch[" + key + "]");
      if (verdict == "crash" || verdict == "no_evidence") {
        // The run died before pytest wrote a testcase for it: nothing was measured.
        EXPECT_FALSE(d.contains(node)) << key;
        continue;
      }
      ASSERT_TRUE(d.contains(node)) << key << " (" << verdict << ") has no measured time";
      EXPECT_GT(d[node].get<double>(), 0) << key;
      EXPECT_EQ(d[node], e["durations"].value(arch, json())) << key << ": as report.json says";
      ++timed;
    }
    EXPECT_EQ(static_cast<int>(d.size()), timed) << "only the sweep's verified entries";
    EXPECT_GE(timed, 10);
    // As pytest-split writes it (json.dump, sort_keys=True, indent=4); the same on stdout.
    const std::string text = testing::ReadFileOrDie(file);
    EXPECT_TRUE(text.starts_with("{\n    \"tests/runner/test_models.py::")) << text.substr(0, 200);
    EXPECT_TRUE(text.ends_with("\n}")) << "no newline after the object, as json.dump";
    EXPECT_EQ(Ctl({"sweep", "durations", native, "--arch", arch}, &out), 0) << out;
    EXPECT_EQ(out, text + "\n");
    measured[arch] = d;
  }
  // The default arch is the sweep's first; --merge keeps the other tests of a file and
  // overwrites the measured ones.
  const std::string some_node = measured["n150"].begin().key();
  testing::WriteFileOrDie(dir_ / "old.test_durations",
                          json{{"tests/other.py::test_kept", 1.5}, {some_node, 999.0}}.dump());
  ASSERT_EQ(
      Ctl({"sweep", "durations", native, "--merge", (dir_ / "old.test_durations").string()}, &out),
      0)
      << out;
  json merged_durations = json::parse(out, nullptr, false);
  EXPECT_EQ(merged_durations["tests/other.py::test_kept"], 1.5);
  EXPECT_EQ(merged_durations[some_node], measured["n150"][some_node]);
  EXPECT_EQ(merged_durations.size(), measured["n150"].size() + 1);
  // What it refuses, saying why.
  EXPECT_EQ(Ctl({"sweep", "durations", native, "--arch", "n300-llmbox"}, &out), 1) << out;
  EXPECT_NE(out.find("measured no entry on n300-llmbox (archs with measured entries: n150 ("),
            std::string::npos)
      << out;
  EXPECT_EQ(Ctl({"sweep", "durations", "sw-nope"}, &out), 1) << out;
  EXPECT_NE(out.find("no sweep sw-nope"), std::string::npos) << out;

  // ---- 2. truthfulness: the new YAML on a fresh copy, the fixture's own pytest, no overrides
  const auto fresh = testing::CloneFixtureWorkspace(repo_, dir_ / "fresh");
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(Ctl({"sweep", "apply", native, "--repo", fresh.string()}, &out), 0) << out;
  inventory::Document yaml =
      inventory::Document::Parse(kTraining, testing::ReadFileOrDie(fresh / kTraining));
  ASSERT_TRUE(yaml.ok());
  for (const std::string arch : {"n150", "p150"}) {
    SCOPED_TRACE(arch);
    const auto xml = dir_ / ("truth-" + arch + ".xml");
    // The runner runs a KNOWN_FAILURE_XFAIL test's body before its pytest.xfail, as tt-xla's does:
    // one marked notimeout (slow_mini, which hangs) has nothing to end it, so this run leaves the
    // notimeout tests out, as a CI job with a time limit would.
    std::vector<std::string> argv = {"/usr/bin/python3",
                                     "-m",
                                     "pytest",
                                     "-q",
                                     "-p",
                                     "no:cacheprovider",
                                     "-m",
                                     "not notimeout",
                                     "--arch=" + arch,
                                     "--junitxml=" + xml.string()};
    for (const auto& e : yaml.entries()) {
      argv.push_back((fresh / "tests/runner/test_models.py").string() + "::test_all_models_torch[" +
                     e.key + "]");
    }
    testing::RunCommand(argv, dir_, &out);
    auto parsed = junit::ParseJUnitFile(xml);
    ASSERT_TRUE(parsed.ok()) << out;
    int passing = 0, xfailing = 0;
    for (const auto& tc : parsed->cases) {
      const inventory::Entry* e = yaml.Find(tc.key);
      ASSERT_NE(e, nullptr) << tc.key;
      EXPECT_NE(tc.outcome, junit::Outcome::kError) << tc.key;
      const std::string status(e->StatusForArch(arch));
      if (status == "EXPECTED_PASSING") {
        EXPECT_EQ(tc.outcome, junit::Outcome::kPassed) << tc.key << ": " << tc.message;
        ++passing;
      } else if (status == "KNOWN_FAILURE_XFAIL") {
        EXPECT_TRUE(tc.IsXfail()) << tc.key << ": " << tc.message;
        ++xfailing;
      }
    }
    EXPECT_GE(passing, 8);
    EXPECT_GE(xfailing, 8);
  }

  // ---- 3. the same sweep replayed from the recorded evidence, planned with the durations the
  // native sweep measured
  StopAgents();
  StartAgents("replay", dir_ / "out-native" / "evidence");
  const std::string replay = RunSweep("replay", dir_ / "n150.test_durations");
  const json again = Report(replay, dir_ / "out-replay");
  ASSERT_TRUE(again.is_object());
  std::map<std::string, json> replayed;
  for (const auto& e : again["entries"]) replayed[e["key"]] = e;
  for (const auto& [key, e] : entries) {
    ASSERT_TRUE(replayed.count(key)) << key;
    EXPECT_EQ(replayed[key]["arch_outcomes"], e["arch_outcomes"]) << key;
    EXPECT_EQ(replayed[key]["fix_path"], e["fix_path"]) << key;
    EXPECT_EQ(replayed[key]["playbooks"], e["playbooks"]) << key;
    EXPECT_EQ(replayed[key]["durations"], e["durations"]) << key << ": replay measures the same";
  }
  // The planner took the file: a one-entry n150 shard whose test ran long enough to be trusted
  // (at least 5 s) is expected to take exactly that long.
  ASSERT_EQ(Ctl({"shards", "list", "--sweep", replay, "-o", "json"}, &out), 0) << out;
  int planned_from_file = 0;
  for (const auto& sh : json::parse(out, nullptr, false).value("shards", json::array())) {
    if (sh.value("arch", "") != "n150" || sh.value("wave", 0) != 1 || sh["keys"].size() != 1) {
      continue;
    }
    auto e = entries.find(sh["keys"][0].get<std::string>());
    if (e == entries.end()) continue;
    const std::string node = e->second.value("node_id", "");
    if (!measured["n150"].contains(node) || measured["n150"][node].get<double>() < 5) continue;
    EXPECT_DOUBLE_EQ(sh.value("expected_seconds", 0.0), measured["n150"][node].get<double>())
        << node;
    ++planned_from_file;
  }
  EXPECT_GE(planned_from_file, 1) << "no shard of the fixture planned from a trusted duration";
  EXPECT_EQ(testing::ReadFileOrDie(dir_ / "out-replay/tt-xla.patch"),
            testing::ReadFileOrDie(dir_ / "out-native/tt-xla.patch"));
  EXPECT_EQ(testing::ReadFileOrDie(dir_ / "out-replay/tt-forge-models.patch"), forge_patch);
  // Its evidence: every decided entry (and every entry the native run had evidence for) links
  // what answered it, and the links are files.
  int decided = 0, native_decided = 0;
  for (const auto& [key, e] : entries) {
    const json& r = replayed[key];
    native_decided += !e["verdicts"].empty();
    decided += !r["verdicts"].empty();
    if (r["verdicts"].empty() && e["evidence"].empty()) continue;
    EXPECT_FALSE(r["evidence"].empty()) << key << ": the replay recorded no evidence for it";
    for (const auto& p : r["evidence"]) {
      EXPECT_TRUE(std::filesystem::is_regular_file(dir_ / "out-replay" / p.get<std::string>()))
          << key << ": " << p;
    }
  }
  EXPECT_EQ(decided, native_decided);
  EXPECT_GT(decided, 0);

  // ---- 4. the replay's evidence replays to the same decisions
  ASSERT_TRUE(std::filesystem::is_directory(dir_ / "out-replay" / "evidence"))
      << "the replay sweep wrote no evidence/";
  StopAgents();
  StartAgents("replay", dir_ / "out-replay" / "evidence", "replay2");
  const std::string second = RunSweep("replay");
  const json third = Report(second, dir_ / "out-replay2");
  ASSERT_TRUE(third.is_object());
  std::map<std::string, json> replayed2;
  for (const auto& e : third["entries"]) replayed2[e["key"]] = e;
  for (const auto& [key, e] : entries) {
    ASSERT_TRUE(replayed2.count(key)) << key;
    EXPECT_EQ(replayed2[key]["arch_outcomes"], e["arch_outcomes"]) << key;
    EXPECT_EQ(replayed2[key]["fix_path"], e["fix_path"]) << key;
    EXPECT_EQ(replayed2[key]["playbooks"], e["playbooks"]) << key;
    EXPECT_EQ(replayed2[key]["evidence"].empty(), replayed[key]["evidence"].empty()) << key;
  }
  EXPECT_EQ(testing::ReadFileOrDie(dir_ / "out-replay2/tt-xla.patch"),
            testing::ReadFileOrDie(dir_ / "out-native/tt-xla.patch"));
  EXPECT_EQ(testing::ReadFileOrDie(dir_ / "out-replay2/tt-forge-models.patch"), forge_patch);
}

// A device that does not open (every session stops before its first test): the attempts fail,
// the sweep stops at its failure budget instead of deciding entries from sessions that never
// reached a model, and waits for a person; the same request id finds the same sweep.
TEST_F(FixtureSweepTest, ABrokenDeviceStopsTheSweepAtItsFailureBudget) {
  testing::WriteFileOrDie(repo_ / "tests/runner/faults.yaml", "broken_device:\n  kind: unusable\n");
  std::string out;
  ASSERT_EQ(testing::RunCommand(testing::GitTestArgv(repo_, {"commit", "-qam", "broken device"}),
                                dir_, &out),
            0)
      << out;
  StartAgents("native", {});
  const std::vector<std::string> start = {"sweep",
                                          "start",
                                          "--repo",
                                          repo_.string(),
                                          "--arch",
                                          "n150,p150",
                                          "--max-failed-shards",
                                          "1",
                                          "--max-attempts",
                                          "1",
                                          "--request-id",
                                          "weekly-broken",
                                          "--reason",
                                          "e2e",
                                          "--wait"};
  EXPECT_EQ(Ctl(start, &out), 1) << out << testing::ReadFileOrDie(dir_ / "coordinator.log");
  EXPECT_NE(out.find("stopped at its failure budget ("), std::string::npos) << out;

  std::string id;
  json sweep;
  // The shards that were running end; nothing else is leased while the agents sit idle.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        if (Ctl({"sweep", "list", "-o", "json"}, &out) != 0) return false;
        const json list = json::parse(out, nullptr, false).value("sweeps", json::array());
        if (list.size() != 1) return false;
        sweep = list[0];
        id = sweep.value("id", "");
        const json by_state = sweep.value("shards_by_state", json::object());
        return by_state.value("leased", 0) + by_state.value("running", 0) == 0 &&
               sweep.value("state", "") == "blocked";
      },
      120s))
      << out;
  std::this_thread::sleep_for(5s);
  ASSERT_EQ(Ctl({"sweep", "status", id, "-o", "json"}, &out), 0) << out;
  const json later = json::parse(out, nullptr, false);
  EXPECT_EQ(later["shards_by_state"], sweep["shards_by_state"]) << "no lease while stopped";
  EXPECT_GT(later["shards_by_state"].value("queued", 0), 0) << out;
  EXPECT_TRUE(later.value("over_budget", false)) << out;
  EXPECT_GE(later.value("failed_shards", 0), 2) << out;
  EXPECT_EQ(later.value("max_failed_shards", 0), 1) << out;
  std::string problem;
  for (const auto& p : later.value("problems", json::array())) {
    if (p.get<std::string>().starts_with("failure budget spent: ")) problem = p.get<std::string>();
  }
  ASSERT_FALSE(problem.empty()) << out;
  // Its hints run as printed.
  const std::vector<std::string> hints = testing::BacktickedCommands(problem);
  ASSERT_EQ(hints.size(), 2u) << problem;
  EXPECT_EQ(hints[1].rfind("triagectl sweep cancel " + id + " --reason ", 0), 0u) << hints[1];

  // A retried job: the same request id re-attaches to the stopped sweep and fails again.
  EXPECT_EQ(Ctl(start, &out), 1) << out;
  EXPECT_NE(out.find("sweep " + id + "  blocked"), std::string::npos) << out;
  EXPECT_NE(out.find("request   weekly-broken (already started"), std::string::npos) << out;
  ASSERT_EQ(Ctl({"sweep", "list", "-o", "json"}, &out), 0);
  EXPECT_EQ(json::parse(out, nullptr, false)["sweeps"].size(), 1u) << out;

  // A person raises the budget (not below what failed), then gives up on the machine.
  EXPECT_NE(Ctl({"sweep", "resume", id, "--max-failed-shards", "1", "--reason", "x"}, &out), 0);
  EXPECT_NE(out.find("above the sweep's"), std::string::npos) << out;
  std::vector<std::string> resume = testing::ShellWords(hints[0]);
  ASSERT_GE(resume.size(), 2u);
  resume.erase(resume.begin());  // triagectl
  resume.insert(resume.end(), {"-o", "json"});
  ASSERT_EQ(Ctl(resume, &out), 0) << hints[0] << ": " << out;
  EXPECT_FALSE(json::parse(out, nullptr, false).value("over_budget", true)) << out;
  std::vector<std::string> cancel = testing::ShellWords(hints[1]);
  cancel.erase(cancel.begin());
  ASSERT_EQ(Ctl(cancel, &out), 0) << hints[1] << ": " << out;
}

// The emulated device's change between the two sweeps of SweepDiffNamesWhatTheDeviceChanged:
// deit_mini, fixed by the first sweep (registry line, verified on both archs), now fails to
// compile; yolo_mini S, left failing with the conv2d error it shares with N, now passes.
constexpr char kDeit[] = "deit_mini/pytorch-Tiny-single_device-training";
constexpr char kYoloS[] = "yolo_mini/pytorch-S-single_device-training";
constexpr char kSoftmax[] = "error: 'ttir.softmax' op result shape mismatch";
constexpr char kConv2d[] = "error: 'ttir.conv2d' op expected bias shape";

TEST_F(FixtureSweepTest, SweepDiffNamesWhatTheDeviceChanged) {
  StartAgents("native", {});
  const std::string before = RunSweep("native");

  // The change, committed in the repository the sweeps read (the agents fetch it from there).
  const auto faults_path = repo_ / "tests/runner/faults.yaml";
  std::string faults = testing::ReadFileOrDie(faults_path);
  const std::string yolo_s = util::StrCat(
      "  yolo_mini/pytorch-S:\n    run_mode: training\n"
      "    kind: ttmlir\n    message: \"",
      kConv2d, "\"\n");
  const std::size_t at = faults.find(yolo_s);
  ASSERT_NE(at, std::string::npos) << "the fault table changed: " << faults;
  faults.erase(at, yolo_s.size());
  util::StrAppend(&faults, "  deit_mini/pytorch-Tiny:\n    run_mode: training\n    kind: ttmlir\n",
                  "    message: \"", kSoftmax, "\"\n");
  testing::WriteFileOrDie(faults_path, faults);
  std::string out;
  ASSERT_EQ(testing::RunCommand(
                testing::GitTestArgv(repo_, {"commit", "-q", "-am", "deit fails, yolo S passes"}),
                dir_, &out),
            0)
      << out;
  const std::string after = RunSweep("native");

  ASSERT_EQ(Ctl({"sweep", "diff", before, after, "-o", "json"}, &out), 0) << out;
  const json diff = json::parse(out, nullptr, false);
  ASSERT_TRUE(diff.is_object()) << out;
  EXPECT_EQ(diff["before"], before);
  EXPECT_EQ(diff["after"], after);
  // Exactly these transitions, and every other entry still passes or fails as it did.
  std::set<std::string> transitions;
  for (const auto& e : diff["entries"]) {
    transitions.insert(util::StrCat(e["key"].get<std::string>(), " ", e["arch"].get<std::string>(),
                                    " ", e["category"].get<std::string>()));
    if (e["key"] == kDeit) {
      EXPECT_EQ(e["before"]["status"], "EXPECTED_PASSING") << e.dump();
      EXPECT_EQ(e["after"]["status"], "KNOWN_FAILURE_XFAIL") << e.dump();
      EXPECT_EQ(e["after"]["reason"], kSoftmax) << e.dump();
    } else if (e["key"] == kYoloS) {
      EXPECT_EQ(e["before"]["reason"], kConv2d) << e.dump();
      EXPECT_EQ(e["after"]["status"], "EXPECTED_PASSING") << e.dump();
    }
  }
  const std::set<std::string> want = {
      util::StrCat(kDeit, " n150 regressed"), util::StrCat(kDeit, " p150 regressed"),
      util::StrCat(kYoloS, " n150 fixed"), util::StrCat(kYoloS, " p150 fixed")};
  EXPECT_EQ(transitions, want) << diff.dump(2);
  const json& counts = diff["counts"];
  EXPECT_EQ(counts["fixed"], 2);
  EXPECT_EQ(counts["regressed"], 2);
  for (const char* none :
       {"new_failure", "new_passing", "still_failing_changed", "carried", "gone"}) {
    EXPECT_EQ(counts[none], 0) << none << ": " << counts.dump();
  }
  EXPECT_GT(counts["still_passing"].get<int>(), 0);
  EXPECT_GT(counts["still_failing"].get<int>(), 0);
  // The conv2d cluster lost yolo S; the softmax one is new.
  std::map<std::string, json> clusters;
  for (const auto& c : diff["clusters"]) clusters[c["signature"]] = c;
  EXPECT_EQ(clusters[kConv2d],
            json({{"signature", kConv2d}, {"before", 2}, {"after", 1}, {"delta", -1}}));
  EXPECT_EQ(clusters[kSoftmax],
            json({{"signature", kSoftmax}, {"before", 0}, {"after", 1}, {"delta", 1}}));
  // The table names the transitions too.
  ASSERT_EQ(Ctl({"sweep", "diff", before, after}, &out), 0) << out;
  EXPECT_NE(out.find("\nregressed:\n"), std::string::npos) << out;
  EXPECT_NE(out.find(kDeit), std::string::npos) << out;

  // The second sweep's report compares itself with the first.
  const json report = Report(after, dir_ / "out-after");
  ASSERT_TRUE(report.is_object());
  const json& wow = report["week_over_week"];
  EXPECT_EQ(wow["previous"], before) << wow.dump(2);
  EXPECT_EQ(wow["entries"], diff["entries"]);
  EXPECT_EQ(wow["counts"], diff["counts"]);
  EXPECT_NE(testing::ReadFileOrDie(dir_ / "out-after/report.md").find("\n## Since sweep " + before),
            std::string::npos);
}

// Incremental sweeps (docs/farm.md, "Incremental sweeps"): a second sweep of the unchanged
// fixture carries everything and runs nothing (no agent is even connected); after one loader's
// edit, only that loader's shards run.
TEST_F(FixtureSweepTest, IncrementalSweepsRunOnlyWhatChanged) {
  StartAgents("native", {});
  const std::string first = RunSweep("native");
  const json first_report = Report(first, dir_ / "out-first");
  StopAgents();

  auto start_incremental = [&](const std::string& name) {
    std::string out;
    EXPECT_EQ(Ctl({"sweep", "start", "--repo", repo_.string(), "--arch", "n150,p150", "--executor",
                   "native", "--incremental", "--reason", name, "-o", "json"},
                  &out),
              0)
        << out;
    const json started = json::parse(out, nullptr, false);
    const std::string id = started.value("id", "");
    EXPECT_FALSE(id.empty()) << out;
    EXPECT_EQ(Ctl({"sweep", "watch", id}, &out), 0)
        << out << testing::ReadFileOrDie(dir_ / "coordinator.log");
    EXPECT_EQ(Ctl({"sweep", "status", id, "-o", "json"}, &out), 0) << out;
    return json::parse(out, nullptr, false);
  };
  auto shards_of = [&](const std::string& id) {
    std::string out;
    EXPECT_EQ(Ctl({"shards", "list", "--sweep", id, "-o", "json"}, &out), 0) << out;
    return json::parse(out, nullptr, false).value("shards", json::array());
  };

  // Unchanged: no agent runs, yet the sweep succeeds with the first one's patches.
  const json second = start_incremental("unchanged");
  const std::string second_id = second.value("id", "");
  EXPECT_EQ(second.value("state", ""), "succeeded") << second.dump(2);
  const json first_shards = shards_of(first);
  const json second_shards = shards_of(second_id);
  EXPECT_EQ(second["carry"].value("base", ""), first) << second.dump(2);
  EXPECT_EQ(second["carry"].value("shards", 0), static_cast<int>(first_shards.size()));
  EXPECT_EQ(second["carry"].value("rerun_loaders", 0), 0) << second.dump(2);
  ASSERT_EQ(second_shards.size(), first_shards.size());
  for (const auto& s : second_shards) {
    EXPECT_EQ(s.value("state", ""), "succeeded") << s.dump();
    EXPECT_EQ(s["carried_from"].value("sweep_id", ""), first) << s.dump();
  }
  const json second_report = Report(second_id, dir_ / "out-second");
  for (const char* patch : {"tt-xla.patch", "tt-forge-models.patch"}) {
    EXPECT_EQ(testing::ReadFileOrDie(dir_ / "out-second" / patch),
              testing::ReadFileOrDie(dir_ / "out-first" / patch))
        << patch;
  }
  EXPECT_EQ(second_report["totals"], first_report["totals"]);
  ASSERT_EQ(second_report["entries"].size(), first_report["entries"].size());
  for (const auto& e : second_report["entries"]) {
    EXPECT_EQ(e["carried_from"], first) << e.dump();
  }
  std::string out;
  ASSERT_EQ(Ctl({"sweep", "diff", first, second_id, "-o", "json"}, &out), 0) << out;
  const json diff = json::parse(out, nullptr, false);
  EXPECT_EQ(diff["counts"].value("regressed", -1), 0) << diff["counts"].dump();
  EXPECT_EQ(diff["counts"].value("fixed", -1), 0) << diff["counts"].dump();
  EXPECT_GT(diff["counts"].value("carried", 0), 0) << diff["counts"].dump();

  // One loader changes (a comment, committed in tt-forge-models and recorded by tt-xla): its
  // shards run again, the others are carried from the sweep that ran them.
  const std::string loader = "escalate_mini/pytorch/loader.py";
  const auto forge = repo_ / "third_party/tt_forge_models";
  std::string text = testing::ReadFileOrDie(forge / loader);
  testing::WriteFileOrDie(forge / loader, text + "# touched by the incremental sweep test\n");
  for (const auto& argv : {testing::GitTestArgv(forge, {"commit", "-q", "-am", "touch escalate"}),
                           testing::GitTestArgv(forge, {"push", "-q", "origin", "HEAD:main"}),
                           testing::GitTestArgv(repo_, {"commit", "-q", "-am", "bump forge"})}) {
    ASSERT_EQ(testing::RunCommand(argv, dir_, &out), 0) << out;
  }
  StartAgents("native", {}, "again");
  const json third = start_incremental("one loader");
  const std::string third_id = third.value("id", "");
  EXPECT_EQ(third.value("state", ""), "succeeded") << third.dump(2);
  EXPECT_EQ(third["carry"].value("base", ""), second_id) << third.dump(2);
  EXPECT_EQ(third["carry"].value("rerun_loaders", 0), 1) << third.dump(2);
  int ran = 0;
  for (const auto& s : shards_of(third_id)) {
    if (s.contains("carried_from")) {
      EXPECT_EQ(s["carried_from"].value("sweep_id", ""), first) << s.dump();
      EXPECT_EQ(s.value("loader", "").find("escalate_mini"), std::string::npos) << s.dump();
    } else {
      ++ran;
      EXPECT_NE(s.value("loader", "").find(loader), std::string::npos) << s.dump();
    }
  }
  EXPECT_GT(ran, 0);
  const json third_report = Report(third_id, dir_ / "out-third");
  for (const auto& e : third_report["entries"]) {
    if (e.value("loader", "").find("escalate_mini") != std::string::npos) {
      EXPECT_TRUE(e["carried_from"].is_null()) << e.dump();
    } else {
      EXPECT_EQ(e["carried_from"], first) << e.dump();
    }
  }
  EXPECT_EQ(third_report["totals"], first_report["totals"]);

  // Wall time of each sweep, for the record (not asserted: the machine is shared).
  for (const auto& [what, id] : {std::pair{"full", first}, std::pair{"unchanged", second_id},
                                 std::pair{"one loader", third_id}}) {
    EXPECT_EQ(Ctl({"sweep", "status", id, "-o", "json"}, &out), 0) << out;
    const json s = json::parse(out, nullptr, false);
    const double seconds = (std::stoll(s.value("finished_unix_ms", "0")) -
                            std::stoll(s.value("created_unix_ms", "0"))) /
                           1000.0;
    std::cout << "sweep " << id << " (" << what << "): " << seconds << " s, "
              << s["shards_by_state"].dump() << "\n";
  }
}

}  // namespace
}  // namespace triage
