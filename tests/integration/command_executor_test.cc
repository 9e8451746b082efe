// The command executor on a real workspace, with scripted stand-in commands that edit files:
// diffs of both repos, JUnit files, exit status, argv without a shell, and timeouts that kill
// the whole process group.

#include "agent/executor/command_executor.h"

#include <signal.h>

#include <set>

#include "agent/workspace/workspace.h"
#include "common/git/git.h"
#include "gtest/gtest.h"
#include "tests/unit/test_support.h"

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

  absl::StatusOr<v1::ShardResult> Run(const std::string& command_json, const std::string& per,
                                      const std::string& timeout = "") {
    (*spec_.mutable_params())["command"] = command_json;
    (*spec_.mutable_params())["per"] = per;
    if (!timeout.empty()) (*spec_.mutable_params())["timeout_seconds"] = timeout;
    auto dir = ws_->Prepare(spec_);
    if (!dir.ok()) return dir.status();
    ExecContext ctx;
    ctx.spec = &spec_;
    ctx.workspace = ws_.get();
    ctx.shard_dir = *dir;
    ctx.progress = [&](const std::string& step, const std::string& entry,
                       const std::vector<std::string>&) { steps_.push_back(step + " " + entry); };
    CommandExecutor executor;
    return executor.Run(ctx);
  }

  testing::TempDir tmp_;
  std::filesystem::path repo_, ws_path_;
  std::unique_ptr<workspace::Workspace> ws_;
  v1::ShardSpec spec_;
  std::vector<std::string> steps_;
};

TEST_F(CommandExecutorTest, CollectsBothDiffsJUnitAndTheExitStatus) {
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
  EXPECT_NE(r->forge_diff().find("+    def unpack_forward_output(self, out):"), std::string::npos)
      << r->forge_diff();
  EXPECT_NE(r->forge_diff().find("a/a/pytorch/loader.py"), std::string::npos)
      << "paths relative to the tt_forge_models root";
  EXPECT_NE(r->ttxla_diff().find("+    status: EXPECTED_PASSING"), std::string::npos);
  EXPECT_EQ(r->ttxla_diff().find("third_party/tt_forge_models"), std::string::npos)
      << "no submodule noise in the tt-xla diff";
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

TEST_F(CommandExecutorTest, AMissingCommandIsAnInfrastructureError) {
  auto r = Run("[\"/no/such/tool\"]", "shard");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("/no/such/tool"), std::string::npos);
}

}  // namespace
}  // namespace triage::agent
