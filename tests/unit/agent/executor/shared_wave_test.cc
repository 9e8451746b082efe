// Which loaders a shared fix's wave checks (agent/executor/shared_wave.h): those importing a
// changed module, directly or through another shared module, in the import forms loaders use.

#include "agent/executor/shared_wave.h"

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class SharedWaveTest : public ::testing::Test {
 protected:
  void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories((dir_.path() / path).parent_path());
    testing::WriteFileOrDie(dir_.path() / path, text);
  }
  std::filesystem::path Root() const { return dir_.path(); }

  testing::TempDir dir_;
};

TEST_F(SharedWaveTest, AChangedHelperIsFollowedThroughTheSharedModulesThatImportIt) {
  Write("base.py", "import torch\n");
  Write("tools/images.py", "import torch\n");
  Write("tools/vision.py", "from .images import batch\n");  // imports the changed helper
  Write("tools/text.py", "from ..base import ModelLoader\n");
  EXPECT_THAT(ChangedModules(Root(), {"tt_forge_models:tools/images.py"}),
              ElementsAre("tools.images", "tools.vision"));
  EXPECT_THAT(ChangedModules(Root(), {"tt_forge_models:base.py"}),
              ElementsAre("base", "tools.text"));
  // A tt-xla file has no module a loader imports by this name (the wave takes every loader then).
  EXPECT_THAT(ChangedModules(Root(), {"tt-xla:python_package/tt_torch/x.py"}), IsEmpty());
}

TEST_F(SharedWaveTest, ALoaderImportsAModuleInEveryFormLoadersUse) {
  const std::set<std::string> helper = {"tools.images"};
  const std::pair<const char*, bool> cases[] = {
      {"from ...tools.images import batch\n", true},
      {"from ...tools import images\n", true},
      {"from ...tools import (\n    text,\n    images,\n)\n", true},
      {"import third_party.tt_forge_models.tools.images as im\n", true},
      {"from ...tools import text  # images\n", false},
      {"from ...tools.images_extra import batch\n", false},
      {"x = 'from ...tools.images import batch'\n", false},
      {"import tools\n", false},
  };
  int n = 0;
  for (const auto& [source, imports] : cases) {
    const std::string dir = "loader" + std::to_string(++n) + "/pytorch";
    Write(dir + "/loader.py", source);
    EXPECT_EQ(DirImports(Root() / dir, helper), imports) << source;
  }
  // A file below the loader directory counts too.
  Write("nested/pytorch/src/model.py", "from ....tools.images import batch\n");
  EXPECT_TRUE(DirImports(Root() / "nested/pytorch", helper));
  EXPECT_FALSE(DirImports(Root() / "missing", helper));
}

}  // namespace
}  // namespace triage::agent
