// The families' picks: which tensors of the output a family's loss reads (loss_internal.h).

#include <algorithm>
#include <map>
#include <tuple>

#include "agent/playbooks/unpack_forward_output/loss_internal.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::playbooks::loss_internal {

// ---------------------------------------------------------------------------------------------
// The families' picks

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

}  // namespace triage::playbooks::loss_internal
