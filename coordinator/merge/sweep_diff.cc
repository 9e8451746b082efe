#include "coordinator/merge/sweep_diff.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "common/junit/reason.h"
#include "common/util/strings.h"
#include "nlohmann/json.hpp"

namespace triage::merge {
namespace {

using nlohmann::json;

constexpr std::string_view kPassing = "EXPECTED_PASSING";
constexpr std::string_view kNoReason = "(no reason)";

// The failure-cluster key of a reason, as the report's clusters (report_json.cc) write it.
std::string SignatureOf(const std::string& reason) {
  return reason.empty() ? std::string(kNoReason) : junit::ReasonSignature(reason);
}

std::string StringOr(const json& j, const char* name, std::string fallback = "") {
  if (!j.is_object()) return fallback;
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// One report.json, checked enough that the comparison reads only well-formed fields.
struct ReportView {
  std::string sweep;
  struct Entry {
    std::string file;
    std::string key;
    const json* entry = nullptr;
  };
  std::vector<Entry> entries;
  std::map<std::string, std::size_t> index;  // file + '\n' + key -> entries
  std::map<std::string, int> cluster_sizes;  // signature -> entries
};

// The failing outcomes' signatures per entry, counted like the report counts its clusters
// (report_json.cc): for a report.json written before it had "clusters".
std::map<std::string, int> ClustersFromEntries(const std::vector<ReportView::Entry>& entries) {
  std::map<std::string, int> sizes;
  for (const auto& e : entries) {
    std::set<std::string> signatures;
    for (const auto& [arch, o] : e.entry->at("arch_outcomes").items()) {
      const std::string status = StringOr(o, "status");
      if (status != "KNOWN_FAILURE_XFAIL" && status != "NOT_SUPPORTED_SKIP") continue;
      signatures.insert(SignatureOf(StringOr(o, "reason")));
    }
    for (const auto& s : signatures) sizes[s]++;
  }
  return sizes;
}

absl::StatusOr<std::map<std::string, int>> ClusterSizes(const json& clusters,
                                                        const std::string& where) {
  if (!clusters.is_array()) {
    return absl::InvalidArgumentError(util::StrCat(where, ": \"clusters\" is not an array"));
  }
  std::map<std::string, int> sizes;
  for (std::size_t i = 0; i < clusters.size(); ++i) {
    const json& c = clusters[i];
    if (!c.is_object() || !c.contains("signature") || !c["signature"].is_string() ||
        !c.contains("size") || !c["size"].is_number_integer()) {
      return absl::InvalidArgumentError(util::StrCat(
          where, ": clusters[", i, "] needs a string \"signature\" and an integer \"size\""));
    }
    sizes[c["signature"].get<std::string>()] += c["size"].get<int>();
  }
  return sizes;
}

absl::StatusOr<ReportView> View(const json& report, std::string_view which) {
  ReportView v;
  if (!report.is_object()) {
    return absl::InvalidArgumentError(util::StrCat("the ", which, " report.json is not an object"));
  }
  v.sweep = StringOr(report, "sweep");
  const std::string where = util::StrCat(
      "the ", which, " report.json", v.sweep.empty() ? "" : util::StrCat(" (sweep ", v.sweep, ")"));
  if (!report.contains("entries") || !report["entries"].is_array()) {
    return absl::InvalidArgumentError(util::StrCat(where, ": \"entries\" is not an array"));
  }
  const json& entries = report["entries"];
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const json& e = entries[i];
    const std::string at = util::StrCat(where, ": entries[", i, "]");
    if (!e.is_object()) return absl::InvalidArgumentError(util::StrCat(at, " is not an object"));
    for (const char* field : {"key", "file"}) {
      if (!e.contains(field) || !e[field].is_string()) {
        return absl::InvalidArgumentError(util::StrCat(at, ": \"", field, "\" is not a string"));
      }
    }
    if (!e.contains("arch_outcomes") || !e["arch_outcomes"].is_object()) {
      return absl::InvalidArgumentError(util::StrCat(at, ": \"arch_outcomes\" is not an object"));
    }
    for (const auto& [arch, o] : e["arch_outcomes"].items()) {
      if (!o.is_null() && !(o.is_object() && o.contains("status") && o["status"].is_string())) {
        return absl::InvalidArgumentError(util::StrCat(
            at, ": arch_outcomes.", arch, " is neither null nor an outcome with a \"status\""));
      }
    }
    if (e.contains("verdicts") && !e["verdicts"].is_object()) {
      return absl::InvalidArgumentError(util::StrCat(at, ": \"verdicts\" is not an object"));
    }
    if (e.contains("carried_from") && !e["carried_from"].is_null() &&
        !e["carried_from"].is_string()) {
      return absl::InvalidArgumentError(
          util::StrCat(at, ": \"carried_from\" is neither null nor a sweep id"));
    }
    ReportView::Entry entry{e["file"].get<std::string>(), e["key"].get<std::string>(), &e};
    if (!v.index.emplace(entry.file + "\n" + entry.key, v.entries.size()).second) {
      return absl::InvalidArgumentError(
          util::StrCat(at, ": ", entry.key, " of ", entry.file, " is listed twice"));
    }
    v.entries.push_back(std::move(entry));
  }
  if (report.contains("clusters")) {
    auto sizes = ClusterSizes(report["clusters"], where);
    if (!sizes.ok()) return sizes.status();
    v.cluster_sizes = std::move(*sizes);
  } else {
    v.cluster_sizes = ClustersFromEntries(v.entries);
  }
  return v;
}

DiffCategory Categorize(const std::optional<ArchState>& before, const ArchState& after) {
  if (!before) return after.passing ? DiffCategory::kNewPassing : DiffCategory::kNewFailure;
  if (before->passing)
    return after.passing ? DiffCategory::kStillPassing : DiffCategory::kRegressed;
  if (after.passing) return DiffCategory::kFixed;
  // An unknown signature (an unchanged entry without a verdict's reason) is no evidence of a
  // different failure.
  if (before->signature && after.signature && *before->signature != *after.signature) {
    return DiffCategory::kStillFailingChanged;
  }
  return DiffCategory::kStillFailing;
}

std::vector<ClusterDelta> ClusterDeltas(const std::map<std::string, int>& before,
                                        const std::map<std::string, int>& after) {
  std::map<std::string, ClusterDelta> by_signature;
  for (const auto& [s, n] : before) by_signature[s] = {s, n, 0};
  for (const auto& [s, n] : after) {
    auto& d = by_signature[s];
    d.signature = s;
    d.after = n;
  }
  std::vector<ClusterDelta> out;
  for (auto& [s, d] : by_signature) out.push_back(std::move(d));
  std::stable_sort(out.begin(), out.end(), [](const ClusterDelta& a, const ClusterDelta& b) {
    const int da = std::abs(a.delta()), db = std::abs(b.delta());
    if (da != db) return da > db;
    return std::max(a.before, a.after) > std::max(b.before, b.after);
  });
  return out;
}

json StateJson(const std::optional<ArchState>& s) {
  if (!s) return nullptr;
  return {{"status", s->status},
          {"reason", s->reason.empty() ? json(nullptr) : json(s->reason)},
          {"signature", s->signature ? json(*s->signature) : json(nullptr)}};
}

}  // namespace

std::optional<ArchState> ReadArchState(const json& entry, const std::string& arch) {
  auto outcomes = entry.find("arch_outcomes");
  if (outcomes == entry.end() || !outcomes->is_object()) return std::nullopt;
  auto o = outcomes->find(arch);
  if (o == outcomes->end()) return std::nullopt;
  ArchState s;
  if (o->is_object()) {
    s.status = StringOr(*o, "status");
    s.reason = StringOr(*o, "reason");
    s.signature = SignatureOf(s.reason);
  } else {
    // Left as it was: still at the failing status the sweep selected it for. What the arch's
    // verification saw this time is the best word on why.
    s.status = "unchanged";
    auto verdicts = entry.find("verdicts");
    if (verdicts != entry.end() && verdicts->is_object() && verdicts->contains(arch)) {
      s.reason = StringOr((*verdicts)[arch], "reason");
    }
    if (!s.reason.empty()) s.signature = SignatureOf(s.reason);
  }
  s.passing = s.status == kPassing;
  return s;
}

std::string_view DiffCategoryName(DiffCategory c) {
  switch (c) {
    case DiffCategory::kFixed:
      return "fixed";
    case DiffCategory::kRegressed:
      return "regressed";
    case DiffCategory::kNewFailure:
      return "new_failure";
    case DiffCategory::kStillFailingChanged:
      return "still_failing_changed";
    case DiffCategory::kStillFailing:
      return "still_failing";
    case DiffCategory::kStillPassing:
      return "still_passing";
    case DiffCategory::kNewPassing:
      return "new_passing";
    case DiffCategory::kCarried:
      return "carried";
    case DiffCategory::kGone:
      return "gone";
  }
  return "";
}

bool IsTrivial(DiffCategory c) {
  return c == DiffCategory::kStillPassing || c == DiffCategory::kStillFailing;
}

std::map<DiffCategory, int> SweepDiff::Counts() const {
  std::map<DiffCategory, int> counts;
  for (DiffCategory c : kDiffCategories) counts[c] = 0;
  for (const auto& e : entries) counts[e.category]++;
  return counts;
}

absl::StatusOr<SweepDiff> DiffSweeps(const json& before, const json& after) {
  auto a = View(before, "older");
  if (!a.ok()) return a.status();
  auto b = View(after, "newer");
  if (!b.ok()) return b.status();
  SweepDiff d;
  d.before_sweep = a->sweep;
  d.after_sweep = b->sweep;
  for (const auto& e : b->entries) {
    auto in_a = a->index.find(e.file + "\n" + e.key);
    const json* old = in_a == a->index.end() ? nullptr : a->entries[in_a->second].entry;
    const std::string carried = StringOr(*e.entry, "carried_from");
    for (const auto& [arch, o] : e.entry->at("arch_outcomes").items()) {
      EntryDiff row;
      row.file = e.file;
      row.key = e.key;
      row.arch = arch;
      row.after = ReadArchState(*e.entry, arch);
      if (old != nullptr) row.before = ReadArchState(*old, arch);
      row.carried_from = carried;
      row.category = !carried.empty() ? DiffCategory::kCarried : Categorize(row.before, *row.after);
      d.entries.push_back(std::move(row));
    }
  }
  for (const auto& e : a->entries) {
    auto in_b = b->index.find(e.file + "\n" + e.key);
    const json* now = in_b == b->index.end() ? nullptr : b->entries[in_b->second].entry;
    for (const auto& [arch, o] : e.entry->at("arch_outcomes").items()) {
      if (now != nullptr && now->at("arch_outcomes").contains(arch)) continue;
      EntryDiff row;
      row.file = e.file;
      row.key = e.key;
      row.arch = arch;
      row.category = DiffCategory::kGone;
      row.before = ReadArchState(*e.entry, arch);
      d.entries.push_back(std::move(row));
    }
  }
  d.clusters = ClusterDeltas(a->cluster_sizes, b->cluster_sizes);
  return d;
}

json DiffJson(const SweepDiff& diff, bool all) {
  json counts = json::object();
  for (const auto& [c, n] : diff.Counts()) counts[std::string(DiffCategoryName(c))] = n;
  json entries = json::array();
  for (const auto& e : diff.entries) {
    if (!all && IsTrivial(e.category)) continue;
    json row = {{"key", e.key},
                {"file", e.file},
                {"arch", e.arch},
                {"category", DiffCategoryName(e.category)},
                {"before", StateJson(e.before)},
                {"after", StateJson(e.after)}};
    if (!e.carried_from.empty()) row["carried_from"] = e.carried_from;
    entries.push_back(std::move(row));
  }
  json clusters = json::array();
  for (const auto& c : diff.clusters) {
    clusters.push_back({{"signature", c.signature},
                        {"before", c.before},
                        {"after", c.after},
                        {"delta", c.delta()}});
  }
  return {{"before", diff.before_sweep},
          {"after", diff.after_sweep},
          {"counts", counts},
          {"entries", entries},
          {"clusters", clusters}};
}

std::string StateText(const std::optional<ArchState>& state) {
  if (!state) return "-";
  return state->reason.empty() ? state->status : util::StrCat(state->status, ": ", state->reason);
}

}  // namespace triage::merge
