#include "agent/playbooks/unpack_forward_output/loss_target.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "agent/playbooks/unpack_forward_output/loss_internal.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::playbooks {
namespace {

using namespace loss_internal;  // NOLINT(google-build-using-namespace): this file's own parts

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
