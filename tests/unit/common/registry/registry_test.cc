#include "common/registry/registry.h"

#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::registry {
namespace {

// Shaped like tt-forge-models' training_utils.py (written for this test).
constexpr char kUtils[] =
    "import torch\n"
    "\n"
    "_HANDLER_REGISTRY = {}\n"
    "\n"
    "\n"
    "def _register_attr(cls_name, attr):\n"
    "    pass\n"
    "\n"
    "\n"
    "_register_attr(\"BaseModelOutputWithPast\", \"last_hidden_state\")\n"
    "_register_attr(\"CausalLMOutputWithPast\", \"logits\")\n"
    "_register_attr(\"CLIPOutput\", \"logits_per_text\")\n"
    "_register_attr(\"DFineObjectDetectionOutput\", \"logits\")  # detection\n"
    "_register_attr('MgpstrModelOutput', 'logits')\n"
    "_register_handler(\"Special\", lambda x: x)\n"
    "_register_attr(\"YolosObjectDetectionOutput\", \"logits\")\n";

TEST(Registry, ReadsAttrAndHandlerLines) {
  auto f = RegistryFile::Parse(std::string(kTrainingUtilsPath), kUtils);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->registrations().size(), 7u);
  EXPECT_EQ(f->Find("CLIPOutput")->attr, "logits_per_text");
  EXPECT_EQ(f->Find("MgpstrModelOutput")->attr, "logits");
  EXPECT_EQ(f->Find("DFineObjectDetectionOutput")->line, 12);
  EXPECT_EQ(f->Find("Special")->attr, "");
  EXPECT_EQ(f->Find("_register_attr"), nullptr);
}

TEST(Registry, AddsAtTheCaseInsensitiveSortedPosition) {
  auto f = RegistryFile::Parse(std::string(kTrainingUtilsPath), kUtils);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->Add("CLIPVisionOutput", "pooler_output").ok());  // after CLIPOutput
  ASSERT_TRUE(f->Add("Dinov2Output", "last_hidden_state").ok());  // between DFine and Mgpstr
  ASSERT_TRUE(f->Add("AAOutput", "x").ok());                      // first
  ASSERT_TRUE(f->Add("ZebraOutput", "y").ok());                   // last
  std::string text = f->Text();
  auto pos = [&](const char* s) { return text.find(s); };
  EXPECT_LT(pos("\"AAOutput\""), pos("\"BaseModelOutputWithPast\""));
  EXPECT_LT(pos("\"CLIPOutput\""), pos("\"CLIPVisionOutput\""));
  EXPECT_LT(pos("\"CLIPVisionOutput\""), pos("\"DFineObjectDetectionOutput\""));
  EXPECT_LT(pos("\"DFineObjectDetectionOutput\""), pos("\"Dinov2Output\""));
  EXPECT_LT(pos("\"Dinov2Output\""), pos("'MgpstrModelOutput'"));
  EXPECT_GT(pos("\"ZebraOutput\""), pos("\"YolosObjectDetectionOutput\""));
  EXPECT_NE(text.find("_register_attr(\"Dinov2Output\", \"last_hidden_state\")\n"),
            std::string::npos);
}

TEST(Registry, RefusesASecondHandlerButAcceptsTheSameLine) {
  auto f = RegistryFile::Parse(std::string(kTrainingUtilsPath), kUtils);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->Add("CLIPOutput", "logits_per_text").ok());
  EXPECT_EQ(f->Text(), kUtils) << "identical proposals collapse";
  auto st = f->Add("CLIPOutput", "logits_per_image");
  EXPECT_TRUE(absl::IsAlreadyExists(st)) << st;
  EXPECT_NE(std::string(st.message()).find(":12: class 'CLIPOutput' already has a handler"),
            std::string::npos)
      << st;
  EXPECT_TRUE(absl::IsAlreadyExists(f->Add("Special", "logits")));
}

TEST(Registry, RefusesNonIdentifiers) {
  auto f = RegistryFile::Parse(std::string(kTrainingUtilsPath), kUtils);
  ASSERT_TRUE(f.ok());
  for (auto bad : {"Foo\")\nimport os", "1Foo", "", "Foo Bar", "Foo.Bar"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(f->Add(bad, "logits"))) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(f->Add("Foo", bad))) << bad;
  }
  EXPECT_EQ(f->Text(), kUtils);
}

TEST(Registry, RemoveAndDiffApplyWithGit) {
  auto f = RegistryFile::Parse(std::string(kTrainingUtilsPath), kUtils);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->Remove("MgpstrModelOutput").ok());
  EXPECT_TRUE(absl::IsNotFound(f->Remove("MgpstrModelOutput")));
  ASSERT_TRUE(f->Add("Swinv2Output", "logits").ok());
  EXPECT_EQ(f->Find("MgpstrModelOutput"), nullptr);
  testing::TempDir tmp;
  testing::WriteFileOrDie(tmp.path() / kTrainingUtilsPath, kUtils);
  testing::WriteFileOrDie(tmp.path() / "p.patch", f->Diff());
  std::string log;
  ASSERT_EQ(testing::RunCommand({"git", "apply", "p.patch"}, tmp.path(), &log), 0) << log;
  EXPECT_EQ(testing::ReadFileOrDie(tmp.path() / kTrainingUtilsPath), f->Text());
}

TEST(Registry, DuplicateClassInTheFileIsAnError) {
  auto f =
      RegistryFile::Parse("t.py", "_register_attr(\"A\", \"x\")\n_register_attr(\"A\", \"y\")\n");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(std::string(f.status().message()).find("t.py:2: second handler for class 'A'"),
            std::string::npos);
}

TEST(Registry, EmptyRegistryAppends) {
  auto f = RegistryFile::Parse("t.py", "x = 1");
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->Add("A", "b").ok());
  EXPECT_EQ(f->Text(), "x = 1\n_register_attr(\"A\", \"b\")\n");
}

TEST(FindUnpackOverride, FindsTheMethod) {
  EXPECT_EQ(FindUnpackOverride("class ModelLoader:\n    def load_model(self):\n        pass\n"
                               "    def unpack_forward_output(self, fo):\n        return fo[0]\n"),
            4);
  EXPECT_FALSE(
      FindUnpackOverride("from x import unpack_forward_output\n"
                         "def unpack_forward_output_helper(x):\n    pass\n"));
}

}  // namespace
}  // namespace triage::registry
