// The loss target per model family (docs/playbooks.md, "Which attribute is registered"), on
// output trees in the CPU probe's form (docs/probe.md) as real models of each family return them.

#include "agent/playbooks/unpack_forward_output/loss_target.h"

#include <string>
#include <vector>

#include "agent/playbooks/probe.h"
#include "agent/playbooks/unpack_forward_output/unpack_forward_output.h"
#include "gtest/gtest.h"

namespace triage::playbooks {
namespace {

using nlohmann::json;

constexpr const char* kHf = "transformers.modeling_outputs";

// Node builders (docs/probe.md's NODE).
json T(std::vector<int> shape) {
  return {{"type", "tensor"}, {"shape", shape}, {"dtype", "torch.bfloat16"}};
}
json None() { return {{"type", "object"}, {"class", "NoneType"}, {"attrs", json::object()}}; }
json Obj(const std::string& cls, json attrs) {
  return {{"type", "object"}, {"class", cls}, {"attrs", std::move(attrs)}};
}
json Tuple(json items) { return {{"type", "tuple"}, {"items", std::move(items)}}; }
json List(json items) { return {{"type", "list"}, {"items", std::move(items)}}; }
json Dict(json items) { return {{"type", "dict"}, {"items", std::move(items)}}; }
json Repeat(int n, const json& node) {
  json items = json::array();
  for (int i = 0; i < n; ++i) items.push_back(node);
  return items;
}

LossTargetInput In(json tree, const std::string& module = kHf, const std::string& task = "",
                   const std::string& doc = "") {
  LossTargetInput in;
  const std::string type = tree.value("type", "");
  in.output_class = type == "object" ? tree.value("class", "") : type;
  in.output_module = type == "object" ? module : "builtins";
  in.tree = std::move(tree);
  in.task = task;
  in.loader_doc = doc;
  return in;
}

std::vector<std::string> Names(const std::vector<LossCandidate>& cs) {
  std::vector<std::string> out;
  for (const auto& c : cs) out.push_back(c.name);
  return out;
}

std::string ShapeOf(const LossTarget& t, const std::string& name) {
  for (const auto& c : t.not_chosen) {
    if (c.name == name) return c.shape;
  }
  return "<not listed>";
}

// --- the family table, one row per family

struct Row {
  std::string name;
  LossTargetInput in;
  LossFamily family;
  std::string expr;
  std::string attr;  // "" when the target is not one attribute
  bool by_rule;
  std::vector<std::string> not_chosen;
};

std::vector<Row> Rows() {
  // DETR: class logits and boxes, plus the decoder's per-layer auxiliary predictions and the
  // encoder/decoder states.
  const json detr =
      Obj("DetrObjectDetectionOutput",
          {{"loss", None()},
           {"loss_dict", None()},
           {"logits", T({2, 100, 92})},
           {"pred_boxes", T({2, 100, 4})},
           {"auxiliary_outputs",
            List(Repeat(5, Dict({{"logits", T({2, 100, 92})}, {"pred_boxes", T({2, 100, 4})}})))},
           {"last_hidden_state", T({2, 100, 256})},
           {"decoder_hidden_states", None()},
           {"decoder_attentions", None()},
           {"cross_attentions", None()},
           {"encoder_last_hidden_state", T({2, 850, 256})},
           {"encoder_hidden_states", None()},
           {"encoder_attentions", None()}});
  // SegFormer: per-pixel logits at a quarter of the input resolution.
  const json segformer = Obj("SemanticSegmenterOutput", {{"loss", None()},
                                                         {"logits", T({2, 150, 128, 128})},
                                                         {"hidden_states", None()},
                                                         {"attentions", None()}});
  // UperNet with its auxiliary FCN head and the backbone's feature pyramid.
  const json upernet = Obj("SemanticSegmenterOutput",
                           {{"loss", None()},
                            {"logits", T({2, 150, 512, 512})},
                            {"auxiliary_logits", T({2, 150, 512, 512})},
                            {"hidden_states", Tuple({T({2, 96, 128, 128}), T({2, 192, 64, 64}),
                                                     T({2, 384, 32, 32}), T({2, 768, 16, 16})})},
                            {"attentions", None()}});
  // Mask2Former: per-query class scores and per-query masks (the per-pixel tensor), auxiliary
  // predictions of every decoder layer, the pixel decoder's features at the mask resolution.
  const json mask2former = Obj(
      "Mask2FormerForUniversalSegmentationOutput",
      {{"loss", None()},
       {"class_queries_logits", T({2, 100, 134})},
       {"masks_queries_logits", T({2, 100, 96, 96})},
       {"auxiliary_logits", List(Repeat(9, Dict({{"class_queries_logits", T({2, 100, 134})},
                                                 {"masks_queries_logits", T({2, 100, 96, 96})}})))},
       {"encoder_last_hidden_state", T({2, 768, 12, 12})},
       {"pixel_decoder_last_hidden_state", T({2, 256, 96, 96})},
       {"transformer_decoder_last_hidden_state", T({2, 100, 256})},
       {"encoder_hidden_states", None()},
       {"pixel_decoder_hidden_states", None()},
       {"transformer_decoder_hidden_states", None()},
       {"attentions", None()}});
  // DETR's panoptic head: class logits and boxes as for detection, and the per-query masks.
  const json detr_panoptic = Obj("DetrSegmentationOutput", {{"logits", T({2, 100, 251})},
                                                            {"pred_boxes", T({2, 100, 4})},
                                                            {"pred_masks", T({2, 100, 200, 267})},
                                                            {"last_hidden_state", T({2, 100, 256})},
                                                            {"auxiliary_outputs", None()}});
  // Extractive QA: the span loss reads both ends.
  const json qa = Obj("QuestionAnsweringModelOutput", {{"loss", None()},
                                                       {"start_logits", T({2, 384})},
                                                       {"end_logits", T({2, 384})},
                                                       {"hidden_states", None()},
                                                       {"attentions", None()}});
  const json pooled = Obj("BaseModelOutputWithPooling", {{"last_hidden_state", T({2, 128, 768})},
                                                         {"pooler_output", T({2, 768})},
                                                         {"hidden_states", None()},
                                                         {"attentions", None()}});
  const json dpr =
      Obj("DPRQuestionEncoderOutput",
          {{"pooler_output", T({2, 768})}, {"hidden_states", None()}, {"attentions", None()}});
  // CLIP: both similarity matrices, both embeddings and the two towers' own outputs.
  const json tower = Obj("BaseModelOutputWithPooling", {{"last_hidden_state", T({3, 7, 512})},
                                                        {"pooler_output", T({3, 512})},
                                                        {"hidden_states", None()},
                                                        {"attentions", None()}});
  const json clip = Obj("CLIPOutput", {{"loss", None()},
                                       {"logits_per_image", T({2, 3})},
                                       {"logits_per_text", T({3, 2})},
                                       {"text_embeds", T({3, 512})},
                                       {"image_embeds", T({2, 512})},
                                       {"text_model_output", tower},
                                       {"vision_model_output", tower}});
  // The same model returning a tuple (return_dict=False).
  const json clip_tuple = Tuple({T({2, 3}), T({3, 2}), T({3, 512}), T({2, 512})});
  const json depth = Obj("DepthEstimatorOutput", {{"loss", None()},
                                                  {"predicted_depth", T({2, 384, 384})},
                                                  {"hidden_states", None()},
                                                  {"attentions", None()}});
  // YOLOv3/v5-style training heads: per scale (B, anchors * (5 + classes), H, W).
  const json yolo = List({T({2, 255, 80, 80}), T({2, 255, 40, 40}), T({2, 255, 20, 20})});
  // YOLOv5's detect head with the anchors split out: (B, anchors, H, W, 5 + classes).
  const json yolo5 = List({T({2, 3, 80, 80, 85}), T({2, 3, 40, 40, 85}), T({2, 3, 20, 20, 85})});
  // YOLOv8 in eval mode: the decoded predictions, then the raw per-scale heads.
  const json yolo8 = Tuple(
      {T({2, 84, 8400}), List({T({2, 144, 80, 80}), T({2, 144, 40, 40}), T({2, 144, 20, 20})})});
  const json lm =
      Obj("CausalLMOutputWithPast",
          {{"loss", None()},
           {"logits", T({2, 32, 50257})},
           {"past_key_values", Tuple(Repeat(2, Tuple({T({2, 12, 32, 64}), T({2, 12, 32, 64})})))},
           {"hidden_states", None()},
           {"attentions", None()}});
  const json cls = Obj("ImageClassifierOutput", {{"loss", None()},
                                                 {"logits", T({2, 1000})},
                                                 {"hidden_states", None()},
                                                 {"attentions", None()}});
  // Nothing names the family: several tensors of a custom class.
  const json unknown = Obj("FancyOutput", {{"scores", T({2, 10})},
                                           {"embeddings", T({2, 64})},
                                           {"gate", T({2, 10})},
                                           {"hidden_states", Tuple(Repeat(3, T({2, 16, 64})))},
                                           {"attentions", None()}});

  return {
      {"DETR: the class logits, one attribute a registry line names; auxiliary outputs dropped",
       In(detr, "transformers.models.detr.modeling_detr"),
       LossFamily::kDetection,
       "forward_output.logits",
       "logits",
       true,
       {"auxiliary_outputs", "encoder_last_hidden_state", "last_hidden_state", "pred_boxes"}},
      {"SegFormer: the per-pixel logits",
       In(segformer),
       LossFamily::kSegmentation,
       "forward_output.logits",
       "logits",
       true,
       {}},
      {"UperNet: the per-pixel logits, not the auxiliary head nor the feature pyramid",
       In(upernet),
       LossFamily::kSegmentation,
       "forward_output.logits",
       "logits",
       true,
       {"auxiliary_logits", "hidden_states"}},
      {"Mask2Former: the per-query masks are the per-pixel tensor",
       In(mask2former, "transformers.models.mask2former.modeling_mask2former"),
       LossFamily::kSegmentation,
       "forward_output.masks_queries_logits",
       "masks_queries_logits",
       true,
       {"auxiliary_logits", "class_queries_logits", "encoder_last_hidden_state",
        "pixel_decoder_last_hidden_state", "transformer_decoder_last_hidden_state"}},
      {"DETR panoptic: pred_masks, not logits",
       In(detr_panoptic),
       LossFamily::kSegmentation,
       "forward_output.pred_masks",
       "pred_masks",
       true,
       {"last_hidden_state", "logits", "pred_boxes"}},
      {"QA: start_logits, one attribute a registry line names",
       In(qa),
       LossFamily::kQuestionAnswering,
       "forward_output.start_logits",
       "start_logits",
       true,
       {"end_logits"}},
      {"QA tuple (return_dict=False)",
       In(Tuple({T({2, 384}), T({2, 384})}), "", "nlp_qa"),
       LossFamily::kQuestionAnswering,
       "torch.stack((forward_output[0], forward_output[1]), dim=-1)",
       "",
       true,
       {}},
      {"feature extractor: last_hidden_state",
       In(pooled),
       LossFamily::kFeatures,
       "forward_output.last_hidden_state",
       "last_hidden_state",
       true,
       {"pooler_output"}},
      {"sentence embedding: pooler_output",
       In(pooled, kHf, "nlp_embed_gen"),
       LossFamily::kEmbedding,
       "forward_output.pooler_output",
       "pooler_output",
       true,
       {"last_hidden_state"}},
      {"retrieval encoder: its only tensor",
       In(dpr, "transformers.models.dpr.modeling_dpr"),
       LossFamily::kUnknown,
       "forward_output.pooler_output",
       "pooler_output",
       true,
       {}},
      {"CLIP: logits_per_text",
       In(clip, "transformers.models.clip.modeling_clip"),
       LossFamily::kContrastive,
       "forward_output.logits_per_text",
       "logits_per_text",
       true,
       {"image_embeds", "logits_per_image", "text_embeds", "text_model_output",
        "vision_model_output"}},
      {"CLIP tuple: the first of the transposed pair",
       In(clip_tuple, "", "mm_image_text_sim"),
       LossFamily::kContrastive,
       "forward_output[0]",
       "",
       true,
       {"[1]", "[2]", "[3]"}},
      {"depth: predicted_depth",
       In(depth),
       LossFamily::kDepth,
       "forward_output.predicted_depth",
       "predicted_depth",
       true,
       {}},
      {"YOLO heads: flattened and concatenated",
       In(yolo, "", "cv_object_det"),
       LossFamily::kDetection,
       "torch.cat([t.flatten(1) for t in forward_output], dim=1)",
       "",
       true,
       {}},
      {"YOLOv5 rank-5 heads",
       In(yolo5, "", "", "YOLOv5 object detection model loader"),
       LossFamily::kDetection,
       "torch.cat([t.flatten(1) for t in forward_output], dim=1)",
       "",
       true,
       {}},
      {"YOLOv8 eval tuple: the raw heads, not the decoded boxes",
       In(yolo8, "", "cv_object_det"),
       LossFamily::kDetection,
       "torch.cat([t.flatten(1) for t in forward_output[1]], dim=1)",
       "",
       true,
       {"[0]"}},
      {"causal LM: logits, not the cache",
       In(lm),
       LossFamily::kLanguageModel,
       "forward_output.logits",
       "logits",
       true,
       {"past_key_values"}},
      {"image classifier: logits",
       In(cls),
       LossFamily::kClassification,
       "forward_output.logits",
       "logits",
       true,
       {}},
      {"unknown class, several tensors: the minimal candidate, for review",
       In(unknown, "fancy.modeling_fancy"),
       LossFamily::kUnknown,
       "forward_output.scores",
       "scores",
       false,
       {"embeddings", "gate", "hidden_states"}},
      {"family known, none of its tensors: the minimal candidate, for review",
       In(Dict({{"hm", T({2, 80, 128, 128})},
                {"wh", T({2, 2, 128, 128})},
                {"reg", T({2, 2, 128, 128})}}),
          "", "cv_object_det"),
       LossFamily::kDetection,
       "forward_output[\"hm\"]",
       "",
       false,
       {"[\"reg\"]", "[\"wh\"]"}},
  };
}

TEST(LossTarget, FamilyTable) {
  for (const Row& r : Rows()) {
    SCOPED_TRACE(r.name);
    const LossTarget t = DecideLossTarget(r.in);
    EXPECT_EQ(LossFamilyName(t.family), LossFamilyName(r.family));
    EXPECT_EQ(t.expr, r.expr);
    EXPECT_EQ(t.attr, r.attr);
    EXPECT_EQ(t.by_rule, r.by_rule) << t.reason;
    EXPECT_EQ(Names(t.not_chosen), r.not_chosen);
    EXPECT_FALSE(t.reason.empty());
    EXPECT_EQ(t.needs_torch, r.expr.starts_with("torch.")) << t.expr;
    EXPECT_FALSE(t.chosen.empty());
  }
}

TEST(LossTarget, AlternativesCarryTheirShapes) {
  const auto rows = Rows();
  auto row = [&](std::string_view prefix) {
    for (const auto& r : rows) {
      if (r.name.starts_with(prefix)) return DecideLossTarget(r.in);
    }
    ADD_FAILURE() << prefix;
    return LossTarget{};
  };
  const LossTarget detr = row("DETR:");
  EXPECT_EQ(Names(detr.chosen), (std::vector<std::string>{"logits"}));
  EXPECT_EQ(ShapeOf(detr, "pred_boxes"), "(2, 100, 4)");
  EXPECT_EQ(ShapeOf(detr, "auxiliary_outputs"), "list of 10 tensors (2, 100, 92), (2, 100, 4)");
  EXPECT_EQ(ShapeOf(detr, "last_hidden_state"), "(2, 100, 256)");
  EXPECT_NE(detr.reason.find("output class DetrObjectDetectionOutput"), std::string::npos);

  const LossTarget unknown = row("unknown class");
  EXPECT_EQ(ShapeOf(unknown, "embeddings"), "(2, 64)");
  EXPECT_EQ(ShapeOf(unknown, "hidden_states"), "tuple of 3 tensors (2, 16, 64)");
  EXPECT_NE(unknown.reason.find("no model family is known"), std::string::npos) << unknown.reason;
  EXPECT_NE(unknown.reason.find("minimal candidate"), std::string::npos) << unknown.reason;

  const LossTarget clip = row("CLIP: logits_per_text");
  EXPECT_EQ(ShapeOf(clip, "text_model_output"),
            "BaseModelOutputWithPooling of 2 tensors "
            "(3, 7, 512), (3, 512)");
  const LossTarget centernet = row("family known");
  EXPECT_NE(centernet.reason.find("none of the family's loss tensors"), std::string::npos)
      << centernet.reason;
}

// The family from each signal on its own, in the order of docs/playbooks.md.
TEST(LossTarget, FamilySignals) {
  const json two = Obj("MyOutput", {{"logits", T({2, 5})}, {"extra", T({2, 5})}});
  auto family = [](const LossTargetInput& in) {
    const LossTarget t = DecideLossTarget(in);
    return std::make_pair(std::string(LossFamilyName(t.family)), t.family_from);
  };
  EXPECT_EQ(family(In(Obj("MySequenceClassifierOutput", {{"logits", T({2, 5})}}))),
            std::make_pair(std::string("classification"),
                           std::string("output class MySequenceClassifierOutput")));
  EXPECT_EQ(family(In(two, "mymodels.segmentation.heads")).first, "segmentation");
  EXPECT_EQ(family(In(two, "m", "nlp_causal_lm")).second, "model_info task nlp_causal_lm");
  EXPECT_EQ(family(In(two, "m", "", "\"\"\"BERT model loader for question answering.\"\"\"")),
            std::make_pair(std::string("question_answering"),
                           std::string("loader docstring: \"question answering\"")));
  // The class outranks the task; the task outranks the docstring.
  EXPECT_EQ(
      family(In(Obj("MyCausalLMOutput", {{"logits", T({2, 4, 9})}}), "m", "cv_image_cls")).first,
      "language_model");
  EXPECT_EQ(family(In(two, "m", "cv_image_cls", "a depth estimation model")).first,
            "classification");
  // A shared base class names the family only when nothing else does.
  const json base = Obj("BaseModelOutput", {{"last_hidden_state", T({2, 4, 8})}});
  EXPECT_EQ(family(In(base, kHf, "nlp_embed_gen")).first, "embedding");
  EXPECT_EQ(family(In(base)).first, "features");
  EXPECT_EQ(family(In(two)).first, "unknown");
  // An unknown task is no signal.
  EXPECT_EQ(family(In(two, "m", "cv_scene_text_recognition")).first, "unknown");
  // With a family the logits are decided by rule; without, they are the minimal candidate.
  EXPECT_TRUE(DecideLossTarget(In(two, "m", "nlp_text_cls")).by_rule);
  EXPECT_FALSE(DecideLossTarget(In(two)).by_rule);
}

// Rules that need no family: the only tensor; the only one that is not an auxiliary output.
TEST(LossTarget, OnlyCandidateIsARule) {
  LossTarget t = DecideLossTarget(In(Obj("Odd", {{"y", T({2})}, {"n", None()}})));
  EXPECT_TRUE(t.by_rule);
  EXPECT_EQ(t.attr, "y");
  t = DecideLossTarget(In(Obj("Odd", {{"y", T({2, 3})},
                                      {"attentions", Tuple({T({2, 4, 3, 3})})},
                                      {"past_key_values", Tuple({T({2, 4, 3, 8})})}})));
  EXPECT_TRUE(t.by_rule);
  EXPECT_EQ(t.attr, "y");
  EXPECT_EQ(Names(t.not_chosen), (std::vector<std::string>{"attentions", "past_key_values"}));
  // Nested: one tensor, never a concatenation of all of them.
  t = DecideLossTarget(In(List({Dict({{"features", T({2, 8})}, {"out", T({2, 3})}})})));
  EXPECT_FALSE(t.by_rule);
  EXPECT_EQ(t.expr, "forward_output[0][\"out\"]");
  EXPECT_EQ(Names(t.not_chosen), (std::vector<std::string>{"[0][\"features\"]"}));
}

// Two per-pixel tensors the names cannot tell apart: the first, for review.
TEST(LossTarget, SegmentationTieIsReviewed) {
  LossTarget t = DecideLossTarget(
      In(Tuple({T({2, 19, 64, 64}), T({2, 19, 64, 64}), T({2, 19, 32, 32})}), "", "cv_image_seg"));
  EXPECT_EQ(t.expr, "forward_output[0]");
  EXPECT_FALSE(t.by_rule);
  // torchvision's {"out", "aux"}: the auxiliary head is dropped by its name.
  t = DecideLossTarget(
      In(Dict({{"out", T({2, 21, 64, 64})}, {"aux", T({2, 21, 64, 64})}}), "", "cv_image_seg"));
  EXPECT_EQ(t.expr, "forward_output[\"out\"]");
  EXPECT_TRUE(t.by_rule);
}

// Whatever the tree, no exception and no guess without a tensor.
TEST(LossTarget, MalformedTreesAreNoTarget) {
  for (const json& tree :
       {json(), json(3), json::parse(R"({"type": 7})"), json::parse(R"({"type": "list"})"),
        json::parse(R"({"type": "dict", "items": [1]})"),
        json::parse(R"({"type": "object", "class": 5, "attrs": {"a": {"type": "int"}}})")}) {
    LossTargetInput in;
    in.tree = tree;
    const LossTarget t = DecideLossTarget(in);
    EXPECT_TRUE(t.expr.empty()) << tree.dump();
    EXPECT_TRUE(t.chosen.empty()) << tree.dump();
  }
  LossTargetInput in;
  in.tree = json::parse(R"({"type": "tuple", "items": [{"type": "tensor", "shape": "x"},
                            {"type": "tensor", "shape": [2, null]}]})");
  const LossTarget t = DecideLossTarget(in);
  EXPECT_EQ(t.expr, "forward_output[0]");
  EXPECT_EQ(t.not_chosen.at(0).shape, "(2, -1)");
}

TEST(LossTarget, LoaderDocOf) {
  EXPECT_EQ(LoaderDocOf("# SPDX-FileCopyrightText: (c) 2025 Someone\n"
                        "# SPDX-License-Identifier: Apache-2.0\n"
                        "\"\"\"\nDETR model loader implementation for object detection.\n\"\"\"\n"
                        "import torch\n"),
            "DETR model loader implementation for object detection.");
  EXPECT_EQ(LoaderDocOf("#!/usr/bin/env python\n# YOLO heads, three scales\n\n"
                        "r'''one line'''\nx = 1\n"),
            "YOLO heads, three scales\none line");
  EXPECT_EQ(LoaderDocOf("import torch\n\"\"\"not the module docstring\"\"\"\n"), "");
  EXPECT_EQ(LoaderDocOf("\"\"\"never closed\n"), "never closed");
}

// --- what PlanUnpack makes of a loss target

TEST(LossTarget, PlanFollowsTheTarget) {
  auto doc = [](json tree, const std::string& task = "") {
    ProbeDoc d;
    d.key = "k";
    d.phase = "structure";
    d.has_output = true;
    d.output_class = tree.value("type", "") == "object" ? tree.value("class", "") : "tuple";
    d.output_module = kHf;
    d.tree = std::move(tree);
    d.has_unpacked = true;
    if (!task.empty()) d.model_info = ProbeDoc::ModelInfo{"M", "", task, "huggingface"};
    return d;
  };
  // One attribute of a named class: a registry line.
  UnpackPlan p =
      PlanUnpack(doc(Obj("SemanticSegmenterOutput", {{"logits", T({1, 3, 8, 8})}})), nullptr);
  EXPECT_EQ(p.kind, UnpackPlan::Kind::kRegistryAdd);
  EXPECT_EQ(p.attr, "logits");
  ASSERT_TRUE(p.loss_target.has_value());
  EXPECT_TRUE(p.review.empty());
  // A family whose full target is two attributes: still a registry line for a named class,
  // naming the family's primary attribute.
  p = PlanUnpack(doc(Obj("QuestionAnsweringModelOutput",
                         {{"start_logits", T({1, 16})}, {"end_logits", T({1, 16})}})),
                 nullptr);
  EXPECT_EQ(p.kind, UnpackPlan::Kind::kRegistryAdd);
  EXPECT_EQ(p.attr, "start_logits");
  // On a shared base class (other models of the class train on another attribute): the
  // family's full target, in an override.
  p = PlanUnpack(
      doc(Obj("BaseModelOutput", {{"start_logits", T({1, 16})}, {"end_logits", T({1, 16})}})),
      nullptr);
  EXPECT_EQ(p.kind, UnpackPlan::Kind::kOverride);
  EXPECT_EQ(p.expr,
            "torch.stack((forward_output.start_logits, forward_output.end_logits), dim=-1)");
  EXPECT_TRUE(p.needs_torch);
  EXPECT_NE(p.why_not_other.find("more than one attribute"), std::string::npos);
  // A shared base class whose target is this model's own: an override, never a registry line.
  p = PlanUnpack(doc(Obj("BaseModelOutputWithPooling",
                         {{"last_hidden_state", T({1, 4, 8})}, {"pooler_output", T({1, 8})}}),
                     "nlp_embed_gen"),
                 nullptr);
  EXPECT_EQ(p.kind, UnpackPlan::Kind::kOverride);
  EXPECT_EQ(p.expr, "forward_output.pooler_output");
  EXPECT_NE(p.why_not_other.find("shared base output"), std::string::npos) << p.why_not_other;
  // The minimal candidate is flagged, and the flag names the alternatives.
  p = PlanUnpack(doc(Tuple({T({2, 3}), T({2, 5})})), nullptr);
  EXPECT_EQ(p.kind, UnpackPlan::Kind::kOverride);
  EXPECT_EQ(p.expr, "forward_output[0]");
  ASSERT_EQ(p.review.size(), 1u);
  EXPECT_EQ(p.review[0],
            "ambiguous loss target: no family rule decided (family unknown); the minimal "
            "candidate `[0]` was taken, alternatives: [1]");
  EXPECT_NE(p.selected.find("; not selected: [1]"), std::string::npos) << p.selected;
  // The docstring of the override says what is selected and what is not.
  EXPECT_NE(RenderOverride(p).find("not selected: [1]."), std::string::npos);
  // The loader's docstring is a family hint.
  p = PlanUnpack(doc(Tuple({T({2, 3}), T({3, 2})})), nullptr,
                 "clip_mini: a text/image contrastive model");
  EXPECT_TRUE(p.review.empty());
  EXPECT_EQ(p.loss_target->family, LossFamily::kContrastive);
}

// --- the checkout's house style (docs/playbooks.md, "Which attribute is registered")

// The house form of tt-forge-models: the whole output to an imported helper, concatenated.
constexpr char kHouseLoader[] = R"(import torch

from ...base import ModelLoader as BaseModelLoader


class ModelLoader(BaseModelLoader):
    def load_model(self, dtype_override=None, **kwargs):
        return None

    def unpack_forward_output(self, fwd_output):
        """Every head gets a gradient."""
        import torch
        from ...tools.utils import extract_tensors_recursive

        tensors = []
        extract_tensors_recursive(fwd_output, tensors)
        if tensors:
            return torch.cat([t.flatten() for t in tensors])
)";

HouseOverride House() {
  auto h = ParseHouseOverride("heads_mini/pytorch/loader.py", kHouseLoader);
  EXPECT_TRUE(h.has_value());
  return h.value_or(HouseOverride{});
}

TEST(HouseStyle, ParsesTheHouseOverride) {
  const HouseOverride h = House();
  EXPECT_EQ(h.line, 10);
  EXPECT_EQ(h.param, "fwd_output");
  EXPECT_EQ(h.helper, "extract_tensors_recursive");
  EXPECT_EQ(h.body, (std::vector<std::string>{
                        "import torch",
                        "from ...tools.utils import extract_tensors_recursive",
                        "tensors = []",
                        "extract_tensors_recursive(fwd_output, tensors)",
                        "if tensors:",
                        "    return torch.cat([t.flatten() for t in tensors])",
                    }));
  EXPECT_EQ(h.Citation(), "heads_mini/pytorch/loader.py:10's override");
  // A helper that returns the list is the same form.
  EXPECT_TRUE(ParseHouseOverride(
      "a/pytorch/loader.py",
      "class ModelLoader:\n    def unpack_forward_output(self, out):\n"
      "        from ...tools.utils import extract_tensors_recursive\n"
      "        return torch.cat([t.flatten() for t in extract_tensors_recursive(out)])\n"));
  // Not the house form: one element, a helper on a part only, no concatenation, or self.
  for (const char* body :
       {"        return out[0]\n",
        "        from ...tools.utils import extract_tensors_recursive\n"
        "        return torch.cat([t.flatten() for t in extract_tensors_recursive(out[1])])\n",
        "        from ...tools.utils import extract_tensors_recursive\n"
        "        return extract_tensors_recursive(out)[0]\n",
        "        from ...tools.utils import extract_tensors_recursive\n"
        "        return torch.cat(extract_tensors_recursive(out)[: self.n])\n"}) {
    SCOPED_TRACE(body);
    EXPECT_FALSE(ParseHouseOverride(
        "a/pytorch/loader.py",
        std::string("class ModelLoader:\n    def unpack_forward_output(self, out):\n") + body));
  }
  EXPECT_FALSE(ParseHouseOverride("a/pytorch/loader.py", "class ModelLoader:\n    pass\n"));
}

TEST(HouseStyle, StatementsAreMovedToAnotherLoader) {
  const HouseOverride h = House();
  // The parameter renamed, the relative import re-anchored at the target's depth.
  auto same = HouseStatementsFor(h, "yolo_mini/pytorch/loader.py", "forward_output");
  ASSERT_TRUE(same.has_value());
  EXPECT_EQ((*same)[1], "from ...tools.utils import extract_tensors_recursive");
  EXPECT_EQ((*same)[3], "extract_tensors_recursive(forward_output, tensors)");
  EXPECT_EQ((*same)[5], "    return torch.cat([t.flatten() for t in tensors])");
  auto deeper = HouseStatementsFor(h, "bert/token_cls/pytorch/loader.py", "forward_output[1]");
  ASSERT_TRUE(deeper.has_value());
  EXPECT_EQ((*deeper)[1], "from ....tools.utils import extract_tensors_recursive");
  EXPECT_EQ((*deeper)[3], "extract_tensors_recursive(forward_output[1], tensors)");
  // An import from the house loader's own model directory does not move.
  HouseOverride local = h;
  local.body[1] = "from ..utils import extract_tensors_recursive";
  EXPECT_FALSE(HouseStatementsFor(local, "yolo_mini/pytorch/loader.py", "forward_output"));
  EXPECT_TRUE(HouseStatementsFor(local, "heads_mini/pytorch/loader.py", "forward_output"));
  // The most common form wins, then the first loader.
  HouseOverride other = h;
  other.loader = "a_mini/pytorch/loader.py";
  other.body.back() = "    return torch.cat([t.reshape(-1) for t in tensors])";
  HouseOverride third = h;
  third.loader = "z_mini/pytorch/loader.py";
  third.param = "out";
  third.body[3] = "extract_tensors_recursive(out, tensors)";
  EXPECT_EQ(ChooseHouseOverride({other, h, third})->loader, "heads_mini/pytorch/loader.py");
  EXPECT_EQ(ChooseHouseOverride({other, h})->loader, "a_mini/pytorch/loader.py");
  EXPECT_FALSE(ChooseHouseOverride({}));
}

// Rule 1: a named class whose family target combines attributes gets a registry line naming
// the attribute the checkout's lines of the family name.
TEST(HouseStyle, NamedCombinationIsARegistryLineNamedAsTheCheckoutNamesIt) {
  const json qa = Obj("BertQuestionAnsweringOutput",
                      {{"start_logits", T({1, 16})}, {"end_logits", T({1, 16})}});
  LossTargetInput in = In(qa);
  LossTarget t = DecideLossTarget(in);
  EXPECT_EQ(t.attr, "start_logits") << "the family's primary attribute";
  EXPECT_TRUE(t.follows.empty());
  EXPECT_NE(t.reason.find("registers no other question answering class"), std::string::npos)
      << t.reason;
  // The checkout registers another QA class with end_logits: that naming is followed.
  in.registry = {{"MiniCausalLMOutput", "logits", 40},
                 {"XLNetQuestionAnsweringSimpleOutput", "end_logits", 44}};
  t = DecideLossTarget(in);
  EXPECT_EQ(t.attr, "end_logits");
  EXPECT_EQ(t.expr, "forward_output.end_logits");
  EXPECT_EQ(t.follows,
            "training_utils.py:44 `_register_attr(\"XLNetQuestionAnsweringSimpleOutput\", "
            "\"end_logits\")`");
  EXPECT_NE(t.reason.find("follows " + t.follows), std::string::npos) << t.reason;
  EXPECT_EQ(Names(t.not_chosen), (std::vector<std::string>{"start_logits"}));
  EXPECT_TRUE(t.by_rule);
  // Detection: a class of no known family that registers a distinctive attribute counts; a
  // language model's `logits` line does not.
  const json det =
      Obj("MiniDetOutput", {{"pred_logits", T({1, 64, 5})}, {"pred_boxes", T({1, 64, 4})}});
  in = In(det, "x.detection.outputs");
  in.registry = {{"MiniCausalLMOutput", "logits", 40}};
  t = DecideLossTarget(in);
  EXPECT_EQ(t.attr, "pred_logits") << "the class logits, the family's primary";
  in.registry.push_back({"MiniBoxesOutput", "pred_boxes", 41});
  t = DecideLossTarget(in);
  EXPECT_EQ(t.attr, "pred_boxes");
  EXPECT_NE(t.follows.find("training_utils.py:41"), std::string::npos);
  // A single-attribute family cites the family's line naming the same attribute.
  in = In(Obj("MiniSequenceClassifierOutput", {{"logits", T({1, 3})}}));
  in.registry = {{"MiniImageClassifierOutput", "logits", 42}};
  t = DecideLossTarget(in);
  EXPECT_EQ(t.attr, "logits");
  EXPECT_EQ(t.follows,
            "training_utils.py:42 `_register_attr(\"MiniImageClassifierOutput\", \"logits\")`");
}

// Rule 2: a bare container of several heads follows the checkout's house-form override.
TEST(HouseStyle, BareContainerOfSeveralHeadsFollowsTheHouseOverride) {
  const json yolo = List(Repeat(3, T({1, 6, 8, 8})));
  LossTargetInput in = In(yolo, "", "cv_object_det");
  LossTarget t = DecideLossTarget(in);
  EXPECT_FALSE(t.house_form) << "no house override in the checkout: the family table";
  EXPECT_EQ(t.expr, "torch.cat([t.flatten(1) for t in forward_output], dim=1)");
  in.house_override = House();
  t = DecideLossTarget(in);
  EXPECT_TRUE(t.house_form);
  EXPECT_EQ(t.expr, "forward_output");
  EXPECT_EQ(t.follows, "heads_mini/pytorch/loader.py:10's override");
  EXPECT_NE(t.reason.find("follows heads_mini/pytorch/loader.py:10's override"), std::string::npos)
      << t.reason;
  EXPECT_EQ(t.chosen.size(), 3u);
  EXPECT_TRUE(t.by_rule);
  // The family table's single pick is overruled: every head of a tuple.
  in = In(Tuple({T({1, 3}), T({1, 6})}), "", "cv_image_cls");
  in.house_override = House();
  t = DecideLossTarget(in);
  EXPECT_TRUE(t.house_form);
  EXPECT_EQ(t.expr, "forward_output");
  EXPECT_NE(t.reason.find("the family table alone would take `[0]`"), std::string::npos)
      << t.reason;
  EXPECT_TRUE(t.not_chosen.empty());
  // YOLO in eval mode: the heads member only, the decoded predictions stay out.
  in = In(Tuple({T({1, 84, 6}), List(Repeat(3, T({1, 6, 8, 8})))}), "", "cv_object_det");
  in.house_override = House();
  t = DecideLossTarget(in);
  EXPECT_TRUE(t.house_form);
  EXPECT_EQ(t.expr, "forward_output[1]");
  EXPECT_EQ(Names(t.not_chosen), (std::vector<std::string>{"[0]"}));
  // An auxiliary head by name stays out: one main tensor, the family's pick.
  in = In(Dict({{"out", T({1, 3, 8, 8})}, {"aux", T({1, 3, 8, 8})}}), "", "cv_image_seg");
  in.house_override = House();
  t = DecideLossTarget(in);
  EXPECT_FALSE(t.house_form);
  EXPECT_EQ(t.expr, "forward_output[\"out\"]");
  // Several main heads next to an auxiliary one: the house form would reduce it too.
  in = In(Dict({{"a", T({1, 3})}, {"b", T({1, 4})}, {"aux", T({1, 3})}}), "", "");
  in.house_override = House();
  t = DecideLossTarget(in);
  EXPECT_FALSE(t.house_form);
  EXPECT_NE(t.reason.find("not in the house form of heads_mini/pytorch/loader.py:10's override"),
            std::string::npos)
      << t.reason;
  // CLIP's tuple at a batch of 2 with 3 texts: the similarity matrices are each other's
  // transpose and the embeddings are per text or per image. They share no batch dimension, so
  // they are not heads of one prediction: the family's pick, not the house form.
  in = In(Tuple({T({2, 3}), T({3, 2}), T({3, 6}), T({2, 6})}), "", "mm_image_text_sim");
  in.house_override = House();
  t = DecideLossTarget(in);
  EXPECT_FALSE(t.house_form);
  EXPECT_EQ(t.expr, "forward_output[0]");
  EXPECT_NE(t.reason.find("do not share their leading (batch) dimension"), std::string::npos)
      << t.reason;
  // A named class whose heads sit in one container member (MGP-STR's three logits): the house
  // form over that member (an override: a registry line cannot name a container).
  in = In(Obj("MgpstrModelOutput",
              {{"logits", Tuple({T({1, 27, 38}), T({1, 27, 50257}), T({1, 27, 30522})})},
               {"attentions", None()}}));
  in.house_override = House();
  t = DecideLossTarget(in);
  EXPECT_TRUE(t.house_form);
  EXPECT_EQ(t.expr, "forward_output.logits");
  EXPECT_TRUE(t.attr.empty());
  // One tensor: nothing to reduce.
  in = In(Tuple({T({1, 3})}), "", "cv_image_cls");
  in.house_override = House();
  EXPECT_FALSE(DecideLossTarget(in).house_form);
}

TEST(HouseStyle, PlanRendersTheHouseForm) {
  ProbeDoc d;
  d.key = "k";
  d.phase = "structure";
  d.has_output = true;
  d.output_class = "list";
  d.output_module = "builtins";
  d.tree = List(Repeat(3, T({1, 6, 8, 8})));
  d.has_unpacked = true;
  const UnpackPlan p = PlanUnpack(d, nullptr, "a detector", House());
  EXPECT_EQ(p.kind, UnpackPlan::Kind::kOverride);
  ASSERT_TRUE(p.house.has_value());
  EXPECT_FALSE(p.needs_torch) << "the house statements import torch themselves";
  EXPECT_NE(p.why_not_other.find("follows heads_mini/pytorch/loader.py:10's override"),
            std::string::npos)
      << p.why_not_other;
  const std::string method = RenderOverride(p, "yolo_mini/pytorch/loader.py");
  EXPECT_NE(method.find("    def unpack_forward_output(self, forward_output):\n"),
            std::string::npos);
  EXPECT_NE(method.find("        \"\"\"\n"
                        "        import torch\n"
                        "        from ...tools.utils import extract_tensors_recursive\n"
                        "        tensors = []\n"
                        "        extract_tensors_recursive(forward_output, tensors)\n"
                        "        if tensors:\n"
                        "            return torch.cat([t.flatten() for t in tensors])\n"),
            std::string::npos)
      << method;
}

}  // namespace
}  // namespace triage::playbooks
