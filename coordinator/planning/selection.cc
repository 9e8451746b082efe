#include "coordinator/planning/selection.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "common/command/shared_scope.h"
#include "common/inventory/key.h"
#include "common/inventory/schema.h"
#include "common/junit/reason.h"
#include "common/util/strings.h"
#include "re2/re2.h"

namespace triage::coord {
namespace {

bool IsFailingStatus(std::string_view status) {
  return status == "KNOWN_FAILURE_XFAIL" || status == "NOT_SUPPORTED_SKIP";
}

bool IsClusterId(std::string_view id) {
  if (id.size() != 10 || id.substr(0, 2) != "c-") return false;
  return std::all_of(id.begin() + 2, id.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

template <typename Field>
absl::Status Collect(const Field& values, std::string_view field,
                     std::set<std::string, std::less<>>& out) {
  for (const auto& v : values) {
    if (v.empty()) {
      return absl::InvalidArgumentError(util::StrCat("selection.", field, ": an empty value"));
    }
    out.insert(v);
  }
  return absl::OkStatus();
}

// The target archs of an entry: n300-llmbox for a tensor-parallel entry, else the sweep's.
std::vector<std::string> TargetArchs(const inventory::Entry& e,
                                     const std::vector<std::string>& archs) {
  if (e.parts->parallelism == "tensor_parallel") {
    return {std::string(inventory::kTensorParallelArch)};
  }
  return archs.empty() ? std::vector<std::string>{"n150"} : archs;
}

std::string_view ReasonOnArch(const inventory::Entry& e, std::string_view arch) {
  const inventory::Value* v = e.FieldForArch("reason", arch);
  return v != nullptr && v->is_string() ? std::string_view(v->string) : std::string_view();
}

// Whether the arch's override sets the status or the reason the entry is seen with.
bool OverrideDecides(const inventory::Entry& e, std::string_view arch) {
  const inventory::Value* overrides = e.Field("arch_overrides");
  const inventory::Value* o = overrides != nullptr ? overrides->Find(arch) : nullptr;
  return o != nullptr && (o->Find("status") != nullptr || o->Find("reason") != nullptr);
}

// A failing entry as its shards carry it: seen on the first target arch it fails on.
std::optional<SelectedEntry> FailingEntry(const inventory::Document& doc, const inventory::Entry& e,
                                          const std::vector<std::string>& archs) {
  for (const std::string& arch : TargetArchs(e, archs)) {
    const std::string_view status = e.StatusForArch(arch);
    if (!IsFailingStatus(status)) continue;
    SelectedEntry s{&doc, &e, std::string(kRemediatePlaybook), {}};
    v1::ShardEntry& se = s.shard_entry;
    se.set_key(e.key);
    se.set_file(doc.path());
    se.set_reason(std::string(ReasonOnArch(e, arch)));
    se.set_status(std::string(status));
    se.set_bringup_status(std::string(e.StringField("bringup_status")));
    if (OverrideDecides(e, arch)) se.set_override_arch(arch);
    return s;
  }
  return std::nullopt;
}

SelectedEntry ClassifiedEntry(const inventory::Document& doc, const inventory::Entry& e,
                              const classify::Match& match) {
  SelectedEntry s{&doc, &e, match.playbook, {}};
  v1::ShardEntry& se = s.shard_entry;
  se.set_key(e.key);
  se.set_file(doc.path());
  se.set_flavor(match.flavor);
  se.set_reason(match.reason);
  se.set_status(std::string(match.arch.empty() ? e.Status() : e.StatusForArch(match.arch)));
  se.set_bringup_status(std::string(e.StringField("bringup_status")));
  se.set_override_arch(match.arch);
  for (const auto& cap : match.captures) se.add_captures(cap);
  return s;
}

bool PlaybookSelected(const SelectOptions& options, const std::string& playbook) {
  return options.playbooks.empty() || std::find(options.playbooks.begin(), options.playbooks.end(),
                                                playbook) != options.playbooks.end();
}

}  // namespace

Selector::~Selector() = default;
Selector::Selector(Selector&&) noexcept = default;
Selector& Selector::operator=(Selector&&) noexcept = default;

absl::StatusOr<Selector> Selector::Compile(const v1::Selection& selection) {
  Selector s;
  s.failing_ = selection.failing();
  if (selection.keys_size() > kMaxSelectionKeys) {
    return absl::InvalidArgumentError(util::StrCat("selection.keys: ", selection.keys_size(),
                                                   " keys, over the limit of ", kMaxSelectionKeys));
  }
  for (auto [values, field, set] : {std::make_tuple(&selection.keys(), "keys", &s.keys_),
                                    std::make_tuple(&selection.files(), "files", &s.files_)}) {
    if (auto st = Collect(*values, field, *set); !st.ok()) return st;
  }
  for (const std::string& status : selection.statuses()) {
    const bool known =
        std::find(std::begin(inventory::kStatusNames), std::end(inventory::kStatusNames), status) !=
        std::end(inventory::kStatusNames);
    if (!known || (s.failing_ && !IsFailingStatus(status))) {
      return absl::InvalidArgumentError(
          util::StrCat("selection.statuses: '", status, "' is not ",
                       s.failing_ ? "a failing status (KNOWN_FAILURE_XFAIL or NOT_SUPPORTED_SKIP)"
                                  : "a status name (EXPECTED_PASSING, KNOWN_FAILURE_XFAIL, ...)"));
    }
    s.statuses_.insert(status);
  }
  for (const std::string& id : selection.clusters()) {
    if (!IsClusterId(id)) {
      return absl::InvalidArgumentError(
          util::StrCat("selection.clusters: '", id, "' is not a cluster id (c- and 8 hex digits)"));
    }
    s.clusters_.insert(id);
  }
  if (!selection.reason_regex().empty()) {
    re2::RE2::Options options;
    options.set_log_errors(false);
    s.reason_ = std::make_unique<re2::RE2>(selection.reason_regex(), options);
    if (!s.reason_->ok()) {
      return absl::InvalidArgumentError(
          util::StrCat("selection.reason_regex: '", selection.reason_regex(),
                       "' is not an RE2 pattern: ", s.reason_->error()));
    }
  }
  if (selection.limit() < 0) {
    return absl::InvalidArgumentError(
        util::StrCat("selection.limit: ", selection.limit(), " is negative (0: no limit)"));
  }
  s.limit_ = selection.limit();
  if (!s.failing_ && (selection.shared_paths_size() > 0 || selection.no_fan_out())) {
    return absl::InvalidArgumentError(
        util::StrCat("selection.", selection.no_fan_out() ? "no_fan_out" : "shared_paths",
                     ": only a failing selection (remediation) has a shared scope and fan-out"));
  }
  s.fan_out_ = s.failing_ && !selection.no_fan_out();
  if (s.failing_ && selection.shared_paths().empty()) {
    s.shared_paths_.assign(std::begin(command::kDefaultSharedPaths),
                           std::end(command::kDefaultSharedPaths));
  }
  for (const std::string& path : selection.shared_paths()) {
    if (path == command::kNoSharedPaths) {
      if (selection.shared_paths_size() > 1) {
        return absl::InvalidArgumentError(
            "selection.shared_paths: 'none' turns the shared scope off and takes no other path");
      }
      break;
    }
    auto checked = command::CheckSharedPath(path);
    if (!checked.ok()) {
      return absl::InvalidArgumentError(
          util::StrCat("selection.shared_paths: ", checked.status().message()));
    }
    s.shared_paths_.push_back(std::move(*checked));
  }
  return s;
}

bool Selector::Matches(std::string_view file, std::string_view key, std::string_view status,
                       std::string_view reason, std::string_view cluster) const {
  if (!keys_.empty() && !keys_.count(key)) return false;
  if (!files_.empty() && !files_.count(file)) return false;
  if (!statuses_.empty() && !statuses_.count(status)) return false;
  if (!clusters_.empty() && !clusters_.count(cluster)) return false;
  if (reason_ != nullptr && !re2::RE2::PartialMatch(reason, *reason_)) return false;
  return true;
}

Selection SelectEntries(const inventory::Inventory& inventory, const Selector& selector,
                        const SelectOptions& options) {
  Selection out;
  // Errors of a whole file, and errors confined to one key.
  std::map<std::string, const util::Diagnostic*, std::less<>> bad_files, bad_keys;
  for (const auto& d : inventory.diagnostics) {
    if (d.severity != util::Severity::kError) continue;
    (d.key.empty() ? bad_files.emplace(d.file, &d) : bad_keys.emplace(d.key, &d));
  }
  std::vector<SelectedEntry> matched;
  for (const auto& ref : inventory.TestEntries()) {
    const inventory::Entry& e = *ref.entry;
    if (!e.parts) continue;
    std::optional<SelectedEntry> s;
    if (selector.failing()) {
      s = FailingEntry(*ref.document, e, options.archs);
    } else if (options.rules != nullptr) {
      auto c = options.rules->Classify(e);
      if (c.match && PlaybookSelected(options, c.match->playbook)) {
        s = ClassifiedEntry(*ref.document, e, *c.match);
      }
    }
    if (!s) continue;
    v1::ShardEntry& se = s->shard_entry;
    if (!se.reason().empty()) se.set_cluster(junit::ClusterIdOfReason(se.reason()));
    if (!selector.Matches(se.file(), se.key(), se.status(), se.reason(), se.cluster())) continue;
    if (auto f = bad_files.find(se.file()); f != bad_files.end()) {
      out.problems.push_back(util::StrCat(se.file(), ": entry '", se.key(),
                                          "' left out: the file has validation errors"));
      continue;
    }
    if (auto k = bad_keys.find(se.key()); k != bad_keys.end()) {
      out.problems.push_back(
          util::StrCat(se.file(), ": entry '", se.key(), "' left out: ", k->second->ToString()));
      continue;
    }
    matched.push_back(std::move(*s));
  }
  out.matched = static_cast<int>(matched.size());

  // Clusters by size; the limit takes the largest first.
  std::map<std::string, SelectedCluster> clusters;
  for (const SelectedEntry& s : matched) {
    const v1::ShardEntry& se = s.shard_entry;
    if (se.cluster().empty()) {
      ++out.without_reason;
      continue;
    }
    SelectedCluster& c = clusters[se.cluster()];
    if (c.id.empty()) {
      c.id = se.cluster();
      c.signature = junit::ReasonSignature(se.reason());
      c.example = se.reason();
    }
    ++c.matched;
  }
  std::vector<std::size_t> order(matched.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto size_of = [&](std::size_t i) {
    const std::string& id = matched[i].shard_entry.cluster();
    return id.empty() ? 0 : clusters[id].matched;
  };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const int sa = size_of(a), sb = size_of(b);
    if (sa != sb) return sa > sb;
    return matched[a].shard_entry.cluster() < matched[b].shard_entry.cluster() && sa > 0;
  });
  const std::size_t take =
      selector.limit() > 0 ? std::min<std::size_t>(selector.limit(), order.size()) : order.size();
  std::vector<bool> taken(matched.size(), false);
  for (std::size_t i = 0; i < take; ++i) {
    taken[order[i]] = true;
    const std::string& id = matched[order[i]].shard_entry.cluster();
    if (!id.empty()) ++clusters[id].taken;
  }
  for (std::size_t i = 0; i < matched.size(); ++i) {
    if (taken[i]) out.entries.push_back(std::move(matched[i]));
  }
  for (auto& [id, c] : clusters) out.clusters.push_back(std::move(c));
  std::stable_sort(out.clusters.begin(), out.clusters.end(),
                   [](const SelectedCluster& a, const SelectedCluster& b) {
                     return a.matched > b.matched;  // ties stay in id order
                   });
  return out;
}

}  // namespace triage::coord
