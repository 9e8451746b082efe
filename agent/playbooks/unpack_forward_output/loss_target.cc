#include "agent/playbooks/unpack_forward_output/loss_target.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::playbooks {
namespace {

using nlohmann::json;

// The walk stops here: deeper or further tensors are not candidates (the probe itself stops at
// depth 16 and 256 items per container).
constexpr int kMaxDepth = 16;
constexpr std::size_t kMaxLeaves = 4096;
// Alternatives listed one by one inside a partly chosen member, before "n more".
constexpr std::size_t kMaxListed = 8;

// Members read without throwing: absent or of another type reads as null / "".
const json& Member(const json& obj, const char* name) {
  static const json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(name);
  return it != obj.end() ? *it : kNull;
}

std::string Str(const json& obj, const char* name) {
  const json& m = Member(obj, name);
  return m.is_string() ? m.get<std::string>() : "";
}

bool IsTensor(const json& n) { return Str(n, "type") == "tensor"; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool Has(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

bool IsIdentifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::vector<std::int64_t> DimsOf(const json& n) {
  std::vector<std::int64_t> dims;
  const json& s = Member(n, "shape");
  if (!s.is_array()) return dims;
  for (const auto& d : s) dims.push_back(d.is_number_integer() ? d.get<std::int64_t>() : -1);
  return dims;
}

std::string ShapeText(const std::vector<std::int64_t>& dims) {
  return util::StrCat("(", util::StrJoin(dims, ", "), ")");
}

// Names of outputs no training loss reads: attention weights, per-layer hidden states, caches,
// auxiliary heads and their outputs, intermediate and encoder-side states, anchors and reference
// points, losses the model computed itself, nested sub-model outputs.
bool IsAuxName(std::string_view raw) {
  const std::string n = Lower(raw);
  if (n == "aux" || n.starts_with("aux_") || n.starts_with("auxiliary") || Has(n, "_aux")) {
    return true;
  }
  for (std::string_view s :
       {"attention", "hidden_states", "past_key_values", "cache", "loss", "intermediate", "debug",
        "anchor", "reference_points", "model_output"}) {
    if (Has(n, s)) return true;
  }
  if (n == "mems" || n.starts_with("encoder_") || n.starts_with("enc_")) return true;
  // A sub-module's final state (pixel_decoder_last_hidden_state, ...), not the model's own.
  return n != "last_hidden_state" && n.ends_with("last_hidden_state");
}

// Features rather than predictions.
bool IsHiddenName(std::string_view raw) {
  const std::string n = Lower(raw);
  return Has(n, "hidden_state") || Has(n, "embed") || Has(n, "feature") || Has(n, "pooled") ||
         n == "pooler_output";
}

// Names a model's prediction usually has.
bool IsHeadName(std::string_view raw) {
  const std::string n = Lower(raw);
  if (Has(n, "logits") || n.starts_with("pred")) return true;
  for (std::string_view s : {"out", "output", "outputs", "scores", "sample", "reconstruction",
                             "spectrogram", "waveform"}) {
    if (n == s) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// The output as candidates: its top-level members and every tensor under them.

struct Leaf {
  std::string expr;  // forward_output.logits[0]; "" when not expressible (attribute name)
  std::string name;  // the expression after forward_output: logits[0], [1], ["out"]
  std::string key;   // the top-level attribute or dict key ("" for sequence elements)
  std::string last;  // the nearest attribute or dict key on its path ("" when none)
  std::size_t member = 0;
  int depth = 0;  // 0: a top-level member itself, 1: an element of one, ...
  bool aux = false;
  std::vector<std::int64_t> dims;
};

struct TopMember {
  std::string name;  // logits, ["out"], [0]
  std::string key;   // logits, out, "" (sequence element)
  std::string expr;
  const json* node = nullptr;
  bool aux = false;
  std::vector<std::size_t> leaves;
};

struct Output {
  std::string kind;  // object | dict | list | tuple | tensor | ""
  std::vector<TopMember> members;
  std::vector<Leaf> leaves;

  bool Named() const { return kind == "object" || kind == "dict"; }
  bool Sequence() const { return kind == "list" || kind == "tuple"; }
};

std::string Suffix(const std::string& container_kind, const std::string& key, std::size_t index) {
  if (container_kind == "object") return util::StrCat(".", key);
  if (container_kind == "dict") {
    return util::StrCat("[", json(key).dump(-1, ' ', false, json::error_handler_t::replace), "]");
  }
  return util::StrCat("[", index, "]");
}

void Walk(const json& node, const std::string& expr, const std::string& name,
          const std::string& last, bool aux, int depth, std::size_t member, const std::string& key,
          Output& out) {
  if (out.leaves.size() >= kMaxLeaves) return;
  if (IsTensor(node)) {
    out.leaves.push_back({expr, name, key, last, member, depth, aux, DimsOf(node)});
    out.members[member].leaves.push_back(out.leaves.size() - 1);
    return;
  }
  if (depth >= kMaxDepth) return;
  const std::string type = Str(node, "type");
  auto child = [&](const json& n, const std::string& k, std::size_t i, bool is_attr) {
    const std::string suffix = Suffix(type, k, i);
    const bool expressible = !expr.empty() && (!is_attr || IsIdentifier(k));
    const std::string child_name =
        name.empty() && suffix.starts_with(".") ? suffix.substr(1) : name + suffix;
    const bool named = is_attr || type == "dict";
    Walk(n, expressible ? expr + suffix : "", child_name, named ? k : last,
         aux || (named && IsAuxName(k)), depth + 1, member, key, out);
  };
  if (type == "object" || type == "dict") {
    const json& items = Member(node, type == "object" ? "attrs" : "items");
    if (!items.is_object()) return;
    for (auto it = items.begin(); it != items.end(); ++it) {
      child(it.value(), it.key(), 0, type == "object");
    }
  } else if (type == "list" || type == "tuple") {
    const json& items = Member(node, "items");
    if (!items.is_array()) return;
    for (std::size_t i = 0; i < items.size(); ++i) child(items[i], "", i, false);
  }
}

Output Collect(const json& tree) {
  Output out;
  out.kind = Str(tree, "type");
  if (out.kind == "tensor") {
    out.members.push_back({"", "", "forward_output", &tree, false, {}});
    out.leaves.push_back({"forward_output", "", "", "", 0, 0, false, DimsOf(tree)});
    out.members[0].leaves.push_back(0);
    return out;
  }
  auto add = [&](const json& node, const std::string& key, std::size_t index) {
    const std::string suffix = Suffix(out.kind, key, index);
    TopMember m;
    m.name = suffix.starts_with(".") ? suffix.substr(1) : suffix;
    m.key = key;
    const bool expressible = out.kind != "object" || IsIdentifier(key);
    m.expr = expressible ? "forward_output" + suffix : "";
    m.node = &node;
    m.aux = !key.empty() && IsAuxName(key);
    out.members.push_back(std::move(m));
    const TopMember& added = out.members.back();
    const std::size_t member = out.members.size() - 1;
    if (IsTensor(node)) {
      if (out.leaves.size() >= kMaxLeaves) return;
      out.leaves.push_back({added.expr, added.name, key, key, member, 0, added.aux, DimsOf(node)});
      out.members[member].leaves.push_back(out.leaves.size() - 1);
    } else {
      Walk(node, added.expr, added.name, key, added.aux, 0, member, key, out);
    }
  };
  if (out.Named()) {
    const json& items = Member(tree, out.kind == "object" ? "attrs" : "items");
    if (items.is_object()) {
      for (auto it = items.begin(); it != items.end(); ++it) add(it.value(), it.key(), 0);
    }
  } else if (out.Sequence()) {
    const json& items = Member(tree, "items");
    if (items.is_array()) {
      for (std::size_t i = 0; i < items.size(); ++i) add(items[i], "", i);
    }
  }
  return out;
}

// The top-level tensor named key (not auxiliary, expressible), or null.
const Leaf* TopTensor(const Output& o, std::string_view key) {
  for (const auto& l : o.leaves) {
    if (l.depth == 0 && !l.aux && !l.expr.empty() && l.key == key) return &l;
  }
  return nullptr;
}

std::size_t IndexOf(const Output& o, const Leaf* l) {
  return static_cast<std::size_t>(l - o.leaves.data());
}

// ---------------------------------------------------------------------------------------------
// The family

struct FamilySignal {
  LossFamily family = LossFamily::kUnknown;
  std::string from;
};

std::string_view FamilyLabel(LossFamily f) {
  switch (f) {
    case LossFamily::kLanguageModel:
      return "language model";
    case LossFamily::kClassification:
      return "classification";
    case LossFamily::kDetection:
      return "object detection";
    case LossFamily::kSegmentation:
      return "segmentation";
    case LossFamily::kDepth:
      return "depth estimation";
    case LossFamily::kQuestionAnswering:
      return "question answering";
    case LossFamily::kContrastive:
      return "contrastive image-text";
    case LossFamily::kEmbedding:
      return "embedding / retrieval";
    case LossFamily::kFeatures:
      return "feature extraction";
    case LossFamily::kUnknown:
      break;
  }
  return "unknown family";
}

struct Needle {
  std::string_view text;
  LossFamily family;
};

// HuggingFace's naming of head outputs (transformers.modeling_outputs and the models' own).
constexpr Needle kClassNeedles[] = {
    {"QuestionAnswering", LossFamily::kQuestionAnswering},
    {"Segment", LossFamily::kSegmentation},
    {"Detection", LossFamily::kDetection},
    {"Depth", LossFamily::kDepth},
    {"CausalLM", LossFamily::kLanguageModel},
    {"MaskedLM", LossFamily::kLanguageModel},
    {"Seq2SeqLM", LossFamily::kLanguageModel},
    {"LMHead", LossFamily::kLanguageModel},
    {"Classifier", LossFamily::kClassification},
    {"Classification", LossFamily::kClassification},
    {"MultipleChoice", LossFamily::kClassification},
};

// Base (headless) outputs: shared by every model of an architecture and by many architectures,
// so they name the family only when nothing else does.
bool IsSharedBaseClass(std::string_view cls) {
  return cls.starts_with("BaseModelOutput") || cls == "Seq2SeqModelOutput";
}

constexpr Needle kModuleNeedles[] = {
    {"detection", LossFamily::kDetection},
    {"segmentation", LossFamily::kSegmentation},
    {"depth", LossFamily::kDepth},
};

// tt-forge-models' ModelTask values.
constexpr Needle kTasks[] = {
    {"nlp_causal_lm", LossFamily::kLanguageModel},
    {"nlp_masked_lm", LossFamily::kLanguageModel},
    {"nlp_translation", LossFamily::kLanguageModel},
    {"nlp_summarization", LossFamily::kLanguageModel},
    {"mm_causal_lm", LossFamily::kLanguageModel},
    {"mm_masked_lm", LossFamily::kLanguageModel},
    {"mm_image_capt", LossFamily::kLanguageModel},
    {"mm_image_ttt", LossFamily::kLanguageModel},
    {"mm_video_ttt", LossFamily::kLanguageModel},
    {"mm_conditional_generation", LossFamily::kLanguageModel},
    {"conditional_generation", LossFamily::kLanguageModel},
    {"cv_image_to_text", LossFamily::kLanguageModel},
    {"audio_asr", LossFamily::kLanguageModel},
    {"nlp_text_cls", LossFamily::kClassification},
    {"nlp_token_cls", LossFamily::kClassification},
    {"nlp_multi_choice", LossFamily::kClassification},
    {"audio_cls", LossFamily::kClassification},
    {"cv_image_cls", LossFamily::kClassification},
    {"cv_video_cls", LossFamily::kClassification},
    {"cv_object_det", LossFamily::kDetection},
    {"cv_zs_object_det", LossFamily::kDetection},
    {"cv_image_seg", LossFamily::kSegmentation},
    {"cv_panoptic_seg", LossFamily::kSegmentation},
    {"cv_mask_gen", LossFamily::kSegmentation},
    {"cv_depth_est", LossFamily::kDepth},
    {"nlp_qa", LossFamily::kQuestionAnswering},
    {"mm_image_text_sim", LossFamily::kContrastive},
    {"mm_image_text_similarity", LossFamily::kContrastive},
    {"cv_zs_image_cls", LossFamily::kContrastive},
    {"nlp_embed_gen", LossFamily::kEmbedding},
    {"cv_image_fe", LossFamily::kFeatures},
};

// Words of a loader's docstring, most specific first ("zero-shot image classification" is
// contrastive, "detection and classification" detection).
constexpr Needle kDocNeedles[] = {
    {"question answering", LossFamily::kQuestionAnswering},
    {"question-answering", LossFamily::kQuestionAnswering},
    {"contrastive", LossFamily::kContrastive},
    {"image-text", LossFamily::kContrastive},
    {"text-image", LossFamily::kContrastive},
    {"image/text", LossFamily::kContrastive},
    {"text/image", LossFamily::kContrastive},
    {"zero-shot image classification", LossFamily::kContrastive},
    {"detector", LossFamily::kDetection},
    {"detection", LossFamily::kDetection},
    {"segmentation", LossFamily::kSegmentation},
    {"segmenter", LossFamily::kSegmentation},
    {"depth estimation", LossFamily::kDepth},
    {"depth map", LossFamily::kDepth},
    {"monocular depth", LossFamily::kDepth},
    {"language model", LossFamily::kLanguageModel},
    {"speech recognition", LossFamily::kLanguageModel},
    {"translation", LossFamily::kLanguageModel},
    {"summarization", LossFamily::kLanguageModel},
    {"classifier", LossFamily::kClassification},
    {"classification", LossFamily::kClassification},
    {"embedding", LossFamily::kEmbedding},
    {"retrieval", LossFamily::kEmbedding},
    {"sentence similarity", LossFamily::kEmbedding},
    {"feature extractor", LossFamily::kFeatures},
    {"feature extraction", LossFamily::kFeatures},
};

constexpr std::string_view kClassScoreNames[] = {"logits", "pred_logits", "class_logits",
                                                 "cls_logits", "scores"};
constexpr std::string_view kBoxNames[] = {"pred_boxes", "boxes",          "bboxes",
                                          "bbox",       "pred_bbox",      "pred_bboxes",
                                          "bbox_pred",  "box_regression", "bbox_regression"};

// The family the output's own attribute names give (top-level, non-auxiliary tensors).
std::optional<FamilySignal> FamilyFromAttrs(const Output& o) {
  if (!o.Named()) return std::nullopt;
  auto has = [&](std::string_view k) { return TopTensor(o, k) != nullptr; };
  if (has("logits_per_image") || has("logits_per_text")) {
    return FamilySignal{LossFamily::kContrastive, "attribute logits_per_image / logits_per_text"};
  }
  if (has("start_logits") && has("end_logits")) {
    return FamilySignal{LossFamily::kQuestionAnswering, "attributes start_logits and end_logits"};
  }
  for (auto k : kBoxNames) {
    if (has(k)) return FamilySignal{LossFamily::kDetection, util::StrCat("attribute ", k)};
  }
  if (has("predicted_depth")) return FamilySignal{LossFamily::kDepth, "attribute predicted_depth"};
  for (std::string_view k : {"masks_queries_logits", "pred_masks"}) {
    if (has(k)) return FamilySignal{LossFamily::kSegmentation, util::StrCat("attribute ", k)};
  }
  return std::nullopt;
}

// The output's class: the tree's own for an object, else the probe's (list, dict, ...).
std::string ClassOf(const LossTargetInput& in, const Output& o) {
  const std::string tree_class = Str(in.tree, "class");
  return o.kind == "object" && !tree_class.empty() ? tree_class : in.output_class;
}

FamilySignal DecideFamily(const LossTargetInput& in, const Output& o) {
  const std::string cls = ClassOf(in, o);
  if (!IsSharedBaseClass(cls)) {
    for (const auto& n : kClassNeedles) {
      if (Has(cls, n.text)) return {n.family, util::StrCat("output class ", cls)};
    }
  }
  const std::string module = Lower(in.output_module);
  for (const auto& n : kModuleNeedles) {
    if (Has(module, n.text)) return {n.family, util::StrCat("output module ", in.output_module)};
  }
  if (auto s = FamilyFromAttrs(o)) return *s;
  const std::string task = Lower(util::TrimWhitespace(in.task));
  for (const auto& n : kTasks) {
    if (task == n.text) return {n.family, util::StrCat("model_info task ", n.text)};
  }
  const std::string doc = Lower(in.loader_doc);
  for (const auto& n : kDocNeedles) {
    if (Has(doc, n.text)) return {n.family, util::StrCat("loader docstring: \"", n.text, "\"")};
  }
  if (IsSharedBaseClass(cls)) return {LossFamily::kFeatures, util::StrCat("output class ", cls)};
  return {};
}

// ---------------------------------------------------------------------------------------------
// The families' picks

struct Pick {
  std::vector<std::size_t> leaves;  // the tensors the expression reads
  std::string expr;
  std::string attr;
  bool torch = false;
  bool by_rule = true;
  std::string what;  // the rest of the reason sentence
};

std::string Quoted(const Leaf& l) {
  return util::StrCat("`", l.name.empty() ? "forward_output" : l.name, "` ", ShapeText(l.dims));
}

Pick Single(const Output& o, const Leaf& l, std::string_view why) {
  Pick p;
  p.leaves = {IndexOf(o, &l)};
  p.expr = l.expr;
  if (o.kind == "object" && l.depth == 0) p.attr = l.key;
  p.what = util::StrCat(Quoted(l), ", ", why);
  return p;
}

// The top-level non-auxiliary tensors.
std::vector<const Leaf*> TopTensors(const Output& o) {
  std::vector<const Leaf*> out;
  for (const auto& l : o.leaves) {
    if (l.depth == 0 && !l.aux && !l.expr.empty()) out.push_back(&l);
  }
  return out;
}

std::optional<Pick> PickLogits(const Output& o, std::string_view why) {
  if (o.Named()) {
    if (const Leaf* l = TopTensor(o, "logits")) return Single(o, *l, why);
    std::vector<const Leaf*> named;
    for (const Leaf* l : TopTensors(o)) {
      if (Has(Lower(l->key), "logits")) named.push_back(l);
    }
    if (named.size() == 1) return Single(o, *named[0], why);
    return std::nullopt;
  }
  if (o.Sequence() && !o.members.empty() && o.members[0].leaves.size() == 1) {
    const Leaf& l = o.leaves[o.members[0].leaves[0]];
    if (l.depth == 0 && !l.expr.empty()) {
      return Single(o, l, util::StrCat(why, " (a tuple output leads with the prediction)"));
    }
  }
  return std::nullopt;
}

// Per-scale head tensors: at least two, of one rank (3 to 5), batch and channel (rank 4: dim 1;
// ranks 3 and 5: the last dim, the per-anchor predictions).
bool IsHeadPyramid(const std::vector<const Leaf*>& ls) {
  if (ls.size() < 2) return false;
  const auto& f = ls[0]->dims;
  if (f.size() < 3 || f.size() > 5) return false;
  const std::size_t channel = f.size() == 4 ? 1 : f.size() - 1;
  return std::all_of(ls.begin(), ls.end(), [&](const Leaf* l) {
    return l->dims.size() == f.size() && l->dims[0] == f[0] && l->dims[channel] == f[channel];
  });
}

// The per-scale heads ls of the container container_expr, flattened and concatenated; nullopt
// when they are not a head pyramid.
std::optional<Pick> PyramidOf(const Output& o, const std::string& container_expr,
                              const std::vector<const Leaf*>& ls, std::string_view where) {
  if (container_expr.empty() || !IsHeadPyramid(ls)) return std::nullopt;
  Pick p;
  for (const Leaf* l : ls) p.leaves.push_back(IndexOf(o, l));
  p.expr = util::StrCat("torch.cat([t.flatten(1) for t in ", container_expr, "], dim=1)");
  p.torch = true;
  std::vector<std::string> shapes;
  for (const Leaf* l : ls) shapes.push_back(ShapeText(l->dims));
  p.what = util::StrCat("the ", ls.size(), " per-scale detection-head tensors", where, " (",
                        util::StrJoin(shapes, ", "),
                        "), flattened and concatenated: the class and box outputs the detection "
                        "loss reads");
  return p;
}

std::optional<Pick> PickDetection(const Output& o) {
  if (o.Named()) {
    const Leaf* cls = nullptr;
    const Leaf* box = nullptr;
    for (auto k : kClassScoreNames) {
      if (!cls) cls = TopTensor(o, k);
    }
    for (auto k : kBoxNames) {
      if (!box) box = TopTensor(o, k);
    }
    if (cls && box) {
      Pick p;
      p.leaves = {IndexOf(o, cls), IndexOf(o, box)};
      const auto& a = cls->dims;
      const auto& b = box->dims;
      const bool same_lead =
          a.size() == b.size() && a.size() >= 2 && std::equal(a.begin(), a.end() - 1, b.begin());
      p.expr = same_lead ? util::StrCat("torch.cat((", cls->expr, ", ", box->expr, "), dim=-1)")
                         : util::StrCat("torch.cat((", cls->expr, ".flatten(1), ", box->expr,
                                        ".flatten(1)), dim=1)");
      p.torch = true;
      p.what = util::StrCat("the class logits ", Quoted(*cls), " and the boxes ", Quoted(*box),
                            ", concatenated: what the detection loss matches against the targets");
      return p;
    }
    if (cls || box) {
      return Single(o, cls ? *cls : *box, "the one detection-head tensor of the output");
    }
    // A member holding the per-scale heads.
    for (const auto& m : o.members) {
      if (m.aux || m.expr.empty() || Str(*m.node, "type") == "tensor") continue;
      std::vector<const Leaf*> ls;
      for (auto i : m.leaves) ls.push_back(&o.leaves[i]);
      const bool direct =
          std::all_of(ls.begin(), ls.end(), [](const Leaf* l) { return l->depth == 1; });
      if (!direct) continue;
      if (auto p = PyramidOf(o, m.expr, ls, util::StrCat(" of `", m.name, "`"))) return p;
    }
    return std::nullopt;
  }
  if (!o.Sequence()) return std::nullopt;
  // The output is the list of heads, or holds it (YOLO in eval mode: (decoded, [heads])).
  std::vector<const Leaf*> top;
  bool all_tensors = !o.members.empty();
  for (const auto& m : o.members) {
    if (m.leaves.size() != 1 || o.leaves[m.leaves[0]].depth != 0) {
      all_tensors = false;
      break;
    }
    top.push_back(&o.leaves[m.leaves[0]]);
  }
  if (all_tensors) return PyramidOf(o, "forward_output", top, "");
  for (const auto& m : o.members) {
    const std::string type = Str(*m.node, "type");
    if (type != "list" && type != "tuple") continue;
    std::vector<const Leaf*> ls;
    for (auto i : m.leaves) ls.push_back(&o.leaves[i]);
    if (!std::all_of(ls.begin(), ls.end(), [](const Leaf* l) { return l->depth == 1; })) continue;
    if (auto p = PyramidOf(o, m.expr, ls, util::StrCat(" of `", m.name, "`"))) return p;
  }
  return std::nullopt;
}

std::int64_t Spatial(const Leaf& l) {
  const auto& d = l.dims;
  if (d.size() < 2) return 0;
  const std::int64_t h = d[d.size() - 2];
  const std::int64_t w = d[d.size() - 1];
  return h > 0 && w > 0 ? h * w : 0;
}

// Per-pixel tensors: top-level, not auxiliary, not features; rank 4 or more (B, C|queries, H, W),
// or rank 3 when named a mask or segmentation.
std::vector<const Leaf*> PerPixel(const Output& o) {
  std::vector<const Leaf*> out;
  for (const Leaf* l : TopTensors(o)) {
    if (IsHiddenName(l->key)) continue;
    const std::string k = Lower(l->key);
    const bool masky = Has(k, "mask") || Has(k, "seg");
    if ((l->dims.size() >= 4 || (l->dims.size() == 3 && masky)) && Spatial(*l) > 1) {
      out.push_back(l);
    }
  }
  return out;
}

std::optional<Pick> PickSegmentation(const Output& o) {
  std::vector<const Leaf*> c = PerPixel(o);
  if (c.empty()) return std::nullopt;
  // The finest resolution, then logits over masks over other prediction names.
  auto rank = [](const Leaf* l) {
    const std::string k = Lower(l->key);
    return Has(k, "logits") ? 0 : Has(k, "mask") ? 1 : IsHeadName(k) ? 2 : 3;
  };
  std::int64_t best = 0;
  for (const Leaf* l : c) best = std::max(best, Spatial(*l));
  std::erase_if(c, [&](const Leaf* l) { return Spatial(*l) != best; });
  int best_rank = 3;
  for (const Leaf* l : c) best_rank = std::min(best_rank, rank(l));
  std::erase_if(c, [&](const Leaf* l) { return rank(l) != best_rank; });
  Pick p = Single(o, *c[0], "the per-pixel logits the segmentation loss reads");
  if (c.size() > 1) {
    p.by_rule = false;
    p.what = util::StrCat(Quoted(*c[0]), ", the first of ", c.size(),
                          " per-pixel tensors of the same resolution");
  }
  return p;
}

std::optional<Pick> PickDepth(const Output& o) {
  const std::string why = "the regressed depth map the depth loss reads";
  if (const Leaf* l = TopTensor(o, "predicted_depth")) return Single(o, *l, why);
  std::vector<const Leaf*> named;
  std::vector<const Leaf*> maps;
  for (const Leaf* l : TopTensors(o)) {
    const std::string k = Lower(l->key);
    if (Has(k, "depth") || Has(k, "disparity")) named.push_back(l);
    if (!IsHiddenName(k) && l->dims.size() >= 3 && Spatial(*l) > 1) maps.push_back(l);
  }
  if (named.size() == 1) return Single(o, *named[0], why);
  if (named.empty() && maps.size() == 1) return Single(o, *maps[0], why);
  return std::nullopt;
}

std::optional<Pick> PickQuestionAnswering(const Output& o) {
  const Leaf* start = nullptr;
  const Leaf* end = nullptr;
  if (o.Named()) {
    start = TopTensor(o, "start_logits");
    end = TopTensor(o, "end_logits");
  } else if (o.Sequence() && o.members.size() >= 2) {
    auto top = [&](std::size_t i) -> const Leaf* {
      const auto& m = o.members[i];
      if (m.leaves.size() != 1) return nullptr;
      const Leaf& l = o.leaves[m.leaves[0]];
      return l.depth == 0 && l.dims.size() == 2 ? &l : nullptr;
    };
    start = top(0);
    end = top(1);
  }
  if (!start || !end || start->dims != end->dims) return std::nullopt;
  Pick p;
  p.leaves = {IndexOf(o, start), IndexOf(o, end)};
  p.expr = util::StrCat("torch.stack((", start->expr, ", ", end->expr, "), dim=-1)");
  p.torch = true;
  p.what = util::StrCat("the start logits ", Quoted(*start), " and the end logits ", Quoted(*end),
                        ", stacked: the span loss reads both (the head's (..., 2) output)");
  return p;
}

std::optional<Pick> PickContrastive(const Output& o) {
  const std::string why =
      "the image-text similarity matrix the contrastive loss reads (logits_per_image is its "
      "transpose)";
  if (o.Named()) {
    if (const Leaf* l = TopTensor(o, "logits_per_text")) return Single(o, *l, why);
    if (const Leaf* l = TopTensor(o, "logits_per_image")) return Single(o, *l, why);
    return std::nullopt;
  }
  if (!o.Sequence()) return std::nullopt;
  // Unnamed: the first pair of matrices where one is the other transposed.
  std::vector<const Leaf*> mats;
  for (const auto& m : o.members) {
    if (m.leaves.size() != 1) continue;
    const Leaf& l = o.leaves[m.leaves[0]];
    if (l.depth == 0 && l.dims.size() == 2) mats.push_back(&l);
  }
  for (std::size_t i = 0; i < mats.size(); ++i) {
    for (std::size_t j = i + 1; j < mats.size(); ++j) {
      const auto& a = mats[i]->dims;
      const auto& b = mats[j]->dims;
      if (a[0] == b[1] && a[1] == b[0]) {
        return Single(o, *mats[i],
                      util::StrCat("one of the two similarity matrices (", mats[j]->name,
                                   " is its transpose): the contrastive loss reads either"));
      }
    }
  }
  return std::nullopt;
}

std::optional<Pick> PickEmbedding(const Output& o, const std::string& cls) {
  if (o.Named()) {
    const Leaf* l = TopTensor(o, "pooler_output");
    if (!l) {
      std::vector<const Leaf*> named;
      for (const Leaf* t : TopTensors(o)) {
        const std::string k = Lower(t->key);
        if ((Has(k, "embed") || Has(k, "pooled")) && t->dims.size() == 2) named.push_back(t);
      }
      if (named.size() == 1) l = named[0];
    }
    if (l) {
      Pick p = Single(o, *l, "the pooled embedding a retrieval or similarity loss compares");
      if (IsSharedBaseClass(cls)) {
        p.what += util::StrCat("; other models of ", cls, " train on last_hidden_state");
      }
      return p;
    }
    if (const Leaf* h = TopTensor(o, "last_hidden_state")) {
      return Single(o, *h, "the token embeddings (the output has no pooled embedding)");
    }
    return std::nullopt;
  }
  if (o.Sequence()) {
    for (const auto& m : o.members) {
      if (m.leaves.size() != 1) continue;
      const Leaf& l = o.leaves[m.leaves[0]];
      if (l.depth == 0 && l.dims.size() == 2) {
        return Single(o, l, "the pooled embedding (the first (batch, dim) tensor of the tuple)");
      }
    }
  }
  return std::nullopt;
}

std::optional<Pick> PickFeatures(const Output& o) {
  const std::string why = "the encoder's features, what a loss on a feature extractor reads";
  if (o.Named()) {
    if (const Leaf* l = TopTensor(o, "last_hidden_state")) return Single(o, *l, why);
    return std::nullopt;
  }
  if (o.Sequence() && !o.members.empty() && o.members[0].leaves.size() == 1) {
    const Leaf& l = o.leaves[o.members[0].leaves[0]];
    if (l.depth == 0 && l.dims.size() >= 2) return Single(o, l, why);
  }
  return std::nullopt;
}

std::optional<Pick> PickForFamily(LossFamily f, const Output& o, const std::string& cls) {
  switch (f) {
    case LossFamily::kLanguageModel:
      return PickLogits(o, "the token logits the language-model loss reads");
    case LossFamily::kClassification:
      return PickLogits(o, "the class logits the classification loss reads");
    case LossFamily::kDetection:
      return PickDetection(o);
    case LossFamily::kSegmentation:
      return PickSegmentation(o);
    case LossFamily::kDepth:
      return PickDepth(o);
    case LossFamily::kQuestionAnswering:
      return PickQuestionAnswering(o);
    case LossFamily::kContrastive:
      return PickContrastive(o);
    case LossFamily::kEmbedding:
      return PickEmbedding(o, cls);
    case LossFamily::kFeatures:
      return PickFeatures(o);
    case LossFamily::kUnknown:
      break;
  }
  return std::nullopt;
}

// Without a family pick: the only tensor, the only non-auxiliary tensor, else the minimal
// candidate (one tensor: top-level before nested, prediction names before others, features
// last, then the output's order), which needs review.
std::optional<Pick> PickGeneric(const Output& o) {
  std::vector<const Leaf*> all;
  for (const auto& l : o.leaves) {
    if (!l.expr.empty()) all.push_back(&l);
  }
  if (all.empty()) return std::nullopt;
  if (all.size() == 1) return Single(o, *all[0], "the output's only tensor");
  std::vector<const Leaf*> main;
  for (const Leaf* l : all) {
    if (!l->aux) main.push_back(l);
  }
  if (main.size() == 1) {
    return Single(o, *main[0],
                  "the output's only tensor that is not an auxiliary output (attentions, hidden "
                  "states, caches, auxiliary heads)");
  }
  const std::vector<const Leaf*>& pool = main.empty() ? all : main;
  auto key = [](const Leaf* l) {
    const std::string_view name = l->last;
    const int kind = IsHeadName(name) ? 0 : IsHiddenName(name) ? 2 : 1;
    return std::make_tuple(l->depth > 0 ? 1 : 0, kind);
  };
  const Leaf* best = *std::min_element(
      pool.begin(), pool.end(), [&](const Leaf* a, const Leaf* b) { return key(a) < key(b); });
  Pick p = Single(o, *best, "the minimal candidate: one tensor, not a combination of the others");
  p.by_rule = false;
  return p;
}

// What a container member holds: "tuple of 3 tensors (1, 4, 7), (1, 4, 9), …".
std::string Holds(const Output& o, const TopMember& m) {
  std::string type = Str(*m.node, "type");
  if (type == "object") type = Str(*m.node, "class");
  std::vector<std::string> shapes;
  bool more = false;
  for (auto i : m.leaves) {
    std::string s = ShapeText(o.leaves[i].dims);
    if (std::find(shapes.begin(), shapes.end(), s) != shapes.end()) continue;
    if (shapes.size() == 3) {
      more = true;
      break;
    }
    shapes.push_back(std::move(s));
  }
  return util::StrCat(type, " of ", m.leaves.size(),
                      m.leaves.size() == 1 ? " tensor " : " tensors ", util::StrJoin(shapes, ", "),
                      more ? ", …" : "");
}

std::vector<LossCandidate> NotChosen(const Output& o, const std::set<std::size_t>& chosen) {
  std::vector<LossCandidate> out;
  for (const auto& m : o.members) {
    if (m.leaves.empty()) continue;
    const bool any = std::any_of(m.leaves.begin(), m.leaves.end(),
                                 [&](std::size_t i) { return chosen.count(i) > 0; });
    if (!any) {
      const bool tensor = m.leaves.size() == 1 && o.leaves[m.leaves[0]].depth == 0;
      out.push_back({m.name, tensor ? ShapeText(o.leaves[m.leaves[0]].dims) : Holds(o, m)});
      continue;
    }
    std::size_t listed = 0;
    std::size_t rest = 0;
    for (auto i : m.leaves) {
      if (chosen.count(i)) continue;
      if (listed < kMaxListed) {
        out.push_back({o.leaves[i].name, ShapeText(o.leaves[i].dims)});
        ++listed;
      } else {
        ++rest;
      }
    }
    if (rest > 0) out.push_back({util::StrCat(m.name, " …"), util::StrCat(rest, " more tensors")});
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The checkout's house style (docs/playbooks.md, "Which attribute is registered")

// The family an output class's name gives (the class needles; none for a shared base class).
LossFamily FamilyOfClass(std::string_view cls) {
  if (IsSharedBaseClass(cls)) return LossFamily::kUnknown;
  for (const auto& n : kClassNeedles) {
    if (Has(cls, n.text)) return n.family;
  }
  return LossFamily::kUnknown;
}

// The single attributes a registry line can name for a family whose loss target combines
// several (question answering's two ends, detection's class logits and boxes), primary first.
std::vector<std::string_view> SingleAttrsOf(LossFamily f) {
  std::vector<std::string_view> out;
  if (f == LossFamily::kQuestionAnswering) {
    out = {"start_logits", "end_logits"};
  } else if (f == LossFamily::kDetection) {
    out.assign(std::begin(kClassScoreNames), std::end(kClassScoreNames));
    out.insert(out.end(), std::begin(kBoxNames), std::end(kBoxNames));
  }
  return out;
}

// Attribute names only that family's outputs carry (a line for a class of no known family
// counts for the family when it registers one of them).
bool IsDistinctiveAttr(LossFamily f, std::string_view attr) {
  if (f == LossFamily::kQuestionAnswering) return attr == "start_logits" || attr == "end_logits";
  if (f == LossFamily::kDetection) {
    const bool class_scores = attr != "logits" && attr != "scores" &&
                              std::find(std::begin(kClassScoreNames), std::end(kClassScoreNames),
                                        attr) != std::end(kClassScoreNames);
    return class_scores ||
           std::find(std::begin(kBoxNames), std::end(kBoxNames), attr) != std::end(kBoxNames);
  }
  return false;
}

std::string CiteLine(const LossTargetInput::RegistryLine& l) {
  return util::StrCat("training_utils.py:", l.line, " `_register_attr(\"", l.cls, "\", \"", l.attr,
                      "\")`");
}

// The existing registry lines of the family with an attribute this output has as a top-level
// tensor: the attribute most of them name (then the earliest line), and the first line naming
// it.
std::optional<std::pair<std::string, const LossTargetInput::RegistryLine*>> HouseAttr(
    const LossTargetInput& in, const Output& o, LossFamily family,
    const std::vector<std::string_view>& allowed) {
  std::map<std::string, std::pair<int, const LossTargetInput::RegistryLine*>> uses;
  for (const auto& l : in.registry) {
    const LossFamily f = FamilyOfClass(l.cls);
    const bool same =
        f == family || (f == LossFamily::kUnknown && IsDistinctiveAttr(family, l.attr));
    if (!same || !TopTensor(o, l.attr)) continue;
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), l.attr) == allowed.end()) {
      continue;
    }
    auto& u = uses[l.attr];
    ++u.first;
    if (u.second == nullptr || l.line < u.second->line) u.second = &l;
  }
  if (uses.empty()) return std::nullopt;
  auto best = uses.begin();
  for (auto it = uses.begin(); it != uses.end(); ++it) {
    if (it->second.first > best->second.first ||
        (it->second.first == best->second.first &&
         it->second.second->line < best->second.second->line)) {
      best = it;
    }
  }
  return std::make_pair(best->first, best->second.second);
}

// Rule 1: a named output whose family target combines several attributes gets the one
// attribute a registry line can name: the one the checkout's lines of the family name, else the
// family's primary (question answering: start_logits; detection: the class logits).
std::optional<Pick> RegistryAttrPick(const LossTargetInput& in, const Output& o, LossFamily family,
                                     const Pick& combined, const std::string& cls,
                                     std::string* follows) {
  const std::vector<std::string_view> singles = SingleAttrsOf(family);
  if (singles.empty() || !o.Named() || o.kind != "object" || combined.leaves.size() < 2) {
    return std::nullopt;
  }
  for (auto i : combined.leaves) {
    if (o.leaves[i].depth != 0) return std::nullopt;  // a container member: no registry line
  }
  const Leaf* chosen = nullptr;
  std::string why;
  if (auto house = HouseAttr(in, o, family, singles)) {
    chosen = TopTensor(o, house->first);
    *follows = CiteLine(*house->second);
    why = util::StrCat("named as the checkout's registry lines of the family name it: follows ",
                       *follows);
  } else {
    for (auto k : singles) {
      if (!chosen) chosen = TopTensor(o, k);
    }
    why =
        util::StrCat("the family's primary single attribute (training_utils.py registers no other ",
                     FamilyLabel(family), " class to follow)");
  }
  if (!chosen) return std::nullopt;
  Pick p = Single(o, *chosen, "");
  p.what =
      util::StrCat(Quoted(*chosen), ", one attribute so that a registry line (global for ", cls,
                   ") fixes every loader returning the class, ", why, "; the family's full target ",
                   combined.expr, " would be a per-loader override");
  return p;
}

// Whether tensors are heads of one prediction: each predicts for every sample, so they share
// the leading (batch) dimension. A similarity matrix and its transpose, or per-text embeddings
// next to per-image ones, do not: reducing them all would train on what the loss never reads.
bool SameBatch(const Output& o, const std::vector<std::size_t>& leaves) {
  if (leaves.empty()) return false;
  for (std::size_t i : leaves) {
    if (o.leaves[i].dims.empty() || o.leaves[i].dims[0] != o.leaves[leaves[0]].dims[0]) {
      return false;
    }
  }
  return true;
}

std::optional<std::string> HouseExprOf(const Output& o, const Pick& pick, std::string* skipped);

// Rule 2: the part of the output the house-form override reduces (the whole output, or the one
// member holding the heads), or nullopt with why not in *skipped. Only heads of one prediction
// (SameBatch) are reduced together.
std::optional<std::string> HouseExpr(const Output& o, const Pick& pick, std::string* skipped) {
  std::optional<std::string> sub = HouseExprOf(o, pick, skipped);
  if (!sub) return sub;
  std::vector<std::size_t> leaves;
  for (std::size_t i = 0; i < o.leaves.size(); ++i) {
    const std::string& e = o.leaves[i].expr;
    if (*sub == "forward_output" || e == *sub || e.starts_with(*sub + "[") ||
        e.starts_with(*sub + ".")) {
      leaves.push_back(i);
    }
  }
  if (!SameBatch(o, leaves)) {
    *skipped = util::StrCat("the tensors of `", *sub,
                            "` do not share their leading (batch) dimension, so they are not "
                            "heads of one prediction");
    return std::nullopt;
  }
  return sub;
}

std::optional<std::string> HouseExprOf(const Output& o, const Pick& pick, std::string* skipped) {
  auto any_aux = [&](const std::vector<std::size_t>& leaves) {
    return std::any_of(leaves.begin(), leaves.end(),
                       [&](std::size_t i) { return o.leaves[i].aux; });
  };
  std::vector<std::size_t> all;
  for (std::size_t i = 0; i < o.leaves.size(); ++i) all.push_back(i);
  if (pick.leaves.size() >= 2) {
    // The heads the family combines: the output's own elements, or one member's.
    const std::size_t member = o.leaves[pick.leaves[0]].member;
    const bool top = std::all_of(pick.leaves.begin(), pick.leaves.end(),
                                 [&](std::size_t i) { return o.leaves[i].depth == 0; });
    const bool one_member = std::all_of(pick.leaves.begin(), pick.leaves.end(), [&](std::size_t i) {
      return o.leaves[i].depth == 1 && o.leaves[i].member == member;
    });
    if (top && !o.Named()) {
      if (!any_aux(all)) return std::string("forward_output");
      *skipped = "it would reduce the output's auxiliary members too";
      return std::nullopt;
    }
    if (one_member && !o.members[member].expr.empty() && !any_aux(o.members[member].leaves)) {
      return o.members[member].expr;
    }
    return std::nullopt;
  }
  if (o.kind == "object") {
    // A named class: only a container member holding the picked head and others beside it.
    const Leaf& l = o.leaves[pick.leaves[0]];
    const TopMember& m = o.members[l.member];
    if (l.depth == 0 || m.aux || m.expr.empty() || m.leaves.size() < 2 || any_aux(m.leaves)) {
      return std::nullopt;
    }
    return m.expr;
  }
  std::vector<const TopMember*> main;
  std::size_t tensors = 0;
  for (const auto& m : o.members) {
    if (m.aux || m.leaves.empty()) continue;
    main.push_back(&m);
    tensors += m.leaves.size();
  }
  if (tensors < 2) return std::nullopt;  // one head: nothing to reduce
  if (!any_aux(all)) return std::string("forward_output");
  if (main.size() == 1 && !main[0]->expr.empty() && !any_aux(main[0]->leaves)) {
    return main[0]->expr;
  }
  *skipped =
      "it reduces one container, and the heads here sit next to auxiliary outputs it would "
      "reduce too";
  return std::nullopt;
}

}  // namespace

std::string_view LossFamilyName(LossFamily family) {
  switch (family) {
    case LossFamily::kLanguageModel:
      return "language_model";
    case LossFamily::kClassification:
      return "classification";
    case LossFamily::kDetection:
      return "detection";
    case LossFamily::kSegmentation:
      return "segmentation";
    case LossFamily::kDepth:
      return "depth";
    case LossFamily::kQuestionAnswering:
      return "question_answering";
    case LossFamily::kContrastive:
      return "contrastive";
    case LossFamily::kEmbedding:
      return "embedding";
    case LossFamily::kFeatures:
      return "features";
    case LossFamily::kUnknown:
      break;
  }
  return "unknown";
}

LossTarget DecideLossTarget(const LossTargetInput& in) {
  LossTarget t;
  const Output o = Collect(in.tree);
  const FamilySignal family = DecideFamily(in, o);
  t.family = family.family;
  t.family_from = family.from;
  const std::string cls = ClassOf(in, o);
  const std::string family_text =
      family.family == LossFamily::kUnknown
          ? std::string("no model family is known")
          : util::StrCat(FamilyLabel(family.family), " (", family.from, ")");
  std::optional<Pick> pick = PickForFamily(family.family, o, cls);
  std::string lead = family_text;
  if (!pick) {
    pick = PickGeneric(o);
    if (family.family != LossFamily::kUnknown) {
      lead += ", but the output has none of the family's loss tensors";
    }
  }
  if (!pick) {
    t.reason = util::StrCat(family_text, "; the output holds no tensor");
    return t;
  }
  // The checkout's house style (docs/playbooks.md, "Which attribute is registered").
  std::string house_note;
  if (auto single = IsSharedBaseClass(cls)
                        ? std::nullopt
                        : RegistryAttrPick(in, o, family.family, *pick, cls, &t.follows)) {
    pick = std::move(single);
  } else if (in.house_override &&
             (o.kind != "object" || pick->leaves.size() >= 2 ||
              (pick->leaves.size() == 1 && o.leaves[pick->leaves[0]].depth > 0))) {
    std::string skipped;
    if (auto sub = HouseExpr(o, *pick, &skipped)) {
      Pick h;
      for (std::size_t i = 0; i < o.leaves.size(); ++i) {
        const std::string& e = o.leaves[i].expr;
        if (*sub == "forward_output" || e == *sub || e.starts_with(*sub + "[") ||
            e.starts_with(*sub + ".")) {
          h.leaves.push_back(i);
        }
      }
      h.expr = *sub;
      h.torch = true;
      std::vector<std::string> shapes;
      for (auto i : h.leaves) shapes.push_back(ShapeText(o.leaves[i].dims));
      t.follows = in.house_override->Citation();
      t.house_form = true;
      h.what =
          util::StrCat("every tensor of `", *sub, "` (", util::StrJoin(shapes, ", "),
                       "), flattened and concatenated the way the checkout's overrides reduce "
                       "an output of several heads, so that every head gets a gradient: follows ",
                       t.follows);
      if (pick->leaves.size() == 1) {
        h.what += util::StrCat(" (the family table alone would take ",
                               Quoted(o.leaves[pick->leaves[0]]), ")");
      }
      pick = std::move(h);
    } else if (!skipped.empty()) {
      house_note =
          util::StrCat("; not in the house form of ", in.house_override->Citation(), ": ", skipped);
    }
  } else if (o.kind == "object" && !pick->attr.empty()) {
    // A single attribute: cite a line of the family that names the same one.
    const LossFamily f = FamilyOfClass(cls);
    if (f != LossFamily::kUnknown) {
      for (const auto& l : in.registry) {
        if (l.attr == pick->attr && FamilyOfClass(l.cls) == f && l.cls != cls) {
          t.follows = CiteLine(l);
          house_note = util::StrCat("; as ", t.follows);
          break;
        }
      }
    }
  }
  t.expr = pick->expr;
  t.attr = pick->attr;
  t.needs_torch = pick->torch;
  t.by_rule = pick->by_rule || t.house_form;
  t.per_loader = IsSharedBaseClass(cls) && !t.attr.empty() && t.attr != "last_hidden_state";
  t.reason = util::StrCat(lead, ": ", pick->what, house_note);
  std::set<std::size_t> chosen(pick->leaves.begin(), pick->leaves.end());
  for (auto i : pick->leaves) t.chosen.push_back({o.leaves[i].name, ShapeText(o.leaves[i].dims)});
  t.not_chosen = NotChosen(o, chosen);
  return t;
}

std::string LoaderDocOf(std::string_view loader_text) {
  std::string comments;
  std::string doc;
  const auto lines = util::SplitLines(loader_text);
  std::size_t i = 0;
  for (; i < lines.size(); ++i) {
    std::string_view line = util::TrimWhitespace(lines[i]);
    if (line.empty()) continue;
    if (!line.starts_with("#")) break;
    line = util::TrimWhitespace(line.substr(1));
    const std::string lower = Lower(line);
    if (line.starts_with("!") || Has(lower, "spdx") || Has(lower, "copyright") ||
        Has(lower, "coding:") || Has(lower, "coding=")) {
      continue;
    }
    util::StrAppend(&comments, comments.empty() ? "" : "\n", line);
  }
  if (i < lines.size()) {
    std::string_view first = util::TrimWhitespace(lines[i]);
    if (first.starts_with("r") || first.starts_with("R")) first.remove_prefix(1);
    for (std::string_view quote : {"\"\"\"", "'''"}) {
      if (!first.starts_with(quote)) continue;
      std::string_view rest = first.substr(quote.size());
      for (;;) {
        if (auto end = rest.find(quote); end != std::string_view::npos) {
          util::StrAppend(&doc, rest.substr(0, end));
          break;
        }
        util::StrAppend(&doc, rest, "\n");
        if (++i >= lines.size()) break;
        rest = lines[i];
      }
      break;
    }
  }
  std::string out = util::StrCat(comments, comments.empty() || doc.empty() ? "" : "\n", doc);
  return std::string(util::TrimWhitespace(out));
}

}  // namespace triage::playbooks
