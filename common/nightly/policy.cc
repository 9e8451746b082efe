#include "common/nightly/policy.h"

#include <cmath>
#include <set>
#include <vector>

#include "common/inventory/editor.h"
#include "common/util/strings.h"
#include "yaml-cpp/yaml.h"

namespace triage::nightly {
namespace {

constexpr std::string_view kParallelisms[] = {"single_device", "data_parallel", "tensor_parallel"};
constexpr std::string_view kRunModes[] = {"inference", "training"};

bool IsLowestKey(std::string_view k) {
  if (k == "default") return true;
  for (auto p : kParallelisms) {
    if (k == p) return true;
    for (auto m : kRunModes) {
      if (k == util::StrCat(p, "-", m)) return true;
    }
  }
  for (auto m : kRunModes) {
    if (k == m) return true;
  }
  return false;
}

// The knobs whose value is a word: its choices (free_text: or any text), and its field.
struct WordKnob {
  std::string_view name;
  std::vector<std::string_view> choices;
  bool free_text;
  std::string Policy::*field;
};

const WordKnob* FindWordKnob(std::string_view name) {
  static const std::vector<WordKnob> kKnobs = {
      {"enable", {"floor", "above"}, false, &Policy::enable},
      {"nonsense", {"disable_pcc", "xfail"}, false, &Policy::nonsense},
      {"pcc_reason", {"runner", "short"}, false, &Policy::pcc_reason},
      {"demote_pcc_off", {"drop", "keep"}, false, &Policy::demote_pcc_off},
      {"pcc_comment", {"figure", "none"}, false, &Policy::pcc_comment},
      {"skip_bringup", {"write", "omit"}, false, &Policy::skip_bringup_status},
      {"unknown_stage", {"write", "omit"}, false, &Policy::unknown_stage},
      {"crash_reason", {"signal", "message"}, false, &Policy::crash_reason},
      {"hang_reason", {"message"}, true, &Policy::hang_reason},
      {"oom_reason", {"message"}, true, &Policy::oom_reason},
  };
  for (const auto& k : kKnobs) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

}  // namespace

double Policy::Lowest(std::string_view parallelism, std::string_view run_mode) const {
  for (const std::string& k : {util::StrCat(parallelism, "-", run_mode), std::string(parallelism),
                               std::string(run_mode), std::string("default")}) {
    if (auto it = lowest.find(k); it != lowest.end()) return it->second;
  }
  return 0.97;
}

absl::StatusOr<Policy> ReadPolicy(std::string_view text, std::string_view path,
                                  const Policy& base) {
  Policy p = base;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        util::StrCat(path, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
  }
  if (root.IsNull()) return p;
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(util::StrCat(path, ":", root.Mark().line + 1,
                                                   ": a policy is a mapping of knobs (",
                                                   util::StrJoin(kPolicyKnobs, ", "), ")"));
  }
  std::set<std::string> seen;
  for (const auto& kv : root) {
    const std::string knob = kv.first.as<std::string>("");
    const YAML::Node& v = kv.second;
    const std::string where = util::StrCat(path, ":", kv.first.Mark().line + 1);
    auto bad = [&](std::string_view why) {
      return absl::InvalidArgumentError(util::StrCat(where, ": ", knob, ": ", why));
    };
    if (!seen.insert(knob).second) return bad("set twice");
    auto number = [&](const YAML::Node& n, double lo, double hi) -> absl::StatusOr<double> {
      double d = 0;
      if (!n.IsScalar() || !YAML::convert<double>::decode(n, d) || !std::isfinite(d)) {
        return bad(util::StrCat("expected a number, got '", n.IsScalar() ? n.Scalar() : "?", "'"));
      }
      if (d < lo || d > hi) {
        return bad(util::StrCat(Number(d), " is not between ", Number(lo), " and ", Number(hi)));
      }
      return d;
    };
    auto choice = [&](const std::vector<std::string_view>& allowed,
                      bool free_text) -> absl::StatusOr<std::string> {
      if (!v.IsScalar() || v.Scalar().empty()) return bad("expected a word");
      for (auto a : allowed) {
        if (v.Scalar() == a) return v.Scalar();
      }
      if (free_text) return v.Scalar();
      return bad(util::StrCat("'", v.Scalar(), "' is not one of ", util::StrJoin(allowed, ", ")));
    };
    if (knob == "grid") {
      auto d = number(v, 0.0001, 0.1);
      if (!d.ok()) return d.status();
      p.grid = *d;
    } else if (knob == "margin") {
      auto d = number(v, 0, 0.1);
      if (!d.ok()) return d.status();
      p.margin = *d;
    } else if (knob == "lowest") {
      if (v.IsScalar()) {
        auto d = number(v, 0, 0.999);
        if (!d.ok()) return d.status();
        p.lowest = {{"default", *d}};
      } else if (v.IsMap()) {
        p.lowest = {{"default", base.Lowest("", "")}};
        for (const auto& item : v) {
          const std::string k = item.first.as<std::string>("");
          if (!IsLowestKey(k)) {
            return bad(util::StrCat("'", k,
                                    "' is not default, a parallelism, a run mode or "
                                    "<parallelism>-<run_mode>"));
          }
          auto d = number(item.second, 0, 0.999);
          if (!d.ok()) return d.status();
          p.lowest[k] = *d;
        }
      } else {
        return bad("expected a number or a mapping of parallelism/run mode to a number");
      }
    } else if (const WordKnob* w = FindWordKnob(knob); w != nullptr) {
      auto c = choice(w->choices, w->free_text);
      if (!c.ok()) return c.status();
      p.*(w->field) = *c;
    } else {
      return bad(util::StrCat("not a knob of the nightly policy (",
                              util::StrJoin(kPolicyKnobs, ", "), ")"));
    }
    p.sources[knob] = where;
  }
  if (p.margin >= p.grid) {
    return absl::InvalidArgumentError(util::StrCat(path, ": margin ", Number(p.margin),
                                                   " must be smaller than grid ", Number(p.grid)));
  }
  return p;
}

std::vector<KnobValue> PolicyValues(const Policy& p) {
  std::vector<KnobValue> out;
  for (std::string_view knob : kPolicyKnobs) {
    KnobValue v;
    v.knob = knob;
    auto it = p.sources.find(std::string(knob));
    v.source = it == p.sources.end() ? std::string("default") : it->second;
    if (knob == "grid") {
      v.value = Number(p.grid);
    } else if (knob == "margin") {
      v.value = Number(p.margin);
    } else if (knob == "lowest") {
      std::vector<std::string> lowest;
      for (const auto& [k, d] : p.lowest) lowest.push_back(util::StrCat(k, ": ", Number(d)));
      v.value = util::StrCat("{", util::StrJoin(lowest, ", "), "}");
    } else if (const WordKnob* w = FindWordKnob(knob); w != nullptr) {
      v.value = w->free_text ? inventory::DoubleQuote(p.*(w->field)) : p.*(w->field);
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::string PolicyYaml(const Policy& p) {
  std::string out;
  for (const KnobValue& v : PolicyValues(p)) {
    out += util::StrCat(v.knob, ": ", v.value, "  # ", v.source, "\n");
  }
  return out;
}

}  // namespace triage::nightly
