#include "coordinator/triagectl/land_plan.h"

#include <algorithm>

#include "common/diff/apply_diff.h"
#include "common/inventory/document.h"
#include "common/registry/registry.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "nlohmann/json.hpp"

namespace triage::ctl::land {
namespace {

using nlohmann::json;

constexpr std::string_view kForgePrefix = "third_party/tt_forge_models/";

std::string Str(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return "";
  return j[key].get<std::string>();
}

// One thing that lands or not as a whole.
struct Unit {
  bool forge = false;
  std::string file;
  std::vector<diff::Hunk> hunks;
  std::vector<diff::LineWindow> windows;  // YAML units: the entry's lines at the target
  std::set<std::string> owners;           // the entries it serves
  std::string what;                       // "its YAML entry", "the registry line for X", ...
  bool applies = false;
  std::string why;  // why it does not apply
};

int LeadingContext(const diff::Hunk& h) {
  int n = 0;
  for (const auto& l : h.lines) {
    if (!l.empty() && l[0] != ' ') break;
    ++n;
  }
  return n;
}

bool HasRemovals(const diff::Hunk& h) {
  return std::any_of(h.lines.begin(), h.lines.end(),
                     [](const std::string& l) { return l.starts_with("-"); });
}

// The text with the units' hunks applied together (each unit whole or not at all is the
// caller's business); where a hunk did not apply, why.
diff::PartialApply ApplyUnits(const std::string& text, const std::vector<const Unit*>& units) {
  std::vector<std::pair<int, std::pair<diff::Hunk, diff::LineWindow>>> ordered;
  for (const Unit* u : units) {
    for (std::size_t k = 0; k < u->hunks.size(); ++k) {
      ordered.push_back(
          {u->hunks[k].old_start,
           {u->hunks[k], k < u->windows.size() ? u->windows[k] : diff::LineWindow{}}});
    }
  }
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<diff::Hunk> hunks;
  std::vector<diff::LineWindow> windows;
  for (auto& [start, hw] : ordered) {
    hunks.push_back(hw.first);
    windows.push_back(hw.second);
  }
  return diff::ApplyHunksNear(text, hunks, windows);
}

// The YAML units of one tt-xla file: a hunk per entry (docs/report.md, "The patches").
absl::Status YamlUnits(const PlanInput& in, const std::string& path,
                       const std::vector<diff::Hunk>& hunks,
                       const std::map<std::string, const json*>& entries,
                       std::vector<Unit>& units) {
  auto before = in.ttxla_at_sweep(path);
  if (!before.ok()) return before.status();
  auto target = in.ttxla_target(path);
  if (!target.ok()) return target.status();
  const inventory::Document old_doc = inventory::Document::Parse(path, *before);
  const inventory::Document new_doc = inventory::Document::Parse(path, *target);
  for (const diff::Hunk& h : hunks) {
    Unit u;
    u.file = path;
    u.hunks = {h};
    u.what = "its YAML entry";
    if (!HasRemovals(h)) {
      // Added lines only: a new entry (by its key line) when the report knows one.
      for (const auto& l : h.lines) {
        if (!l.starts_with("+")) continue;
        std::string_view t = util::TrimWhitespace(std::string_view(l).substr(1));
        if (!t.ends_with(":")) continue;
        t.remove_suffix(1);
        if (t.size() >= 2 && t.front() == '"' && t.back() == '"') t = t.substr(1, t.size() - 2);
        if (entries.count(std::string(t))) u.owners.insert(std::string(t));
      }
      if (!u.owners.empty()) {
        u.what = "its new YAML entry";
        for (const auto& key : u.owners) {
          if (new_doc.Find(key) != nullptr) {
            u.why = util::StrCat(path, " has an entry ", key, " already (added upstream)");
          }
        }
        u.windows = {diff::LineWindow{}};
        units.push_back(std::move(u));
        continue;
      }
    }
    const int changed_line = h.old_start - 1 + LeadingContext(h);
    const inventory::Entry* owner = nullptr;
    for (const auto& e : old_doc.entries()) {
      if (e.first_line <= changed_line) owner = &e;
    }
    if (owner == nullptr) {
      u.what = util::StrCat("the lines of ", path, " at ", h.header);
      units.push_back(std::move(u));
      continue;
    }
    u.owners.insert(owner->key);
    const inventory::Entry* now = new_doc.Find(owner->key);
    if (now == nullptr) {
      u.why = util::StrCat("the entry is no longer in ", path, " (removed upstream)");
      u.windows = {diff::LineWindow{0, 0}};
    } else {
      // The entry's lines at the target, up to the next entry's key.
      int end = new_doc.line_count();
      for (const auto& e : new_doc.entries()) {
        if (e.first_line > now->first_line) end = std::min(end, e.first_line);
      }
      int old_end = old_doc.line_count();
      for (const auto& e : old_doc.entries()) {
        if (e.first_line > owner->first_line) old_end = std::min(old_end, e.first_line);
      }
      // The window ends at the entry's last line (comments and blanks after it belong to
      // nobody); old_end likewise, so a hunk whose change ends the entry may drop its
      // trailing context there.
      u.windows = {diff::LineWindow{now->first_line, std::min(end, now->last_line + 1),
                                    std::min(old_end, owner->last_line + 1)}};
    }
    units.push_back(std::move(u));
  }
  return absl::OkStatus();
}

// The forge units of one file: a registry line per hunk of training_utils.py, a loader (or any
// other file) as a whole.
void ForgeUnits(const std::string& path, const std::vector<diff::Hunk>& hunks, const json& report,
                std::vector<Unit>& units) {
  const std::string full = util::StrCat(kForgePrefix, path);
  if (full == registry::kTrainingUtilsPath) {
    for (const diff::Hunk& h : hunks) {
      Unit u;
      u.forge = true;
      u.file = path;
      u.hunks = {h};
      std::set<std::string> classes;
      for (const auto& l : h.lines) {
        if (l.starts_with(" ")) continue;
        for (const auto& e : report["entries"]) {
          const std::string cls = Str(e, "output_class");
          if (!cls.empty() && Str(e, "fix_path").find("registry") != std::string::npos &&
              l.find(util::StrCat("\"", cls, "\"")) != std::string::npos) {
            u.owners.insert(Str(e, "key"));
            classes.insert(cls);
          }
        }
      }
      u.what = classes.empty() ? util::StrCat("the lines of training_utils.py at ", h.header)
                               : util::StrCat("the registry line for ", *classes.begin());
      units.push_back(std::move(u));
    }
    return;
  }
  Unit u;
  u.forge = true;
  u.file = path;
  u.hunks = hunks;
  for (const auto& e : report["entries"]) {
    if (Str(e, "loader") == full) u.owners.insert(Str(e, "key"));
  }
  u.what = util::StrCat("its loader change (", path, ")");
  units.push_back(std::move(u));
}

absl::StatusOr<std::map<std::string, std::vector<diff::Hunk>>> FilesOf(const std::string& patch) {
  std::map<std::string, std::vector<diff::Hunk>> out;
  auto files = diff::SplitDiff(patch);
  if (!files.ok()) return files.status();
  for (const auto& f : *files) {
    auto hunks = diff::ParseHunks(f);
    if (!hunks.ok()) return hunks.status();
    auto& v = out[f.path()];
    v.insert(v.end(), hunks->begin(), hunks->end());
  }
  return out;
}

}  // namespace

absl::StatusOr<Plan> PlanLanding(const PlanInput& in) {
  const json& report = *in.report;
  std::map<std::string, const json*> entries;
  for (const auto& e : report["entries"]) entries[Str(e, "key")] = &e;
  auto yaml_files = FilesOf(in.ttxla_patch);
  if (!yaml_files.ok()) return yaml_files.status();
  auto forge_files = FilesOf(in.forge_patch);
  if (!forge_files.ok()) return forge_files.status();

  std::vector<Unit> units;
  for (const auto& [path, hunks] : *yaml_files) {
    if (auto st = YamlUnits(in, path, hunks, entries, units); !st.ok()) return st;
  }
  for (const auto& [path, hunks] : *forge_files) ForgeUnits(path, hunks, report, units);

  // Each unit on its own against the target.
  std::map<std::pair<bool, std::string>, std::string> targets;
  for (Unit& u : units) {
    auto [it, fresh] = targets.try_emplace({u.forge, u.file});
    if (fresh) {
      auto text = u.forge ? in.forge_target(u.file) : in.ttxla_target(u.file);
      if (!text.ok()) return text.status();
      it->second = *text;
    }
    if (!u.why.empty()) continue;
    const diff::PartialApply alone = ApplyUnits(it->second, {&u});
    u.applies = std::all_of(alone.hunks.begin(), alone.hunks.end(),
                            [](const auto& p) { return p.applied; });
    if (!u.applies) {
      for (const auto& p : alone.hunks) {
        if (!p.applied) u.why = p.why;
      }
      if (!u.forge)
        u.why = util::StrCat("the entry changed upstream since the sweep (", u.why, ")");
    }
  }

  Plan plan;
  // An excluded entry is named when it had something to land.
  std::set<std::string> owned;
  for (const Unit& u : units) owned.insert(u.owners.begin(), u.owners.end());
  for (const auto& [key, why] : in.excluded) {
    if (owned.count(key)) plan.left_out[key] = why;
  }
  for (const Unit& u : units) {
    if (u.applies) continue;
    if (u.owners.empty()) {
      plan.problems.push_back(util::StrCat(u.forge ? "tt_forge_models/" : "tt-xla/", u.file, ": ",
                                           u.what, " does not apply: ", u.why));
      continue;
    }
    for (const auto& key : u.owners) {
      plan.left_out.try_emplace(key, util::StrCat(u.what, " does not apply: ", u.why));
    }
  }
  // A unit lands when it applies and serves an entry that lands (or no entry at all).
  std::map<std::pair<bool, std::string>, std::vector<const Unit*>> kept;
  for (const Unit& u : units) {
    if (!u.applies) continue;
    const bool serves = u.owners.empty() ||
                        std::any_of(u.owners.begin(), u.owners.end(),
                                    [&](const std::string& k) { return !plan.left_out.count(k); });
    if (!serves) continue;
    kept[{u.forge, u.file}].push_back(&u);
    for (const auto& k : u.owners) {
      if (!plan.left_out.count(k)) plan.landed.insert(k);
    }
  }
  for (const auto& [where, list] : kept) {
    const diff::PartialApply together = ApplyUnits(targets[where], list);
    for (const auto& p : together.hunks) {
      if (!p.applied) {
        return absl::FailedPreconditionError(util::StrCat(
            where.second, ": hunks that apply one by one do not apply together: ", p.why));
      }
    }
    (where.first ? plan.forge : plan.ttxla).push_back({where.second, together.text});
  }
  return plan;
}

}  // namespace triage::ctl::land
