// The key grammar read from a checkout's runner (common/inventory/key_grammar.h) and keys parsed
// with it (ParseKey's grammar overload).

#include "common/inventory/key_grammar.h"

#include <string>
#include <utility>
#include <vector>

#include "common/inventory/key.h"
#include "common/util/strings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::inventory {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Segments = std::vector<std::pair<std::string, std::vector<std::string>>>;

constexpr char kPath[] = "tests/runner/test_models.py";

Segments SegmentsOf(const KeyGrammar& g) {
  Segments out;
  for (const auto& s : g.segments) out.emplace_back(s.name, s.ids);
  return out;
}

// 1-based line of the first occurrence of needle.
int LineOf(std::string_view text, std::string_view needle) {
  const std::size_t at = text.find(needle);
  EXPECT_NE(at, std::string_view::npos) << needle;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
}

constexpr char kPreamble[] =
    "import pytest\n"
    "from tests.infra import RunMode, Parallelism\n"
    "\n"
    "MODELS_ROOT_TORCH = find('torch')  # (not a decorator\n"
    "\n"
    "\n"
    "@pytest.mark.model_test\n";

constexpr char kRunMode[] =
    "@pytest.mark.parametrize(\n"
    "    \"run_mode\",\n"
    "    [\n"
    "        pytest.param(RunMode.INFERENCE, id=\"inference\", marks=pytest.mark.inference),\n"
    "        pytest.param(RunMode.TRAINING, id=\"training\", marks=pytest.mark.training),\n"
    "    ],\n"
    ")\n";

// The op-by-op parametrize of December 2025's runner, its ids as a list of literals.
constexpr char kOpByOp[] =
    "@pytest.mark.parametrize(\n"
    "    \"op_by_op\",\n"
    "    [None, OpByOpBackend.TORCH, OpByOpBackend.STABLEHLO],\n"
    "    ids=[\"full\", \"op_by_op_torch\", \"op_by_op_stablehlo\"],  # a comment: ) ]\n"
    ")\n";

constexpr char kParallelism[] =
    "@pytest.mark.parametrize(\n"
    "    \"parallelism\",\n"
    "    [\n"
    "        pytest.param(\n"
    "            Parallelism.SINGLE_DEVICE,\n"
    "            id=\"single_device\",\n"
    "            marks=pytest.mark.single_device,\n"
    "        ),\n"
    "        pytest.param(\n"
    "            Parallelism.DATA_PARALLEL,\n"
    "            id='data_parallel',\n"
    "            marks=[pytest.mark.data_parallel, pytest.mark.skip(reason=\"no ) here\")],\n"
    "        ),\n"
    "    ],\n"
    ")\n";

constexpr char kEntry[] =
    "@pytest.mark.parametrize(\n"
    "    \"test_entry\",\n"
    "    test_entries_torch,\n"
    "    ids=DynamicLoader.create_test_id_generator(MODELS_ROOT_TORCH),\n"
    ")\n";

constexpr char kFunction[] =
    "def test_all_models_torch(\n"
    "    test_entry, run_mode, parallelism, record_property\n"
    "):\n"
    "    \"\"\"PyTorch model test (a docstring with a ( in it).\"\"\"\n"
    "    run(test_entry)\n";

std::string Runner(std::vector<std::string_view> decorators) {
  std::string out = kPreamble;
  for (std::string_view d : decorators) out += d;
  out += kFunction;
  return out;
}

KeyGrammar ReadOrDie(const std::string& text) {
  absl::StatusOr<KeyGrammar> g = ReadKeyGrammar(text, kPath);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : KeyGrammar{};
}

std::string ErrorOf(const std::string& text) {
  absl::StatusOr<KeyGrammar> g = ReadKeyGrammar(text, kPath);
  EXPECT_FALSE(g.ok());
  if (g.ok()) return "";
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  return util::MessageOf(g.status());
}

TEST(KeyGrammar, TheDefaultIsTodays) {
  const KeyGrammar& g = DefaultKeyGrammar();
  EXPECT_EQ(g.source, "built-in");
  EXPECT_TRUE(g.built_in());
  EXPECT_EQ(SegmentsOf(g),
            (Segments{{"parallelism", {"single_device", "data_parallel", "tensor_parallel"}},
                      {"run_mode", {"inference", "training"}}}));
  EXPECT_EQ(g.Pattern(), "<model_path>/<framework>[-<variant>]-<parallelism>-<run_mode>");
}

TEST(KeyGrammar, TheHeadRunnerReadsAsTodaysGrammar) {
  TRIAGE_REQUIRE_SHARED_DATA(dir);
  const std::string text = testing::ReadFileOrDie(dir / "head" / kPath);
  absl::StatusOr<KeyGrammar> g = ReadKeyGrammar(text, kPath);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(SegmentsOf(*g), SegmentsOf(DefaultKeyGrammar()));
  EXPECT_EQ(g->source, util::StrCat(kPath, ":", LineOf(text, "\ndef test_all_models_torch(") + 1));
  EXPECT_FALSE(g->built_in());
}

TEST(KeyGrammar, AnOpByOpSegmentBetweenParallelismAndRunMode) {
  const std::string text = Runner({kRunMode, kOpByOp, kParallelism, kEntry});
  const KeyGrammar g = ReadOrDie(text);
  EXPECT_EQ(SegmentsOf(g), (Segments{{"parallelism", {"single_device", "data_parallel"}},
                                     {"op_by_op", {"full", "op_by_op_torch", "op_by_op_stablehlo"}},
                                     {"run_mode", {"inference", "training"}}}));
  EXPECT_EQ(g.source, util::StrCat(kPath, ":", LineOf(text, "def test_all_models_torch(")));
  EXPECT_EQ(g.Pattern(),
            "<model_path>/<framework>[-<variant>]-<parallelism>-<op_by_op>-<run_mode>");

  auto parts = ParseKey("gemma/pytorch-google/gemma-2-9b-it-single_device-full-inference", g);
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(parts->model_path, "gemma");
  EXPECT_EQ(parts->variant, "google/gemma-2-9b-it");
  EXPECT_EQ(parts->parallelism, "single_device");
  EXPECT_EQ(parts->run_mode, "inference");
  EXPECT_THAT(parts->segments, ElementsAre(std::make_pair("op_by_op", "full")));
  EXPECT_EQ(parts->EntryId(), "gemma/pytorch-google/gemma-2-9b-it");
  EXPECT_EQ(parts->LoaderPath(), "third_party/tt_forge_models/gemma/pytorch/loader.py");
  auto no_variant = ParseKey("mgp_str_base/pytorch-data_parallel-op_by_op_torch-training", g);
  ASSERT_TRUE(no_variant.ok()) << no_variant.status();
  EXPECT_EQ(no_variant->variant, "");
  EXPECT_THAT(no_variant->segments, ElementsAre(std::make_pair("op_by_op", "op_by_op_torch")));

  // Today's key is not of this grammar, and the message names where the grammar comes from.
  auto today = ParseKey("resnet/pytorch-resnet_50_hf-single_device-inference", g);
  ASSERT_FALSE(today.ok());
  EXPECT_EQ(util::MessageOf(today.status()),
            util::StrCat("key 'resnet/pytorch-resnet_50_hf-single_device-inference' does not "
                         "match <model_path>/<framework>[-<variant>]-<parallelism>-<op_by_op>-"
                         "<run_mode>: no full/op_by_op_torch/op_by_op_stablehlo segment (key "
                         "grammar of ",
                         g.source, ")"));
  // And the December key is not of today's.
  EXPECT_EQ(KeyMismatch("gemma/pytorch-google/gemma-2-9b-it-single_device-full-inference",
                        DefaultKeyGrammar()),
            "does not match <model_path>/<framework>[-<variant>]-<parallelism>-<run_mode>: no "
            "single_device/data_parallel/tensor_parallel segment");
  EXPECT_EQ(KeyMismatch("gemma/pytorch-x-single_device-full-inference", g), "");
}

TEST(KeyGrammar, OpByOpIdsWrittenAsParams) {
  const KeyGrammar g =
      ReadOrDie(Runner({kRunMode,
                        "@pytest.mark.parametrize(\"op_by_op\", [pytest.param(None, id=\"full\"), "
                        "pytest.param(B.TORCH, id=\"op_by_op\" \"_torch\")])\n",
                        kParallelism, "@pytest.mark.no_auto_properties\n", kEntry}));
  EXPECT_EQ(SegmentsOf(g), (Segments{{"parallelism", {"single_device", "data_parallel"}},
                                     {"op_by_op", {"full", "op_by_op_torch"}},
                                     {"run_mode", {"inference", "training"}}}));
}

TEST(KeyGrammar, NoParallelismSegment) {
  const KeyGrammar g = ReadOrDie(Runner({kRunMode, kOpByOp, kEntry}));
  EXPECT_EQ(SegmentsOf(g), (Segments{{"op_by_op", {"full", "op_by_op_torch", "op_by_op_stablehlo"}},
                                     {"run_mode", {"inference", "training"}}}));
  auto parts = ParseKey("hrnet/pytorch-hrnetv2_w48_osmr-full-inference", g);
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(parts->variant, "hrnetv2_w48_osmr");
  EXPECT_EQ(parts->parallelism, "");
  EXPECT_EQ(parts->run_mode, "inference");
  EXPECT_THAT(parts->segments, ElementsAre(std::make_pair("op_by_op", "full")));
  EXPECT_EQ(TestFunctionOfKey("hrnet/jax-x-full-inference", g), "test_all_models_jax");
  // llm params and the mesh keep their places around the grammar's segments.
  auto llm = ParseKey("q/pytorch-0.5B-llm_decode-seq_1-batch_1-full-mesh_default-inference", g);
  ASSERT_TRUE(llm.ok()) << llm.status();
  EXPECT_EQ(llm->variant, "0.5B");
  EXPECT_EQ(llm->llm_params, "llm_decode-seq_1-batch_1");
  EXPECT_EQ(llm->mesh, "mesh_default");
  EXPECT_EQ(
      TestFunctionOfKey("q/pytorch-0.5B-llm_decode-seq_1-batch_1-full-mesh_default-inference", g),
      "test_llms_torch");
}

TEST(KeyGrammar, MalformedRunnersNameTheLine) {
  // No such function.
  EXPECT_EQ(ErrorOf("def test_all_models_jax():\n    pass\n"),
            "tests/runner/test_models.py: no 'def test_all_models_torch(' (the runner's model "
            "test) in the file");
  // A parametrize never closed: the bracket it opens is named with its line.
  std::string unclosed = Runner({kRunMode,
                                 "@pytest.mark.parametrize(\n    \"op_by_op\",\n    "
                                 "[None, B.TORCH],\n    ids=[\"full\", \"op\"],\n",
                                 kEntry});
  const int unclosed_at = LineOf(unclosed, "    \"op_by_op\",") - 1;
  EXPECT_THAT(ErrorOf(unclosed),
              StartsWith(util::StrCat(kPath, ":", unclosed_at, ": '(' is never closed")));
  // A bracket closed by the wrong one.
  std::string crossed = Runner({kRunMode, "@pytest.mark.parametrize(\"x\", [1, 2)\n", kEntry});
  EXPECT_EQ(ErrorOf(crossed),
            util::StrCat(kPath, ":", LineOf(crossed, "\"x\", [1, 2)"),
                         ": ')' does not close '[' (line ", LineOf(crossed, "\"x\", [1, 2)"), ")"));
  // A string not closed on its line.
  std::string string =
      Runner({kRunMode, "@pytest.mark.parametrize(\"x\", [1], ids=[\"a])\n", kEntry});
  EXPECT_EQ(ErrorOf(string), util::StrCat(kPath, ":", LineOf(string, "ids=[\"a])"),
                                          ": a string literal is not closed on its line"));
  // A segment whose ids are not literals.
  std::string computed =
      Runner({kRunMode, "@pytest.mark.parametrize(\"op_by_op\", MODES, ids=mode_id)\n", kEntry});
  EXPECT_EQ(ErrorOf(computed),
            util::StrCat(kPath, ":", LineOf(computed, "@pytest.mark.parametrize(\"op_by_op\""),
                         ": @pytest.mark.parametrize('op_by_op', ...) above the test entry has "
                         "no literal ids (pytest.param(..., id=\"...\") items or ids=[...])"));
  // The parametrize nearest the function must be the entry's.
  std::string no_entry = Runner({kRunMode, kParallelism});
  EXPECT_THAT(ErrorOf(no_entry),
              StartsWith(util::StrCat(kPath, ":",
                                      LineOf(no_entry,
                                             "@pytest.mark.parametrize(\n"
                                             "    \"parallelism\""),
                                      ": the parametrize nearest def test_all_models_torch(")));
  // No run mode, two parallelisms.
  std::string no_mode = Runner({kParallelism, kEntry});
  EXPECT_EQ(ErrorOf(no_mode),
            util::StrCat(kPath, ":", LineOf(no_mode, "def test_all_models_torch("),
                         ": no run mode parametrize (ids inference/training) above def "
                         "test_all_models_torch("));
  std::string twice = Runner({kRunMode, kParallelism, kParallelism, kEntry});
  EXPECT_THAT(ErrorOf(twice), HasSubstr(": a second parallelism segment"));
}

TEST(KeyGrammar, ARunnerWhoseIdsComeFromElsewhereHasTheBuiltInGrammar) {
  // No parametrize above the function: a conftest makes its ids, as the built-in grammar says.
  auto g = ReadKeyGrammar(Runner({}), kPath);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->built_in());
  EXPECT_EQ(g->Pattern(), DefaultKeyGrammar().Pattern());
}

}  // namespace
}  // namespace triage::inventory
