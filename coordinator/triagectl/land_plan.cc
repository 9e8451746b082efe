#include "coordinator/triagectl/land_plan.h"

#include <algorithm>

#include "common/diff/apply_diff.h"
#include "common/inventory/document.h"
#include "common/inventory/key_grammar.h"
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

// A part of a hunk that serves one entry (docs/landing.md, "Units"): its changed lines with the
// context around them that lies inside the entry.
struct EntryHunk {
  std::string owner;       // the entry's key; "" for lines of no entry
  bool new_entry = false;  // its lines add the entry (a key the file did not have)
  diff::Hunk hunk;
};

// The key a line of a test-config file defines ("  key:" at the entries' indent), or "".
std::string KeyOfLine(std::string_view line) {
  if (!line.starts_with("  ") || line.starts_with("   ")) return "";
  std::string_view t = util::TrimWhitespace(line);
  if (!t.ends_with(":")) return "";
  t.remove_suffix(1);
  if (t.size() >= 2 && t.front() == '"' && t.back() == '"') t = t.substr(1, t.size() - 2);
  return std::string(t);
}

// Splits a hunk at entry boundaries. A patch may hold one hunk for the changes of several entries
// (entries without a blank line between them: one entry's trailing context is the next one's
// key), and a change right after an entry's last line (a field appended to it) lies before the
// next entry's key: each changed line belongs to the entry that holds it, an added line to the
// entry that holds the line before it, an added key the report knows (and the file did not have)
// starts a new entry. Each part keeps up to 3 lines of context inside its entry; a part whose
// change ends its entry keeps the next line as its one line of trailing context (ApplyHunksNear
// may drop it at the entry's window).
std::vector<EntryHunk> SplitByEntry(const diff::Hunk& h, const inventory::Document& old_doc,
                                    const std::map<std::string, const json*>& report_entries) {
  const auto& entries = old_doc.entries();
  // The entry holding old line x: the last whose key is at or above it (-1: none).
  const auto owner_of_line = [&](int x) {
    int owner = -1;
    for (int i = 0; i < static_cast<int>(entries.size()) && entries[i].first_line <= x; ++i) {
      owner = i;
    }
    return owner;
  };
  struct Line {
    const std::string* text;
    char tag;      // ' ', '-', '+', '\\'
    int old_line;  // ' ', '-': the old line; '+': the old line it is inserted before
    int new_line;  // ' ', '+': the new line; '-': the new line it was before
    std::string owner;
    bool new_entry = false;
    int entry = -1;  // index in entries (-1: a new entry or none)
  };
  std::vector<Line> lines;
  int o = h.old_count == 0 ? h.old_start : h.old_start - 1;
  int n = h.new_count == 0 ? h.new_start : h.new_start - 1;
  std::string new_key;  // the new entry the '+' lines run in
  for (const std::string& text : h.lines) {
    const char tag = text.empty() ? ' ' : text[0];
    Line l{&text, tag, o, n, "", false, -1};
    if (tag == '\\') {
      if (!lines.empty()) {
        l.owner = lines.back().owner;
        l.new_entry = lines.back().new_entry;
        l.entry = lines.back().entry;
      }
      lines.push_back(l);
      continue;
    }
    if (tag == '+') {
      const std::string key = KeyOfLine(std::string_view(text).substr(1));
      if (!key.empty() && report_entries.count(key) && old_doc.Find(key) == nullptr) new_key = key;
    } else {
      new_key.clear();
    }
    if (tag == '+' && !new_key.empty()) {
      l.owner = new_key;
      l.new_entry = true;
    } else {
      l.entry = owner_of_line(tag == '+' ? std::max(0, o - 1) : o);
      if (l.entry >= 0) l.owner = entries[l.entry].key;
    }
    if (tag != '+') ++o;
    if (tag != '-') ++n;
    lines.push_back(std::move(l));
  }
  // Blank and comment lines added right above a new entry's key are the new entry's (the blank
  // line between entries that a new entry brings).
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (!lines[i].new_entry || lines[i - 1].new_entry) continue;
    for (std::size_t j = i; j > 0 && lines[j - 1].tag == '+' &&
                            util::IsBlankOrComment(std::string_view(*lines[j - 1].text).substr(1));
         --j) {
      lines[j - 1].owner = lines[i].owner;
      lines[j - 1].new_entry = true;
      lines[j - 1].entry = -1;
    }
  }
  // Groups of change lines with one owner, in order.
  std::vector<std::pair<std::size_t, std::size_t>> groups;  // first and last line index
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].tag != '+' && lines[i].tag != '-') continue;
    if (!groups.empty() && lines[groups.back().second].owner == lines[i].owner &&
        lines[groups.back().second].new_entry == lines[i].new_entry) {
      groups.back().second = i;
    } else {
      groups.push_back({i, i});
    }
  }
  std::vector<EntryHunk> out;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    auto [first, last] = groups[g];
    while (last + 1 < lines.size() && lines[last + 1].tag == '\\') ++last;
    const Line& head = lines[first];
    const inventory::Entry* entry = head.entry >= 0 ? &entries[head.entry] : nullptr;
    const std::size_t floor = g == 0 ? 0 : groups[g - 1].second + 1;
    const std::size_t ceiling = g + 1 < groups.size() ? groups[g + 1].first : lines.size();
    // Leading context: inside the entry (a new entry's and a keyless part's: any).
    std::size_t begin = first;
    for (int k = 0; k < 3 && begin > floor && lines[begin - 1].tag == ' '; ++k) {
      if (entry != nullptr && lines[begin - 1].old_line < entry->first_line) break;
      --begin;
    }
    // Trailing context: inside the entry, else the one line after it.
    std::size_t end = last + 1;
    for (int k = 0; k < 3 && end < ceiling && (lines[end].tag == ' ' || lines[end].tag == '\\');) {
      if (lines[end].tag == ' ') {
        if (entry != nullptr && lines[end].old_line > entry->last_line) break;
        ++k;
      }
      ++end;
    }
    if (end == last + 1 && end < lines.size() && lines[end].tag == ' ') {
      ++end;
      if (end < lines.size() && lines[end].tag == '\\') ++end;
    }
    EntryHunk part;
    part.owner = head.owner;
    part.new_entry = head.new_entry;
    diff::Hunk& sub = part.hunk;
    for (std::size_t i = begin; i < end; ++i) {
      sub.lines.push_back(*lines[i].text);
      if (lines[i].tag == ' ' || lines[i].tag == '-') ++sub.old_count;
      if (lines[i].tag == ' ' || lines[i].tag == '+') ++sub.new_count;
    }
    sub.old_start = sub.old_count == 0 ? lines[begin].old_line : lines[begin].old_line + 1;
    sub.new_start = sub.new_count == 0 ? lines[begin].new_line : lines[begin].new_line + 1;
    sub.header = util::StrCat("@@ -", sub.old_start, ",", sub.old_count, " +", sub.new_start, ",",
                              sub.new_count, " @@");
    out.push_back(std::move(part));
  }
  return out;
}

// The YAML units of one tt-xla file: one per entry, holding every part of a hunk that changes it
// (SplitByEntry); a new entry's lines; lines of no entry.
absl::Status YamlUnits(const PlanInput& in, const std::string& path,
                       const std::vector<diff::Hunk>& hunks,
                       const std::map<std::string, const json*>& entries,
                       std::vector<Unit>& units) {
  auto before = in.ttxla_at_sweep(path);
  if (!before.ok()) return before.status();
  auto target = in.ttxla_target(path);
  if (!target.ok()) return target.status();
  const inventory::KeyGrammar grammar =
      inventory::GrammarOrDefault(in.ttxla_at_sweep(std::string(inventory::kRunnerPath)));
  const inventory::Document old_doc =
      inventory::Document::Parse(path, *before, {.grammar = &grammar});
  const inventory::Document new_doc =
      inventory::Document::Parse(path, *target, {.grammar = &grammar});
  std::map<std::string, std::size_t> unit_of;  // an entry's unit in units
  for (const diff::Hunk& h : hunks) {
    for (EntryHunk& part : SplitByEntry(h, old_doc, entries)) {
      if (part.new_entry) {
        Unit u;
        u.file = path;
        u.what = "its new YAML entry";
        u.owners.insert(part.owner);
        if (new_doc.Find(part.owner) != nullptr) {
          u.why = util::StrCat(path, " has an entry ", part.owner, " already (added upstream)");
        }
        u.hunks = {std::move(part.hunk)};
        u.windows = {diff::LineWindow{}};
        units.push_back(std::move(u));
        continue;
      }
      if (part.owner.empty()) {
        Unit u;
        u.file = path;
        u.what = util::StrCat("the lines of ", path, " at ", part.hunk.header);
        u.hunks = {std::move(part.hunk)};
        units.push_back(std::move(u));
        continue;
      }
      auto [it, fresh] = unit_of.try_emplace(part.owner, units.size());
      if (fresh) {
        Unit u;
        u.file = path;
        u.what = "its YAML entry";
        u.owners.insert(part.owner);
        units.push_back(std::move(u));
      }
      Unit& u = units[it->second];
      const inventory::Entry* owner = old_doc.Find(part.owner);
      const inventory::Entry* now = new_doc.Find(part.owner);
      diff::LineWindow window{0, 0};
      if (now == nullptr) {
        u.why = util::StrCat("the entry is no longer in ", path, " (removed upstream)");
      } else {
        // The entry's lines at the target, up to the next entry's key; the window ends at the
        // entry's last line (comments and blanks after it belong to nobody), old_end likewise,
        // so a part whose change ends the entry may drop its trailing context there.
        int end = new_doc.line_count();
        for (const auto& e : new_doc.entries()) {
          if (e.first_line > now->first_line) end = std::min(end, e.first_line);
        }
        int old_end = old_doc.line_count();
        for (const auto& e : old_doc.entries()) {
          if (e.first_line > owner->first_line) old_end = std::min(old_end, e.first_line);
        }
        window = diff::LineWindow{now->first_line, std::min(end, now->last_line + 1),
                                  std::min(old_end, owner->last_line + 1)};
      }
      u.hunks.push_back(std::move(part.hunk));
      u.windows.push_back(window);
    }
  }
  return absl::OkStatus();
}

// A shared fix of a remediation sweep (report.json's shared_fixes, docs/remediation.md): the
// entries it fixed own it, so it stays out with them, and they with it. false: file is no shared
// fix ("tt-xla/<path>" or "tt_forge_models/<path>").
bool SharedOwners(const json& report, const std::string& file, Unit& u) {
  bool shared = false;
  for (const auto& f : report.value("shared_fixes", json::array())) {
    if (Str(f, "file") != file || !f.value("landed", false)) continue;
    shared = true;
    for (const auto& k : f.value("fixed", json::array())) u.owners.insert(k.get<std::string>());
  }
  if (shared) u.what = util::StrCat("the shared fix of ", file);
  return shared;
}

// A tt-xla file that is not a test-config file: a shared fix, as a whole.
void SharedTtXlaUnit(const std::string& path, const std::vector<diff::Hunk>& hunks,
                     const json& report, std::vector<Unit>& units) {
  Unit u;
  u.file = path;
  u.hunks = hunks;
  if (!SharedOwners(report, util::StrCat("tt-xla/", path), u)) {
    u.what = util::StrCat("the change of ", path);
  }
  units.push_back(std::move(u));
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
  if (SharedOwners(report, util::StrCat("tt_forge_models/", path), u)) {
    units.push_back(std::move(u));
    return;
  }
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
    if (!path.ends_with(".yaml") && !path.ends_with(".yml")) {
      SharedTtXlaUnit(path, hunks, report, units);
      continue;
    }
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
