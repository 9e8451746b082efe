// The agent's self-check (agent/core/runner_check.h; docs/farm.md, "Only a working agent is a
// witness"): fake interpreters (scripts in a temp dir) that are missing, cannot import the
// runner's modules or fail to load its conftest; device directories with too few entries; and
// the real interpreter collecting one test of a small runner written by the test.

#include "agent/core/runner_check.h"

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kKey[] = "m0/pytorch-Base-single_device-inference";
constexpr char kExcluded[] = "m1/pytorch-Base-single_device-inference";
constexpr char kNoLoader[] = "m2/pytorch-Base-single_device-inference";

// What pytest prints when the runner's conftest does not import.
constexpr char kConftestFails[] =
    "ImportError while loading conftest '/ws/tests/runner/conftest.py'.\n"
    "tests/runner/conftest.py:19: in <module>\n"
    "    import yaml\n"
    "E   ModuleNotFoundError: No module named 'yaml'\n";

class RunnerCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ws_ = tmp_.path() / "ws";
    // A small runner: test_all_models_torch over the YAML's keys, and a test-config file whose
    // first entries cannot be collected (excluded; loader missing).
    testing::WriteFileOrDie(ws_ / "tests/runner/test_models.py",
                            "import pytest\n"
                            "KEYS = ['" +
                                std::string(kKey) +
                                "']\n"
                                "@pytest.mark.parametrize('key', KEYS, ids=KEYS)\n"
                                "def test_all_models_torch(key):\n"
                                "    pass\n");
    testing::WriteFileOrDie(
        ws_ / "tests/runner/test_config/torch/test_config_inference_single_device.yaml",
        "test_config:\n"
        "  " +
            std::string(kExcluded) +
            ":\n    status: EXCLUDE_MODEL\n"
            "  " +
            std::string(kNoLoader) +
            ":\n    status: EXPECTED_PASSING\n"
            "  " +
            std::string(kKey) + ":\n    status: KNOWN_FAILURE_XFAIL\n");
    for (const char* loader : {"m0", "m1"}) {
      testing::WriteFileOrDie(ws_ / "third_party/tt_forge_models" / loader / "pytorch/loader.py",
                              "");
    }
  }

  // An executable script in the temp dir standing in for --python.
  std::string Script(const std::string& name, const std::string& body) {
    const fs::path path = tmp_.path() / name;
    testing::WriteFileOrDie(path, "#!/bin/sh\n" + body);
    ::chmod(path.c_str(), 0755);
    return path.string();
  }

  RunnerCheckOptions Options(const std::string& python) {
    RunnerCheckOptions o;
    o.python = python;
    o.workspace = ws_;
    o.device_path = testing::FakeDevices(tmp_.path() / "dev", 1);
    o.device_count = 1;
    o.timeout = std::chrono::seconds(60);
    return o;
  }

  std::string Node() const {
    return (ws_ / "tests/runner/test_models.py").string() + "::test_all_models_torch[" + kKey + "]";
  }

  testing::TempDir tmp_;
  fs::path ws_;
};

TEST_F(RunnerCheckTest, AMissingInterpreterIsNamed) {
  const std::string missing = (tmp_.path() / "no-python").string();
  const std::string problem = CheckRunner(Options(missing));
  EXPECT_THAT(problem, HasSubstr("--python " + missing + " does not run"));
}

TEST_F(RunnerCheckTest, AnInterpreterThatExitsOneCannotImportTheRunnersModules) {
  const std::string problem = CheckRunner(Options(Script("python", "exit 1\n")));
  EXPECT_THAT(problem, HasSubstr("cannot import pytest and torch (exit 1)"));
}

TEST_F(RunnerCheckTest, TheMissingModuleIsNamed) {
  const std::string python =
      Script("python", "echo \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n");
  EXPECT_EQ(CheckRunner(Options(python)),
            "--python " + python +
                " cannot import pytest and torch: ModuleNotFoundError: No module named 'torch' "
                "(exit 1)");
}

TEST_F(RunnerCheckTest, AConftestThatDoesNotImportIsNamedWithItsFirstErrorLine) {
  // Imports work; pytest's collection prints what a conftest without its modules prints.
  const std::string python =
      Script("python", "if [ \"$1\" = -c ]; then exit 0; fi\nprintf '%s' \"" +
                           std::string(kConftestFails) + "\"\nexit 4\n");
  EXPECT_EQ(CheckRunner(Options(python)),
            "pytest cannot collect " + Node() +
                ": ImportError while loading conftest '/ws/tests/runner/conftest.py' "
                "(ModuleNotFoundError: No module named 'yaml') (exit 4)");
}

TEST_F(RunnerCheckTest, TheCollectionRunsInTheWorkspaceWithTheNodeIdOfAnEntryItCanCollect) {
  // The fake records its arguments and working directory.
  const std::string python =
      Script("python", "echo \"$(pwd) $*\" >> \"" + (tmp_.path() / "calls").string() + "\"\n");
  EXPECT_EQ(CheckRunner(Options(python)), "");
  const std::string calls = testing::ReadFileOrDie(tmp_.path() / "calls");
  EXPECT_THAT(calls, HasSubstr(ws_.string() + " -c import pytest"));
  EXPECT_THAT(calls, HasSubstr(ws_.string() + " -m pytest --collect-only -q -p no:cacheprovider " +
                               Node()));
}

TEST_F(RunnerCheckTest, TheCollectableTestSkipsExcludedEntriesAndMissingLoaders) {
  auto node = CollectableTest(ws_);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(*node, Node());
  fs::remove(ws_ / "third_party/tt_forge_models/m0/pytorch/loader.py");
  node = CollectableTest(ws_);
  ASSERT_FALSE(node.ok());
  EXPECT_THAT(std::string(node.status().message()), HasSubstr("no test-config entry to collect"));
  fs::remove(ws_ / "tests/runner/test_models.py");
  node = CollectableTest(ws_);
  ASSERT_FALSE(node.ok());
  EXPECT_THAT(std::string(node.status().message()),
              HasSubstr("has no tests/runner/test_models.py"));
}

TEST_F(RunnerCheckTest, ADeviceDirectoryWithTooFewEntriesIsAProblem) {
  const fs::path dev = testing::FakeDevices(tmp_.path() / "two", 2);
  EXPECT_EQ(CheckDevices(dev, 2), "");
  EXPECT_EQ(CheckDevices(dev, 1), "");
  EXPECT_EQ(CheckDevices(dev, 4),
            "the device path " + dev.string() + " holds 2 entries, fewer than --device_count 4");
  EXPECT_THAT(CheckDevices(tmp_.path() / "none", 1),
              HasSubstr("the device path " + (tmp_.path() / "none").string() + " does not exist"));
  EXPECT_EQ(CheckDevices("", 8), "") << "\"\" turns the device check off (emulated devices)";
  // A device node itself (not a directory) counts as one device.
  testing::WriteFileOrDie(tmp_.path() / "node", "");
  EXPECT_EQ(CheckDevices(tmp_.path() / "node", 1), "");
}

TEST_F(RunnerCheckTest, ADeviceAgentChecksItsDevicesAndACpuAgentDoesNot) {
  const std::string python = Script("python", "exit 0\n");
  RunnerCheckOptions o = Options(python);
  o.device_count = 2;
  EXPECT_THAT(CheckRunner(o), HasSubstr("holds 1 entry, fewer than --device_count 2"));
  o.cpu_only = true;
  EXPECT_EQ(CheckRunner(o), "");
  // Both a runner and a device problem: one line names both.
  o = Options(Script("broken", "exit 1\n"));
  o.device_path = tmp_.path() / "nowhere";
  const std::string both = CheckRunner(o);
  EXPECT_THAT(both, HasSubstr("cannot import pytest and torch"));
  EXPECT_THAT(both, HasSubstr("; and the device path"));
}

TEST(FirstCollectionErrorTest, NamesTheFailingModuleConftestOrLine) {
  EXPECT_EQ(FirstCollectionError(
                "==================================== ERRORS ====\n"
                "_____ ERROR collecting tests/runner/test_models.py _____\n"
                "ImportError while importing test module '/ws/tests/runner/test_models.py'.\n"
                "tests/runner/test_models.py:16: in <module>\n"
                "    import torch\n"
                "E   ModuleNotFoundError: No module named 'torch'\n"
                "=========================== short test summary info ====\n"
                "ERROR tests/runner/test_models.py\n"),
            "ERROR collecting tests/runner/test_models.py (ModuleNotFoundError: No module named "
            "'torch')");
  EXPECT_EQ(FirstCollectionError("\nERROR: not found: /ws/tests/runner/test_models.py::f[k]\n"
                                 "(no name '/ws/tests/runner/test_models.py::f[k]' in any of "
                                 "[<Module tests/runner/test_models.py>])\n"),
            "ERROR: not found: /ws/tests/runner/test_models.py::f[k]");
  EXPECT_EQ(FirstCollectionError("something else\nlast words\n\n"), "last words");
  EXPECT_EQ(FirstCollectionError(""), "no output");
}

// The real interpreter (pytest and torch installed) on the small runner: it collects; with a
// conftest that imports a missing module it names the conftest and the module.
TEST_F(RunnerCheckTest, TheRealInterpreterCollectsOrNamesTheConftestThatFails) {
  RunnerCheckOptions o = Options("/usr/bin/python3");
  EXPECT_EQ(CheckRunner(o), "");
  EXPECT_FALSE(fs::exists(ws_ / ".pytest_cache")) << "the check leaves the checkout as it was";
  testing::WriteFileOrDie(ws_ / "tests/runner/conftest.py", "import no_such_runner_module\n");
  const std::string problem = CheckRunner(o);
  EXPECT_THAT(problem, HasSubstr("pytest cannot collect " + Node()));
  EXPECT_THAT(problem, HasSubstr("ImportError while loading conftest"));
  EXPECT_THAT(problem, HasSubstr("No module named 'no_such_runner_module'"));
}

}  // namespace
}  // namespace triage::agent
