// The shared scope of a remediation sweep (common/command/shared_scope.h): which files outside a
// loader directory a command may change.

#include "common/command/shared_scope.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace triage::command {
namespace {

TEST(SharedScope, ADirectoryPrefixTakesItsFilesAFilePrefixOnlyItself) {
  const std::vector<std::string> shared = {"tt-xla:python_package/", "tt_forge_models:base.py"};
  EXPECT_TRUE(InSharedScope(shared, "tt-xla", "python_package/tt_torch/backend.py"));
  EXPECT_FALSE(InSharedScope(shared, "tt-xla", "python_package_extra/x.py"));
  EXPECT_FALSE(InSharedScope(shared, "tt_forge_models", "python_package/x.py"));
  EXPECT_TRUE(InSharedScope(shared, "tt_forge_models", "base.py"));
  EXPECT_FALSE(InSharedScope(shared, "tt_forge_models", "base.py.orig"));
  EXPECT_FALSE(InSharedScope({}, "tt-xla", "python_package/x.py"));
}

TEST(SharedScope, TheDefaultsAreValidAndTheRunnerCiAndRegistryNeverAre) {
  for (std::string_view p : kDefaultSharedPaths) EXPECT_TRUE(CheckSharedPath(p).ok()) << p;
  for (std::string_view p : {"tt-xla:tests/runner/test_models.py", "tt-xla:tests/",
                             "tt-xla:third_party/tt_forge_models/", "tt-xla:.github/",
                             "tt_forge_models:training_utils.py", "tt-xla:a/../tests/",
                             "tt-xla:./x", "tt-xla:a//b", "other:x"}) {
    EXPECT_FALSE(CheckSharedPath(p).ok()) << p;
  }
  // A prefix that holds a forbidden path is refused too: "tt-xla:" would hold tests/.
  EXPECT_FALSE(CheckSharedPath("tt-xla:t").ok());
}

TEST(SharedScope, AnEditOutsideTheLoaderDirectoryIsShared) {
  const std::string loader = "third_party/tt_forge_models/patch_mini/pytorch/loader.py";
  EXPECT_FALSE(OutsideLoader(loader, "tt_forge_models", "patch_mini/pytorch/loader.py"));
  EXPECT_FALSE(OutsideLoader(loader, "tt_forge_models", "patch_mini/pytorch/src/model.py"));
  EXPECT_TRUE(OutsideLoader(loader, "tt_forge_models", "patch_mini/__init__.py"));
  EXPECT_TRUE(OutsideLoader(loader, "tt_forge_models", "tools/mini_images.py"));
  EXPECT_TRUE(OutsideLoader(loader, "tt-xla", "python_package/x.py"));
}

}  // namespace
}  // namespace triage::command
