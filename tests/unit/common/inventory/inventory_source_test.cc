// What a working-tree source reads and refuses, checked on a real folder: types come from lstat,
// a FIFO is never opened, and links are followed only inside the repository.

#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "common/inventory/inventory.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::inventory {
namespace {

namespace fs = std::filesystem;

constexpr char kYaml[] =
    "test_config:\n  a/pytorch-X-single_device-training:\n    status: EXPECTED_PASSING\n";

TEST(WorkTreeSource, ListsLinksInsideAndRefusesTheRest) {
  testing::TempDir repo, outside;
  const fs::path config = repo.path() / kTestConfigDir;
  testing::WriteFileOrDie(config / "torch/test_config_training_single_device.yaml", kYaml);
  testing::WriteFileOrDie(outside.path() / "x.yaml", kYaml);
  fs::create_directories(config / "jax");
  fs::create_symlink("../torch", config / "jax/torch");  // a folder inside: followed
  const fs::path bad = config / "bad";
  fs::create_directories(bad);
  fs::create_symlink("..", bad / "up");             // a folder that holds the link: a loop
  fs::create_symlink(outside.path(), bad / "far");  // a folder outside
  fs::create_symlink(outside.path() / "x.yaml", bad / "x.yaml");
  fs::create_symlink("missing.yaml", bad / "gone.yaml");
  fs::create_symlink("missing", bad / "gone");  // not a *.yaml: reads nothing, ignored
  ASSERT_EQ(::mkfifo((bad / "fifo.yaml").c_str(), 0644), 0);
  ASSERT_EQ(::mkfifo((bad / "fifo.txt").c_str(), 0644), 0);  // not a *.yaml: ignored
  fs::create_symlink("fifo.yaml", bad / "to_fifo.yaml");

  WorkTreeSource source(repo.path());
  auto listing = source.List(kTestConfigDir, ".yaml");
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_EQ(listing->files,
            (std::vector<std::string>{
                "tests/runner/test_config/jax/torch/test_config_training_single_device.yaml",
                "tests/runner/test_config/torch/test_config_training_single_device.yaml"}));
  std::map<std::string, std::string> refused(listing->refused.begin(), listing->refused.end());
  EXPECT_EQ(
      refused,
      (std::map<std::string, std::string>{
          {"tests/runner/test_config/bad/far",
           "symbolic link to '" + outside.path().string() + "', outside the repository; not read"},
          {"tests/runner/test_config/bad/fifo.yaml", "is a FIFO, not a regular file; not read"},
          {"tests/runner/test_config/bad/gone.yaml",
           "dangling symbolic link (to 'missing.yaml'); not read"},
          {"tests/runner/test_config/bad/to_fifo.yaml",
           "symbolic link to 'fifo.yaml', which is a FIFO, not a regular file; "
           "not read"},
          {"tests/runner/test_config/bad/up",
           "symbolic link to '..', a folder that holds it (a loop); not followed"},
          {"tests/runner/test_config/bad/x.yaml", "symbolic link to '" +
                                                      (outside.path() / "x.yaml").string() +
                                                      "', outside the repository; not read"},
      }));

  // Read checks again (the tree may change after listing) and never opens a FIFO.
  auto fifo = source.Read("tests/runner/test_config/bad/fifo.yaml", 1 << 20);
  ASSERT_FALSE(fifo.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(fifo.status())) << fifo.status();
  EXPECT_EQ(fifo.status().message(), "is a FIFO, not a regular file; not read");
  auto far = source.Read("tests/runner/test_config/bad/x.yaml", 1 << 20);
  ASSERT_FALSE(far.ok());
  EXPECT_EQ(far.status().message(), "not inside the repository (any more); not read");
  auto linked = source.Read(
      "tests/runner/test_config/jax/torch/test_config_training_single_device.yaml", 1 << 20);
  ASSERT_TRUE(linked.ok()) << linked.status();
  EXPECT_EQ(*linked, kYaml);
}

TEST(WorkTreeSource, TestConfigFolderLeavingTheRepositoryIsRefused) {
  testing::TempDir repo, outside;
  testing::WriteFileOrDie(outside.path() / "torch/test_config_training_single_device.yaml", kYaml);
  fs::create_directories(repo.path() / "tests/runner");
  fs::create_symlink(outside.path(), repo.path() / kTestConfigDir);
  auto inv = LoadInventory(WorkTreeSource(repo.path()));
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_TRUE(inv->documents.empty());
  ASSERT_EQ(inv->diagnostics.size(), 1u);
  EXPECT_EQ(inv->diagnostics[0].ToString(), "tests/runner/test_config: resolves to '" +
                                                fs::canonical(outside.path()).string() +
                                                "', outside the repository; not read");
}

// A runner of December 2025: entry, parallelism, op-by-op, run mode.
constexpr char kOpByOpRunner[] =
    "import pytest\n"
    "\n"
    "@pytest.mark.model_test\n"
    "@pytest.mark.parametrize(\n"
    "    \"run_mode\",\n"
    "    [pytest.param(RunMode.INFERENCE, id=\"inference\"), pytest.param(RunMode.TRAINING, "
    "id=\"training\")],\n"
    ")\n"
    "@pytest.mark.parametrize(\"op_by_op\", [None, B.TORCH], ids=[\"full\", \"op_by_op_torch\"])\n"
    "@pytest.mark.parametrize(\n"
    "    \"parallelism\", [pytest.param(Parallelism.SINGLE_DEVICE, id=\"single_device\")]\n"
    ")\n"
    "@pytest.mark.parametrize(\"test_entry\", entries, ids=make_id)\n"
    "def test_all_models_torch(test_entry, run_mode, op_by_op, parallelism):\n"
    "    pass\n";

constexpr char kFullYaml[] =
    "test_config:\n  a/pytorch-X-single_device-full-inference:\n    status: EXPECTED_PASSING\n";
constexpr char kInferenceFile[] =
    "tests/runner/test_config/torch/test_config_inference_single_device.yaml";

TEST(LoadInventory, KeysAreReadWithTheRunnersGrammar) {
  testing::TempDir repo;
  testing::WriteFileOrDie(repo.path() / kInferenceFile, kFullYaml);
  testing::WriteFileOrDie(repo.path() / kRunnerPath, kOpByOpRunner);
  auto inv = LoadInventory(WorkTreeSource(repo.path()));
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_TRUE(inv->diagnostics.empty()) << inv->diagnostics.front().ToString();
  EXPECT_EQ(inv->grammar.source, "tests/runner/test_models.py:13");
  ASSERT_EQ(inv->grammar.segments.size(), 3u);
  EXPECT_EQ(inv->grammar.segments[1].name, "op_by_op");
  ASSERT_EQ(inv->documents.size(), 1u);
  EXPECT_EQ(inv->documents[0].grammar().source, inv->grammar.source);
  ASSERT_EQ(inv->documents[0].entries().size(), 1u);
  EXPECT_EQ(inv->documents[0].entries()[0].loader,
            "third_party/tt_forge_models/a/pytorch/loader.py");
}

TEST(LoadInventory, WithoutARunnerTheBuiltInGrammar) {
  testing::TempDir repo;
  testing::WriteFileOrDie(repo.path() / kInferenceFile, kFullYaml);
  WorkTreeSource source(repo.path());
  auto missing = source.Read(kRunnerPath, 1 << 20);
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  auto inv = LoadInventory(source);
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_TRUE(inv->grammar.built_in());
  EXPECT_FALSE(inv->ok()) << "a key of another grammar is an error";
  ASSERT_EQ(inv->diagnostics.size(), 1u);
  EXPECT_NE(inv->diagnostics[0].ToString().find(
                ":2:3: key 'a/pytorch-X-single_device-full-inference' does not match"),
            std::string::npos)
      << inv->diagnostics[0].ToString();
}

TEST(LoadInventory, ARunnerWhoseGrammarCannotBeReadIsAWarning) {
  testing::TempDir repo;
  testing::WriteFileOrDie(
      repo.path() / kTestConfigDir / "torch/test_config_training_single_device.yaml", kYaml);
  std::string runner = kOpByOpRunner;
  runner.replace(runner.find("ids=[\"full\", \"op_by_op_torch\"]"), 30, "ids=op_id");
  testing::WriteFileOrDie(repo.path() / kRunnerPath, runner);
  auto inv = LoadInventory(WorkTreeSource(repo.path()));
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_TRUE(inv->ok());
  EXPECT_TRUE(inv->grammar.built_in());
  ASSERT_EQ(inv->diagnostics.size(), 1u);
  EXPECT_EQ(inv->diagnostics[0].ToString(),
            "tests/runner/test_models.py:8: warning: @pytest.mark.parametrize('op_by_op', ...) "
            "above the test entry has no literal ids (pytest.param(..., id=\"...\") items or "
            "ids=[...]); keys are read with the built-in grammar "
            "(<model_path>/<framework>[-<variant>]-<parallelism>-<run_mode>)");
}

}  // namespace
}  // namespace triage::inventory
