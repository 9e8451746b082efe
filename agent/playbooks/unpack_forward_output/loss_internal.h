#pragma once

// What loss_target.cc, output_tree.cc and loss_picks.cc share: the probe's output tree as
// candidates (its top-level members and every tensor under them) and the families' picks over
// it. Internal to DecideLossTarget (loss_target.h).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/playbooks/unpack_forward_output/loss_target.h"
#include "nlohmann/json.hpp"

namespace triage::playbooks::loss_internal {

using nlohmann::json;

// The walk stops here: deeper or further tensors are not candidates (the probe itself stops at
// depth 16 and 256 items per container).
constexpr int kMaxDepth = 16;
constexpr std::size_t kMaxLeaves = 4096;
// Alternatives listed one by one inside a partly chosen member, before "n more".
constexpr std::size_t kMaxListed = 8;

// Members read without throwing: absent or of another type reads as null / "".
const json& Member(const json& obj, const char* name);
std::string Str(const json& obj, const char* name);
bool IsTensor(const json& n);
std::string Lower(std::string_view s);
bool Has(std::string_view haystack, std::string_view needle);
bool IsIdentifier(std::string_view s);
std::vector<std::int64_t> DimsOf(const json& n);
std::string ShapeText(const std::vector<std::int64_t>& dims);
// Names of outputs no training loss reads (attention weights, caches, auxiliary heads, ...).
bool IsAuxName(std::string_view raw);
// Features rather than predictions.
bool IsHiddenName(std::string_view raw);
// Names a model's prediction usually has.
bool IsHeadName(std::string_view raw);

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

// The output's members and tensors, as the probe's tree describes them (output_tree.cc).
Output Collect(const json& tree);
const Leaf* TopTensor(const Output& o, std::string_view key);
std::size_t IndexOf(const Output& o, const Leaf* l);

// Base (headless) outputs: shared by every model of an architecture and by many architectures,
// so they name the family only when nothing else does.
inline bool IsSharedBaseClass(std::string_view cls) {
  return cls.starts_with("BaseModelOutput") || cls == "Seq2SeqModelOutput";
}

inline constexpr std::string_view kClassScoreNames[] = {"logits", "pred_logits", "class_logits",
                                                        "cls_logits", "scores"};
inline constexpr std::string_view kBoxNames[] = {"pred_boxes", "boxes",          "bboxes",
                                                 "bbox",       "pred_bbox",      "pred_bboxes",
                                                 "bbox_pred",  "box_regression", "bbox_regression"};

// ---------------------------------------------------------------------------------------------
// The families' picks (loss_picks.cc)

struct Pick {
  std::vector<std::size_t> leaves;  // the tensors the expression reads
  std::string expr;
  std::string attr;
  bool torch = false;
  bool by_rule = true;
  std::string what;  // the rest of the reason sentence
};

std::string Quoted(const Leaf& l);
Pick Single(const Output& o, const Leaf& l, std::string_view why);
std::optional<Pick> PickForFamily(LossFamily f, const Output& o, const std::string& cls);
std::optional<Pick> PickGeneric(const Output& o);
std::vector<LossCandidate> NotChosen(const Output& o, const std::set<std::size_t>& chosen);

}  // namespace triage::playbooks::loss_internal
