#include "agent/workspace/workspace.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/process/process.h"
#include "common/registry/registry.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::workspace {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kLoaderPath[] = "a/pytorch/loader.py";
constexpr char kLoaderV1[] =
    "class ModelLoader:\n"
    "    def load(self):\n"
    "        return 1\n";
constexpr char kLoaderV2[] =
    "class ModelLoader:\n"
    "    def load(self):\n"
    "        return 1  # v2\n";
constexpr char kUtils[] =
    "_HANDLER_REGISTRY = {}\n"
    "\n"
    "\n"
    "def _register_attr(cls_name, attr):\n"
    "    pass\n"
    "\n"
    "\n"
    "_register_attr(\"BaseModelOutputWithPast\", \"last_hidden_state\")\n"
    "_register_attr(\"CausalLMOutputWithPast\", \"logits\")\n";
constexpr char kYamlPath[] =
    "tests/runner/test_config/torch/test_config_inference_single_device.yaml";
constexpr char kYaml[] =
    "test_config:\n"
    "  a/pytorch-A-single_device-inference:\n"
    "    status: EXPECTED_PASSING\n";

// A loader edit as the coordinator sends it.
constexpr char kLoaderDiff[] =
    "diff --git a/a/pytorch/loader.py b/a/pytorch/loader.py\n"
    "--- a/a/pytorch/loader.py\n"
    "+++ b/a/pytorch/loader.py\n"
    "@@ -1,3 +1,3 @@\n"
    " class ModelLoader:\n"
    "     def load(self):\n"
    "-        return 1\n"
    "+        return 2\n";
constexpr char kYamlDiff[] =
    "diff --git a/tests/runner/test_config/torch/test_config_inference_single_device.yaml "
    "b/tests/runner/test_config/torch/test_config_inference_single_device.yaml\n"
    "--- a/tests/runner/test_config/torch/test_config_inference_single_device.yaml\n"
    "+++ b/tests/runner/test_config/torch/test_config_inference_single_device.yaml\n"
    "@@ -1,3 +1,3 @@\n"
    " test_config:\n"
    "   a/pytorch-A-single_device-inference:\n"
    "-    status: EXPECTED_PASSING\n"
    "+    status: KNOWN_FAILURE_XFAIL\n";

struct Output {
  bool ok = false;
  std::string text;
};

Output Try(const fs::path& dir, std::vector<std::string> args, std::string stdin_data = "") {
  process::RunOptions options;
  options.argv = testing::GitTestArgv(dir, args);
  options.env = testing::GitTestEnv();
  options.stdin_data = std::move(stdin_data);
  options.timeout = std::chrono::seconds(60);
  auto r = process::Run(options);
  if (!r.ok()) return {false, util::MessageOf(r.status())};
  return {r->ok(), r->output};
}

// Runs git for the test's own setup, isolated from the user's configuration.
std::string Sh(const fs::path& dir, std::vector<std::string> args) {
  Output out = Try(dir, args);
  EXPECT_TRUE(out.ok) << util::StrJoin(args, " ") << ":\n" << out.text;
  return std::string(util::TrimWhitespace(out.text));
}

std::string Commit(const fs::path& dir, const std::string& message) {
  Sh(dir, {"add", "-A"});
  Sh(dir, {"commit", "-q", "-m", message});
  return Sh(dir, {"rev-parse", "HEAD"});
}

class WorkspaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    forge_up_ = tmp_.path() / "forge-upstream";
    ttxla_up_ = tmp_.path() / "ttxla-upstream";
    ws_ = tmp_.path() / "workspace";
    shards_ = tmp_.path() / "shards";
    fs::create_directories(forge_up_);
    fs::create_directories(ttxla_up_);

    Sh(forge_up_, {"init", "-q"});
    testing::WriteFileOrDie(forge_up_ / kLoaderPath, kLoaderV1);
    testing::WriteFileOrDie(forge_up_ / "training_utils.py", kUtils);
    forge1_ = Commit(forge_up_, "forge 1");

    Sh(ttxla_up_, {"init", "-q"});
    testing::WriteFileOrDie(ttxla_up_ / ".gitignore", "venv/\n");
    testing::WriteFileOrDie(ttxla_up_ / "README.md", "tt-xla 1\n");
    testing::WriteFileOrDie(ttxla_up_ / kYamlPath, kYaml);
    Sh(ttxla_up_, {"submodule", "add", "-q", forge_up_.string(), std::string(kForgeDir)});
    ttxla1_ = Commit(ttxla_up_, "tt-xla 1");

    // The agent's workspace: a clone with the submodule initialized.
    Sh(tmp_.path(), {"clone", "-q", ttxla_up_.string(), ws_.string()});
    Sh(ws_, {"submodule", "update", "-q", "--init"});

    // Upstream moves on after the workspace was cloned.
    testing::WriteFileOrDie(forge_up_ / kLoaderPath, kLoaderV2);
    forge2_ = Commit(forge_up_, "forge 2");
    const fs::path up_sub = ttxla_up_ / kForgeDir;
    Sh(up_sub, {"fetch", "-q", "origin"});
    Sh(up_sub, {"checkout", "-q", forge2_});
    testing::WriteFileOrDie(ttxla_up_ / "README.md", "tt-xla 2\n");
    ttxla2_ = Commit(ttxla_up_, "tt-xla 2");
  }

  triage::v1::ShardSpec Spec(const std::string& shard_id, const std::string& ttxla,
                             const std::string& forge) const {
    triage::v1::ShardSpec spec;
    spec.set_shard_id(shard_id);
    spec.set_ttxla_commit(ttxla);
    spec.set_forge_commit(forge);
    return spec;
  }

  fs::path forge_ws() const { return ws_ / kForgeDir; }
  std::string Read(const fs::path& path) const { return testing::ReadFileOrDie(path); }

  testing::TempDir tmp_;
  fs::path forge_up_, ttxla_up_, ws_, shards_;
  std::string forge1_, forge2_, ttxla1_, ttxla2_;
};

TEST_F(WorkspaceTest, PrepareResetsAndCleansButKeepsIgnoredFiles) {
  // Leftovers of an earlier shard: edits, untracked junk, and an ignored venv.
  testing::WriteFileOrDie(ws_ / "README.md", "edited\n");
  testing::WriteFileOrDie(ws_ / "junk.txt", "junk\n");
  testing::WriteFileOrDie(ws_ / "junk_dir" / "deep" / "x.py", "junk\n");
  testing::WriteFileOrDie(ws_ / "venv" / "bin" / "python", "#!venv\n");
  testing::WriteFileOrDie(forge_ws() / kLoaderPath, "broken\n");
  testing::WriteFileOrDie(forge_ws() / "new_loader.py", "junk\n");
  Sh(forge_ws(), {"checkout", "-q", "--detach", "HEAD"});
  testing::WriteFileOrDie(forge_ws() / "staged.py", "staged\n");
  Sh(forge_ws(), {"add", "staged.py"});
  testing::WriteFileOrDie(ws_ / "staged_top.py", "staged\n");
  Sh(ws_, {"add", "staged_top.py"});
  // A git command killed by a shard's timeout leaves its lock behind.
  testing::WriteFileOrDie(ws_ / ".git" / "index.lock", "");

  Workspace ws(ws_, shards_);
  EXPECT_EQ(ws.root(), ws_);
  auto dir = ws.Prepare(Spec("shard-1", ttxla1_, forge1_));
  ASSERT_TRUE(dir.ok()) << dir.status();

  EXPECT_EQ(Sh(ws_, {"rev-parse", "HEAD"}), ttxla1_);
  EXPECT_EQ(Sh(forge_ws(), {"rev-parse", "HEAD"}), forge1_);
  EXPECT_EQ(Read(ws_ / "README.md"), "tt-xla 1\n");
  EXPECT_FALSE(fs::exists(ws_ / "junk.txt"));
  EXPECT_FALSE(fs::exists(ws_ / "junk_dir"));
  EXPECT_EQ(Read(ws_ / "venv" / "bin" / "python"), "#!venv\n") << "ignored files stay";
  EXPECT_EQ(Read(forge_ws() / kLoaderPath), kLoaderV1);
  EXPECT_FALSE(fs::exists(forge_ws() / "new_loader.py"));
  EXPECT_FALSE(fs::exists(forge_ws() / "staged.py"));
  EXPECT_FALSE(fs::exists(ws_ / "staged_top.py"));
  EXPECT_EQ(Sh(forge_ws(), {"status", "--porcelain"}), "");
  // The superproject too (the submodule at its gitlink, no staged or untracked paths).
  EXPECT_EQ(Sh(ws_, {"status", "--porcelain", "--ignore-submodules=none"}), "");

  EXPECT_EQ(*dir, shards_ / "shard-1" / "attempt-1");
  for (const char* sub : {"logs", "junit", "probes"}) EXPECT_TRUE(fs::is_directory(*dir / sub));
  auto again = ws.Prepare(Spec("shard-1", ttxla1_, forge1_));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, shards_ / "shard-1" / "attempt-2");
}

TEST_F(WorkspaceTest, FetchesMissingCommits) {
  Workspace ws(ws_, shards_);
  ASSERT_FALSE(Try(ws_, {"cat-file", "-e", ttxla2_ + "^{commit}"}).ok) << "not fetched yet";
  auto dir = ws.Prepare(Spec("s", ttxla2_, forge2_));
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(Sh(ws_, {"rev-parse", "HEAD"}), ttxla2_);
  EXPECT_EQ(Sh(forge_ws(), {"rev-parse", "HEAD"}), forge2_);
  EXPECT_EQ(Read(ws_ / "README.md"), "tt-xla 2\n");
  EXPECT_EQ(Read(forge_ws() / kLoaderPath), kLoaderV2);

  // And back.
  ASSERT_TRUE(ws.Prepare(Spec("s", ttxla1_, forge1_)).ok());
  EXPECT_EQ(Read(ws_ / "README.md"), "tt-xla 1\n");
  EXPECT_EQ(Read(forge_ws() / kLoaderPath), kLoaderV1);
}

TEST_F(WorkspaceTest, FetchesFromRepoUrl) {
  Sh(ws_, {"remote", "set-url", "origin", (tmp_.path() / "gone").string()});
  Workspace ws(ws_, shards_);
  auto without = ws.Prepare(Spec("s", ttxla2_, forge1_));
  ASSERT_FALSE(without.ok());
  EXPECT_TRUE(absl::IsNotFound(without.status())) << without.status();
  EXPECT_THAT(util::MessageOf(without.status()), HasSubstr(ttxla2_));

  triage::v1::ShardSpec spec = Spec("s", ttxla2_, forge1_);
  spec.set_repo_url("file://" + ttxla_up_.string());
  auto with = ws.Prepare(spec);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(Sh(ws_, {"rev-parse", "HEAD"}), ttxla2_);

  spec.set_repo_url("--upload-pack=touch /tmp/x");
  spec.set_ttxla_commit(std::string(40, 'a'));
  EXPECT_TRUE(absl::IsInvalidArgument(ws.Prepare(spec).status()));
}

TEST_F(WorkspaceTest, AppliesPreAppliedEditsAndRegistryOps) {
  Workspace ws(ws_, shards_);
  triage::v1::ShardSpec spec = Spec("verify", ttxla1_, forge1_);
  triage::v1::FileEdit* loader = spec.add_pre_apply();
  loader->set_repo("tt_forge_models");
  loader->set_path(kLoaderPath);
  loader->set_diff(kLoaderDiff);
  triage::v1::FileEdit* yaml = spec.add_pre_apply();
  yaml->set_repo("tt-xla");
  yaml->set_path(kYamlPath);
  yaml->set_diff(kYamlDiff);
  triage::v1::RegistryOp* op = spec.add_pre_registry();
  op->set_kind(triage::v1::RegistryOp::ADD);
  op->set_cls("DinoOutput");
  op->set_attr("logits");
  auto dir = ws.Prepare(spec);
  ASSERT_TRUE(dir.ok()) << dir.status();

  EXPECT_THAT(Read(forge_ws() / kLoaderPath), HasSubstr("return 2"));
  EXPECT_THAT(Read(ws_ / kYamlPath), HasSubstr("KNOWN_FAILURE_XFAIL"));
  const std::string utils = Read(ws_ / registry::kTrainingUtilsPath);
  EXPECT_THAT(utils, HasSubstr("_register_attr(\"DinoOutput\", \"logits\")"));
  EXPECT_LT(utils.find("CausalLMOutputWithPast"), utils.find("DinoOutput"));

  // The next shard starts from the pinned commits again.
  auto next = ws.Prepare(Spec("other", ttxla1_, forge1_));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(Read(forge_ws() / kLoaderPath), kLoaderV1);
  EXPECT_EQ(Read(ws_ / kYamlPath), kYaml);
  EXPECT_EQ(Read(ws_ / registry::kTrainingUtilsPath), kUtils);
}

TEST_F(WorkspaceTest, BadPreApplyIsAClearError) {
  Workspace ws(ws_, shards_);
  triage::v1::ShardSpec spec = Spec("bad", ttxla1_, forge1_);
  triage::v1::FileEdit* edit = spec.add_pre_apply();
  edit->set_repo("tt_forge_models");
  edit->set_path(kLoaderPath);
  std::string diff = kLoaderDiff;
  diff.replace(diff.find("-        return 1"), 17, "-        return 7");
  edit->set_diff(diff);
  auto r = ws.Prepare(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(util::MessageOf(r.status()), HasSubstr("tt_forge_models:a/pytorch/loader.py"));
  EXPECT_THAT(util::MessageOf(r.status()), HasSubstr("does not apply"));
  EXPECT_FALSE(fs::exists(shards_ / "bad")) << "no shard directory for a failed prepare";

  edit->set_diff(kLoaderDiff);
  edit->set_repo("tt-metal");
  EXPECT_THAT(util::MessageOf(ws.Prepare(spec).status()), HasSubstr("unknown repository"));

  edit->set_repo("tt_forge_models");
  edit->set_path("../outside.py");
  EXPECT_TRUE(absl::IsInvalidArgument(ws.Prepare(spec).status()));

  triage::v1::ShardSpec remove = Spec("bad", ttxla1_, forge1_);
  triage::v1::RegistryOp* op = remove.add_pre_registry();
  op->set_kind(triage::v1::RegistryOp::REMOVE);
  op->set_cls("NoSuchOutput");
  auto removed = ws.Prepare(remove);
  ASSERT_FALSE(removed.ok());
  EXPECT_THAT(util::MessageOf(removed.status()), HasSubstr("NoSuchOutput"));
}

TEST_F(WorkspaceTest, RejectsBadSpecs) {
  Workspace ws(ws_, shards_);
  EXPECT_TRUE(absl::IsInvalidArgument(ws.Prepare(Spec("../x", ttxla1_, forge1_)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ws.Prepare(Spec("", ttxla1_, forge1_)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ws.Prepare(Spec("s", "HEAD", forge1_)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ws.Prepare(Spec("s", ttxla1_, "")).status()));
  auto unknown = ws.Prepare(Spec("s", std::string(40, 'b'), forge1_));
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(util::MessageOf(unknown.status()), HasSubstr(std::string(40, 'b')));
}

TEST_F(WorkspaceTest, CollectDiffsIncludesNewFilesAndApplies) {
  Workspace ws(ws_, shards_);
  ASSERT_TRUE(ws.Prepare(Spec("s", ttxla1_, forge1_)).ok());

  testing::WriteFileOrDie(ws_ / "README.md", "tt-xla 1\nedited by the shard\n");
  testing::WriteFileOrDie(ws_ / "tests" / "new_test.py", "def test_new():\n    pass\n");
  testing::WriteFileOrDie(ws_ / "blob.bin", std::string("\0\x01\x02\xff", 4));
  testing::WriteFileOrDie(ws_ / "venv" / "lib" / "site.py", "ignored\n");
  testing::WriteFileOrDie(forge_ws() / kLoaderPath, "class ModelLoader:\n    pass\n");
  testing::WriteFileOrDie(forge_ws() / "b" / "pytorch" / "loader.py", "class B:\n    pass\n");
  const std::string status_before = Sh(ws_, {"status", "--porcelain"});

  auto diffs = ws.CollectDiffs(ttxla1_, forge1_);
  ASSERT_TRUE(diffs.ok()) << diffs.status();
  EXPECT_THAT(diffs->ttxla, HasSubstr("diff --git a/README.md b/README.md"));
  EXPECT_THAT(diffs->ttxla, HasSubstr("+edited by the shard"));
  EXPECT_THAT(diffs->ttxla, HasSubstr("b/tests/new_test.py"));
  EXPECT_THAT(diffs->ttxla, HasSubstr("GIT binary patch"));
  EXPECT_THAT(diffs->ttxla, Not(HasSubstr("tt_forge_models"))) << "no gitlink noise";
  EXPECT_THAT(diffs->ttxla, Not(HasSubstr("venv")));
  EXPECT_THAT(diffs->forge, HasSubstr("diff --git a/a/pytorch/loader.py b/a/pytorch/loader.py"));
  EXPECT_THAT(diffs->forge, HasSubstr("b/b/pytorch/loader.py"));

  // The real index is untouched: new files are still untracked.
  EXPECT_EQ(Sh(ws_, {"status", "--porcelain"}), status_before);
  EXPECT_THAT(Sh(ws_, {"status", "--porcelain"}), HasSubstr("?? tests/new_test.py"));
  EXPECT_THAT(Sh(forge_ws(), {"status", "--porcelain"}), HasSubstr("?? b/"));

  auto ttxla_files = ws.ChangedFiles("tt-xla", ttxla1_);
  ASSERT_TRUE(ttxla_files.ok()) << ttxla_files.status();
  EXPECT_THAT(*ttxla_files, ElementsAre("README.md", "blob.bin", "tests/new_test.py"));
  auto forge_files = ws.ChangedFiles("tt_forge_models", forge1_);
  ASSERT_TRUE(forge_files.ok()) << forge_files.status();
  EXPECT_THAT(*forge_files, ElementsAre("a/pytorch/loader.py", "b/pytorch/loader.py"));
  EXPECT_TRUE(absl::IsInvalidArgument(ws.ChangedFiles("tt-metal", ttxla1_).status()));

  // Both diffs apply to a fresh clone at the pinned commits and reproduce the files.
  const fs::path fresh = tmp_.path() / "fresh";
  Sh(tmp_.path(), {"clone", "-q", ttxla_up_.string(), fresh.string()});
  Sh(fresh, {"checkout", "-q", ttxla1_});
  Sh(fresh, {"submodule", "update", "-q", "--init"});
  ASSERT_EQ(Sh(fresh / kForgeDir, {"rev-parse", "HEAD"}), forge1_);
  Output check = Try(fresh, {"apply", "--check", "-"}, diffs->ttxla);
  EXPECT_TRUE(check.ok) << check.text;
  Output forge_check = Try(fresh / kForgeDir, {"apply", "--check", "-"}, diffs->forge);
  EXPECT_TRUE(forge_check.ok) << forge_check.text;
  ASSERT_TRUE(Try(fresh, {"apply", "-"}, diffs->ttxla).ok);
  ASSERT_TRUE(Try(fresh / kForgeDir, {"apply", "-"}, diffs->forge).ok);
  EXPECT_EQ(Read(fresh / "blob.bin"), std::string("\0\x01\x02\xff", 4));
  EXPECT_EQ(Read(fresh / "tests" / "new_test.py"), Read(ws_ / "tests" / "new_test.py"));
  EXPECT_EQ(Read(fresh / kForgeDir / "b" / "pytorch" / "loader.py"), "class B:\n    pass\n");

  // Nothing changed: empty diffs.
  ASSERT_TRUE(ws.Prepare(Spec("s", ttxla1_, forge1_)).ok());
  auto clean = ws.CollectDiffs(ttxla1_, forge1_);
  ASSERT_TRUE(clean.ok()) << clean.status();
  EXPECT_EQ(clean->ttxla, "");
  EXPECT_EQ(clean->forge, "");
}

TEST_F(WorkspaceTest, CollectDiffsAgainstAnotherCommit) {
  // Against commit 2 (not checked out): the diff is what turns commit 2 into the working tree.
  Workspace ws(ws_, shards_);
  ASSERT_TRUE(ws.Prepare(Spec("s", ttxla2_, forge2_)).ok());
  ASSERT_TRUE(ws.Prepare(Spec("s", ttxla1_, forge1_)).ok());
  auto diffs = ws.CollectDiffs(ttxla2_, forge2_);
  ASSERT_TRUE(diffs.ok()) << diffs.status();
  EXPECT_THAT(diffs->ttxla, HasSubstr("-tt-xla 2"));
  EXPECT_THAT(diffs->forge, HasSubstr("-        return 1  # v2"));
}

TEST_F(WorkspaceTest, ResolveRejectsPathsOutsideTheWorkspace) {
  Workspace ws(ws_, shards_);
  auto inside = ws.Resolve(kYamlPath);
  ASSERT_TRUE(inside.ok()) << inside.status();
  EXPECT_EQ(*inside, ws_ / kYamlPath);
  EXPECT_EQ(*ws.Resolve("./tests//runner/"), ws_ / "tests/runner/");
  EXPECT_TRUE(ws.Resolve("not/yet/created.txt").ok());

  const std::vector<std::string> bad_paths = {
      "../x", "/etc/passwd", "a/../../x", "tests/..", "", "..", std::string("a\0b", 3)};
  for (const std::string& bad : bad_paths) {
    auto r = ws.Resolve(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << bad << ": " << r.status();
  }

  const fs::path outside = tmp_.path() / "outside";
  fs::create_directories(outside);
  fs::create_symlink(outside, ws_ / "escape");
  fs::create_symlink("../../outside/missing.txt", ws_ / "tests" / "dangling");
  fs::create_symlink("runner", ws_ / "tests" / "inner");
  fs::create_symlink("loop2", ws_ / "loop1");
  fs::create_symlink("loop1", ws_ / "loop2");
  auto escape = ws.Resolve("escape/file.txt");
  ASSERT_FALSE(escape.ok());
  EXPECT_THAT(util::MessageOf(escape.status()), HasSubstr("outside the workspace"));
  EXPECT_FALSE(ws.Resolve("escape").ok());
  EXPECT_FALSE(ws.Resolve("tests/dangling").ok()) << "a dangling symlink pointing outside";
  EXPECT_FALSE(ws.Resolve("loop1/x").ok());
  auto via_inner = ws.Resolve("tests/inner/test_config");
  ASSERT_TRUE(via_inner.ok()) << via_inner.status();
  EXPECT_EQ(*via_inner, ws_ / "tests/inner/test_config");
}

}  // namespace
}  // namespace triage::workspace
