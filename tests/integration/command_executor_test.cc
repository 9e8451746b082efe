// The command executor on a real workspace, with scripted stand-in commands that edit files:
// both repos' diffs lifted into structured edits (common/lift/lift.h) with the base files read at
// the pinned commits, JUnit files, exit status, argv without a shell, timeouts that kill the
// whole process group, and a registry line from a command starting the coordinator's registry
// re-verification wave.

#include "agent/executor/command_executor.h"

#include <signal.h>

#include <set>

#include "agent/workspace/workspace.h"
#include "common/clock/clock.h"
#include "common/command/command_params.h"
#include "common/git/git.h"
#include "common/util/file.h"
#include "common/util/text.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/persistence/sqlite_store.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::agent {
namespace {

using namespace std::chrono_literals;

constexpr char kYamlPath[] =
    "tests/runner/test_config/torch/test_config_training_single_device.yaml";
constexpr char kYaml[] =
    "test_config:\n"
    "  a/pytorch-V1-single_device-training:\n"
    "    status: NOT_SUPPORTED_SKIP\n"
    "  a/pytorch-V2-single_device-training:\n"
    "    status: NOT_SUPPORTED_SKIP\n";

class CommandExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = testing::MakeTtXlaRepo(tmp_.path(), {{kYamlPath, kYaml}},
                                   {{"a/pytorch/loader.py", "class ModelLoader:\n    pass\n"},
                                    {"training_utils.py", "_register_attr(\"A\", \"b\")\n"}});
    ws_path_ = testing::CloneWorkspace(repo_, tmp_.path() / "ws");
    ws_ = std::make_unique<workspace::Workspace>(ws_path_, tmp_.path() / "shards");
    git::Git g(repo_);
    spec_.set_shard_id("sw-0001-s001");
    spec_.set_sweep_id("sw-0001");
    spec_.set_playbook("unpack_forward_output");
    spec_.set_loader("third_party/tt_forge_models/a/pytorch/loader.py");
    spec_.set_ttxla_commit(*g.RevParse("HEAD"));
    spec_.set_forge_commit(*g.SubmoduleCommit(spec_.ttxla_commit(), "third_party/tt_forge_models"));
    spec_.set_arch("n150");
    spec_.set_timeout_seconds(60);
    for (const char* key :
         {"a/pytorch-V1-single_device-training", "a/pytorch-V2-single_device-training"}) {
      auto* e = spec_.add_entries();
      e->set_key(key);
      e->set_file(kYamlPath);
      e->set_flavor("not_implemented");
      e->set_reason("He said \"no\"; $(touch /tmp/pwned-by-triage) `id` * ?");
    }
  }

  void Script(const std::string& name, const std::string& body) {
    auto path = tmp_.path() / name;
    testing::WriteFileOrDie(path, "#!/bin/sh\n" + body);
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }

  // verify is off: these repositories have no runner to verify with (the farm's verification
  // is tested on the fixture: tests/e2e/command_verify_sweep_test.cc).
  absl::StatusOr<v1::ShardResult> Run(const std::string& command_json, const std::string& per,
                                      const std::string& timeout = "") {
    (*spec_.mutable_params())["command"] = command_json;
    (*spec_.mutable_params())["per"] = per;
    (*spec_.mutable_params())["verify"] = "false";
    if (!timeout.empty()) (*spec_.mutable_params())["timeout_seconds"] = timeout;
    auto dir = ws_->Prepare(spec_);
    if (!dir.ok()) return dir.status();
    ExecContext ctx;
    ctx.spec = &spec_;
    ctx.workspace = ws_.get();
    ctx.shard_dir = *dir;
    ctx.settings = settings_;
    ctx.progress = [&](const std::string& step, const std::string& entry,
                       const std::vector<std::string>&) { steps_.push_back(step + " " + entry); };
    CommandExecutor executor;
    return executor.Run(ctx);
  }

  testing::TempDir tmp_;
  std::filesystem::path repo_, ws_path_;
  std::unique_ptr<workspace::Workspace> ws_;
  v1::ShardSpec spec_;
  ExecSettings settings_;
  std::vector<std::string> steps_;
};

TEST_F(CommandExecutorTest, LiftsBothDiffsAndCollectsJUnitAndTheExitStatus) {
  Script(
      "tool.sh",
      "set -e\n"
      "echo \"    def unpack_forward_output(self, out):\" >> third_party/tt_forge_models/a/"
      "pytorch/loader.py\n"
      "echo '        return out[0]' >> third_party/tt_forge_models/a/pytorch/loader.py\n"
      "sed -i 's/NOT_SUPPORTED_SKIP/EXPECTED_PASSING/' " +
          std::string(kYamlPath) +
          "\n"
          "echo '<testsuite><testcase name=\"test_all_models_torch[k]\"/></testsuite>' > \"$1\"\n"
          "echo done\n");
  auto r = Run("[\"" + (tmp_.path() / "tool.sh").string() + "\", \"{junit}\"]", "shard");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status(), v1::ShardResult::SUCCEEDED);
  EXPECT_EQ(r->exit_code(), 0);
  EXPECT_TRUE(r->ttxla_diff().empty() && r->forge_diff().empty()) << "lifted on the agent";
  ASSERT_EQ(r->file_edits_size(), 1) << "no submodule noise from the tt-xla diff";
  const v1::FileEdit& fe = r->file_edits(0);
  EXPECT_EQ(fe.repo(), "tt_forge_models");
  EXPECT_EQ(fe.path(), "a/pytorch/loader.py") << "paths relative to the tt_forge_models root";
  EXPECT_TRUE(fe.against_pinned());
  EXPECT_NE(fe.diff().find("+    def unpack_forward_output(self, out):"), std::string::npos)
      << fe.diff();
  EXPECT_NE(fe.diff().find("a/a/pytorch/loader.py"), std::string::npos) << fe.diff();
  EXPECT_EQ(r->registry_ops_size(), 0);
  for (const auto& o : r->entries()) {
    SCOPED_TRACE(o.key());
    ASSERT_TRUE(o.changed()) << "the YAML hunk is the entry's edit";
    EXPECT_EQ(o.edit().key(), o.key());
    ASSERT_EQ(o.edit().set_size(), 1);
    EXPECT_EQ(o.edit().set(0).name(), "status");
    EXPECT_EQ(o.edit().set(0).value().string_value(), "EXPECTED_PASSING");
  }
  bool junit = false;
  for (const auto& e : r->evidence())
    junit |= e.kind() == "junit" && e.content().find("testcase") != std::string::npos;
  EXPECT_TRUE(junit);
  ASSERT_EQ(r->entries_size(), 2);
  EXPECT_EQ(r->entries(0).review_size(), 0);
  EXPECT_FALSE(steps_.empty());
  // Each entry links the evidence of its run, by the names the result carries it under.
  std::set<std::string> names;
  for (const auto& e : r->evidence()) names.insert(e.name());
  for (const auto& o : r->entries()) {
    SCOPED_TRACE(o.key());
    EXPECT_EQ(std::set<std::string>(o.evidence().begin(), o.evidence().end()),
              (std::set<std::string>{"logs/command-1.log", "junit/run-1.xml"}));
    for (const auto& name : o.evidence()) EXPECT_TRUE(names.count(name)) << name;
  }
}

TEST_F(CommandExecutorTest, PlaceholdersBecomeArgvItemsNeverShellText) {
  Script("args.sh",
         "for a in \"$@\"; do echo \"ARG[$a]\"; done >> \"$TRIAGE_SHARD_DIR/../args.txt\"\n");
  auto r =
      Run("[\"" + (tmp_.path() / "args.sh").string() + "\", \"{key}\", \"{reason}\", \"x{arch}y\"]",
          "entry");
  ASSERT_TRUE(r.ok()) << r.status();
  std::string args;
  for (const auto& d : std::filesystem::recursive_directory_iterator(tmp_.path() / "shards")) {
    if (d.path().filename() == "args.txt") args = testing::ReadFileOrDie(d.path());
  }
  EXPECT_NE(args.find("ARG[a/pytorch-V1-single_device-training]"), std::string::npos) << args;
  EXPECT_NE(args.find("ARG[a/pytorch-V2-single_device-training]"), std::string::npos) << args;
  EXPECT_NE(args.find("ARG[He said \"no\"; $(touch /tmp/pwned-by-triage) `id` * ?]"),
            std::string::npos)
      << args;
  EXPECT_NE(args.find("ARG[xn150y]"), std::string::npos) << args;
  EXPECT_FALSE(std::filesystem::exists("/tmp/pwned-by-triage"));
  EXPECT_EQ(CommandExecutor::BuildArgv({"t", "{keys}", "{unknown}"}, {}, {"k1", "k2"}),
            (std::vector<std::string>{"t", "k1", "k2", "{unknown}"}));
}

TEST_F(CommandExecutorTest, FailuresAndTimeoutsAreFlaggedAndTheGroupIsKilled) {
  Script("fail.sh", "echo boom >&2\nexit 3\n");
  auto r = Run("[\"" + (tmp_.path() / "fail.sh").string() + "\"]", "shard");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code(), 3);
  ASSERT_GE(r->entries(0).review_size(), 1);
  EXPECT_NE(r->entries(0).review(0).find("exit 3"), std::string::npos) << r->entries(0).review(0);

  const auto pidfile = tmp_.path() / "grandchild.pid";
  Script("hang.sh", "sleep 300 &\necho $! > " + pidfile.string() + "\nwait\n");
  auto t0 = std::chrono::steady_clock::now();
  r = Run("[\"" + (tmp_.path() / "hang.sh").string() + "\"]", "shard", "1");
  ASSERT_TRUE(r.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  ASSERT_GE(r->entries(0).review_size(), 1);
  EXPECT_NE(r->entries(0).review(0).find("timed out"), std::string::npos)
      << r->entries(0).review(0);
  const int pid = std::stoi(testing::ReadFileOrDie(pidfile));
  EXPECT_TRUE(testing::WaitFor([&] { return ::kill(pid, 0) != 0; }, 5s))
      << "the command's background child must be killed with its group";
}

// A registry line a command proposes (a `_register_attr(...)` line added to training_utils.py)
// starts the registry re-verification wave (coordinator/planning/waves.h) exactly as a native
// result's registry op does: the agent lifts the hunk into a registry op, and the coordinator
// re-verifies, with the line pre-applied, the entries whose output class it names.
TEST_F(CommandExecutorTest, ARegistryLineFromACommandStartsTheReverificationWave) {
  constexpr char kUnpackReason[] =
      "tt-forge-models doesn't implement unpack_forward_output for this model.";
  constexpr char kBf16Reason[] = "RuntimeError: 'lu_cpu' not implemented for 'BFloat16'";
  auto entry = [](const std::string& key, const std::string& reason) {
    return "  " + key +
           ":\n    status: NOT_SUPPORTED_SKIP\n    bringup_status: FAILED_FE_COMPILATION\n" +
           "    reason: \"" + reason + "\"\n";
  };
  const std::string yaml = "test_config:\n" +
                           entry("a/pytorch-V1-single_device-training", kUnpackReason) +
                           entry("c/pytorch-X-single_device-training", kBf16Reason);
  const auto repo =
      testing::MakeTtXlaRepo(tmp_.path() / "reg", {{kYamlPath, yaml}},
                             {{"a/pytorch/loader.py", "class ModelLoader:\n    pass\n"},
                              {"c/pytorch/loader.py", "class ModelLoader:\n    pass\n"},
                              {"training_utils.py", "_register_attr(\"A\", \"b\")\n"}});
  workspace::Workspace ws(testing::CloneWorkspace(repo, tmp_.path() / "reg-ws"),
                          tmp_.path() / "reg-shards");
  git::Git g(repo);
  const std::string ttxla_commit = *g.RevParse("HEAD");
  const std::string forge_commit = *g.SubmoduleCommit(ttxla_commit, "third_party/tt_forge_models");

  auto store = coord::SqliteStore::Open(":memory:");
  ASSERT_TRUE(store.ok()) << store.status();
  FakeClock clock;
  coord::Coordinator coordinator(
      coord::CoordinatorOptions{}, store->get(), &clock,
      [&](const v1::StartSweepRequest&) -> absl::StatusOr<coord::SweepInput> {
        coord::SweepInput in;
        in.repo = repo.string();
        in.ttxla_commit = ttxla_commit;
        in.forge_commit = forge_commit;
        in.agent_repo_url = repo.string();
        in.inventory.documents.push_back(inventory::Document::Parse(kYamlPath, yaml));
        return in;
      });
  v1::RegisterRequest reg;
  reg.mutable_dimensions()->set_agent_id("n");
  reg.mutable_dimensions()->set_arch("n150");
  reg.mutable_dimensions()->add_executors("command");
  auto session = coordinator.Register(reg);
  ASSERT_TRUE(session.ok()) << session.status();
  auto lease = [&]() {
    v1::LeaseRequest req;
    req.set_agent_id("n");
    req.set_session_id(session->session_id());
    absl::StatusOr<v1::LeaseResponse> got = absl::UnknownError("not called");
    coordinator.Lease(req, [&](absl::StatusOr<v1::LeaseResponse> r) { got = std::move(r); });
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? *got : v1::LeaseResponse{};
  };
  auto complete = [&](const v1::LeaseResponse& l, const v1::ShardResult& result) {
    v1::CompleteRequest req;
    req.set_agent_id("n");
    req.set_session_id(session->session_id());
    req.set_lease_id(l.lease_id());
    req.set_fencing_token(l.fencing_token());
    *req.mutable_result() = result;
    auto resp = coordinator.Complete(req);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() && resp->accepted();
  };

  // The command adds the registry line for its model's output class.
  Script("register.sh",
         "sed -i 's/^_register_attr(\"A\", \"b\")$/_register_attr(\"A\", \"b\")\\n"
         "_register_attr(\"SharedOutput\", \"logits\")/' "
         "third_party/tt_forge_models/training_utils.py\n");
  v1::StartSweepRequest start;
  start.set_repo_path(repo.string());
  start.add_playbooks("unpack_forward_output");
  start.add_playbooks("dtype_bfloat16");
  start.set_executor("command");
  (*start.mutable_params())["command"] = "[\"" + (tmp_.path() / "register.sh").string() + "\"]";
  (*start.mutable_params())["per"] = "shard";
  (*start.mutable_params())["verify"] = "false";  // no runner in this repo
  start.set_reason("test");
  auto sweep = coordinator.StartSweep(start, coord::Caller{"alice", "operator"});
  ASSERT_TRUE(sweep.ok()) << sweep.status();

  std::map<std::string, v1::LeaseResponse> leases;
  for (int i = 0; i < 2; ++i) {
    auto l = lease();
    ASSERT_TRUE(l.granted());
    leases[l.shard().loader()] = l;
  }
  const std::string a = "third_party/tt_forge_models/a/pytorch/loader.py";
  const std::string c = "third_party/tt_forge_models/c/pytorch/loader.py";
  ASSERT_TRUE(leases.count(a) && leases.count(c));

  // a: the command runs for real in the workspace; its result arrives lifted.
  const v1::ShardSpec spec_a = leases[a].shard();
  auto dir = ws.Prepare(spec_a);
  ASSERT_TRUE(dir.ok()) << dir.status();
  ExecContext ctx;
  ctx.spec = &spec_a;
  ctx.workspace = &ws;
  ctx.shard_dir = *dir;
  auto ra = CommandExecutor().Run(ctx);
  ASSERT_TRUE(ra.ok()) << ra.status();
  EXPECT_TRUE(ra->ttxla_diff().empty() && ra->forge_diff().empty());
  ASSERT_EQ(ra->registry_ops_size(), 1);
  EXPECT_EQ(ra->registry_ops(0).kind(), v1::RegistryOp::ADD);
  EXPECT_EQ(ra->registry_ops(0).cls(), "SharedOutput");
  EXPECT_EQ(ra->registry_ops(0).attr(), "logits");
  EXPECT_EQ(ra->file_edits_size(), 0);
  ASSERT_TRUE(complete(leases[a], *ra));

  // c's model returns the same class, but its playbook stopped: unpack_forward_output failed.
  v1::ShardResult rc;
  rc.set_status(v1::ShardResult::SUCCEEDED);
  for (const auto& e : leases[c].shard().entries()) {
    auto* o = rc.add_entries();
    o->set_key(e.key());
    o->set_file(e.file());
    o->set_arch("n150");
    o->set_verdict("needs_unpack");
    o->set_output_class("SharedOutput");
  }
  ASSERT_TRUE(complete(leases[c], rc));

  EXPECT_EQ(coordinator.GetSweep(sweep->id())->state(), "running") << "a second wave follows";
  auto wave2 = lease();
  ASSERT_TRUE(wave2.granted());
  EXPECT_EQ(wave2.shard().wave(), 2);
  EXPECT_EQ(wave2.shard().loader(), c);
  ASSERT_EQ(wave2.shard().pre_registry_size(), 1);
  EXPECT_EQ(wave2.shard().pre_registry(0).cls(), "SharedOutput");
  EXPECT_EQ(wave2.shard().pre_registry(0).attr(), "logits");
  // The next wave's workspace holds the line.
  ASSERT_TRUE(ws.Prepare(wave2.shard()).ok());
  auto utils = util::ReadFile(ws.forge_root() / "training_utils.py");
  ASSERT_TRUE(utils.ok());
  EXPECT_NE(utils->find("_register_attr(\"SharedOutput\", \"logits\")"), std::string::npos)
      << *utils;
}

// The command runs with the allow-listed variables and the executor's own, never the agent's
// whole environment (docs/farm.md, "Executors"); the operator's command_env_allow adds names.
TEST_F(CommandExecutorTest, TheCommandSeesOnlyTheAllowListedEnvironment) {
  ::setenv("ANTHROPIC_API_KEY", "x", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "y", 1);
  ::setenv("TRIAGE_AGENT_TOKEN", "t", 1);
  ::setenv("MY_TOOL_HOME", "/opt/tool", 1);
  auto names_seen = [&](const v1::ShardResult& r) {
    std::set<std::string> names;
    for (const auto& e : r.evidence()) {
      if (e.name() != "logs/command-1.log") continue;
      const std::string& log = e.content();
      for (auto line : util::SplitLines(log)) {
        const auto eq = line.find('=');
        if (eq != std::string_view::npos) names.insert(std::string(line.substr(0, eq)));
      }
    }
    return names;
  };
  std::set<std::string> allowed = {"TRIAGE_SHARD_DIR", "TRIAGE_JUNIT", "TRIAGE_KEY",
                                   "TRIAGE_SUMMARY"};
  for (std::string_view n : command::kEnvAllowList) allowed.insert(std::string(n));
  auto r = Run("[\"/usr/bin/env\"]", "shard");
  ASSERT_TRUE(r.ok()) << r.status();
  std::set<std::string> seen = names_seen(*r);
  EXPECT_TRUE(seen.count("PATH")) << "allow-listed";
  EXPECT_TRUE(seen.count("TRIAGE_SHARD_DIR"));
  for (const auto& name : seen) EXPECT_TRUE(allowed.count(name)) << "the command saw " << name;
  EXPECT_FALSE(seen.count("ANTHROPIC_API_KEY"));
  EXPECT_FALSE(seen.count("MY_TOOL_HOME"));

  settings_.command_env_allow = {"MY_TOOL_HOME"};
  r = Run("[\"/usr/bin/env\"]", "shard");
  ASSERT_TRUE(r.ok()) << r.status();
  seen = names_seen(*r);
  EXPECT_TRUE(seen.count("MY_TOOL_HOME")) << "the operator's addition";
  EXPECT_FALSE(seen.count("ANTHROPIC_API_KEY"));
  EXPECT_FALSE(seen.count("AWS_SECRET_ACCESS_KEY"));
  EXPECT_FALSE(seen.count("TRIAGE_AGENT_TOKEN"));
  for (const char* n :
       {"ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY", "TRIAGE_AGENT_TOKEN", "MY_TOOL_HOME"}) {
    ::unsetenv(n);
  }
}

// The summary a command writes to $TRIAGE_SUMMARY (docs/remediation.md) is carried on its run's
// outcomes and kept as evidence; one that is not valid is a review flag naming the field, and the
// rest of the result is as without it. Each run has its own file: a run that writes none has no
// summary, even after a run that did.
TEST_F(CommandExecutorTest, TheCommandsSummaryIsCheckedAndCarriedOnItsRunsOutcomes) {
  Script("tool.sh",
         "case \"$1\" in\n"
         "  *V1*) printf '{\"fingerprint\": \"missing-handler\", \"layer\": \"loader\", "
         "\"fix_kind\": \"loader\", \"result\": \"pass\"}' > \"$TRIAGE_SUMMARY\" ;;\n"
         "esac\n");
  auto r = Run("[\"" + (tmp_.path() / "tool.sh").string() + "\", \"{key}\"]", "entry");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->entries_size(), 2);
  const v1::EntryOutcome& v1 = r->entries(0);
  ASSERT_TRUE(v1.has_summary()) << v1.DebugString();
  EXPECT_EQ(v1.summary().fingerprint(), "missing-handler");
  EXPECT_EQ(v1.summary().layer(), "loader");
  EXPECT_NE(std::find(v1.evidence().begin(), v1.evidence().end(), "summaries/run-1.json"),
            v1.evidence().end());
  bool kept = false;
  for (const auto& e : r->evidence()) kept |= e.name() == "summaries/run-1.json";
  EXPECT_TRUE(kept);
  EXPECT_FALSE(r->entries(1).has_summary()) << "run 2 wrote none";

  Script("bad.sh",
         "printf '{\"fingerprint\": \"x\", \"layer\": \"kernel\"}' > \"$TRIAGE_SUMMARY\"\n");
  r = Run("[\"" + (tmp_.path() / "bad.sh").string() + "\"]", "shard");
  ASSERT_TRUE(r.ok()) << r.status();
  for (const auto& o : r->entries()) {
    EXPECT_FALSE(o.has_summary());
    ASSERT_EQ(o.review_size(), 1) << o.DebugString();
    EXPECT_EQ(o.review(0),
              "summary not used: summaries/run-1.json: layer: must be one of loader, tt-xla, "
              "tt-mlir, tt-metal, hardware, unknown");
  }
}

TEST_F(CommandExecutorTest, AMissingCommandIsAnInfrastructureError) {
  auto r = Run("[\"/no/such/tool\"]", "shard");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("/no/such/tool"), std::string::npos);
}

}  // namespace
}  // namespace triage::agent
