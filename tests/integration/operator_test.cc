// What operators are told, with real processes: triage-coordinator, a triage-agent with the
// command executor, and triagectl.
//  - A sweep triages exactly what is checked out: the submodule's HEAD (not tt-xla's gitlink)
//    unless --forge-ref says otherwise; local changes are refused unless --allow-dirty; `sweep
//    apply` accepts the moved submodule such a sweep leaves behind; the patches of a cancelled
//    sweep say they are partial.
//  - A sweep nobody can serve says it is blocked and why; `shards list --stuck` lists only
//    stuck shards.
//  - `sweep durations` refuses a sweep that is still running.

#include <signal.h>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_support.h"

namespace triage {
namespace {

using namespace std::chrono_literals;

class PinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = testing::MakeUnpackRepo(tmp_.path(), 2);
    forge_origin_ = tmp_.path() / "tt-forge-models";
    gitlink_ = Git(repo_ / "third_party/tt_forge_models", {"rev-parse", "HEAD"});
    script_ = tmp_.path() / "triage-tool.sh";
    testing::WriteLoaderTool(script_);
    agent_port_ = testing::FreePort();
    control_port_ = testing::FreePort();
  }

  void TearDown() override {
    if (agent_) agent_->Signal(SIGTERM);
    if (coordinator_) coordinator_->Signal(SIGTERM);
  }

  // git in dir; the trimmed stdout (the test fails on a non-zero exit).
  std::string Git(const std::filesystem::path& dir, const std::vector<std::string>& args) {
    std::string out;
    const int rc = testing::RunCommand(testing::GitTestArgv(dir, args), dir, &out);
    EXPECT_EQ(rc, 0) << "git " << args.front() << ": " << out;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  }

  // An uplift of tt-forge-models on a branch of its origin, checked out in the tt-xla
  // checkout's submodule without committing the gitlink: how one re-triages against a newer
  // tt-forge-models. Returns the uplift's sha.
  std::string MoveSubmodule() {
    Git(forge_origin_, {"checkout", "-q", "-b", "uplift"});
    testing::WriteFileOrDie(forge_origin_ / "m0/pytorch/loader.py",
                            "class ModelLoader:\n    uplifted = True\n");
    Git(forge_origin_, {"commit", "-q", "-am", "uplift"});
    const std::string sha = Git(forge_origin_, {"rev-parse", "HEAD"});
    Git(forge_origin_, {"checkout", "-q", "main"});
    const auto sub = repo_ / "third_party/tt_forge_models";
    Git(sub, {"fetch", "-q", "origin", "uplift"});
    Git(sub, {"checkout", "-q", sha});
    return sha;
  }

  void StartCoordinator() {
    coordinator_ = std::make_unique<testing::ChildProcess>();
    ASSERT_TRUE(coordinator_->Start(
        {testing::kCoordinatorBinary, "--insecure", "--data_dir", (tmp_.path() / "cdata").string(),
         "--agent_address", "127.0.0.1:" + std::to_string(agent_port_), "--control_address",
         "127.0.0.1:" + std::to_string(control_port_), "--metrics_address", "", "--tick_ms", "100",
         "--heartbeat_interval_seconds", "1", "--lease_wait_seconds", "1"},
        tmp_.path(), tmp_.path() / "coordinator.log", testing::GitTestEnv()));
    ASSERT_TRUE(testing::WaitForCoordinator(control_port_, tmp_.path(), 10s))
        << testing::ReadFileOrDie(tmp_.path() / "coordinator.log");
  }

  void StartAgent() {
    auto ws = testing::CloneWorkspace(repo_, tmp_.path() / "ws");
    agent_ = std::make_unique<testing::ChildProcess>();
    ASSERT_TRUE(agent_->Start(
        {testing::kAgentBinary, "--insecure", "--coordinator",
         "127.0.0.1:" + std::to_string(agent_port_), "--agent_id", "agent-0", "--workspace",
         ws.string(), "--data_dir", (tmp_.path() / "adata").string(), "--lease_wait_seconds", "1",
         "--executors", "command", "--metrics_address", ""},
        tmp_.path(), tmp_.path() / "agent.log", testing::GitTestEnv()));
  }

  int Ctl(std::vector<std::string> args, std::string* out) {
    return testing::RunCtl(control_port_, std::move(args), tmp_.path(), out);
  }

  std::vector<std::string> StartArgs() {
    return {"sweep",      "start",
            "--repo",     repo_.string(),
            "--executor", "command",
            "--command",  "[\"" + script_.string() + "\", \"{workspace}/{loader_dir}\", \"{key}\"]",
            "--per",      "shard",
            "--param",    "verify=false",  // the repo has no runner to verify with
            "--reason",   "pin test"};
  }

  // `sweep start` (StartArgs plus extra, as JSON): the new sweep's id ("" with a failure).
  std::string StartSweepId(std::vector<std::string> extra = {}) {
    auto args = StartArgs();
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"-o", "json"});
    std::string out;
    EXPECT_EQ(Ctl(args, &out), 0) << out;
    return nlohmann::json::parse(out, nullptr, false).value("id", "");
  }

  nlohmann::json Status(const std::string& id) {
    std::string out;
    if (Ctl({"sweep", "status", id, "-o", "json"}, &out) != 0) return {};
    return nlohmann::json::parse(out, nullptr, false);
  }

  testing::TempDir tmp_;
  std::filesystem::path repo_;
  std::filesystem::path forge_origin_;
  std::string gitlink_;
  std::filesystem::path script_;
  int agent_port_ = 0;
  int control_port_ = 0;
  std::unique_ptr<testing::ChildProcess> coordinator_;
  std::unique_ptr<testing::ChildProcess> agent_;
};

TEST_F(PinTest, SweepsTheCheckedOutSubmoduleAndApplyAcceptsIt) {
  const std::string uplift = MoveSubmodule();
  ASSERT_NE(uplift, gitlink_);
  StartCoordinator();
  StartAgent();

  std::string out;
  ASSERT_EQ(Ctl(StartArgs(), &out), 0) << out;
  // The start output names both commits.
  EXPECT_NE(out.find(uplift.substr(0, 12)), std::string::npos) << out;
  EXPECT_NE(out.find("tt-xla records " + gitlink_.substr(0, 12)), std::string::npos) << out;
  const std::string id = out.substr(out.find("sweep ") + 6, out.find("  ") - 6);
  auto status = Status(id);
  EXPECT_EQ(status["forge_commit"], uplift) << status.dump(2);
  EXPECT_EQ(status["forge_gitlink_commit"], gitlink_);
  EXPECT_EQ(status["forge_source"], "checkout");
  ASSERT_FALSE(status["notes"].empty());

  ASSERT_EQ(Ctl({"sweep", "watch", id}, &out), 0) << out;
  // The agent ran on the uplift: the loader patch's context is the uplifted loader.
  ASSERT_EQ(Ctl({"sweep", "patch", id, "--out", (tmp_.path() / "out").string()}, &out), 0) << out;
  const std::string forge_patch =
      testing::ReadFileOrDie(tmp_.path() / "out" / "tt-forge-models.patch");
  EXPECT_NE(forge_patch.find(" uplifted = True"), std::string::npos) << forge_patch;
  EXPECT_NE(forge_patch.find("+# triaged"), std::string::npos) << forge_patch;
  ASSERT_EQ(Ctl({"sweep", "report", id, "--out", (tmp_.path() / "out").string()}, &out), 0) << out;
  const auto report =
      nlohmann::json::parse(testing::ReadFileOrDie(tmp_.path() / "out" / "report.json"));
  EXPECT_EQ(report["commits"]["tt_forge_models"], uplift) << report["commits"].dump();
  EXPECT_EQ(report["commits"]["tt_forge_models_gitlink"], gitlink_) << report["commits"].dump();
  const std::string md = testing::ReadFileOrDie(tmp_.path() / "out" / "report.md");
  EXPECT_NE(md.find(gitlink_), std::string::npos) << md;

  // The checkout shows `M third_party/tt_forge_models` (moved submodule): apply accepts it.
  ASSERT_NE(Git(repo_, {"status", "--porcelain"}).find("third_party/tt_forge_models"),
            std::string::npos);
  ASSERT_EQ(Ctl({"sweep", "apply", id, "--repo", repo_.string()}, &out), 0) << out;
  EXPECT_NE(Git(repo_ / "third_party/tt_forge_models", {"diff"}).find("+# triaged"),
            std::string::npos);

  // Real local changes are still refused, by name.
  Git(repo_ / "third_party/tt_forge_models", {"checkout", "-q", "--", "."});
  testing::WriteFileOrDie(repo_ / "third_party/tt_forge_models/m1/pytorch/loader.py", "x = 1\n");
  EXPECT_EQ(Ctl({"sweep", "apply", id, "--repo", repo_.string()}, &out), 1) << out;
  EXPECT_NE(out.find("m1/pytorch/loader.py"), std::string::npos) << out;
}

TEST_F(PinTest, ForgeRefPinsWhatItNames) {
  MoveSubmodule();
  StartCoordinator();
  std::string out;
  auto args = StartArgs();
  args.insert(args.end(), {"--forge-ref", gitlink_, "-o", "json"});
  ASSERT_EQ(Ctl(args, &out), 0) << out;
  const auto sweep = nlohmann::json::parse(out);
  EXPECT_EQ(sweep["forge_commit"], gitlink_) << out;
  EXPECT_EQ(sweep["forge_source"], "ref") << out;

  args = StartArgs();
  args.insert(args.end(), {"--forge-ref", "no-such-branch"});
  EXPECT_EQ(Ctl(args, &out), 1) << out;
  EXPECT_NE(out.find("--forge-ref"), std::string::npos) << out;
  EXPECT_NE(out.find("no-such-branch"), std::string::npos) << out;
}

TEST_F(PinTest, LocalChangesAreRefusedUnlessAllowed) {
  StartCoordinator();
  const auto yaml =
      repo_ / "tests/runner/test_config/torch/test_config_training_single_device.yaml";
  testing::WriteFileOrDie(yaml, testing::ReadFileOrDie(yaml) + "# local edit\n");
  testing::WriteFileOrDie(repo_ / "third_party/tt_forge_models/m1/pytorch/new_helper.py", "x\n");
  std::string out;
  EXPECT_EQ(Ctl(StartArgs(), &out), 1) << out;
  EXPECT_NE(out.find("tests/runner/test_config/torch/test_config_training_single_device.yaml"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("m1/pytorch/new_helper.py"), std::string::npos) << out;
  EXPECT_NE(out.find("--allow-dirty"), std::string::npos) << out;
  std::string list;
  ASSERT_EQ(Ctl({"sweep", "list", "-o", "json"}, &list), 0);
  EXPECT_TRUE(nlohmann::json::parse(list).value("sweeps", nlohmann::json::array()).empty()) << list;

  auto args = StartArgs();
  args.insert(args.end(), {"--allow-dirty", "-o", "json"});
  ASSERT_EQ(Ctl(args, &out), 0) << out;
  const auto sweep = nlohmann::json::parse(out);
  EXPECT_EQ(sweep["ttxla_commit"], Git(repo_, {"rev-parse", "HEAD"}));
  ASSERT_EQ(sweep["notes"].size(), 1u) << out;
  EXPECT_NE(sweep["notes"][0].get<std::string>().find("not part of the sweep"), std::string::npos)
      << out;
}

TEST_F(PinTest, AMalformedCommandIsRefusedAtStart) {
  StartCoordinator();
  std::string out;
  EXPECT_EQ(Ctl({"sweep", "start", "--repo", repo_.string(), "--executor", "command", "--command",
                 R"(["tool",)"},
                &out),
            1)
      << out;
  EXPECT_NE(out.find("params.command is not valid JSON"), std::string::npos) << out;
  ASSERT_EQ(Ctl({"sweep", "list", "-o", "json"}, &out), 0);
  EXPECT_TRUE(nlohmann::json::parse(out).value("sweeps", nlohmann::json::array()).empty()) << out;
}

// A --git-url the coordinator cannot fetch: one short line naming the URL and what git said.
TEST_F(PinTest, AGitUrlThatCannotBeFetchedSaysWhyInOneLine) {
  StartCoordinator();
  std::string out;
  const std::string url = "file://" + (tmp_.path() / "no-such-repo").string();
  EXPECT_NE(Ctl({"sweep", "start", "--git-url", url, "--executor", "command", "--command",
                 "[\"true\"]", "--reason", "pin test"},
                &out),
            0)
      << out;
  EXPECT_NE(out.find("cannot fetch " + url + ": fatal: "), std::string::npos) << out;
  EXPECT_NE(out.find("(git exit 128)"), std::string::npos) << out;
  EXPECT_EQ(out.find("--bare"), std::string::npos) << "no raw command: " << out;
  EXPECT_LT(out.size(), 400u) << out;
}

// The audit log answers who did what to a sweep and its shards, and why; another sweep's actions
// are not among them.
TEST_F(PinTest, TheAuditLogSaysWhoActedOnASweepAndWhy) {
  StartCoordinator();  // no agent: nothing runs
  std::string out;
  const std::string id = StartSweepId();
  const std::string other = StartSweepId();
  ASSERT_FALSE(id.empty());
  ASSERT_FALSE(other.empty());
  ASSERT_EQ(Ctl({"shards", "list", "--sweep", id, "-o", "json"}, &out), 0) << out;
  const auto shards = nlohmann::json::parse(out)["shards"];
  ASSERT_FALSE(shards.empty()) << out;
  const std::string shard = shards[0]["id"];
  ASSERT_EQ(Ctl({"shard", "cancel", shard, "--reason", "not this one"}, &out), 0) << out;
  ASSERT_EQ(Ctl({"sweep", "cancel", id, "--reason", "wrong commit"}, &out), 0) << out;
  ASSERT_EQ(Ctl({"sweep", "cancel", other, "--reason", "the other"}, &out), 0) << out;

  ASSERT_EQ(Ctl({"audit", "list", "--sweep", id, "-o", "json"}, &out), 0) << out;
  const auto entries = nlohmann::json::parse(out)["entries"];
  std::vector<std::string> seen;
  for (const auto& e : entries) {
    seen.push_back(e["action"].get<std::string>() + " " + e["target"].get<std::string>() + " " +
                   e["reason"].get<std::string>());
    EXPECT_FALSE(e["who"].get<std::string>().empty()) << e;
    EXPECT_GT(std::stoll(e["at_unix_ms"].get<std::string>()), 0) << e;
  }
  ASSERT_EQ(seen.size(), 3u) << out;
  EXPECT_EQ(seen[0].rfind("start_sweep " + id + " ", 0), 0u) << seen[0];
  EXPECT_EQ(seen[1], "cancel_shard " + shard + " not this one");
  EXPECT_EQ(seen[2], "cancel_sweep " + id + " wrong commit");

  ASSERT_EQ(Ctl({"sweep", "audit", id}, &out), 0) << out;
  EXPECT_NE(out.find("ACTION"), std::string::npos) << out;
  EXPECT_NE(out.find("cancel_sweep"), std::string::npos) << out;
  EXPECT_NE(out.find("wrong commit"), std::string::npos) << out;
  EXPECT_EQ(out.find("the other"), std::string::npos) << out;
  ASSERT_EQ(Ctl({"audit", "list", "--limit", "1", "-o", "json"}, &out), 0) << out;
  ASSERT_EQ(nlohmann::json::parse(out)["entries"].size(), 1u) << out;
  EXPECT_EQ(nlohmann::json::parse(out)["entries"][0]["reason"], "the other") << out;
  EXPECT_NE(Ctl({"sweep", "audit", "sw-9999"}, &out), 0) << out;
  EXPECT_NE(out.find("no sweep sw-9999"), std::string::npos) << out;
}

TEST_F(PinTest, PatchOfACancelledSweepSaysItIsPartial) {
  StartCoordinator();  // no agent: nothing runs
  std::string out;
  const std::string id = StartSweepId();
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(Ctl({"sweep", "cancel", id, "--reason", "test"}, &out), 0) << out;
  ASSERT_EQ(Ctl({"sweep", "patch", id, "--out", (tmp_.path() / "out").string()}, &out), 0) << out;
  EXPECT_NE(out.find("partial"), std::string::npos) << out;
  EXPECT_NE(out.find("cancelled"), std::string::npos) << out;
  ASSERT_EQ(
      Ctl({"sweep", "patch", id, "--out", (tmp_.path() / "out").string(), "-o", "json"}, &out), 0)
      << out;
  const auto j = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_EQ(j["state"], "cancelled") << out;
  ASSERT_TRUE(j["partial"].is_string()) << out;
  // One count of decided entries: the patch's warning says what `sweep status` says (a cancelled
  // sweep's entries are done, yet none of them was decided here).
  const auto status = Status(id);
  const std::string decided = std::to_string(status["entries"].value("decided", 0)) + " of " +
                              std::to_string(status["entries"].value("total", 0)) +
                              " entries decided";
  EXPECT_NE(j["partial"].get<std::string>().find(decided), std::string::npos)
      << j["partial"] << " vs " << status.dump(2);
  EXPECT_NE(j["partial"].get<std::string>().find("(0 of "), std::string::npos) << j["partial"];
  ASSERT_EQ(Ctl({"sweep", "report", id, "--out", (tmp_.path() / "out").string()}, &out), 0) << out;
  const auto report =
      nlohmann::json::parse(testing::ReadFileOrDie(tmp_.path() / "out" / "report.json"));
  EXPECT_EQ(report["state"], "cancelled");
  EXPECT_TRUE(report["partial"].is_string()) << report.dump(2);
  EXPECT_NE(testing::ReadFileOrDie(tmp_.path() / "out" / "report.md").find("partial"),
            std::string::npos);
}

// `sweep durations` waits for the sweep's end: a running sweep has not measured everything, and
// a sweep that ended before anything ran says which archs measured something (none).
TEST_F(PinTest, DurationsAreRefusedUntilTheSweepEndsAndNameWhatWasMeasured) {
  StartCoordinator();  // no agent: nothing runs
  std::string out;
  const std::string id = StartSweepId();
  ASSERT_FALSE(id.empty());
  const auto file = tmp_.path() / "n150.test_durations";
  EXPECT_EQ(Ctl({"sweep", "durations", id, "--out", file.string()}, &out), 1) << out;
  // Running, or blocked once a tick saw that no agent can take its work: unfinished either way.
  const bool unfinished =
      out.find("sweep " + id + " is still running: its durations are complete when it ends") !=
          std::string::npos ||
      out.find("sweep " + id + " is still blocked: its durations are complete when it ends") !=
          std::string::npos;
  EXPECT_TRUE(unfinished) << out;
  ASSERT_EQ(Ctl({"sweep", "cancel", id, "--reason", "test"}, &out), 0) << out;
  EXPECT_EQ(Ctl({"sweep", "durations", id, "--out", file.string()}, &out), 1) << out;
  EXPECT_NE(
      out.find("sweep " + id + " measured no entry on n150 (archs with measured entries: none)"),
      std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(file)) << "nothing written";
}

TEST_F(PinTest, ABlockedSweepSaysSoAndWhy) {
  StartCoordinator();
  StartAgent();  // n150, command executor only
  std::string out;
  const std::string id = StartSweepId({"--arch", "p150"});
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(testing::WaitFor([&] { return Status(id).value("state", "") == "blocked"; }, 10s))
      << Status(id).dump(2);
  const auto status = Status(id);
  ASSERT_EQ(status["problems"].size(), 1u) << status.dump(2);
  EXPECT_NE(status["problems"][0].get<std::string>().find(
                "2 shards need arch p150 with executor command"),
            std::string::npos)
      << status.dump(2);
  EXPECT_EQ(status["eta_seconds"], "-1") << "int64 in proto JSON";
  ASSERT_EQ(Ctl({"sweep", "get", id}, &out), 0) << out;
  EXPECT_NE(out.find("blocked"), std::string::npos) << out;
  EXPECT_NE(out.find("problem   2 shards need arch p150"), std::string::npos) << out;

  // A watch (a CI job waiting on the sweep) gives up once the sweep has stayed blocked for
  // --blocked-timeout, naming why; the sweep itself goes on.
  const auto watch_start = std::chrono::steady_clock::now();
  EXPECT_EQ(Ctl({"sweep", "watch", id, "--blocked-timeout", "2"}, &out), 1) << out;
  EXPECT_LT(std::chrono::steady_clock::now() - watch_start, 30s);
  EXPECT_NE(out.find("sweep " + id + " has been blocked for 2 s: 2 shards need arch p150"),
            std::string::npos)
      << out;
  EXPECT_EQ(Status(id).value("state", ""), "blocked") << "the sweep goes on";

  // --stuck lists only leased or running shards without progress, whatever the threshold.
  ASSERT_EQ(Ctl({"shards", "list", "--stuck", "--stuck-minutes", "0.001", "-o", "json"}, &out), 0)
      << out;
  EXPECT_TRUE(nlohmann::json::parse(out).value("shards", nlohmann::json::array()).empty()) << out;
  EXPECT_EQ(Ctl({"shards", "list", "--stuck", "--stuck-minutes", "0"}, &out), 2) << out;
  EXPECT_NE(out.find("--stuck-minutes"), std::string::npos) << out;
  EXPECT_EQ(Ctl({"shards", "list", "--stuck-minutes", "-3"}, &out), 2) << out;
}

}  // namespace
}  // namespace triage
