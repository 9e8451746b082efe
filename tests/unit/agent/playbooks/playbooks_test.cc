// The decision tables of both seeds, the loader edits, and whole playbook runs over fake tools
// on a temporary workspace (no torch needed here; the e2e test runs the real thing).

#include "agent/playbooks/playbooks.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <set>

#include "agent/executor/native_tools.h"
#include "agent/executor/replay_tools.h"
#include "agent/playbooks/dtype_bfloat16/dtype_bfloat16.h"
#include "agent/playbooks/probe.h"
#include "agent/playbooks/python_edit.h"
#include "agent/playbooks/shard_run.h"
#include "agent/playbooks/unpack_forward_output/unpack_forward_output.h"
#include "common/util/text.h"
#include "gtest/gtest.h"
#include "tests/support/fake_playbook_tools.h"
#include "tests/support/test_support.h"

namespace triage::playbooks {
namespace {

using agent::ReplayTools;

using nlohmann::json;

json Tensor(std::vector<int> shape) {
  return {{"type", "tensor"}, {"shape", shape}, {"dtype", "torch.bfloat16"}};
}

ProbeDoc Doc(const std::string& key, const std::string& phase, json tree, bool unpacked_ok,
             std::optional<ProbeDoc::Error> error = {}) {
  ProbeDoc d;
  d.key = key;
  d.phase = phase;
  d.ok = !error;
  d.error = error;
  d.has_output = !tree.is_null();
  d.tree = tree;
  if (tree.is_object() && tree.value("type", "") == "object") d.output_class = tree["class"];
  d.has_unpacked = d.has_output;
  d.unpacked_ok = unpacked_ok;
  d.unpacked_kind = unpacked_ok ? "tensor" : "";
  d.unpacked_error = unpacked_ok ? "" : "No handler for class X exists in `unpack_forward_output`";
  return d;
}

json Object(const std::string& cls, json attrs) {
  return {{"type", "object"}, {"class", cls}, {"attrs", attrs}};
}

// --- unpack fix table (docs/playbooks.md)
// ---------------------------------------------------------------------------

// Members that are absent or of another type read as their defaults: no exception, and no lookup
// of a missing key through a const json (tests/fuzz/regressions/probe).
TEST(ProbeDoc, MissingAndMistypedMembersReadAsDefaults) {
  auto docs = ParseProbeOutput(
      R"({"schema": 1, "key": "k", "phase": "bfloat16", "ok": true, "unpacked": {"ok": true}})"
      "\n"
      R"({"schema": 1, "key": "k", "phase": "float32", "ok": 1, "seq": "2", "loader": 7,)"
      R"( "error": {"type": null}, "inputs": [3, {"name": "x", "dtype": 5}], "backward": []})");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_TRUE((*docs)[0].has_unpacked);
  EXPECT_TRUE((*docs)[0].unpacked_ok);
  EXPECT_EQ((*docs)[0].unpacked_error, "");
  EXPECT_FALSE((*docs)[1].ok);
  EXPECT_EQ((*docs)[1].seq, 0);
  EXPECT_EQ((*docs)[1].loader, "");
  ASSERT_TRUE((*docs)[1].error.has_value());
  EXPECT_EQ((*docs)[1].error->type, "");
  ASSERT_EQ((*docs)[1].inputs.size(), 2u);
  EXPECT_EQ((*docs)[1].inputs[1].name, "x");
  EXPECT_EQ((*docs)[1].inputs[1].dtype, "");
  EXPECT_EQ((*docs)[1].backward, "skipped");

  EXPECT_FALSE(ParseProbeFile(R"({"schema": "1", "key": 2, "phase": "structure"})", "p.json").ok());
  EXPECT_FALSE(ParseProbeFile(R"({"schema": 1, "key": 2, "phase": "structure"})", "p.json").ok());

  EXPECT_EQ(DescribeTree(nlohmann::json::parse(R"({"type": "list"})")), "list[0]: []");
  EXPECT_EQ(DescribeTree(nlohmann::json::parse(R"({"type": "dict", "items": [1]})")), "dict{}");
  EXPECT_EQ(DescribeTree(nlohmann::json::parse(R"({"type": "tensor", "shape": 3})")), "Tensor() ");
  EXPECT_EQ(DescribeTree(nlohmann::json::parse(R"({"type": 3})")), "");
}

// model_info (the loader's task) is read when present; documents recorded without it read as
// unknown (docs/probe.md).
TEST(ProbeDoc, ModelInfoIsOptional) {
  auto docs = ParseProbeOutput(
      R"({"schema": 1, "key": "k", "phase": "structure", "model_info": {"model": "YoloMini",)"
      R"( "variant": "N", "task": "cv_object_det", "source": "github"}})"
      "\n"
      R"({"schema": 1, "key": "k", "phase": "structure"})"
      "\n"
      R"({"schema": 1, "key": "k", "phase": "structure", "model_info": null})"
      "\n"
      R"({"schema": 1, "key": "k", "phase": "structure", "model_info": {"task": 3}})");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 4u);
  ASSERT_TRUE((*docs)[0].model_info.has_value());
  EXPECT_EQ((*docs)[0].model_info->task, "cv_object_det");
  EXPECT_EQ((*docs)[0].model_info->model, "YoloMini");
  EXPECT_EQ((*docs)[0].model_info->source, "github");
  EXPECT_FALSE((*docs)[1].model_info.has_value());
  EXPECT_FALSE((*docs)[2].model_info.has_value());
  ASSERT_TRUE((*docs)[3].model_info.has_value());
  EXPECT_EQ((*docs)[3].model_info->task, "");
}

// --- the inputs mode's documents (docs/probe.md, "The inputs mode")

// A train document with every member of the inputs mode, as the probe prints it.
constexpr char kInputsTrainDoc[] =
    R"({"schema": 1, "key": "det/pytorch-Base-single_device-training",
  "loader": "third_party/tt_forge_models/det/pytorch/loader.py", "variant": "Base",
  "model_info": null, "phase": "train", "ok": false,
  "error": {"type": "AssertionError", "message": "targets should not be none when in training mode",
            "traceback": "Traceback ...",
            "site": {"file": "/usr/lib/python3/dist-packages/torchvision/models/detection/generalized_rcnn.py",
                     "function": "forward", "line": 62, "in_loader_dir": false},
            "module": null},
  "inputs": [{"name": "0", "dtype": "torch.bfloat16", "shape": [2, 3, 8, 8], "kind": "tensor", "tree": null},
             {"name": "1", "dtype": null, "shape": null, "kind": "list",
              "tree": {"type": "list", "items": [{"type": "dict", "items": {
                "boxes": {"type": "tensor", "shape": [1, 4], "dtype": "torch.float32"}}}]}}],
  "output": null, "unpacked": null, "backward": "skipped",
  "variant_member": "BASE", "container": "list",
  "forward": {"class": "FasterRCNN", "module": "torchvision.models.detection.faster_rcnn",
              "qualname": "GeneralizedRCNN.forward",
              "file": "/usr/lib/python3/dist-packages/torchvision/models/detection/generalized_rcnn.py",
              "in_loader_dir": false,
              "params": [{"name": "images", "kind": "positional", "has_default": false, "default": null},
                         {"name": "targets", "kind": "positional", "has_default": true, "default": "None"},
                         {"name": "extra", "kind": "var_positional", "has_default": false, "default": null},
                         {"name": "scale", "kind": "keyword_only", "has_default": true, "default": "1.0"},
                         {"name": "kw", "kind": "var_keyword", "has_default": false, "default": null}]},
  "load_inputs": {"params": [{"name": "dtype_override", "kind": "positional", "has_default": true, "default": "None"},
                             {"name": "batch_size", "kind": "positional", "has_default": true, "default": "1"}],
                  "passed": ["dtype_override", "batch_size"]},
  "binding": {"ok": true, "params": [{"input": "0", "param": "images"}, {"input": "1", "param": "targets"}],
              "error": null},
  "config": {"is_encoder_decoder": true, "decoder_start_token_id": 0, "pad_token_id": 1},
  "requirements": [{"file": "requirements.nodeps.txt", "packages": ["--no-deps", "foo==1"]},
                   {"file": "requirements.txt", "packages": ["torchvision==0.14"]}],
  "seq": 1})";

TEST(ProbeDoc, InputsModeMembersAreRead) {
  auto docs = ParseProbeFile(kInputsTrainDoc, "p.json");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 1u);
  const ProbeDoc& d = docs->front();
  EXPECT_EQ(d.phase, "train");
  EXPECT_EQ(d.seq, 1);
  EXPECT_EQ(d.variant_member, "BASE");
  EXPECT_EQ(d.container, "list");

  ASSERT_TRUE(d.error.has_value());
  EXPECT_EQ(d.error->Line(), "AssertionError: targets should not be none when in training mode");
  EXPECT_EQ(d.error->site_file,
            "/usr/lib/python3/dist-packages/torchvision/models/detection/generalized_rcnn.py");
  EXPECT_EQ(d.error->site_function, "forward");
  EXPECT_EQ(d.error->site_line, 62);
  EXPECT_FALSE(d.error->site_in_loader_dir);
  EXPECT_EQ(d.error->module, "");

  ASSERT_EQ(d.inputs.size(), 2u);
  EXPECT_TRUE(d.inputs[0].tree.is_null());
  EXPECT_EQ(d.inputs[0].shape, (std::vector<std::int64_t>{2, 3, 8, 8}));
  EXPECT_EQ(d.inputs[1].kind, "list");
  EXPECT_EQ(DescribeTree(d.inputs[1].tree), "list[1]: [dict{boxes: Tensor(1, 4) torch.float32}]");

  ASSERT_TRUE(d.forward.has_value());
  EXPECT_EQ(d.forward->model_class, "FasterRCNN");
  EXPECT_EQ(d.forward->model_module, "torchvision.models.detection.faster_rcnn");
  EXPECT_EQ(d.forward->qualname, "GeneralizedRCNN.forward");
  EXPECT_EQ(d.forward->file,
            "/usr/lib/python3/dist-packages/torchvision/models/detection/generalized_rcnn.py");
  EXPECT_FALSE(d.forward->in_loader_dir);
  ASSERT_EQ(d.forward->params.size(), 5u);
  EXPECT_EQ(d.forward->params[0].name, "images");
  EXPECT_EQ(d.forward->params[0].kind, "positional");
  EXPECT_FALSE(d.forward->params[0].has_default);
  EXPECT_EQ(d.forward->params[0].default_repr, "");
  EXPECT_TRUE(d.forward->params[1].has_default);
  EXPECT_EQ(d.forward->params[1].default_repr, "None");
  EXPECT_EQ(d.forward->params[2].kind, "var_positional");
  EXPECT_EQ(d.forward->params[3].kind, "keyword_only");
  EXPECT_EQ(d.forward->params[3].default_repr, "1.0");
  EXPECT_EQ(d.forward->params[4].kind, "var_keyword");

  ASSERT_EQ(d.load_inputs_params.size(), 2u);
  EXPECT_EQ(d.load_inputs_params[1].name, "batch_size");
  EXPECT_EQ(d.load_inputs_params[1].default_repr, "1");
  EXPECT_EQ(d.load_inputs_passed, (std::vector<std::string>{"dtype_override", "batch_size"}));

  EXPECT_TRUE(d.has_binding);
  EXPECT_TRUE(d.binding_ok);
  EXPECT_EQ(d.binding,
            (std::vector<std::pair<std::string, std::string>>{{"0", "images"}, {"1", "targets"}}));
  EXPECT_EQ(d.binding_error, "");

  ASSERT_TRUE(d.config.has_value());
  EXPECT_EQ(d.config->is_encoder_decoder, std::optional<bool>(true));
  EXPECT_EQ(d.config->decoder_start_token_id, std::optional<std::int64_t>(0));
  EXPECT_EQ(d.config->pad_token_id, std::optional<std::int64_t>(1));

  ASSERT_EQ(d.requirements.size(), 2u);
  EXPECT_EQ(d.requirements[0].file, "requirements.nodeps.txt");
  EXPECT_EQ(d.requirements[0].packages, (std::vector<std::string>{"--no-deps", "foo==1"}));
  EXPECT_EQ(d.requirements[1].file, "requirements.txt");
  EXPECT_EQ(d.requirements[1].packages, (std::vector<std::string>{"torchvision==0.14"}));
}

// An import failure: every document carries the error with its missing module and where the
// import was, and the requirements read from disk; nothing that needs the loader.
TEST(ProbeDoc, InputsModeImportErrorNamesTheModule) {
  auto docs = ParseProbeOutput(
      R"({"schema": 1, "key": "k", "phase": "eval", "ok": false, "error": {"type": "ModuleNotFoundError",)"
      R"( "message": "No module named 'kornia'", "traceback": "", "site": {"file":)"
      R"( "third_party/tt_forge_models/k/pytorch/loader.py", "function": "<module>", "line": 3,)"
      R"( "in_loader_dir": true}, "module": "kornia"}, "inputs": [], "output": null, "unpacked": null,)"
      R"( "backward": "skipped", "variant_member": null, "container": null, "forward": null,)"
      R"( "load_inputs": null, "binding": null, "config": null, "requirements": [{"file":)"
      R"( "requirements.txt", "packages": ["kornia==0.7.0"]}]})");
  ASSERT_TRUE(docs.ok()) << docs.status();
  const ProbeDoc& d = docs->front();
  ASSERT_TRUE(d.error.has_value());
  EXPECT_EQ(d.error->module, "kornia");
  EXPECT_EQ(d.error->site_file, "third_party/tt_forge_models/k/pytorch/loader.py");
  EXPECT_EQ(d.error->site_function, "<module>");
  EXPECT_EQ(d.error->site_line, 3);
  EXPECT_TRUE(d.error->site_in_loader_dir);
  EXPECT_EQ(d.variant_member, "");
  EXPECT_EQ(d.container, "");
  EXPECT_FALSE(d.forward.has_value());
  EXPECT_TRUE(d.load_inputs_params.empty());
  EXPECT_FALSE(d.has_binding);
  EXPECT_FALSE(d.config.has_value());
  ASSERT_EQ(d.requirements.size(), 1u);
  EXPECT_EQ(d.requirements[0].packages, (std::vector<std::string>{"kornia==0.7.0"}));
}

// Documents of the other modes (and of the inputs mode recorded before a member existed) have
// none of the members: each reads as its default.
TEST(ProbeDoc, InputsModeMembersAbsentReadAsDefaults) {
  auto docs = ParseProbeOutput(
      R"({"schema": 1, "key": "k", "phase": "structure", "error": {"type": "ValueError",)"
      R"( "message": "m", "traceback": "t"}, "inputs": [{"name": "<single>", "kind": "tensor"}]})");
  ASSERT_TRUE(docs.ok()) << docs.status();
  const ProbeDoc& d = docs->front();
  EXPECT_EQ(d.variant_member, "");
  EXPECT_EQ(d.container, "");
  EXPECT_FALSE(d.forward.has_value());
  EXPECT_TRUE(d.load_inputs_params.empty());
  EXPECT_TRUE(d.load_inputs_passed.empty());
  EXPECT_FALSE(d.has_binding);
  EXPECT_FALSE(d.binding_ok);
  EXPECT_TRUE(d.binding.empty());
  EXPECT_EQ(d.binding_error, "");
  EXPECT_FALSE(d.config.has_value());
  EXPECT_TRUE(d.requirements.empty());
  ASSERT_TRUE(d.error.has_value());
  EXPECT_EQ(d.error->site_file, "");
  EXPECT_EQ(d.error->site_function, "");
  EXPECT_EQ(d.error->site_line, 0);
  EXPECT_FALSE(d.error->site_in_loader_dir);
  EXPECT_EQ(d.error->module, "");
  ASSERT_EQ(d.inputs.size(), 1u);
  EXPECT_TRUE(d.inputs[0].tree.is_null());
}

// Members of another type are ignored (read as their defaults), never an exception; items of
// the wrong type inside a list are skipped.
TEST(ProbeDoc, InputsModeMistypedMembersAreIgnored) {
  auto docs = ParseProbeOutput(
      R"({"schema": 1, "key": "k", "phase": "train", "variant_member": 3, "container": ["dict"],)"
      R"( "forward": "GptMini", "load_inputs": [1], "binding": true, "config": "c",)"
      R"( "requirements": {"file": "requirements.txt"},)"
      R"( "error": {"type": "E", "message": "m", "site": "loader.py:3", "module": 5}})"
      "\n"
      R"({"schema": 1, "key": "k", "phase": "train",)"
      R"( "forward": {"class": 1, "module": null, "qualname": [], "file": 2, "in_loader_dir": "yes",)"
      R"(   "params": [3, {"kind": "positional"}, {"name": "x", "kind": 4, "has_default": "no",)"
      R"(   "default": 5}]},)"
      R"( "load_inputs": {"params": {"name": "x"}, "passed": ["batch_size", 7, null]},)"
      R"( "binding": {"ok": "true", "params": [1, {"input": "0"}, {"input": 0, "param": "x"},)"
      R"(   {"input": "1", "param": "y"}], "error": 3},)"
      R"( "config": {"is_encoder_decoder": 1, "decoder_start_token_id": "2", "pad_token_id": 1.5},)"
      R"( "requirements": [3, {"packages": ["a"]}, {"file": "requirements.txt", "packages": [1, "b"]}],)"
      R"( "error": {"type": "E", "message": "m", "site": {"file": 1, "function": null, "line": "3",)"
      R"(   "in_loader_dir": 1}, "module": ["x"]},)"
      R"( "inputs": [{"name": "0", "kind": "list", "tree": 3}]})"
      "\n"
      R"({"schema": 1, "key": "k", "phase": "train", "error": {"site": {"line": -4}},)"
      R"( "config": {"decoder_start_token_id": null, "pad_token_id": true}})");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 3u);

  const ProbeDoc& a = (*docs)[0];
  EXPECT_EQ(a.variant_member, "");
  EXPECT_EQ(a.container, "");
  EXPECT_FALSE(a.forward.has_value());
  EXPECT_TRUE(a.load_inputs_params.empty());
  EXPECT_FALSE(a.has_binding);
  EXPECT_FALSE(a.config.has_value());
  EXPECT_TRUE(a.requirements.empty());
  ASSERT_TRUE(a.error.has_value());
  EXPECT_EQ(a.error->site_file, "");
  EXPECT_EQ(a.error->module, "");

  const ProbeDoc& b = (*docs)[1];
  ASSERT_TRUE(b.forward.has_value());
  EXPECT_EQ(b.forward->model_class, "");
  EXPECT_EQ(b.forward->model_module, "");
  EXPECT_EQ(b.forward->qualname, "");
  EXPECT_EQ(b.forward->file, "");
  EXPECT_FALSE(b.forward->in_loader_dir);
  ASSERT_EQ(b.forward->params.size(), 1u) << "parameters without a name are skipped";
  EXPECT_EQ(b.forward->params[0].name, "x");
  EXPECT_EQ(b.forward->params[0].kind, "positional");
  EXPECT_FALSE(b.forward->params[0].has_default);
  EXPECT_EQ(b.forward->params[0].default_repr, "");
  EXPECT_TRUE(b.load_inputs_params.empty());
  EXPECT_EQ(b.load_inputs_passed, (std::vector<std::string>{"batch_size"}));
  EXPECT_TRUE(b.has_binding);
  EXPECT_FALSE(b.binding_ok);
  EXPECT_EQ(b.binding, (std::vector<std::pair<std::string, std::string>>{{"1", "y"}}))
      << "pairs without both names are skipped";
  EXPECT_EQ(b.binding_error, "");
  ASSERT_TRUE(b.config.has_value());
  EXPECT_FALSE(b.config->is_encoder_decoder.has_value());
  EXPECT_FALSE(b.config->decoder_start_token_id.has_value());
  EXPECT_FALSE(b.config->pad_token_id.has_value());
  ASSERT_EQ(b.requirements.size(), 1u) << "entries without a file name are skipped";
  EXPECT_EQ(b.requirements[0].packages, (std::vector<std::string>{"b"}));
  ASSERT_TRUE(b.error.has_value());
  EXPECT_EQ(b.error->site_file, "");
  EXPECT_EQ(b.error->site_function, "");
  EXPECT_EQ(b.error->site_line, 0);
  EXPECT_FALSE(b.error->site_in_loader_dir);
  EXPECT_EQ(b.error->module, "");
  ASSERT_EQ(b.inputs.size(), 1u);
  EXPECT_EQ(b.inputs[0].tree, json(3)) << "the tree is kept as it is (DescribeTree copes)";
  EXPECT_EQ(DescribeTree(b.inputs[0].tree), "?");

  const ProbeDoc& c = (*docs)[2];
  ASSERT_TRUE(c.error.has_value());
  EXPECT_EQ(c.error->site_line, 0) << "a negative line reads as unknown";
  ASSERT_TRUE(c.config.has_value());
  EXPECT_FALSE(c.config->decoder_start_token_id.has_value());
  EXPECT_FALSE(c.config->pad_token_id.has_value()) << "a bool is not a token id";
}

TEST(ProbeDoc, ProbePhasesPerMode) {
  EXPECT_EQ(ProbePhases("structure"), (std::vector<std::string>{"structure"}));
  EXPECT_EQ(ProbePhases("dtype"), (std::vector<std::string>{"bfloat16", "float32"}));
  EXPECT_EQ(ProbePhases("inputs"), (std::vector<std::string>{"train", "eval"}));
  EXPECT_EQ(ProbePhases("floor"), (std::vector<std::string>{"floor"}));
  EXPECT_TRUE(ProbePhases("").empty());
  EXPECT_TRUE(ProbePhases("Inputs").empty());
  EXPECT_TRUE(ProbePhases("train").empty()) << "a phase is not a mode";
}

// PositionOf counts the parameters that bind positionally, in order, and stops at the first
// that does not (var_positional, keyword_only, var_keyword); Has looks at every parameter.
TEST(ProbeDoc, ForwardPositionOfAndHas) {
  auto param = [](std::string name, std::string kind) {
    return ProbeDoc::Param{std::move(name), std::move(kind), false, ""};
  };
  ProbeDoc::Forward f;
  f.params = {param("images", "positional"), param("targets", "positional"),
              param("args", "var_positional"), param("scale", "keyword_only"),
              param("kwargs", "var_keyword")};
  EXPECT_EQ(f.PositionOf("images"), 0);
  EXPECT_EQ(f.PositionOf("targets"), 1);
  EXPECT_EQ(f.PositionOf("args"), -1);
  EXPECT_EQ(f.PositionOf("scale"), -1);
  EXPECT_EQ(f.PositionOf("kwargs"), -1);
  EXPECT_EQ(f.PositionOf("missing"), -1);
  for (const char* name : {"images", "targets", "args", "scale", "kwargs"}) {
    EXPECT_TRUE(f.Has(name)) << name;
  }
  EXPECT_FALSE(f.Has("missing"));
  EXPECT_FALSE(f.Has(""));

  ProbeDoc::Forward keyword_first;
  keyword_first.params = {param("x", "keyword_only"), param("targets", "positional")};
  EXPECT_EQ(keyword_first.PositionOf("targets"), -1) << "nothing after a keyword-only binds";
  EXPECT_TRUE(keyword_first.Has("targets"));
  EXPECT_EQ(ProbeDoc::Forward{}.PositionOf("x"), -1);
  EXPECT_FALSE(ProbeDoc::Forward{}.Has("x"));

  // The same from a parsed document.
  auto docs = ParseProbeFile(kInputsTrainDoc, "p.json");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_TRUE(docs->front().forward.has_value());
  EXPECT_EQ(docs->front().forward->PositionOf("targets"), 1);
  EXPECT_EQ(docs->front().forward->PositionOf("scale"), -1);
  EXPECT_TRUE(docs->front().forward->Has("kw"));
}

TEST(PlanUnpack, DecisionTable) {
  auto reg = registry::RegistryFile::Parse("training_utils.py",
                                           "_register_attr(\"WrongOutput\", \"logits\")\n");
  ASSERT_TRUE(reg.ok());
  struct Case {
    std::string name;
    json tree;
    bool unpacked_ok;
    UnpackPlan::Kind kind;
    std::string cls, attr, expr;
    bool review;
    std::string task = "";  // the loader's model_info task
  };
  const Case cases[] = {
      {"named class, logits -> registry",
       Object("MiniCausalLMOutput",
              {{"logits", Tensor({1, 4, 16})},
               {"past_key_values", {{"type", "tuple"}, {"items", json::array()}}}}),
       false, UnpackPlan::Kind::kRegistryAdd, "MiniCausalLMOutput", "logits", "", false},
      {"encoder -> last_hidden_state",
       Object("MiniEncoderOutput",
              {{"last_hidden_state", Tensor({1, 4, 8})},
               {"hidden_states", {{"type", "tuple"}, {"items", json::array()}}}}),
       false, UnpackPlan::Kind::kRegistryAdd, "MiniEncoderOutput", "last_hidden_state", "", false},
      {"one tensor attribute", Object("Weird", {{"scores", Tensor({2})}}), false,
       UnpackPlan::Kind::kRegistryAdd, "Weird", "scores", "", false},
      // No family rule: the minimal candidate, flagged (loss_target_test.cc has the details),
      // kept on this loader: a guess never becomes a global registry line.
      {"ambiguous named class", Object("Weird2", {{"a", Tensor({2})}, {"b", Tensor({3})}}), false,
       UnpackPlan::Kind::kOverride, "Weird2", "", "forward_output.a", true},
      {"wrong registry entry -> remove + override",
       Object("WrongOutput",
              {{"logits",
                {{"type", "tuple"}, {"items", {Tensor({1, 3}), Tensor({1, 5}), Tensor({1, 7})}}}}}),
       false, UnpackPlan::Kind::kRemoveAndOverride, "WrongOutput", "logits",
       "forward_output.logits[0]", true},
      {"detection heads -> concat",
       {{"type", "list"},
        {"items", {Tensor({1, 8, 8, 8}), Tensor({1, 8, 4, 4}), Tensor({1, 8, 2, 2})}}},
       false,
       UnpackPlan::Kind::kOverride,
       "",
       "",
       "torch.cat([t.flatten(1) for t in forward_output], dim=1)",
       false,
       "cv_object_det"},
      {"same heads, no family known -> the first, for review",
       {{"type", "list"},
        {"items", {Tensor({1, 8, 8, 8}), Tensor({1, 8, 4, 4}), Tensor({1, 8, 2, 2})}}},
       false,
       UnpackPlan::Kind::kOverride,
       "",
       "",
       "forward_output[0]",
       true},
      {"plain tuple -> first element",
       {{"type", "tuple"}, {"items", {Tensor({2, 2}), Tensor({2, 2}), Tensor({2, 8})}}},
       false,
       UnpackPlan::Kind::kOverride,
       "",
       "",
       "forward_output[0]",
       true},
      {"dict with aux -> out",
       {{"type", "dict"},
        {"items", {{"aux", Tensor({1, 3, 8, 8})}, {"out", Tensor({1, 3, 8, 8})}}}},
       false,
       UnpackPlan::Kind::kOverride,
       "",
       "",
       "forward_output[\"out\"]",
       false},
      {"nested, one tensor -> that tensor",
       {{"type", "list"}, {"items", {{{"type", "dict"}, {"items", {{"x", Tensor({1})}}}}}}},
       false,
       UnpackPlan::Kind::kOverride,
       "",
       "",
       "forward_output[0][\"x\"]",
       false},
      {"nested, several tensors -> one of them, never all",
       {{"type", "list"},
        {"items",
         {{{"type", "dict"}, {"items", {{"hm", Tensor({1, 2, 8, 8})}, {"wh", Tensor({1, 2})}}}}}}},
       false,
       UnpackPlan::Kind::kOverride,
       "",
       "",
       "forward_output[0][\"hm\"]",
       true},
      {"already handled -> stale",
       Object("MiniBaseModelOutput", {{"last_hidden_state", Tensor({1})}}), true,
       UnpackPlan::Kind::kStale, "", "", "", false},
  };
  for (const auto& c : cases) {
    ProbeDoc d = Doc("k", "structure", c.tree, c.unpacked_ok);
    if (!c.task.empty()) d.model_info = ProbeDoc::ModelInfo{"M", "", c.task, "github"};
    UnpackPlan p = PlanUnpack(d, &*reg);
    EXPECT_EQ(p.kind, c.kind) << c.name;
    EXPECT_EQ(p.cls, c.cls) << c.name;
    EXPECT_EQ(p.attr, c.attr) << c.name;
    EXPECT_EQ(p.expr, c.expr) << c.name;
    EXPECT_EQ(!p.review.empty(), c.review) << c.name;
    if (p.kind == UnpackPlan::Kind::kOverride || p.kind == UnpackPlan::Kind::kRegistryAdd) {
      EXPECT_FALSE(p.why_not_other.empty()) << c.name << ": say why the other path was not taken";
    }
  }
}

TEST(RenderOverride, CarriesTheTwoSectionDocstring) {
  UnpackPlan p;
  p.kind = UnpackPlan::Kind::kOverride;
  p.structure = "list[3]: [Tensor(1, 8, 8, 8) torch.bfloat16, ...]";
  p.selected = "the 3 detection-head tensors";
  p.expr = "forward_output[0]";
  std::string code = RenderOverride(p);
  EXPECT_NE(code.find("    def unpack_forward_output(self, forward_output):\n"), std::string::npos);
  EXPECT_NE(code.find("Forward output structure:\n            list[3]"), std::string::npos);
  EXPECT_NE(code.find("What is selected and why:\n            the 3 detection-head tensors."),
            std::string::npos);
  EXPECT_NE(code.find("        return forward_output[0]\n"), std::string::npos);
}

// --- dtype rows (docs/playbooks.md)
// ---------------------------------------------------------------------------

TEST(ClassifyDtype, DecisionTable) {
  auto err = [](std::string m) { return ProbeError("RuntimeError", m); };
  const json out = Tensor({1, 4});
  auto phase = [&](const std::string& p, std::optional<ProbeDoc::Error> e, bool unpack_ok = true) {
    ProbeDoc d = Doc("k", p, e && e->message.find("unpack") == std::string::npos ? json() : out,
                     unpack_ok, e);
    if (!unpack_ok) {
      d.has_unpacked = true;
      d.unpacked_ok = false;
    }
    return d;
  };
  struct Case {
    std::string name;
    ProbeDoc bf16, f32;
    DtypeRow row;
  };
  const Case cases[] = {
      {"bf16 signature, f32 ok",
       phase("bfloat16", err("\"lu_cpu\" not implemented for 'BFloat16'")), phase("float32", {}),
       DtypeRow::kProceed},
      {"torch 1.13 wording without BFloat16",
       phase("bfloat16", err("mat1 and mat2 must have the same dtype")), phase("float32", {}),
       DtypeRow::kProceed},
      {"both fail", phase("bfloat16", err("expected scalar type Float but found BFloat16")),
       phase("float32", err("shape mismatch")), DtypeRow::kEscalate},
      {"bf16 ok", phase("bfloat16", {}), phase("float32", {}), DtypeRow::kNotReproduced},
      {"no signature", phase("bfloat16", err("CUDA out of memory")), phase("float32", {}),
       DtypeRow::kOtherError},
      {"bf16 signature, float32 fails only to unpack: proceed, the unpack playbook next",
       phase("bfloat16", err("\"lu_cpu\" not implemented for 'BFloat16'")),
       phase("float32", err("No handler for class X exists in `unpack_forward_output`"), false),
       DtypeRow::kProceed},
      {"bf16 runs forward, unpack fails: nothing for dtype to fix",
       phase("bfloat16", err("No handler for class X exists in `unpack_forward_output`"), false),
       phase("float32", err("No handler for class X exists in `unpack_forward_output`"), false),
       DtypeRow::kNeedsUnpack},
      {"no signature, float32 fails only to unpack", phase("bfloat16", err("CUDA out of memory")),
       phase("float32", err("No handler for class X exists in `unpack_forward_output`"), false),
       DtypeRow::kOtherError},
      {"bf16 signature, float32 fails for a missing input: proceed, missing_inputs decides next",
       phase("bfloat16", err("mat1 and mat2 must have the same dtype")),
       phase("float32",
             err("You have to specify either decoder_input_ids or decoder_inputs_embeds.")),
       DtypeRow::kProceed},
  };
  for (const auto& c : cases) EXPECT_EQ(ClassifyDtype(c.bf16, c.f32), c.row) << c.name;
  EXPECT_TRUE(UnpackFailed(cases[5].f32));
  EXPECT_FALSE(UnpackFailed(cases[0].bf16)) << "a forward failure is not unpack's";
}

TEST(EditFor, DecisionsBecomeFieldEdits) {
  v1::ShardEntry e;
  e.set_key("k");
  e.set_file("f.yaml");
  junit::Decision pass{true, "EXPECTED_PASSING", std::nullopt, std::nullopt, std::nullopt, {}};
  auto edit = EditFor(pass, e, {});
  ASSERT_EQ(edit.set_size(), 1);
  EXPECT_EQ(edit.set(0).value().string_value(), "EXPECTED_PASSING");
  EXPECT_EQ(std::vector<std::string>(edit.delete_().begin(), edit.delete_().end()),
            (std::vector<std::string>{"bringup_status", "reason"}));
  junit::Decision pcc{true, "EXPECTED_PASSING", std::nullopt, std::nullopt, false, {}};
  edit = EditFor(pcc, e, {});
  ASSERT_EQ(edit.set_size(), 2);
  EXPECT_EQ(edit.set(1).name(), "assert_pcc");
  EXPECT_FALSE(edit.set(1).value().bool_value());
  junit::Decision timeout{true,         "KNOWN_FAILURE_XFAIL",
                          std::nullopt, "Failed: Timeout >10.0s",
                          std::nullopt, {"notimeout"}};
  edit = EditFor(timeout, e, {"push", "nightly"});
  const auto& markers = edit.set(edit.set_size() - 1);
  EXPECT_EQ(markers.name(), "markers");
  EXPECT_EQ(markers.value().list_value().items_size(), 3);
  EXPECT_EQ(markers.value().list_value().items(2), "notimeout");
}

// --- loader edits --------------------------------------------------------------------------------

constexpr char kLoader[] =
    "import torch\n"
    "from ...base import ModelLoader as Base\n"
    "\n"
    "\n"
    "class ModelLoader(Base):\n"
    "    def load_model(self, dtype_override=None):\n"
    "        return Net()\n"
    "\n"
    "    def load_inputs(self, dtype_override=None, batch_size=1):\n"
    "        decoder_input_values = torch.zeros((1, 4, 8))\n"
    "        mask = torch.ones(2, dtype=torch.long)\n"
    "        feats = processor(audio)\n"
    "        return {\"decoder_input_values\": decoder_input_values, \"mask\": mask}\n"
    "\n"
    "\n"
    "def helper():\n"
    "    return 1\n";

TEST(PythonEdit, AddsTheMethodAtTheEndOfModelLoader) {
  auto out = AddMethodToModelLoader(kLoader, "unpack_forward_output",
                                    "    def unpack_forward_output(self, forward_output):\n"
                                    "        return forward_output[0]\n");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE(out->find("\"mask\": mask}\n\n    def unpack_forward_output(self, forward_output):\n"
                      "        return forward_output[0]\n\n\ndef helper():"),
            std::string::npos)
      << *out;
  EXPECT_TRUE(
      absl::IsAlreadyExists(AddMethodToModelLoader(*out, "unpack_forward_output", "x").status()));
  EXPECT_TRUE(absl::IsNotFound(AddMethodToModelLoader("def f():\n    pass\n", "m", "x").status()));
  EXPECT_EQ(EnsureImportTorch(kLoader), kLoader);
  EXPECT_EQ(EnsureImportTorch("import os\n\nclass ModelLoader:\n    pass\n"),
            "import os\nimport torch\n\nclass ModelLoader:\n    pass\n");
}

TEST(PythonEdit, DtypeFixIsOneArgumentOrOneCast) {
  auto fix = FindDtypeFix(kLoader, {"decoder_input_values"});
  ASSERT_TRUE(fix.has_value());
  EXPECT_EQ(fix->line, 10);
  EXPECT_NE(fix->text.find("decoder_input_values = torch.zeros((1, 4, 8), dtype=dtype_override)\n"),
            std::string::npos);
  // Exactly one line differs.
  int diff = 0;
  auto a = util::SplitLines(kLoader), b = util::SplitLines(fix->text);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) diff += a[i] != b[i];
  EXPECT_EQ(diff, 1);
  // A tensor from another call gets one cast after its assignment.
  auto cast = FindDtypeFix(kLoader, {"feats"});
  ASSERT_TRUE(cast.has_value());
  EXPECT_NE(
      cast->text.find("        feats = processor(audio)\n        feats = feats.to(dtype_override) "
                      "if dtype_override is not None else feats\n"),
      std::string::npos);
  // Constructors that already take a dtype are not fix sites; unknown offenders with several
  // candidates are not guessed.
  EXPECT_FALSE(
      FindDtypeFix("class ModelLoader:\n    def load_inputs(self, dtype_override=None):\n"
                   "        x = torch.zeros(2, dtype=torch.float32)\n",
                   {"x"}));
  EXPECT_FALSE(
      FindDtypeFix("class ModelLoader:\n    def load_inputs(self, dtype_override=None):\n"
                   "        a = torch.zeros(2)\n        b = torch.ones(2)\n",
                   {"c"}));
  auto only = FindDtypeFix(
      "class ModelLoader:\n    def load_inputs(self, dtype_override=None):\n"
      "        buf = torch.empty()\n",
      {"x"});
  ASSERT_TRUE(only.has_value()) << "one constructor, one offender";
  EXPECT_NE(only->text.find("torch.empty(dtype=dtype_override)"), std::string::npos);
}

// --- whole runs over fake tools ------------------------------------------------------------------

class PlaybookRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ws_ = tmp_.path();
    testing::WriteFileOrDie(ws_ / "third_party/tt_forge_models/training_utils.py",
                            "_register_attr(\"Alpha\", \"logits\")\n");
    testing::WriteFileOrDie(ws_ / "third_party/tt_forge_models/m/pytorch/loader.py", kLoader);
    testing::WriteFileOrDie(
        ws_ / "tests/runner/test_config/torch/test_config_training_single_device.yaml",
        "test_config:\n"
        "  m/pytorch-A-single_device-training:\n"
        "    status: NOT_SUPPORTED_SKIP\n"
        "    bringup_status: FAILED_FE_COMPILATION\n"
        "    reason: \"old\"\n"
        "  m/pytorch-B-single_device-training:\n"
        "    status: NOT_SUPPORTED_SKIP\n"
        "    markers: [push]\n"
        "    reason: \"old\"\n");
    spec_.set_shard_id("s1");
    spec_.set_loader("third_party/tt_forge_models/m/pytorch/loader.py");
    spec_.set_phase(v1::PHASE_FULL);
    spec_.set_arch("n150");
    for (const char* k :
         {"m/pytorch-A-single_device-training", "m/pytorch-B-single_device-training"}) {
      auto* e = spec_.add_entries();
      e->set_key(k);
      e->set_file("tests/runner/test_config/torch/test_config_training_single_device.yaml");
      e->set_status("NOT_SUPPORTED_SKIP");
      e->set_reason("old");
    }
  }

  absl::StatusOr<v1::ShardResult> Run(const std::string& playbook, const std::string& flavor) {
    spec_.set_playbook(playbook);
    for (auto& e : *spec_.mutable_entries()) e.set_flavor(flavor);
    PlaybookContext ctx;
    ctx.spec = &spec_;
    ctx.workspace = ws_;
    ctx.tools = &tools_;
    ctx.chain = chain_;
    return RunPlaybook(ctx);
  }

  // Both entries' probes see a MiniOutput whose only tensor is logits (the registry path).
  void ProbesOfARegisteredOutput() {
    const json out = Object("MiniOutput", {{"logits", Tensor({1, 4})}});
    for (const char* k :
         {"m/pytorch-A-single_device-training", "m/pytorch-B-single_device-training"}) {
      tools_.probes[k] = {{Doc(k, "structure", out, false)}, {Doc(k, "structure", out, true)}};
    }
  }

  // Both entries' probes: the loader's own override unpacks the output to a tensor.
  void ProbesOfAWorkingOverride() {
    const json out = {{"type", "tuple"}, {"items", {Tensor({1, 3}), Tensor({1, 6})}}};
    for (const char* k :
         {"m/pytorch-A-single_device-training", "m/pytorch-B-single_device-training"}) {
      tools_.probes[k] = {{Doc(k, "structure", out, true)}};
    }
  }

  // Variant A's inference entry, passing.
  void WriteInferenceEntry() {
    testing::WriteFileOrDie(
        ws_ / "tests/runner/test_config/torch/test_config_inference_single_device.yaml",
        "test_config:\n"
        "  m/pytorch-A-single_device-inference:\n"
        "    status: EXPECTED_PASSING\n");
  }

  static junit::TestCase Failed(const std::string& error) {
    junit::TestCase tc;
    tc.outcome = junit::Outcome::kFailed;
    tc.message = error;
    tc.text = "E   " + error;
    tc.properties = {{"triage_error", error}};
    return tc;
  }

  testing::TempDir tmp_;
  std::filesystem::path ws_;
  v1::ShardSpec spec_;
  FakeTools tools_;
  std::function<const Playbook*(std::string_view)> chain_;  // unset: the registered playbooks
};

TEST_F(PlaybookRunTest, UnpackRegistryPathVerifiesAndDecidesEveryVariant) {
  ProbesOfARegisteredOutput();
  tools_.cases["m/pytorch-B-single_device-training"] =
      Failed("RuntimeError: TT_FATAL @ op.cpp:1: boom");
  auto r = Run("unpack_forward_output", "not_implemented");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->registry_ops_size(), 1);
  EXPECT_EQ(r->registry_ops(0).cls(), "MiniOutput");
  EXPECT_EQ(r->registry_ops(0).attr(), "logits");
  EXPECT_NE(testing::ReadFileOrDie(ws_ / "third_party/tt_forge_models/training_utils.py")
                .find("_register_attr(\"MiniOutput\", \"logits\")"),
            std::string::npos)
      << "applied in the workspace before verification";
  EXPECT_EQ(r->file_edits_size(), 0);
  ASSERT_EQ(tools_.pytest_calls.size(), 1u) << "one pytest run for the shard's training entries";
  EXPECT_EQ(tools_.pytest_calls[0].size(), 2u);
  const auto& a = r->entries(0);
  EXPECT_EQ(a.fix_path(), "registry");
  EXPECT_EQ(a.output_class(), "MiniOutput");
  EXPECT_EQ(a.loss_target().chosen(), "logits") << "a registry line names the attribute";
  EXPECT_TRUE(a.loss_target().by_rule()) << "the output's only tensor";
  EXPECT_TRUE(a.changed());
  EXPECT_EQ(a.verdict(), "pass");
  EXPECT_EQ(a.edit().set(0).value().string_value(), "EXPECTED_PASSING");
  const auto& b = r->entries(1);
  EXPECT_EQ(b.verdict(), "failure");
  EXPECT_EQ(b.stage(), "FAILED_RUNTIME");
  EXPECT_EQ(b.reason(), "TT_FATAL @ op.cpp:1: boom");
  EXPECT_EQ(b.edit().set(0).value().string_value(), "KNOWN_FAILURE_XFAIL");
}

// After the fix, B's device run reports only a status code. Its old reason is false now (the
// registry line fixed it): the generic text replaces it, at the stage the run reached, flagged for
// a better reason. Without the fix (the dtype playbook, whose probe reproduced the old error) the
// same evidence leaves the entry as it is.
TEST_F(PlaybookRunTest, AGenericErrorReplacesAReasonTheFixMadeFalse) {
  ProbesOfARegisteredOutput();
  junit::TestCase generic = Failed("RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13");
  generic.properties.push_back({"triage_stage", "RUNTIME_EXECUTION_START"});
  tools_.cases["m/pytorch-B-single_device-training"] = generic;
  auto r = Run("unpack_forward_output", "not_implemented");
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& b = r->entries(1);
  EXPECT_EQ(b.verdict(), "failure");
  ASSERT_TRUE(b.changed()) << "the old reason is not kept";
  EXPECT_EQ(b.edit().set(0).value().string_value(), "KNOWN_FAILURE_XFAIL");
  EXPECT_EQ(b.stage(), "FAILED_RUNTIME");
  EXPECT_EQ(b.reason(), "RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13");
  bool flagged = false;
  for (const auto& note : b.review()) flagged |= note.find("generic reason") != std::string::npos;
  EXPECT_TRUE(flagged) << "flagged for a better reason";
}

// Split phases: the PROBE phase says the reason is false, the coordinator hands that to the
// VERIFY phase on the entry (ShardEntry.old_reason_stale), which decides with it.
TEST_F(PlaybookRunTest, AProbePhaseTellsItsVerifyPhaseTheReasonIsStale) {
  spec_.set_phase(v1::PHASE_PROBE);
  ProbesOfARegisteredOutput();
  auto probe = Run("unpack_forward_output", "not_implemented");
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->entries(1).verdict(), "ready");
  EXPECT_TRUE(probe->entries(1).old_reason_stale()) << "fixed by the registry line";

  spec_.set_phase(v1::PHASE_VERIFY);
  for (auto& e : *spec_.mutable_entries()) e.set_old_reason_stale(true);
  junit::TestCase generic = Failed("RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13");
  generic.properties.push_back({"triage_stage", "RUNTIME_EXECUTION_START"});
  tools_.cases["m/pytorch-B-single_device-training"] = generic;
  auto verify = Run("unpack_forward_output", "not_implemented");
  ASSERT_TRUE(verify.ok()) << verify.status();
  EXPECT_TRUE(verify->entries(1).changed());
  EXPECT_EQ(verify->entries(1).reason(),
            "RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13");
}

TEST_F(PlaybookRunTest, AGenericErrorKeepsAReasonTheProbeReproduced) {
  junit::TestCase generic = Failed("RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13");
  generic.properties.push_back({"triage_stage", "RUNTIME_EXECUTION_START"});
  EntryWork w;
  v1::ShardEntry entry = spec_.entries(0);
  v1::EntryOutcome out;
  w.entry = &entry;
  w.out = &out;
  w.reason = "old";
  ProbeDoc reproduced;
  reproduced.ok = false;
  w.probe = reproduced;
  Verification v;
  v.testcase = &generic;
  DecideFromVerification(w, v);
  EXPECT_EQ(out.verdict(), "failure");
  EXPECT_FALSE(out.changed()) << "nothing shows the old reason false: a person decides";
  w.fixed = true;
  v1::EntryOutcome after_fix;
  w.out = &after_fix;
  DecideFromVerification(w, v);
  EXPECT_TRUE(after_fix.changed());
  EXPECT_EQ(after_fix.reason(), "RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13");
}

// The informational inference run shares the verification's session (docs/playbooks.md,
// "Verification"): one device session per shard, the inference entry last.
TEST_F(PlaybookRunTest, TheInferenceEntryRunsLastInTheVerificationSession) {
  WriteInferenceEntry();
  ProbesOfARegisteredOutput();
  tools_.cases["m/pytorch-A-single_device-inference"] =
      Failed("RuntimeError: TT_FATAL @ op.cpp:1: boom");
  auto r = Run("unpack_forward_output", "not_implemented");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(tools_.pytest_calls.size(), 1u) << "the inference entry needs no session of its own";
  EXPECT_EQ(tools_.pytest_calls[0],
            (std::vector<std::string>{"m/pytorch-A-single_device-training",
                                      "m/pytorch-B-single_device-training",
                                      "m/pytorch-A-single_device-inference"}));
  EXPECT_EQ(r->entries(0).verdict(), "pass") << "the inference failure decides nothing";
  EXPECT_NE(r->entries(0).inference_outcome().find("m/pytorch-A-single_device-inference: failure"),
            std::string::npos)
      << r->entries(0).inference_outcome();
  bool flagged = false;
  for (const auto& f : r->entries(0).review()) flagged |= f.starts_with("inference regression");
  EXPECT_TRUE(flagged) << "an EXPECTED_PASSING inference entry that fails is named for review";
  EXPECT_TRUE(r->entries(1).inference_outcome().empty()) << "one inference run per shard";
}

TEST_F(PlaybookRunTest, ASessionThatCrashedBeforeTheInferenceEntryRunsItAlone) {
  WriteInferenceEntry();
  ProbesOfARegisteredOutput();
  tools_.crash = {"m/pytorch-B-single_device-training"};
  auto r = Run("unpack_forward_output", "not_implemented");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(tools_.pytest_calls.size(), 4u) << "the session, each entry alone, the inference alone";
  EXPECT_EQ(tools_.pytest_calls[3],
            (std::vector<std::string>{"m/pytorch-A-single_device-inference"}));
  EXPECT_EQ(r->entries(0).verdict(), "pass");
  EXPECT_EQ(r->entries(1).verdict(), "crash");
  EXPECT_EQ(r->entries(0).inference_outcome(), "m/pytorch-A-single_device-inference: pass")
      << "its own run's outcome, not the crashed session's";
}

// A session the runner could not run (no testcase, an INTERNALERROR before any model) decides no
// entry: the attempt fails, and the coordinator counts it against the failure budget.
TEST_F(PlaybookRunTest, ARunnerThatCannotRunFailsTheAttemptInsteadOfDecidingEntries) {
  const json out = {{"type", "tuple"}, {"items", {Tensor({2, 3}), Tensor({2, 5})}}};
  for (const char* k :
       {"m/pytorch-A-single_device-training", "m/pytorch-B-single_device-training"}) {
    tools_.probes[k] = {{Doc(k, "structure", out, false)}, {Doc(k, "structure", out, true)}};
  }
  tools_.runner_broken =
      "collected 2 items\nINTERNALERROR> RuntimeError: tt device 0: failed to open\n";
  auto r = Run("unpack_forward_output", "not_implemented");
  ASSERT_FALSE(r.ok()) << "no entry decided from a session that never reached a model";
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("the runner could not run the tests: INTERNALERROR> "
                                      "RuntimeError: tt device 0: failed to open"),
            std::string::npos)
      << r.status();
  ASSERT_EQ(tools_.pytest_calls.size(), 1u) << "nothing run alone after it";
}

TEST_F(PlaybookRunTest, UnpackOverridePathWritesTheLoaderAndIsolatesACrash) {
  const json out = {{"type", "tuple"}, {"items", {Tensor({2, 3}), Tensor({2, 5})}}};
  for (const char* k :
       {"m/pytorch-A-single_device-training", "m/pytorch-B-single_device-training"}) {
    tools_.probes[k] = {{Doc(k, "structure", out, false)}, {Doc(k, "structure", out, true)}};
  }
  tools_.crash = {"m/pytorch-A-single_device-training"};
  auto r = Run("unpack_forward_output", "not_implemented");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->file_edits_size(), 1);
  EXPECT_EQ(r->file_edits(0).path(), "m/pytorch/loader.py");
  EXPECT_NE(r->file_edits(0).diff().find("+        return forward_output[0]"), std::string::npos);
  // The crash took the shared run down: each missing entry ran alone.
  ASSERT_EQ(tools_.pytest_calls.size(), 3u);
  EXPECT_EQ(r->entries(0).verdict(), "crash");
  EXPECT_EQ(r->entries(0).edit().set(0).value().string_value(), "NOT_SUPPORTED_SKIP");
  EXPECT_EQ(r->entries(1).verdict(), "pass");
  EXPECT_EQ(r->entries(0).fix_path(), "override");
  // Nothing names the family: the minimal candidate, flagged, with the alternative listed.
  const auto& t = r->entries(0).loss_target();
  EXPECT_EQ(t.family(), "unknown");
  EXPECT_EQ(t.chosen(), "forward_output[0]");
  EXPECT_FALSE(t.by_rule());
  ASSERT_EQ(t.not_chosen_size(), 1);
  EXPECT_EQ(t.not_chosen(0).name(), "[1]");
  EXPECT_EQ(t.not_chosen(0).shape(), "(2, 5)");
  ASSERT_GE(r->entries(0).review_size(), 1);
  EXPECT_NE(r->entries(0).review(0).find("alternatives: [1]"), std::string::npos);
}

TEST_F(PlaybookRunTest, ExistingOverrideThatWorksIsStale) {
  testing::WriteFileOrDie(ws_ / "third_party/tt_forge_models/m/pytorch/loader.py",
                          "class ModelLoader:\n    def unpack_forward_output(self, o):\n"
                          "        return o[0]\n");
  ProbesOfAWorkingOverride();
  auto r = Run("unpack_forward_output", "not_implemented");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->entries(0).probe_finding().find("already defines unpack_forward_output"),
            std::string::npos);
  EXPECT_EQ(r->entries(0).fix_path(), "none");
  EXPECT_EQ(r->entries(0).verdict(), "pass");
  EXPECT_EQ(r->file_edits_size(), 0) << "a working override is left as it is";
}

TEST_F(PlaybookRunTest, ProbePhaseFixesButDoesNotVerify) {
  spec_.set_phase(v1::PHASE_PROBE);
  ProbesOfARegisteredOutput();
  auto r = Run("unpack_forward_output", "not_implemented");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(tools_.pytest_calls.empty());
  EXPECT_EQ(r->entries(0).verdict(), "ready");
  EXPECT_EQ(r->entries(0).duration_seconds(), 0) << "nothing measured";
  EXPECT_FALSE(r->entries(0).changed());
  EXPECT_EQ(r->registry_ops_size(), 1);
}

TEST_F(PlaybookRunTest, DtypeCrossFixIsOneArgumentThenVerified) {
  auto bf16_fail = [](const std::string& k) {
    ProbeDoc d = Doc(k, "bfloat16", json(), true,
                     ProbeError("RuntimeError", "mat1 and mat2 must have the same dtype"));
    d.inputs = {ProbeInput("decoder_input_values", "torch.float32", "tensor"),
                ProbeInput("mask", "torch.int64", "tensor")};
    return d;
  };
  const json out = Tensor({1, 4});
  for (const char* k :
       {"m/pytorch-A-single_device-training", "m/pytorch-B-single_device-training"}) {
    tools_.probes[k] = {{bf16_fail(k), Doc(k, "float32", out, true)},
                        {Doc(k, "bfloat16", out, true), Doc(k, "float32", out, true)}};
  }
  auto r = Run("dtype_bfloat16", "cross_dtype");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->file_edits_size(), 1);
  EXPECT_NE(r->file_edits(0).diff().find(
                "+        decoder_input_values = torch.zeros((1, 4, 8), dtype=dtype_override)"),
            std::string::npos);
  EXPECT_EQ(r->entries(0).fix_path(), "loader_dtype");
  EXPECT_EQ(r->entries(0).verdict(), "pass");
  EXPECT_EQ(r->entries(0).edit().set(0).value().string_value(), "EXPECTED_PASSING");
}

TEST_F(PlaybookRunTest, DtypeOpNotImplementedNeverEditsAndRowsStopEarly) {
  const json out = Tensor({1, 4});
  const std::string op = "\"reflection_pad2d\" not implemented for 'BFloat16'";
  tools_.probes["m/pytorch-A-single_device-training"] = {
      {Doc("a", "bfloat16", json(), true, ProbeError("RuntimeError", op)),
       Doc("a", "float32", out, true)}};
  tools_.probes["m/pytorch-B-single_device-training"] = {
      {Doc("b", "bfloat16", out, true), Doc("b", "float32", out, true)}};
  tools_.cases["m/pytorch-A-single_device-training"] = Failed("RuntimeError: " + op);
  auto r = Run("dtype_bfloat16", "op_not_implemented");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->file_edits_size(), 0);
  EXPECT_EQ(r->entries(0).verdict(), "failure");
  EXPECT_EQ(r->entries(0).stage(), "FAILED_FE_COMPILATION");
  EXPECT_EQ(r->entries(0).reason(), "RuntimeError: " + op);
  EXPECT_EQ(r->entries(1).verdict(), "not_reproduced");
  EXPECT_FALSE(r->entries(1).changed());
  EXPECT_GE(r->entries(1).review_size(), 1);
  ASSERT_EQ(tools_.pytest_calls.size(), 1u);
  EXPECT_EQ(tools_.pytest_calls[0].size(), 1u) << "only the reproducing variant is verified";
}

TEST_F(PlaybookRunTest, MissingEvidenceIsReviewNeverAGuess) {
  auto r = Run("unpack_forward_output", "not_implemented");
  ASSERT_TRUE(r.ok()) << r.status();
  for (const auto& e : r->entries()) {
    EXPECT_EQ(e.verdict(), "no_evidence");
    EXPECT_FALSE(e.changed());
    EXPECT_GE(e.review_size(), 1);
  }
}

// --- dispositions (docs/playbooks.md, "Dispositions"): every outcome of every path says what the
// entry needs next.

void ExpectDispositions(
    const absl::StatusOr<v1::ShardResult>& r,
    const std::vector<std::pair<std::string, v1::EntryOutcome::Disposition>>& want) {
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->entries_size(), static_cast<int>(want.size()));
  for (int i = 0; i < r->entries_size(); ++i) {
    const auto& e = r->entries(i);
    EXPECT_EQ(e.verdict(), want[i].first) << e.key();
    EXPECT_EQ(v1::EntryOutcome::Disposition_Name(e.disposition()),
              v1::EntryOutcome::Disposition_Name(want[i].second))
        << e.key() << " (" << e.verdict() << ")";
    EXPECT_EQ(e.needs_playbook().empty(), e.disposition() != v1::EntryOutcome::NEEDS_PLAYBOOK)
        << e.key();
  }
}

TEST_F(PlaybookRunTest, DispositionUnpackFullIsDoneAfterVerification) {
  ProbesOfARegisteredOutput();
  tools_.cases["m/pytorch-B-single_device-training"] =
      Failed("RuntimeError: TT_FATAL @ op.cpp:1: boom");
  ExpectDispositions(Run("unpack_forward_output", "not_implemented"),
                     {{"pass", v1::EntryOutcome::DONE}, {"failure", v1::EntryOutcome::DONE}});
}

TEST_F(PlaybookRunTest, DispositionProbePhaseIsVerify) {
  spec_.set_phase(v1::PHASE_PROBE);
  const json out = Object("MiniOutput", {{"logits", Tensor({1, 4})}});
  tools_.probes["m/pytorch-A-single_device-training"] = {{Doc("a", "structure", out, false)},
                                                         {Doc("a", "structure", out, true)}};
  ExpectDispositions(
      Run("unpack_forward_output", "not_implemented"),
      {{"ready", v1::EntryOutcome::VERIFY}, {"no_evidence", v1::EntryOutcome::NEEDS_REVIEW}});
}

TEST_F(PlaybookRunTest, DispositionVerifyPhaseAndExistingOverrideAreDone) {
  testing::WriteFileOrDie(ws_ / "third_party/tt_forge_models/m/pytorch/loader.py",
                          "class ModelLoader:\n    def unpack_forward_output(self, o):\n"
                          "        return o[0]\n");
  ProbesOfAWorkingOverride();
  ExpectDispositions(Run("unpack_forward_output", "not_implemented"),
                     {{"pass", v1::EntryOutcome::DONE}, {"pass", v1::EntryOutcome::DONE}});
  spec_.set_phase(v1::PHASE_VERIFY);
  ExpectDispositions(Run("dtype_bfloat16", "cross_dtype"),
                     {{"pass", v1::EntryOutcome::DONE}, {"pass", v1::EntryOutcome::DONE}});
}

TEST_F(PlaybookRunTest, DispositionUnpackStopsNeedReview) {
  // A: the probe failed before the forward output; B: no tensor to select.
  tools_.probes["m/pytorch-A-single_device-training"] = {
      {Doc("a", "structure", json(), false, ProbeError("ImportError", "no module x"))}};
  tools_.probes["m/pytorch-B-single_device-training"] = {
      {Doc("b", "structure", Object("Bare", {{"n", {{"type", "int"}}}}), false)}};
  ExpectDispositions(Run("unpack_forward_output", "not_implemented"),
                     {{"probe_failed", v1::EntryOutcome::NEEDS_REVIEW},
                      {"no_fix", v1::EntryOutcome::NEEDS_REVIEW}});
}

TEST_F(PlaybookRunTest, DispositionUnpackConflictingOverridesNeedReview) {
  tools_.probes["m/pytorch-A-single_device-training"] = {
      {Doc("a", "structure", {{"type", "tuple"}, {"items", {Tensor({2, 3})}}}, false)}};
  tools_.probes["m/pytorch-B-single_device-training"] = {
      {Doc("b", "structure", {{"type", "dict"}, {"items", {{"out", Tensor({2, 3})}}}}, false)}};
  auto r = Run("unpack_forward_output", "not_implemented");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->entries(1).verdict(), "conflict");
  EXPECT_EQ(r->entries(1).disposition(), v1::EntryOutcome::NEEDS_REVIEW);
  EXPECT_NE(r->entries(0).disposition(), v1::EntryOutcome::DISPOSITION_UNSPECIFIED);
}

// An agent without the unpack playbook (docs/playbooks.md, "Chaining"): the stop stays, named.
TEST_F(PlaybookRunTest, DispositionDtypeNeedsUnpackNamesThePlaybook) {
  chain_ = [](std::string_view) -> const Playbook* { return nullptr; };
  const json out = Tensor({1, 4});
  // A: unpack_forward_output raised in the bfloat16 phase; B: the failure did not reproduce.
  tools_.probes["m/pytorch-A-single_device-training"] = {
      {Doc("a", "bfloat16", out, false), Doc("a", "float32", out, false)}};
  tools_.probes["m/pytorch-B-single_device-training"] = {
      {Doc("b", "bfloat16", out, true), Doc("b", "float32", out, true)}};
  auto r = Run("dtype_bfloat16", "cross_dtype");
  ExpectDispositions(r, {{"needs_unpack", v1::EntryOutcome::NEEDS_PLAYBOOK},
                         {"not_reproduced", v1::EntryOutcome::NEEDS_REVIEW}});
  EXPECT_EQ(r->entries(0).needs_playbook(), "unpack_forward_output");
  EXPECT_EQ(
      std::vector<std::string>(r->entries(0).playbooks().begin(), r->entries(0).playbooks().end()),
      std::vector<std::string>{"dtype_bfloat16"});
  ASSERT_EQ(r->entries(0).review_size(), 1);
  EXPECT_EQ(r->entries(0).review(0),
            "needs the unpack_forward_output playbook first, which this agent does not run");
  EXPECT_TRUE(tools_.pytest_calls.empty());
}

TEST_F(PlaybookRunTest, DispositionDtypeEscalateAndGateMisfiredNeedReview) {
  const json out = Tensor({1, 4});
  const ProbeDoc::Error dtype =
      ProbeError("RuntimeError", "mat1 and mat2 must have the same dtype");
  tools_.probes["m/pytorch-A-single_device-training"] = {
      {Doc("a", "bfloat16", json(), true, dtype), Doc("a", "float32", json(), true, dtype)}};
  tools_.probes["m/pytorch-B-single_device-training"] = {
      {Doc("b", "bfloat16", json(), true, ProbeError("KeyError", "'labels'")),
       Doc("b", "float32", out, true)}};
  ExpectDispositions(Run("dtype_bfloat16", "cross_dtype"),
                     {{"escalate", v1::EntryOutcome::NEEDS_REVIEW},
                      {"gate_misfired", v1::EntryOutcome::NEEDS_REVIEW}});
}

// --- chaining (docs/playbooks.md, "Chaining"): a stop naming a playbook this agent runs goes on
// with it in the same shard, on the same loader and workspace.

std::vector<std::string> Playbooks(const v1::EntryOutcome& o) {
  return {o.playbooks().begin(), o.playbooks().end()};
}

// Entry A: a float32 buffer in the bfloat16 phase, and an output class without a registry line;
// entry B does not reproduce.
void ProbesForDtypeThenUnpack(FakeTools& tools) {
  const std::string a = "m/pytorch-A-single_device-training";
  const std::string b = "m/pytorch-B-single_device-training";
  const json out = Object("MiniRankerOutput", {{"logits", Tensor({1, 2, 3})}});
  ProbeDoc bf16 = Doc(a, "bfloat16", json(), true,
                      ProbeError("RuntimeError", "expected scalar type BFloat16 but found Float"));
  bf16.inputs = {ProbeInput("decoder_input_values", "torch.float32", "tensor")};
  auto unpack_fails = [&](const std::string& phase) {
    ProbeDoc d = Doc(a, phase, out, false,
                     ProbeError("ValueError",
                                "No handler for class MiniRankerOutput exists in "
                                "`unpack_forward_output`"));
    d.unpacked_error = "ValueError: No handler for class MiniRankerOutput exists in …";
    return d;
  };
  tools.probes[a] = {
      {bf16, unpack_fails("float32")},                      // dtype: the first probe
      {unpack_fails("bfloat16"), unpack_fails("float32")},  // dtype: after its fix
      {unpack_fails("structure")},                          // unpack: on the fixed loader
      {Doc(a, "structure", out, true)},                     // unpack: after the registry line
  };
  const json tensor = Tensor({1, 4});
  tools.probes[b] = {{Doc(b, "bfloat16", tensor, true), Doc(b, "float32", tensor, true)}};
}

TEST_F(PlaybookRunTest, DtypeFixThenUnpackOnTheFixedLoaderThenOneDecision) {
  ProbesForDtypeThenUnpack(tools_);
  auto r = Run("dtype_bfloat16", "cross_dtype");
  ExpectDispositions(
      r, {{"pass", v1::EntryOutcome::DONE}, {"not_reproduced", v1::EntryOutcome::NEEDS_REVIEW}});
  const auto& a = r->entries(0);
  EXPECT_EQ(Playbooks(a), (std::vector<std::string>{"dtype_bfloat16", "unpack_forward_output"}));
  EXPECT_EQ(Playbooks(r->entries(1)), std::vector<std::string>{"dtype_bfloat16"});
  EXPECT_EQ(a.fix_path(), "loader_dtype+registry");
  EXPECT_EQ(a.output_class(), "MiniRankerOutput");
  EXPECT_EQ(a.flavor(), "cross_dtype") << "the entry keeps its classification";
  EXPECT_NE(a.probe_finding().find("unpack_forward_output FAILED"), std::string::npos)
      << a.probe_finding();
  EXPECT_NE(a.probe_finding().find("; then unpack_forward_output: forward output: "),
            std::string::npos)
      << a.probe_finding();
  EXPECT_EQ(a.review_size(), 0) << a.review(0);
  EXPECT_TRUE(a.needs_playbook().empty());
  // Both fixes in one result: the loader edit and the registry line, made in one workspace.
  ASSERT_EQ(r->file_edits_size(), 1);
  EXPECT_NE(r->file_edits(0).diff().find(
                "+        decoder_input_values = torch.zeros((1, 4, 8), dtype=dtype_override)"),
            std::string::npos);
  ASSERT_EQ(r->registry_ops_size(), 1);
  EXPECT_EQ(r->registry_ops(0).cls(), "MiniRankerOutput");
  EXPECT_EQ(r->registry_ops(0).attr(), "logits");
  EXPECT_NE(testing::ReadFileOrDie(ws_ / "third_party/tt_forge_models/training_utils.py")
                .find("_register_attr(\"MiniRankerOutput\", \"logits\")"),
            std::string::npos);
  // One verification and one YAML decision, from the entry's own (dtype) reason.
  ASSERT_EQ(tools_.pytest_calls.size(), 1u);
  EXPECT_EQ(tools_.pytest_calls[0], std::vector<std::string>{"m/pytorch-A-single_device-training"});
  EXPECT_TRUE(a.changed());
  EXPECT_EQ(a.edit().set(0).value().string_value(), "EXPECTED_PASSING");
}

// An override that raises is what needs fixing: replaced by the rules' choice, here the house
// form another loader of the checkout uses (docs/playbooks.md, "unpack_forward_output").
TEST_F(PlaybookRunTest, AnOverrideThatRaisesIsReplacedInTheHouseForm) {
  testing::WriteFileOrDie(ws_ / "third_party/tt_forge_models/heads/multi/pytorch/loader.py",
                          "class ModelLoader:\n"
                          "    def unpack_forward_output(self, fwd_output):\n"
                          "        import torch\n"
                          "        from ....tools.utils import extract_tensors_recursive\n"
                          "        tensors = []\n"
                          "        extract_tensors_recursive(fwd_output, tensors)\n"
                          "        if tensors:\n"
                          "            return torch.cat([t.flatten() for t in tensors])\n");
  testing::WriteFileOrDie(ws_ / "third_party/tt_forge_models/m/pytorch/loader.py",
                          "import torch\n\n\nclass ModelLoader:\n"
                          "    def load_model(self):\n        return None\n\n"
                          "    def unpack_forward_output(self, fwd):\n"
                          "        return fwd.logits\n");
  const json out = {{"type", "list"}, {"items", {Tensor({1, 6, 8, 8}), Tensor({1, 6, 4, 4})}}};
  for (const char* k :
       {"m/pytorch-A-single_device-training", "m/pytorch-B-single_device-training"}) {
    ProbeDoc raising = Doc(k, "structure", out, false,
                           ProbeError("AttributeError", "'list' object has no attribute 'logits'"));
    raising.error->traceback =
        "Traceback (most recent call last):\n"
        "  File \"/w/agent/scripts/triage_probe.py\", line 300, in run_phase\n"
        "    unpacked = loader.unpack_forward_output(output)\n"
        "  File \"/ws/third_party/tt_forge_models/m/pytorch/loader.py\", line 9, in "
        "unpack_forward_output\n"
        "    return fwd.logits\n"
        "AttributeError: 'list' object has no attribute 'logits'\n";
    raising.unpacked_error = "AttributeError: 'list' object has no attribute 'logits'";
    tools_.probes[k] = {{raising}, {Doc(k, "structure", out, true)}};
  }
  auto r = Run("unpack_forward_output", "not_implemented");
  ExpectDispositions(r, {{"pass", v1::EntryOutcome::DONE}, {"pass", v1::EntryOutcome::DONE}});
  const auto& a = r->entries(0);
  EXPECT_EQ(a.fix_path(), "override_replace");
  EXPECT_NE(a.probe_finding().find("own unpack_forward_output (loader.py:8) raises"),
            std::string::npos)
      << a.probe_finding();
  EXPECT_NE(a.loss_target().reason().find("follows heads/multi/pytorch/loader.py:2's override"),
            std::string::npos)
      << a.loss_target().reason();
  ASSERT_EQ(r->file_edits_size(), 1);
  const std::string& diff = r->file_edits(0).diff();
  EXPECT_NE(diff.find("-        return fwd.logits"), std::string::npos) << diff;
  EXPECT_NE(diff.find("+        from ...tools.utils import extract_tensors_recursive\n"),
            std::string::npos)
      << diff;
  EXPECT_NE(diff.find("+        extract_tensors_recursive(forward_output, tensors)\n"),
            std::string::npos)
      << diff;
  const std::string loader =
      testing::ReadFileOrDie(ws_ / "third_party/tt_forge_models/m/pytorch/loader.py");
  EXPECT_EQ(loader.find("fwd.logits"), std::string::npos);
  EXPECT_EQ(loader.find("def unpack_forward_output"), loader.rfind("def unpack_forward_output"))
      << "one override";
}

// A fix whose re-probe fails on with another playbook's failure stops for that playbook
// (docs/playbooks.md, "Chaining") instead of being verified with the failure left in it.
TEST_F(PlaybookRunTest, UnpackReprobeShowingADtypeErrorStopsForDtypeBfloat16) {
  const json out = Object("MiniOutput", {{"logits", Tensor({1, 4})}});
  for (const char* k :
       {"m/pytorch-A-single_device-training", "m/pytorch-B-single_device-training"}) {
    tools_.probes[k] = {
        {Doc(k, "structure", out, false)},
        {Doc(k, "structure", json(), false,
             ProbeError("RuntimeError", "expected scalar type BFloat16 but found Float"))}};
  }
  chain_ = [](std::string_view) -> const Playbook* { return nullptr; };
  auto r = Run("unpack_forward_output", "not_implemented");
  ExpectDispositions(r, {{"needs_dtype", v1::EntryOutcome::NEEDS_PLAYBOOK},
                         {"needs_dtype", v1::EntryOutcome::NEEDS_PLAYBOOK}});
  EXPECT_EQ(r->entries(0).needs_playbook(), "dtype_bfloat16");
  EXPECT_EQ(r->registry_ops_size(), 1) << "the fix is kept for the next playbook";
  EXPECT_TRUE(tools_.pytest_calls.empty());
}

TEST_F(PlaybookRunTest, DtypeReprobeShowingMissingInputsStopsForMissingInputs) {
  const std::string a = "m/pytorch-A-single_device-training";
  const std::string b = "m/pytorch-B-single_device-training";
  ProbeDoc bf16 = Doc(a, "bfloat16", json(), true,
                      ProbeError("RuntimeError", "expected scalar type BFloat16 but found Float"));
  bf16.inputs = {ProbeInput("decoder_input_values", "torch.float32", "tensor")};
  const json tensor = Tensor({1, 4});
  ProbeDoc after = Doc(a, "bfloat16", json(), true,
                       ProbeError("ValueError",
                                  "You have to specify either decoder_input_ids or "
                                  "decoder_inputs_embeds"));
  tools_.probes[a] = {{bf16, Doc(a, "float32", tensor, true)},
                      {after, Doc(a, "float32", tensor, true)}};
  tools_.probes[b] = {{Doc(b, "bfloat16", tensor, true), Doc(b, "float32", tensor, true)}};
  chain_ = [](std::string_view) -> const Playbook* { return nullptr; };
  auto r = Run("dtype_bfloat16", "cross_dtype");
  ExpectDispositions(r, {{"needs_inputs", v1::EntryOutcome::NEEDS_PLAYBOOK},
                         {"not_reproduced", v1::EntryOutcome::NEEDS_REVIEW}});
  EXPECT_EQ(r->entries(0).needs_playbook(), "missing_inputs");
  EXPECT_EQ(r->entries(0).fix_path(), "loader_dtype") << "the dtype fix is kept";
  EXPECT_EQ(r->file_edits_size(), 1);
}

TEST_F(PlaybookRunTest, ChainInAProbePhaseLeavesTheEntryReadyForVerification) {
  spec_.set_phase(v1::PHASE_PROBE);
  ProbesForDtypeThenUnpack(tools_);
  auto r = Run("dtype_bfloat16", "cross_dtype");
  ExpectDispositions(
      r, {{"ready", v1::EntryOutcome::VERIFY}, {"not_reproduced", v1::EntryOutcome::NEEDS_REVIEW}});
  EXPECT_EQ(Playbooks(r->entries(0)),
            (std::vector<std::string>{"dtype_bfloat16", "unpack_forward_output"}));
  EXPECT_EQ(r->registry_ops_size(), 1) << "the VERIFY phase pre-applies it";
  EXPECT_EQ(r->file_edits_size(), 1);
  EXPECT_TRUE(tools_.pytest_calls.empty());
}

// Two playbooks that name each other, to check the chain's guard.
class PingPong : public Playbook {
 public:
  PingPong(std::string_view name, std::string_view next, std::set<std::string> stop)
      : next_(next), stop_(std::move(stop)) {
    entry_.name = name;
    entry_.version = "1";
  }
  const CatalogEntry& Catalog() const override { return entry_; }
  absl::Status ProbeAndFix(ShardRun& run) const override {
    ++runs;
    for (auto& w : run.entries()) {
      seen.push_back(w.entry->key());
      EXPECT_TRUE(w.verify) << "a chained playbook starts from a lifted stop";
      EXPECT_TRUE(w.out->needs_playbook().empty());
      w.out->set_fix_path(std::string(Name()));
      if (Name() == "ping") w.out->set_output_class("Seen");
      if (stop_.count(w.entry->key())) {
        ShardRun::Stop(w, "stopped", v1::EntryOutcome::NEEDS_PLAYBOOK, next_);
      }
    }
    return absl::OkStatus();
  }
  mutable int runs = 0;
  mutable std::vector<std::string> seen;

 private:
  CatalogEntry entry_;
  std::string next_;
  std::set<std::string> stop_;
};

TEST_F(PlaybookRunTest, ChainRunsTheNamedPlaybookOnItsEntriesOnceEach) {
  const std::string a = "m/pytorch-A-single_device-training";
  const std::string b = "m/pytorch-B-single_device-training";
  // ping stops both for pong; pong stops A for ping again (a cycle) and lets B go on.
  PingPong ping("ping", "pong", {a, b});
  PingPong pong("pong", "ping", {a});
  spec_.set_playbook("ping");
  PlaybookContext ctx;
  ctx.spec = &spec_;
  ctx.workspace = ws_;
  ctx.tools = &tools_;
  ctx.chain = [&](std::string_view name) -> const Playbook* {
    return name == "ping" ? &ping : name == "pong" ? &pong : nullptr;
  };
  auto r = ping.Run(ctx);
  ExpectDispositions(
      r, {{"stopped", v1::EntryOutcome::NEEDS_PLAYBOOK}, {"pass", v1::EntryOutcome::DONE}});
  EXPECT_EQ(ping.runs, 1) << "not run again on A";
  EXPECT_EQ(pong.runs, 1) << "one run for the entries that named it";
  EXPECT_EQ(pong.seen, (std::vector<std::string>{a, b}));
  for (const auto& e : r->entries()) {
    EXPECT_EQ(Playbooks(e), (std::vector<std::string>{"ping", "pong"})) << e.key();
    EXPECT_EQ(e.fix_path(), "ping+pong") << e.key();
    EXPECT_EQ(e.output_class(), "Seen") << "kept when the later playbook did not see the output";
  }
  EXPECT_EQ(r->entries(0).needs_playbook(), "ping");
  ASSERT_EQ(r->entries(0).review_size(), 1);
  EXPECT_NE(r->entries(0).review(0).find("already ran on it"), std::string::npos);
  ASSERT_EQ(tools_.pytest_calls.size(), 1u);
  EXPECT_EQ(tools_.pytest_calls[0], std::vector<std::string>{b});
}

TEST_F(PlaybookRunTest, ChainKeepsAStopNamingAPlaybookThisAgentCannotRun) {
  const std::string a = "m/pytorch-A-single_device-training";
  PingPong ping("ping", "elsewhere", {a});
  spec_.set_playbook("ping");
  PlaybookContext ctx;
  ctx.spec = &spec_;
  ctx.workspace = ws_;
  ctx.tools = &tools_;
  ctx.chain = [&](std::string_view name) -> const Playbook* {
    return name == "ping" ? &ping : nullptr;
  };
  auto r = ping.Run(ctx);
  ExpectDispositions(
      r, {{"stopped", v1::EntryOutcome::NEEDS_PLAYBOOK}, {"pass", v1::EntryOutcome::DONE}});
  EXPECT_EQ(r->entries(0).needs_playbook(), "elsewhere");
  EXPECT_EQ(Playbooks(r->entries(0)), std::vector<std::string>{"ping"});
  ASSERT_EQ(r->entries(0).review_size(), 1);
  EXPECT_EQ(r->entries(0).review(0),
            "needs the elsewhere playbook first, which this agent does not run");
  EXPECT_EQ(ping.runs, 1);
}

// A VERIFY phase runs no playbook's probe and fix: it records no chain (the earlier phase did).
TEST_F(PlaybookRunTest, VerifyPhaseRecordsNoPlaybooks) {
  spec_.set_phase(v1::PHASE_VERIFY);
  auto r = Run("dtype_bfloat16", "cross_dtype");
  ASSERT_TRUE(r.ok()) << r.status();
  for (const auto& e : r->entries()) EXPECT_TRUE(e.playbooks().empty()) << e.key();
}

// A playbook this agent does not have is refused (docs/playbooks.md, "Adding a playbook").
TEST_F(PlaybookRunTest, UnknownPlaybookIsRefused) {
  auto unknown = Run("no_such_playbook", "x");
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(absl::IsUnimplemented(unknown.status())) << unknown.status();
  EXPECT_NE(unknown.status().message().find("has no playbook 'no_such_playbook'"),
            std::string::npos);
  EXPECT_TRUE(tools_.pytest_calls.empty());
}

// --- measured durations (docs/report.md, "Measured durations") -----------------------------------

// Each verified outcome carries its testcase's JUnit time (a probe phase measures nothing:
// ProbePhaseFixesButDoesNotVerify).
TEST_F(PlaybookRunTest, VerificationTimeIsTheOutcomesDuration) {
  ProbesOfARegisteredOutput();
  tools_.cases["m/pytorch-A-single_device-training"].time_seconds = 12.5;
  tools_.cases["m/pytorch-B-single_device-training"] =
      Failed("RuntimeError: TT_FATAL @ op.cpp:1: boom");
  tools_.cases["m/pytorch-B-single_device-training"].time_seconds = 3.25;
  auto r = Run("unpack_forward_output", "not_implemented");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->entries(0).verdict(), "pass");
  EXPECT_DOUBLE_EQ(r->entries(0).duration_seconds(), 12.5);
  EXPECT_EQ(r->entries(1).verdict(), "failure");
  EXPECT_DOUBLE_EQ(r->entries(1).duration_seconds(), 3.25) << "a failing test is measured too";
}

// A time no run can take (a damaged or hand-written JUnit file) measures nothing.
TEST_F(PlaybookRunTest, ImpossibleJUnitTimesAreNotMeasured) {
  testing::WriteFileOrDie(ws_ / "third_party/tt_forge_models/m/pytorch/loader.py",
                          "class ModelLoader:\n    def unpack_forward_output(self, o):\n"
                          "        return o[0]\n");
  ProbesOfAWorkingOverride();
  tools_.cases["m/pytorch-A-single_device-training"].time_seconds = -4;
  tools_.cases["m/pytorch-B-single_device-training"].time_seconds = std::nan("");
  auto r = Run("unpack_forward_output", "not_implemented");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->entries_size(), 2);
  EXPECT_EQ(r->entries(0).verdict(), "pass");
  EXPECT_EQ(r->entries(0).duration_seconds(), 0);
  EXPECT_EQ(r->entries(1).duration_seconds(), 0);
}

// A pytest stand-in for NativeTools: writes the JUnit file pytest would for the node ids it is
// given. A (2.5 s) passes; B is left out of a run of several keys, as a crash leaves it, and
// fails in 6 s when run alone.
constexpr char kFakePytest[] = R"(#!/bin/sh
case "$*" in
  *--mode\ structure*)
    # The probe: the loader's own override returns a tensor.
    key=$(echo "$*" | sed 's/.*--key \([^ ]*\).*/\1/')
    echo '{"schema": 1, "key": "'"$key"'", "phase": "structure", "ok": true, "error": null, "inputs": [], "output": {"class": "tuple", "module": "builtins", "tree": {"type": "tuple", "items": [{"type": "tensor", "shape": [1, 2], "dtype": "torch.bfloat16"}]}}, "unpacked": {"ok": true, "kind": "tensor", "error": null}, "backward": "skipped"}'
    exit 0 ;;
esac
xml=""
keys=""
for a in "$@"; do
  case "$a" in
    --junitxml=*) xml="${a#--junitxml=}" ;;
    *"::test_all_models_torch["*) k="${a#*\[}"; keys="$keys ${k%]}" ;;
  esac
done
n=$(echo $keys | wc -w)
{
  echo '<testsuite name="pytest">'
  for k in $keys; do
    case "$k" in
      *-A-*) echo "<testcase classname=\"t\" name=\"test_all_models_torch[$k]\" time=\"2.5\"/>" ;;
      *-B-*) if [ "$n" = 1 ]; then
               echo "<testcase classname=\"t\" name=\"test_all_models_torch[$k]\" time=\"6.0\"><failure message=\"RuntimeError: boom\">E   RuntimeError: boom</failure></testcase>"
             fi ;;
    esac
  done
  echo '</testsuite>'
} > "$xml"
)";

// The time of the run whose verdict the outcome reports (B's run alone, after the shared run
// left no testcase for it), and a replay of what the native run recorded measures the same.
TEST_F(PlaybookRunTest, NativeAndReplayRunsMeasureTheSameTimes) {
  testing::WriteFileOrDie(ws_ / "third_party/tt_forge_models/m/pytorch/loader.py",
                          "class ModelLoader:\n    def unpack_forward_output(self, o):\n"
                          "        return o[0]\n");
  const auto python = tmp_.path() / "fake-python";
  testing::WriteFileOrDie(python, kFakePytest);
  std::filesystem::permissions(python, std::filesystem::perms::owner_all);
  agent::NativeToolsOptions options;
  options.workspace = ws_;
  options.shard_dir = tmp_.path() / "shard";
  options.scripts_dir = tmp_.path() / "scripts";
  options.python = python.string();
  agent::NativeTools native(options);
  auto run_with = [&](PlaybookTools& tools) {
    spec_.set_playbook("unpack_forward_output");
    for (auto& e : *spec_.mutable_entries()) e.set_flavor("not_implemented");
    PlaybookContext ctx;
    ctx.spec = &spec_;
    ctx.workspace = ws_;
    ctx.tools = &tools;
    return RunPlaybook(ctx);
  };
  auto r = run_with(native);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->entries_size(), 2);
  EXPECT_EQ(r->entries(0).verdict(), "pass");
  EXPECT_DOUBLE_EQ(r->entries(0).duration_seconds(), 2.5);
  EXPECT_EQ(r->entries(1).verdict(), "failure") << "decided by its run alone";
  EXPECT_DOUBLE_EQ(r->entries(1).duration_seconds(), 6.0) << "the time of that run";
  ASSERT_TRUE(std::filesystem::is_regular_file(options.shard_dir / "junit/04-verify-alone.xml"));

  auto replay = ReplayTools::Load(options.shard_dir, tmp_.path() / "replayed");
  ASSERT_TRUE(replay.ok()) << replay.status();
  auto again = run_with(**replay);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->entries_size(), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(again->entries(i).verdict(), r->entries(i).verdict()) << i;
    EXPECT_EQ(again->entries(i).duration_seconds(), r->entries(i).duration_seconds()) << i;
  }
}

TEST(ReplayTools, MatchesProbesBySeqAndTestcasesByOrder) {
  testing::TempDir tmp;
  const std::string key = "m/pytorch-A-single_device-training";
  auto doc = [&](int seq, bool ok) {
    return json{{"schema", 1},
                {"key", key},
                {"loader", "l"},
                {"phase", "structure"},
                {"ok", ok},
                {"seq", seq},
                {"error", nullptr},
                {"inputs", json::array()},
                {"output", nullptr},
                {"unpacked", nullptr},
                {"backward", "skipped"}};
  };
  testing::WriteFileOrDie(tmp.path() / "probes/a.json",
                          json::array({doc(0, false), doc(1, true)}).dump());
  testing::WriteFileOrDie(tmp.path() / "junit/1.xml",
                          "<testsuite><testcase name=\"test_all_models_torch[" + key +
                              "]\"><failure message=\"x\">E   x</failure></testcase></testsuite>");
  testing::WriteFileOrDie(
      tmp.path() / "junit/2.xml",
      "<testsuite><testcase name=\"test_all_models_torch[" + key + "]\"/></testsuite>");
  auto tools = ReplayTools::Load(tmp.path());
  ASSERT_TRUE(tools.ok()) << tools.status();
  EXPECT_FALSE((*tools)->Probe(key, "structure")->front().ok);
  EXPECT_TRUE((*tools)->Probe(key, "structure")->front().ok);
  EXPECT_TRUE(absl::IsNotFound((*tools)->Probe(key, "structure").status())) << "no seq 2";
  EXPECT_EQ((*tools)->Pytest({key}, "v")->cases[0].outcome, junit::Outcome::kFailed);
  EXPECT_EQ((*tools)->Pytest({key}, "v")->cases[0].outcome, junit::Outcome::kPassed);
  EXPECT_EQ((*tools)->Pytest({key}, "v")->cases[0].outcome, junit::Outcome::kPassed)
      << "the last testcase answers when there are fewer";
  EXPECT_EQ((*tools)->Pytest({"other"}, "v")->cases[0].outcome, junit::Outcome::kMissing);
  testing::WriteFileOrDie(tmp.path() / "junit/3.xml",
                          "<testsuite><testcase name=\"test_all_models_torch[" + key +
                              "]\"/><testcase name=\"test_all_models_torch[" + key +
                              "]\"/></testsuite>");
  EXPECT_FALSE(ReplayTools::Load(tmp.path()).ok()) << "two testcases for one key in one file";
}

// A replay records what answered in the layout it reads (so a replayed sweep has evidence like
// a native one), and that record replays to the same answers.
TEST(ReplayTools, RecordsWhatAnsweredAndTheRecordReplaysTheSame) {
  testing::TempDir tmp;
  const auto src = tmp.path() / "src";
  const auto rec = tmp.path() / "rec";
  const std::string key = "m/pytorch-A-single_device-training";
  const std::string crashed = "m/pytorch-B-single_device-training";
  const std::string unasked = "z/pytorch-single_device-training";
  auto doc = [&](const std::string& k, int seq, bool ok) {
    json d = {{"schema", 1},
              {"key", k},
              {"loader", "l"},
              {"phase", "structure"},
              {"ok", ok},
              {"error", nullptr},
              {"inputs", json::array()},
              {"output", nullptr},
              {"unpacked", nullptr},
              {"backward", "skipped"}};
    if (seq > 0) d["seq"] = seq;  // seq 0 is the default and may be left out
    return d;
  };
  auto testcase = [](const std::string& k, bool pass) {
    return "<testcase name=\"test_all_models_torch[" + k + "]\">" +
           (pass ? "" : "<failure message=\"x\">E   x</failure>") + "</testcase>";
  };
  testing::WriteFileOrDie(
      src / "probes/a.json",
      json::array({doc(key, 0, false), doc(key, 1, true), doc(unasked, 0, true)}).dump());
  testing::WriteFileOrDie(
      src / "junit/01-verify.xml",
      "<testsuite>" + testcase(key, false) + testcase(unasked, true) + "</testsuite>");
  testing::WriteFileOrDie(src / "logs/01-verify.log", "the first run\n");
  testing::WriteFileOrDie(src / "junit/02-verify.xml",
                          "<testsuite>" + testcase(key, true) + "</testsuite>");
  testing::WriteFileOrDie(src / "junit/03-inference.xml",
                          "<testsuite>" + testcase(unasked, false) + "</testsuite>");
  testing::WriteFileOrDie(src / ("logs/" + crashed + ".log"), "Fatal Python error: Aborted\n");

  // The same questions, asked of a replay directory; the answers in order.
  auto ask = [&](ReplayTools& t) {
    std::vector<std::string> answers;
    for (int i = 0; i < 3; ++i) {
      auto p = t.Probe(key, "structure");
      answers.push_back(p.ok() ? (p->front().ok ? "probe ok" : "probe failed") : "probe none");
    }
    for (int i = 0; i < 3; ++i) {
      auto r = t.Pytest({key, crashed}, "verify");
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) continue;
      answers.push_back(std::string(junit::OutcomeName(r->cases[0].outcome)));
      answers.push_back(std::string(junit::OutcomeName(r->cases[1].outcome)) + " " + r->log);
    }
    return answers;
  };
  auto first = ReplayTools::Load(src, rec);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::vector<std::string> answers = ask(**first);
  ASSERT_EQ(answers.size(), 9u);
  EXPECT_EQ(answers[0], "probe failed");
  EXPECT_EQ(answers[1], "probe ok");
  EXPECT_EQ(answers[2], "probe none");

  std::vector<std::string> names;
  for (const auto& [name, path] : (*first)->Evidence()) {
    names.push_back(name);
    EXPECT_EQ(path, rec / name);
    EXPECT_TRUE(std::filesystem::is_regular_file(path)) << name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "junit/01-verify.xml", "junit/02-verify.xml", "logs/01-verify.log",
                       "logs/" + crashed + ".log",
                       "probes/m__pytorch-A-single_device-training.structure.0.json",
                       "probes/m__pytorch-A-single_device-training.structure.1.json"}))
      << "what answered, nothing else (03-inference.xml and the unasked key's probe did not)";
  EXPECT_EQ(testing::ReadFileOrDie(rec / "junit/01-verify.xml"),
            testing::ReadFileOrDie(src / "junit/01-verify.xml"))
      << "JUnit files are kept as they were";
  EXPECT_EQ(json::parse(testing::ReadFileOrDie(
                            rec / "probes/m__pytorch-A-single_device-training.structure.0.json"))
                .value("seq", -1),
            0)
      << "a recorded probe document names its seq";

  // The record replays to the same answers.
  auto again = ReplayTools::Load(rec, tmp.path() / "rec2");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ask(**again), answers);
  EXPECT_EQ((*again)->Evidence().size(), (*first)->Evidence().size());

  // Without a record directory nothing is written.
  auto plain = ReplayTools::Load(src);
  ASSERT_TRUE(plain.ok());
  ask(**plain);
  EXPECT_TRUE((*plain)->Evidence().empty());
}

// The inputs mode through replay: one call answers train then eval (ProbePhases), each matched
// by its own seq, and is recorded under the native names with every member kept.
TEST(ReplayTools, InputsModeAnswersTrainThenEvalAndRecordsBoth) {
  testing::TempDir tmp;
  const std::string key = "det/pytorch-Base-single_device-training";
  json train = json::parse(kInputsTrainDoc);
  json eval = train;
  eval["phase"] = "eval";
  eval["ok"] = true;
  eval["error"] = nullptr;
  eval["seq"] = 1;
  json eval0 = eval;
  eval0.erase("seq");
  eval0["container"] = "tuple";
  json train0 = train;
  train0["seq"] = 0;
  train0["container"] = "tuple";
  testing::WriteFileOrDie(tmp.path() / "src/probes/a.json",
                          json::array({eval, train, train0}).dump());
  testing::WriteFileOrDie(tmp.path() / "src/probes/b.json", eval0.dump());
  auto tools = ReplayTools::Load(tmp.path() / "src", tmp.path() / "rec");
  ASSERT_TRUE(tools.ok()) << tools.status();

  for (int seq : {0, 1}) {
    auto docs = (*tools)->Probe(key, "inputs");
    ASSERT_TRUE(docs.ok()) << docs.status();
    ASSERT_EQ(docs->size(), 2u);
    EXPECT_EQ((*docs)[0].phase, "train");
    EXPECT_EQ((*docs)[1].phase, "eval");
    EXPECT_EQ((*docs)[0].seq, seq);
    EXPECT_EQ((*docs)[1].seq, seq);
    EXPECT_EQ((*docs)[0].container, seq == 0 ? "tuple" : "list");
    EXPECT_FALSE((*docs)[0].ok);
    EXPECT_TRUE((*docs)[1].ok);
    ASSERT_TRUE((*docs)[1].forward.has_value());
    EXPECT_EQ((*docs)[1].forward->PositionOf("targets"), 1);
  }
  EXPECT_TRUE(absl::IsNotFound((*tools)->Probe(key, "inputs").status())) << "no seq 2";
  EXPECT_TRUE(absl::IsInvalidArgument((*tools)->Probe(key, "input").status()));

  std::vector<std::string> names;
  for (const auto& [name, path] : (*tools)->Evidence()) names.push_back(name);
  const std::string file = "probes/det__pytorch-Base-single_device-training";
  EXPECT_EQ(names, (std::vector<std::string>{file + ".eval.0.json", file + ".eval.1.json",
                                             file + ".train.0.json", file + ".train.1.json"}));
  const json recorded =
      json::parse(testing::ReadFileOrDie(tmp.path() / "rec" / (file + ".eval.0.json")));
  EXPECT_EQ(recorded.value("seq", -1), 0);
  EXPECT_EQ(recorded["forward"], train["forward"]) << "the inputs mode's members are recorded";
  EXPECT_EQ(recorded["requirements"], train["requirements"]);
}

// A pytest process that dies by a signal leaves the runner's stage file in its directory (the
// teardown that deletes it never ran): NativeTools writes what it says into the log, so that the
// verdict, native or replayed from the log, knows the stage the crashed test was in.
TEST(NativeTools, ACrashLeavesTheStageFileInTheLog) {
  testing::TempDir tmp;
  const std::string key = "m/pytorch-A-single_device-training";
  const auto python = tmp.path() / "fake-python";
  testing::WriteFileOrDie(python,
                          "#!/bin/sh\n"
                          "printf 'TTMLIR_COMPILATION_START' > ._bringup_stage.txt\n"
                          "echo 'UNREACHABLE executed at /src/tt-mlir/lib/X.cpp:7!' >&2\n"
                          "kill -ABRT $$\n");
  std::filesystem::permissions(python, std::filesystem::perms::owner_all);
  agent::NativeToolsOptions options;
  options.workspace = tmp.path() / "ws";
  options.shard_dir = tmp.path() / "shard";
  options.scripts_dir = tmp.path() / "scripts";
  options.python = python.string();
  agent::NativeTools tools(options);
  auto run = tools.Pytest({key}, "verify");
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->signal, 6);
  EXPECT_NE(run->log.find("[triage-agent] the bringup stage file reads TTMLIR_COMPILATION_START\n"
                          "[triage-agent] the pytest process CRASHED with signal 6 (SIGABRT)"),
            std::string::npos)
      << run->log;
  ASSERT_EQ(run->cases.size(), 1u);
  junit::VerifyContext vc;
  vc.log_text = run->log;
  vc.exit_signal = run->signal;
  const junit::Finding f = junit::Classify(&run->cases[0], vc);
  EXPECT_EQ(f.verdict, junit::Verdict::kCrash);
  EXPECT_EQ(f.stage, "FAILED_TTMLIR_COMPILATION");
  EXPECT_EQ(f.stage_source, "stage_file");
  EXPECT_EQ(f.reason,
            "crashed with signal 6 (SIGABRT) during TT-MLIR compilation: UNREACHABLE executed at "
            "X.cpp:7!");
}

// NativeTools runs the probe with the mode and records every document under its phase's name;
// an unknown mode runs nothing. The probe here is a stand-in script printing two documents.
// It runs at the agent's niceness plus probe_nice: it holds no device.
TEST(NativeTools, InputsModeRecordsTrainAndEvalDocuments) {
  testing::TempDir tmp;
  const std::string key = "det/pytorch-Base-single_device-training";
  testing::WriteFileOrDie(tmp.path() / "scripts/triage_probe.py",
                          "echo \"$@\" > \"$(dirname \"$0\")/argv.txt\"\n"
                          "nice > \"$(dirname \"$0\")/nice.txt\"\n"
                          "echo 'loader output' >&2\n"
                          "echo '{\"schema\": 1, \"key\": \"'$4'\", \"phase\": \"train\", "
                          "\"ok\": false, \"error\": {\"type\": \"ModuleNotFoundError\", "
                          "\"message\": \"m\", \"traceback\": \"\", \"module\": \"kornia\"}, "
                          "\"requirements\": [{\"file\": \"requirements.txt\", "
                          "\"packages\": [\"kornia\"]}]}'\n"
                          "echo '{\"schema\": 1, \"key\": \"'$4'\", \"phase\": \"eval\", "
                          "\"ok\": true, \"container\": \"dict\"}'\n");
  agent::NativeToolsOptions options;
  options.workspace = tmp.path() / "ws";
  options.shard_dir = tmp.path() / "shard";
  options.scripts_dir = tmp.path() / "scripts";
  options.python = "/bin/sh";
  agent::NativeTools tools(options);

  EXPECT_TRUE(absl::IsInvalidArgument(tools.Probe(key, "nonsense").status()));
  EXPECT_TRUE(tools.Evidence().empty()) << "an unknown mode runs no probe";

  for (int seq : {0, 1}) {
    auto docs = tools.Probe(key, "inputs");
    ASSERT_TRUE(docs.ok()) << docs.status();
    ASSERT_EQ(docs->size(), 2u);
    EXPECT_EQ((*docs)[0].phase, "train");
    EXPECT_EQ((*docs)[0].seq, seq);
    ASSERT_TRUE((*docs)[0].error.has_value());
    EXPECT_EQ((*docs)[0].error->module, "kornia");
    ASSERT_EQ((*docs)[0].requirements.size(), 1u);
    EXPECT_EQ((*docs)[1].phase, "eval");
    EXPECT_EQ((*docs)[1].seq, seq);
    EXPECT_EQ((*docs)[1].container, "dict");
  }
  const std::string argv_txt = testing::ReadFileOrDie(tmp.path() / "scripts/argv.txt");
  EXPECT_EQ(util::TrimWhitespace(argv_txt),
            "--root " + (tmp.path() / "ws").string() + " --key " + key + " --mode inputs");
  const std::string nice_txt = testing::ReadFileOrDie(tmp.path() / "scripts/nice.txt");
  EXPECT_EQ(util::TrimWhitespace(nice_txt),
            std::to_string(std::min(19, ::getpriority(PRIO_PROCESS, 0) + options.probe_nice)));
  EXPECT_EQ(options.probe_nice, 10) << "the default";

  std::vector<std::string> names;
  for (const auto& [name, path] : tools.Evidence()) {
    names.push_back(name);
    EXPECT_EQ(path, tmp.path() / "shard" / name);
    EXPECT_TRUE(std::filesystem::is_regular_file(path)) << name;
  }
  const std::string file = "det__pytorch-Base-single_device-training";
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "logs/" + file + ".probe-inputs-1.log", "logs/" + file + ".probe-inputs-2.log",
                "probes/" + file + ".eval.0.json", "probes/" + file + ".eval.1.json",
                "probes/" + file + ".train.0.json", "probes/" + file + ".train.1.json"}));
  const json recorded =
      json::parse(testing::ReadFileOrDie(tmp.path() / "shard/probes" / (file + ".train.1.json")));
  EXPECT_EQ(recorded.value("seq", -1), 1);
  EXPECT_EQ(recorded["error"].value("module", ""), "kornia");

  // What the native run recorded replays to the same documents.
  auto replay = ReplayTools::Load(tmp.path() / "shard");
  ASSERT_TRUE(replay.ok()) << replay.status();
  for (int seq : {0, 1}) {
    auto docs = (*replay)->Probe(key, "inputs");
    ASSERT_TRUE(docs.ok()) << docs.status();
    ASSERT_EQ(docs->size(), 2u);
    EXPECT_EQ((*docs)[0].seq, seq);
    EXPECT_EQ((*docs)[1].container, "dict");
  }
}

}  // namespace
}  // namespace triage::playbooks
