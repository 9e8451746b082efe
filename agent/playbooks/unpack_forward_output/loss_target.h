#pragma once

// The loss target of a forward output: which tensor(s) unpack_forward_output returns for
// training (docs/playbooks.md, "Which attribute is registered"). A pure function of what is known
// offline: the CPU probe's output tree and class, the loader's model_info task and its docstring.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/playbooks/unpack_forward_output/house_style.h"
#include "nlohmann/json.hpp"

namespace triage::playbooks {

// The model families of the table in docs/playbooks.md.
enum class LossFamily {
  kUnknown,
  kLanguageModel,      // causal / masked / seq2seq LMs, speech recognition: logits
  kClassification,     // image, text, token, audio classification, multiple choice: logits
  kDetection,          // class logits + boxes, or per-scale head tensors, concatenated
  kSegmentation,       // the per-pixel logits
  kDepth,              // the regressed depth map
  kQuestionAnswering,  // start and end logits, stacked
  kContrastive,        // image-text similarity: one similarity matrix
  kEmbedding,          // retrieval / sentence embeddings: the pooled embedding
  kFeatures,           // encoder-only feature extractors: last_hidden_state
};

// "detection", "question_answering", ... ("unknown" for kUnknown).
std::string_view LossFamilyName(LossFamily family);

// What the decision reads.
struct LossTargetInput {
  std::string output_class;   // type(output).__name__
  std::string output_module;  // type(output).__module__
  nlohmann::json tree;        // the probe's NODE of the forward output (docs/probe.md)
  std::string task;           // the loader's model_info task ("" when unknown)
  std::string loader_doc;     // the loader's docstring and leading comments ("" when unknown)
  // The checkout's house style: training_utils.py's registry lines (line 1-based) and the
  // house-form override other loaders of the checkout carry (ChooseHouseOverride), if any.
  struct RegistryLine {
    std::string cls;
    std::string attr;
    int line = 0;
  };
  std::vector<RegistryLine> registry;
  std::optional<HouseOverride> house_override;
};

// A tensor, or a member holding tensors, of the forward output.
struct LossCandidate {
  std::string name;   // as written after forward_output: logits, [0], ["out"], logits[1]
  std::string shape;  // (1, 100, 4); for a container what it holds: "tuple of 3 tensors (1, 8)"
};

struct LossTarget {
  LossFamily family = LossFamily::kUnknown;
  std::string family_from;  // what named the family: "output class X", "model_info task y", ...
  // The expression unpack_forward_output returns ("forward_output.logits", "torch.cat(...)");
  // "" when the output holds no tensor.
  std::string expr;
  // The attribute when the target is one top-level attribute of a named output (a registry line
  // can express it); "" otherwise.
  std::string attr;
  bool needs_torch = false;
  // true: a family rule (or the output's only candidate) decided; false: the minimal candidate
  // was taken and the choice needs a person.
  bool by_rule = false;
  // The target holds for this model, not for every model of its output class (a shared base
  // class such as BaseModelOutputWithPooling): an override, never a registry line.
  bool per_loader = false;
  std::string reason;  // one sentence without a final period
  // The existing registry line or override the choice follows, as the reason cites it
  // ("training_utils.py:41 `_register_attr(\"X\", \"start_logits\")`",
  // "heads_mini/pytorch/loader.py:40's override"); "" when it follows none.
  std::string follows;
  // true: the override is the house form (LossTargetInput::house_override) reducing every tensor
  // of expr (forward_output, or the one part of it holding the heads, e.g. forward_output[1]).
  bool house_form = false;
  std::vector<LossCandidate> chosen;
  std::vector<LossCandidate> not_chosen;
};

LossTarget DecideLossTarget(const LossTargetInput& in);

// The module docstring of a loader's text and the comment lines before it ("" when none).
std::string LoaderDocOf(std::string_view loader_text);

}  // namespace triage::playbooks
