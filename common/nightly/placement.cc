#include "common/nightly/placement.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "common/lift/lift.h"
#include "common/nightly/rules.h"
#include "common/util/strings.h"

namespace triage::nightly {
namespace {

using inventory::Value;

// The fields that move together: an override never holds a status without its reason.
constexpr std::string_view kStatusGroup[] = {"status", "reason", "bringup_status"};

bool InStatusGroup(std::string_view field) {
  return std::find(std::begin(kStatusGroup), std::end(kStatusGroup), field) !=
         std::end(kStatusGroup);
}

// A unit's value: one optional value per field (nullopt: absent).
using UnitValue = std::vector<std::optional<Value>>;

bool SameUnit(const UnitValue& a, const UnitValue& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].has_value() != b[i].has_value()) return false;
    if (a[i] && !(*a[i] == *b[i])) return false;
  }
  return true;
}

// The value a field resolves to on an arch now.
std::optional<Value> Current(const inventory::Entry& e, std::string_view field,
                             std::string_view arch) {
  const Value* v = e.FieldForArch(field, arch);
  if (v == nullptr) return std::nullopt;
  return *v;
}

std::optional<Value> TopLevel(const inventory::Entry& e, std::string_view field) {
  const Value* v = e.Field(field);
  if (v == nullptr) return std::nullopt;
  return *v;
}

const Value* Override(const inventory::Entry& e, std::string_view arch) {
  const Value* overrides = e.Field("arch_overrides");
  return overrides == nullptr ? nullptr : overrides->Find(arch);
}

bool OverrideHas(const inventory::Entry& e, std::string_view arch, std::string_view field) {
  const Value* o = Override(e, arch);
  return o != nullptr && o->Find(field) != nullptr;
}

// What a target says of a field: set to a value, deleted (nullopt inside), or nothing (nullopt).
std::optional<std::optional<Value>> Said(const v1::EntryEdit& target, std::string_view field) {
  for (const auto& f : target.set()) {
    if (f.name() == field) return std::optional<Value>(lift::FromYaml(f.value()));
  }
  for (const auto& d : target.delete_()) {
    if (d == field) return std::optional<Value>();
  }
  return std::nullopt;
}

double PccOf(const std::optional<Value>& v) {
  if (!v) return kDefaultRequiredPcc;
  return v->kind == Value::Kind::kInt ? static_cast<double>(v->integer) : v->number;
}

// The value a field takes in an override when the arch wants it absent while the top level
// holds it: the runner's default, written out (an override cannot unset a field). Fields without
// a default (a reason) are left inherited: the status beside them decides whether they matter.
std::optional<Value> DefaultOf(std::string_view field) {
  if (field == "required_pcc") return Value::Float(kDefaultRequiredPcc);
  if (field == "assert_pcc") return Value::Bool(true);
  return std::nullopt;
}

struct Builder {
  const inventory::Entry& entry;
  inventory::EntryEdit top;
  std::map<std::string, inventory::EntryEdit> per_arch;
  std::map<std::string, std::string> comments_top;  // field -> comment
  bool top_changed = false;

  inventory::EntryEdit& ForArch(const std::string& arch) {
    auto& e = per_arch[arch];
    e.key = entry.key;
    e.arch = arch;
    return e;
  }

  // Sets or deletes a field at the top level when that changes it.
  void PutTop(const std::string& field, const std::optional<Value>& v, const std::string& comment) {
    const std::optional<Value> now = TopLevel(entry, field);
    if (v) {
      if (now && *now == *v) return;
      top.set.emplace_back(field, *v);
      if (!comment.empty()) top.comments.emplace_back(field, comment);
    } else {
      if (!now) return;
      top.del.push_back(field);
    }
    top_changed = true;
  }

  void PutArch(const std::string& arch, const std::string& field, const std::optional<Value>& v,
               const std::string& comment) {
    const Value* o = Override(entry, arch);
    const Value* now = o == nullptr ? nullptr : o->Find(field);
    if (v) {
      if (now != nullptr && *now == *v) return;
      auto& e = ForArch(arch);
      e.set.emplace_back(field, *v);
      if (!comment.empty()) e.comments.emplace_back(field, comment);
    } else if (now != nullptr) {
      ForArch(arch).del.push_back(field);
    }
  }
};

}  // namespace

Placement Place(const inventory::Entry& entry, const std::vector<std::string>& archs,
                const std::vector<ArchTarget>& targets) {
  Placement out;
  std::map<std::string, const ArchTarget*> by_arch;
  for (const auto& t : targets) by_arch[t.arch] = &t;

  // The units the targets touch, in a fixed order: the status group first.
  std::vector<std::vector<std::string>> units;
  std::set<std::string> fields;
  for (const auto& t : targets) {
    for (const auto& f : t.edit.set()) fields.insert(f.name());
    for (const auto& d : t.edit.delete_()) fields.insert(d);
  }
  if (std::any_of(fields.begin(), fields.end(), InStatusGroup)) {
    units.push_back({std::begin(kStatusGroup), std::end(kStatusGroup)});
  }
  for (const auto& f : fields) {
    if (!InStatusGroup(f)) units.push_back({f});
  }

  Builder b{entry, {}, {}, {}};
  b.top.key = entry.key;
  for (const auto& unit : units) {
    // What each arch wants of the unit.
    std::vector<UnitValue> want;
    for (const auto& arch : archs) {
      UnitValue v;
      for (const auto& field : unit) {
        auto it = by_arch.find(arch);
        std::optional<std::optional<Value>> said =
            it == by_arch.end() ? std::nullopt : Said(it->second->edit, field);
        v.push_back(said ? *said : Current(entry, field, arch));
      }
      want.push_back(std::move(v));
    }
    // "pcc 0.9650 on n150, p150; pcc 0.9860 on p300": the archs' figures, those with the same
    // figure together.
    auto comment_for = [&](const std::vector<std::size_t>& which) {
      std::vector<std::pair<std::string, std::vector<std::string>>> figures;
      for (std::size_t i : which) {
        auto it = by_arch.find(archs[i]);
        if (it == by_arch.end() || it->second->pcc_comment.empty()) continue;
        const std::string& c = it->second->pcc_comment;
        const std::size_t on = c.rfind(" on ");
        const std::string figure = on == std::string::npos ? c : c.substr(0, on);
        const std::string where = on == std::string::npos ? archs[i] : c.substr(on + 4);
        auto f = std::find_if(figures.begin(), figures.end(),
                              [&](const auto& p) { return p.first == figure; });
        if (f == figures.end()) {
          figures.push_back({figure, {where}});
        } else {
          f->second.push_back(where);
        }
      }
      std::vector<std::string> parts;
      for (const auto& [figure, where] : figures) {
        parts.push_back(util::StrCat(figure, " on ", util::StrJoin(where, ", ")));
      }
      return util::StrJoin(parts, "; ");
    };
    const bool pcc_unit =
        unit.size() == 1 && (unit[0] == "required_pcc" || unit[0] == "assert_pcc");

    // required_pcc shared by every arch (no own override): one value, the lowest wanted;
    // except a threshold only one of several archs lowers, which is that arch's (an override):
    // the archs that pass keep the check they pass.
    const auto changing = std::count_if(archs.begin(), archs.end(), [&](const std::string& a) {
      auto it = by_arch.find(a);
      return it != by_arch.end() && Said(it->second->edit, "required_pcc").has_value();
    });
    bool lowers_alone = false;
    if (unit.size() == 1 && unit[0] == "required_pcc" && changing == 1 && archs.size() > 1) {
      for (std::size_t i = 0; i < archs.size(); ++i) {
        auto it = by_arch.find(archs[i]);
        if (it == by_arch.end() || !Said(it->second->edit, "required_pcc")) continue;
        lowers_alone = PccOf(want[i][0]) < PccOf(TopLevel(entry, "required_pcc")) - 1e-9;
      }
    }
    if (unit.size() == 1 && unit[0] == "required_pcc" && !lowers_alone &&
        std::none_of(archs.begin(), archs.end(),
                     [&](const std::string& a) { return OverrideHas(entry, a, "required_pcc"); })) {
      double lowest = kDefaultRequiredPcc;
      for (const auto& w : want) lowest = std::min(lowest, PccOf(w[0]));
      std::optional<Value> v;
      if (lowest < kDefaultRequiredPcc - 1e-9) v = Value::Float(lowest);
      for (auto& w : want) w[0] = v;
    }

    const bool agree = std::all_of(want.begin(), want.end(),
                                   [&](const UnitValue& w) { return SameUnit(w, want[0]); });
    UnitValue top_now;
    for (const auto& field : unit) top_now.push_back(TopLevel(entry, field));
    // The value the top level takes. Every arch agrees: theirs. Otherwise, for the status
    // group, a state without a reason (EXPECTED_PASSING) when some arch wants one, so that an
    // override never inherits a reason it does not need; for other fields the top level's own
    // value while some arch still wants it. Else the value most archs want (on a tie, the
    // first arch's).
    const bool status_unit = unit.size() == std::size(kStatusGroup);
    auto most_wanted = [&](auto&& eligible) -> std::optional<std::size_t> {
      std::optional<std::size_t> best;
      int best_count = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        if (!eligible(want[i])) continue;
        int count = 0;
        for (const auto& w : want) count += SameUnit(w, want[i]) ? 1 : 0;
        if (!best || count > best_count) {
          best = i;
          best_count = count;
        }
      }
      return best;
    };
    UnitValue top = top_now;
    if (agree && !want.empty()) {
      top = want[0];
    } else if (auto clean = status_unit ? most_wanted([](const UnitValue& w) {
                 // The status group's second field: its reason.
                 return !w[1].has_value();
               })
                                        : std::nullopt;
               clean) {
      top = want[*clean];
    } else if (std::none_of(want.begin(), want.end(),
                            [&](const UnitValue& w) { return SameUnit(w, top_now); })) {
      top = want[*most_wanted([](const UnitValue&) { return true; })];
    }
    std::vector<std::size_t> sharing;
    for (std::size_t i = 0; i < archs.size(); ++i) {
      if (SameUnit(want[i], top)) sharing.push_back(i);
    }
    for (std::size_t f = 0; f < unit.size(); ++f) {
      b.PutTop(unit[f], top[f], pcc_unit && top[f] ? comment_for(sharing) : "");
    }
    for (std::size_t i = 0; i < archs.size(); ++i) {
      const bool differs = !SameUnit(want[i], top);
      out.per_arch = out.per_arch || differs;
      for (std::size_t f = 0; f < unit.size(); ++f) {
        std::optional<Value> v;
        if (differs) {
          v = want[i][f];
          if (!v && top[f]) v = DefaultOf(unit[f]);
          if (!v && top[f]) continue;  // inherited (a reason under a status that ignores it)
        }
        b.PutArch(archs[i], unit[f], v, pcc_unit && v ? comment_for({i}) : "");
      }
    }
  }

  if (!b.top.set.empty() || !b.top.del.empty()) out.edits.push_back(b.top);
  for (auto& [arch, e] : b.per_arch) {
    if (!e.set.empty() || !e.del.empty()) out.edits.push_back(std::move(e));
  }
  // A top-level change reaches every arch the entry runs on: say which ones no run covered.
  if (b.top_changed) {
    // tt-xla's runner marks a test for n150 and p150 unless supported_archs says otherwise;
    // multi-device tests run where their job's arch says.
    std::vector<std::string> supported;
    // (A key without a parallelism segment, of an older grammar, runs on one device.)
    if (entry.parts &&
        (entry.parts->parallelism == "single_device" || entry.parts->parallelism.empty())) {
      supported = {"n150", "p150"};
    }
    if (const Value* s = entry.Field("supported_archs"); s != nullptr && s->is_list()) {
      supported.clear();
      for (const auto& item : s->list) supported.push_back(item.string);
    }
    std::vector<std::string> uncovered;
    for (const auto& a : supported) {
      if (std::find(archs.begin(), archs.end(), a) == archs.end()) uncovered.push_back(a);
    }
    if (!uncovered.empty()) {
      out.review.push_back(util::StrCat("top-level change also reaches ",
                                        util::StrJoin(uncovered, ", "),
                                        ", where no run recorded the test"));
    }
  }
  return out;
}

inventory::EntryEdit NewEntry(const std::string& key, const v1::EntryEdit& target) {
  inventory::EntryEdit e;
  e.key = key;
  e.create = true;
  for (const auto& f : target.set()) e.set.emplace_back(f.name(), lift::FromYaml(f.value()));
  return e;
}

std::optional<std::vector<inventory::EntryEdit>> PlaceNew(const std::string& key,
                                                          const std::vector<std::string>& archs,
                                                          const std::vector<ArchTarget>& targets) {
  if (targets.empty()) return std::nullopt;
  if (SameTargets(targets))
    return std::vector<inventory::EntryEdit>{NewEntry(key, targets[0].edit)};
  inventory::Entry empty;
  empty.key = key;
  empty.value.kind = Value::Kind::kMap;
  Placement p = Place(empty, archs, targets);
  if (p.edits.empty() || p.edits.front().arch || p.edits.front().set.empty()) return std::nullopt;
  p.edits.front().create = true;
  return std::move(p.edits);
}

bool SameTargets(const std::vector<ArchTarget>& targets) {
  for (const auto& t : targets) {
    if (t.edit.set_size() != targets.front().edit.set_size()) return false;
    for (int i = 0; i < t.edit.set_size(); ++i) {
      const auto& a = t.edit.set(i);
      const auto& b = targets.front().edit.set(i);
      if (a.name() != b.name() || a.value().SerializeAsString() != b.value().SerializeAsString()) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace triage::nightly
