// The sub-pattern decision and the load_inputs edits of missing_inputs (docs/playbooks.md,
// "missing_inputs"). Pure functions of the probe's documents and the loader's text.

#include <algorithm>
#include <cctype>
#include <charconv>
#include <regex>

#include "agent/playbooks/dtype_bfloat16/dtype_bfloat16.h"
#include "agent/playbooks/missing_inputs/missing_inputs.h"
#include "agent/playbooks/python_edit.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::playbooks::missing_inputs {
namespace {

constexpr std::string_view kDecoderMissing = "decoder_input_ids or decoder_inputs_embeds";
constexpr std::string_view kBatchNormSingleton =
    "Expected more than 1 value per channel when training";
constexpr std::string_view kTorchvisionTargets = "targets should not be none when in training mode";
constexpr std::string_view kNoneMax = "'NoneType' object has no attribute 'max'";
// The decoder length of the synthetic decoder_input_ids: the start token and one more, as a
// seq2seq model's own shift-right produces for a one-token label.
constexpr int kDecoderLength = 2;

bool Contains(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool IsIdentifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// Targets of a forward that has a `targets` parameter: which family builds them.
SubPattern TargetsFamily(const ProbeDoc& train, std::string_view message) {
  const ProbeDoc::Forward& f = *train.forward;
  if (Contains(message, kTorchvisionTargets) ||
      std::string_view(f.model_module).starts_with("torchvision.models.detection")) {
    return SubPattern::kDetectionTargets;
  }
  if (Contains(Lower(f.model_class + " " + f.model_module + " " + f.qualname), "yolo")) {
    return SubPattern::kYoloTargets;
  }
  return SubPattern::kTargetsNoRule;
}

bool HasTargets(const ProbeDoc& d) { return d.forward && d.forward->Has("targets"); }

}  // namespace

std::string_view SubPatternName(SubPattern p) {
  switch (p) {
    case SubPattern::kMissingPackage:
      return "missing_package";
    case SubPattern::kNotReproduced:
      return "not_reproduced";
    case SubPattern::kNeedsUnpack:
      return "needs_unpack";
    case SubPattern::kNeedsDtype:
      return "needs_dtype";
    case SubPattern::kSeq2Seq:
      return "seq2seq_decoder_inputs";
    case SubPattern::kBatchNorm:
      return "batchnorm_single_value";
    case SubPattern::kDetectionTargets:
      return "detection_targets";
    case SubPattern::kYoloTargets:
      return "yolo_targets";
    case SubPattern::kTargetsNoRule:
      return "targets_no_rule";
    case SubPattern::kMismatched:
      return "gate_misfired";
  }
  return "?";
}

bool Fixable(SubPattern p) {
  return p == SubPattern::kSeq2Seq || p == SubPattern::kBatchNorm ||
         p == SubPattern::kDetectionTargets || p == SubPattern::kYoloTargets;
}

SubPattern ClassifyInputs(const ProbeDoc& train, const ProbeDoc& eval) {
  if (train.error &&
      (train.error->type == "ModuleNotFoundError" || train.error->type == "ImportError")) {
    return SubPattern::kMissingPackage;
  }
  if (train.ok) return SubPattern::kNotReproduced;
  // The forward ran and unpack_forward_output raised.
  if (train.has_unpacked && !train.unpacked_ok) return SubPattern::kNeedsUnpack;
  const std::string message = train.error ? train.error->message : "";
  const std::string eval_message = eval.error ? eval.error->message : "";
  if (Contains(message, kDecoderMissing)) return SubPattern::kSeq2Seq;
  if (Contains(message, kBatchNormSingleton)) return SubPattern::kBatchNorm;
  const bool assertion = train.error && train.error->type == "AssertionError";
  if ((assertion || Contains(message, kNoneMax)) && HasTargets(train)) {
    // A targets assert fires in training only: the same error in eval is another failure.
    if (!eval.ok && eval.error && eval.error->type == train.error->type &&
        eval_message == message) {
      return SubPattern::kMismatched;
    }
    return TargetsFamily(train, message);
  }
  if (HasBf16Signature(message) && Contains(message, "BFloat16")) return SubPattern::kNeedsDtype;
  return SubPattern::kMismatched;
}

bool HasMissingInputsSignature(std::string_view message) {
  for (std::string_view sig : {kDecoderMissing, kBatchNormSingleton, kTorchvisionTargets,
                               std::string_view("Model expects targets to be passed")}) {
    if (Contains(message, sig)) return true;
  }
  return false;
}

std::string PipFlagsFor(std::string_view file) {
  if (file == "requirements.nodeps.nobuildisolation.txt") {
    return "pip install --no-deps --no-build-isolation -r";
  }
  if (file == "requirements.nodeps.txt") return "pip install --no-deps -r";
  if (file == "requirements.txt") return "pip install -r";
  return "not installed by the runner";
}

namespace {

struct Ctx {
  const EditRequest& req;
  const ProbeDoc& train;
  std::vector<std::string> review;
};

// The expression of the main input (the first tensor) given the returned value's name.
absl::StatusOr<std::string> MainInput(const ProbeDoc& train, const std::string& name) {
  for (std::size_t i = 0; i < train.inputs.size(); ++i) {
    const auto& in = train.inputs[i];
    if (in.kind != "tensor") continue;
    if (train.container == "tensor") return name;
    if (train.container == "dict") return util::StrCat(name, "[\"", in.name, "\"]");
    return util::StrCat(name, "[", i, "]");
  }
  return absl::FailedPreconditionError("no tensor among load_inputs' values to size new inputs by");
}

// The statements that replace `return NAME` for one sub-pattern (without indentation).
absl::StatusOr<std::vector<std::string>> NewReturn(Ctx& c, const std::string& name) {
  const ProbeDoc& t = c.train;
  auto main = MainInput(t, name);
  if (!main.ok()) return main.status();
  const std::string& m = *main;
  const std::string& container = t.container;
  if (container != "dict" && container != "list" && container != "tuple" && container != "tensor") {
    return absl::FailedPreconditionError(util::StrCat(
        "load_inputs returns a ", container.empty() ? "value of unknown type" : container,
        ": no rule adds an input to it"));
  }
  std::vector<std::string> out;
  if (c.req.pattern == SubPattern::kSeq2Seq) {
    if (!t.config || !t.config->decoder_start_token_id) {
      return absl::FailedPreconditionError(
          "the model's config has no decoder_start_token_id to start decoder_input_ids with");
    }
    if (!t.forward || !t.forward->Has("decoder_input_ids")) {
      return absl::FailedPreconditionError("the forward has no decoder_input_ids parameter");
    }
    for (const auto& [input, param] : t.binding) {
      if (param == "decoder_input_ids") {
        return absl::FailedPreconditionError(
            util::StrCat("input ", input,
                         " already binds to decoder_input_ids: a binding problem for a person"));
      }
    }
    const std::string ids = util::StrCat("torch.full((", m, ".shape[0], ", kDecoderLength, "), ",
                                         *t.config->decoder_start_token_id, ", dtype=torch.long)");
    if (container == "dict") {
      out.push_back(util::StrCat(name, "[\"decoder_input_ids\"] = ", ids));
      out.push_back(util::StrCat("return ", name));
      return out;
    }
    std::vector<std::string> items;
    if (container == "tensor") {
      if (t.forward->params.empty()) {
        return absl::FailedPreconditionError("the forward takes no parameter for the input");
      }
      items.push_back(util::StrCat("\"", t.forward->params[0].name, "\": ", name));
    } else {
      if (!t.has_binding || !t.binding_ok) {
        return absl::FailedPreconditionError(
            util::StrCat("the ", container, " of inputs does not bind to the forward (",
                         t.binding_error.empty() ? "no binding reported" : t.binding_error,
                         "): which item is which needs a person"));
      }
      std::vector<std::string> bound;
      for (std::size_t i = 0; i < t.binding.size(); ++i) {
        items.push_back(util::StrCat("\"", t.binding[i].second, "\": ", name, "[", i, "]"));
        bound.push_back(util::StrCat(i, " -> ", t.binding[i].second));
      }
      c.review.push_back(util::StrCat("the ", container, "'s items were bound by position (",
                                      util::StrJoin(bound, ", "),
                                      "): check each is what that forward parameter expects"));
    }
    items.push_back(util::StrCat("\"decoder_input_ids\": ", ids));
    out.push_back(util::StrCat("return {", util::StrJoin(items, ", "), "}"));
    c.review.push_back(util::StrCat("load_inputs returned a ", container,
                                    " and now returns a dict keyed by forward parameter names: "
                                    "a consumer that relies on the old form breaks"));
    return out;
  }
  // Targets: torchvision detection or YOLO.
  if (!t.forward || !t.forward->Has("targets")) {
    return absl::FailedPreconditionError("the forward has no targets parameter");
  }
  if (c.req.pattern == SubPattern::kDetectionTargets) {
    out.push_back("targets = [");
    out.push_back(util::StrCat("    {\"boxes\": torch.tensor([[0.0, 0.0, ", m, ".shape[-1] / 2, ",
                               m, ".shape[-2] / 2]], dtype=", m,
                               ".dtype), \"labels\": torch.ones(1, dtype=torch.long)}"));
    out.push_back(util::StrCat("    for _ in range(", m, ".shape[0])"));
    out.push_back("]");
  } else {
    out.push_back(util::StrCat("targets = torch.tensor([1.0, ", m, ".shape[-1] / 2, ", m,
                               ".shape[-2] / 2, ", m, ".shape[-1] / 4, ", m,
                               ".shape[-2] / 4], dtype=", m, ".dtype).repeat(", m,
                               ".shape[0], 1, 1)"));
    c.review.push_back(
        "YOLO targets: one box per image as (class, cx, cy, w, h) in input pixels, zero-padded "
        "[B, 1, 5] (the YOLOX layout); check the layout and class ids against the model's "
        "training code");
  }
  const int pos = t.forward->PositionOf("targets");
  if (container == "dict") {
    out.push_back(util::StrCat(name, "[\"targets\"] = targets"));
    out.push_back(util::StrCat("return ", name));
  } else if (container == "tensor" && pos == 1) {
    out.push_back(util::StrCat("return [", name, ", targets]"));
  } else if (container != "tensor" && pos >= 1 &&
             static_cast<std::size_t>(pos) == t.inputs.size()) {
    out.push_back(util::StrCat("return [*", name, ", targets]"));
  } else {
    return absl::FailedPreconditionError(
        util::StrCat("targets is not the forward's next positional parameter after the ",
                     t.inputs.size(), " input(s) of the ", container, " (position ", pos, ")"));
  }
  return out;
}

// Every `return` of load_inputs' body (not of nested functions), bottom-up: [first, last] lines.
std::vector<std::pair<int, int>> Returns(const std::vector<std::string>& lines,
                                         const MethodSpan& span) {
  std::vector<std::pair<int, int>> out;
  int skip_until = -1;  // a nested def/class block
  for (int i = span.body_first; i <= span.last; ++i) {
    std::string_view t = util::TrimWhitespace(lines[i]);
    if (t.empty() || i <= skip_until) continue;
    if (t.starts_with("def ") || t.starts_with("async def ") || t.starts_with("class ")) {
      const int indent = util::IndentOf(lines[i]);
      skip_until = i;
      for (int k = i + 1; k <= span.last; ++k) {
        if (util::TrimWhitespace(lines[k]).empty()) continue;
        if (util::IndentOf(lines[k]) <= indent) break;
        skip_until = k;
      }
      continue;
    }
    if (t != "return" && !t.starts_with("return ") && !t.starts_with("return(")) continue;
    int depth = BracketDelta(lines[i]);
    int end = i;
    while (end < span.last && (depth > 0 || std::string_view(lines[end]).ends_with("\\"))) {
      ++end;
      depth += BracketDelta(lines[end]);
    }
    out.emplace_back(i, end);
    i = end;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

absl::StatusOr<InputsEdit> ReturnEdit(const std::string& text, std::vector<std::string> lines,
                                      const MethodSpan& span, Ctx& c) {
  const auto returns = Returns(lines, span);
  if (returns.empty()) return absl::FailedPreconditionError("load_inputs has no return statement");
  int changed = 0;
  for (const auto& [first, last] : returns) {
    const std::string pad(util::IndentOf(lines[first]), ' ');
    std::string_view t = util::TrimWhitespace(lines[first]);
    std::string expr(util::TrimWhitespace(t.substr(6)));
    if (expr.empty() || expr == "None") {
      return absl::FailedPreconditionError(
          util::StrCat("load_inputs returns nothing at line ", first + 1));
    }
    std::vector<std::string> replacement;
    std::string name = expr;
    if (first != last || !IsIdentifier(expr)) {
      name = "inputs";
      for (int k = first; k <= last; ++k) replacement.push_back(lines[k]);
      // "return EXPR" / "return(EXPR" -> "inputs = EXPR" / "inputs = (EXPR".
      std::string& head = replacement.front();
      const std::size_t at = head.find("return");
      std::size_t expr_at = at + 6;
      while (expr_at < head.size() && head[expr_at] == ' ') ++expr_at;
      head.replace(at, expr_at - at, "inputs = ");
    }
    auto stmts = NewReturn(c, name);
    if (!stmts.ok()) return stmts.status();
    for (const auto& s : *stmts) replacement.push_back(pad + s);
    lines.erase(lines.begin() + first, lines.begin() + last + 1);
    lines.insert(lines.begin() + first, replacement.begin(), replacement.end());
    ++changed;
  }
  InputsEdit edit;
  edit.text = EnsureImportTorch(JoinPythonLines(lines, text.empty() || text.back() == '\n'));
  const std::string what = c.req.pattern == SubPattern::kSeq2Seq       ? "decoder_input_ids"
                           : c.req.pattern == SubPattern::kYoloTargets ? "a YOLO targets tensor"
                                                                       : "detection targets";
  edit.description =
      util::StrCat("load_inputs (line ", span.def_line + 1, ") returns ", what, " too (", changed,
                   " return statement", changed == 1 ? "" : "s", " changed)");
  return edit;
}

absl::StatusOr<InputsEdit> BatchNormEdit(const std::string& text, std::vector<std::string> lines,
                                         const MethodSpan& span, Ctx& c) {
  const ProbeDoc::Param* batch = nullptr;
  for (const auto& p : c.train.load_inputs_params) {
    if (p.name == "batch_size") batch = &p;
  }
  int old_default = 0;
  const std::string& repr = batch != nullptr ? batch->default_repr : "";
  const auto parsed = std::from_chars(repr.data(), repr.data() + repr.size(), old_default);
  if (batch == nullptr || !batch->has_default || parsed.ec != std::errc() ||
      parsed.ptr != repr.data() + repr.size() || old_default >= 2) {
    return absl::FailedPreconditionError(
        "load_inputs has no batch_size parameter with a default below 2: no batch to raise");
  }
  const bool has_variants = text.find("class ModelVariant") != std::string::npos;
  InputsEdit edit;
  if (c.req.change_default || !has_variants || c.req.variant_members.empty()) {
    const std::regex def_re(
        util::StrCat("(\\bbatch_size\\s*(:\\s*[A-Za-z_.\\[\\]]+\\s*)?=\\s*)", old_default, "\\b"));
    bool done = false;
    for (int i = span.def_line; i <= span.header_end && !done; ++i) {
      std::smatch m;
      if (std::regex_search(lines[i], m, def_re)) {
        // The number after `batch_size=` (or `batch_size: int =`) becomes 2.
        const auto at = static_cast<std::size_t>(m.position(0) + m.length(1));
        lines[i].replace(at, static_cast<std::size_t>(m.length(0) - m.length(1)), "2");
        done = true;
      }
    }
    if (!done) {
      return absl::FailedPreconditionError(
          "the batch_size default of load_inputs is not written as a number in its signature");
    }
    edit.description = util::StrCat("load_inputs' default batch_size ", old_default, " -> 2 (line ",
                                    span.def_line + 1, ")");
    c.review.push_back(util::StrCat(
        "the default batch_size of load_inputs is now 2: every variant's inference test of this "
        "loader runs a batch of 2 too (load_inputs has no run mode)"));
  } else {
    const std::string pad(span.body_indent, ' ');
    std::vector<std::string> members;
    for (const auto& v : c.req.variant_members) members.push_back("ModelVariant." + v);
    const std::string cond =
        members.size() == 1 ? util::StrCat("self._variant == ", members[0])
                            : util::StrCat("self._variant in (", util::StrJoin(members, ", "), ")");
    const std::vector<std::string> insert = {
        util::StrCat(pad, "if ", cond, " and batch_size < 2:"),
        util::StrCat(pad,
                     "    batch_size = 2  # BatchNorm in training needs more than one value "
                     "per channel")};
    lines.insert(lines.begin() + span.body_first, insert.begin(), insert.end());
    edit.description =
        util::StrCat("load_inputs raises batch_size to 2 for ", util::StrJoin(members, ", "),
                     " (line ", span.body_first + 1, ")");
    c.review.push_back(util::StrCat(
        "batch_size is now at least 2 for ", util::StrJoin(members, ", "),
        ": that variant's inference test runs a batch of 2 too (load_inputs has no run mode)"));
  }
  edit.text = JoinPythonLines(lines, text.empty() || text.back() == '\n');
  return edit;
}

}  // namespace

absl::StatusOr<InputsEdit> MakeInputsEdit(const std::string& loader_text, const EditRequest& req) {
  if (req.train == nullptr || !Fixable(req.pattern)) {
    return absl::FailedPreconditionError(
        util::StrCat("no load_inputs edit for ", SubPatternName(req.pattern)));
  }
  std::vector<std::string> lines = PythonLines(loader_text);
  auto span = FindModelLoaderMethod(lines, "load_inputs", /*skip_doc=*/true);
  if (!span) {
    return absl::FailedPreconditionError("no load_inputs method in the loader's class ModelLoader");
  }
  Ctx c{req, *req.train, {}};
  auto edit = req.pattern == SubPattern::kBatchNorm ? BatchNormEdit(loader_text, lines, *span, c)
                                                    : ReturnEdit(loader_text, lines, *span, c);
  if (!edit.ok()) return edit.status();
  edit->review = std::move(c.review);
  return edit;
}

}  // namespace triage::playbooks::missing_inputs
