#include "coordinator/planning/fan_out.h"

#include <algorithm>
#include <map>

#include "common/command/shared_scope.h"
#include "common/util/strings.h"

namespace triage::coord {
bool IsSharedEdit(const v1::ShardSpec& spec, const v1::FileEdit& edit) {
  return command::OutsideLoader(spec.loader(), edit.repo(), edit.path());
}

std::string ReleaseFollower(const ShardRecord& lead, const v1::ShardResult* result,
                            ShardRecord& follower, TimePoint now) {
  v1::FanOut& fan = *follower.spec.mutable_fan_out();
  fan.set_released(true);
  follower.state = ShardState::kQueued;
  follower.enqueued_at = now;
  follower.eligible_at = now;
  if (lead.state != ShardState::kSucceeded || result == nullptr) {
    return util::StrCat("shard ", follower.id, ": its lead ", lead.id, " ",
                        lead.state == ShardState::kCancelled ? "was cancelled" : "failed",
                        "; cluster ", fan.cluster(), "'s entries get their own runs");
  }
  std::map<std::string, std::string> cluster_of;  // file + key -> the lead entry's cluster
  for (const auto& e : lead.spec.entries()) cluster_of[e.file() + "\n" + e.key()] = e.cluster();
  const v1::CommandSummary* hint = nullptr;
  for (const auto& o : result->entries()) {
    auto c = cluster_of.find(o.file() + "\n" + o.key());
    if (c == cluster_of.end() || c->second != fan.cluster()) continue;
    const bool fixed = o.verdict() == kPassVerdict &&
                       o.command_check() != "replaced by the farm's decision" &&
                       o.arch() == lead.spec.arch();
    if (fixed) fan.add_lead_fixed_keys(o.key());
    if (o.has_summary() && (hint == nullptr || (fixed && fan.lead_fixed_keys_size() == 1))) {
      hint = &o.summary();
    }
  }
  if (hint != nullptr) *fan.mutable_lead_summary() = *hint;
  fan.set_lead_fixed(fan.lead_fixed_keys_size() > 0);
  if (!fan.lead_fixed()) {
    return util::StrCat(
        "shard ", follower.id, ": its lead ", lead.id, " fixed no entry of cluster ", fan.cluster(),
        "; its entries get their own runs",
        hint != nullptr
            ? util::StrCat(", with the lead's summary (", hint->fingerprint(), ") as a hint")
            : "");
  }
  for (const auto& fe : result->file_edits()) {
    if (!IsSharedEdit(lead.spec, fe)) continue;
    *follower.spec.add_pre_apply() = fe;
    fan.add_shared_files(util::StrCat(fe.repo(), ":", fe.path()));
  }
  for (const auto& op : result->registry_ops()) *follower.spec.add_pre_registry() = op;
  return util::StrCat("shard ", follower.id, ": its lead ", lead.id, " fixed ",
                      util::StrJoin(fan.lead_fixed_keys(), ", "), " of cluster ", fan.cluster(),
                      fan.shared_files().empty()
                          ? "; no shared change to pre-apply, its entries get their own runs"
                          : util::StrCat("; its entries are verified with ",
                                         util::StrJoin(fan.shared_files(), ", "),
                                         " pre-applied before any command runs"));
}

bool CommandEditsLand(const v1::ShardResult& result) {
  bool accepted = false, overruled = false;
  for (const auto& o : result.entries()) {
    const bool replaced = o.command_check() == "replaced by the farm's decision";
    overruled |= replaced;
    accepted |= o.changed() && !replaced;
  }
  return accepted || !overruled;
}

std::vector<v1::FileEdit> SharedEditsToBuildOn(const v1::ShardSpec& spec,
                                               const v1::ShardResult& result,
                                               const std::vector<AcceptedResult>& earlier) {
  auto same = [](const v1::FileEdit& a, const v1::FileEdit& b) {
    return a.repo() == b.repo() && a.path() == b.path() && a.diff() == b.diff();
  };
  std::vector<v1::FileEdit> out;
  for (const auto& fe : result.file_edits()) {
    if (!IsSharedEdit(spec, fe)) continue;
    for (const auto& a : earlier) {
      if (a.spec->shard_id() == spec.shard_id() || !CommandEditsLand(*a.result)) continue;
      for (const auto& e : a.result->file_edits()) {
        if (e.repo() != fe.repo() || e.path() != fe.path() || e.diff() == fe.diff()) continue;
        const bool started_from = std::any_of(spec.pre_apply().begin(), spec.pre_apply().end(),
                                              [&](const v1::FileEdit& p) { return same(p, e); });
        const bool listed =
            std::any_of(out.begin(), out.end(), [&](const v1::FileEdit& p) { return same(p, e); });
        if (!started_from && !listed) out.push_back(e);
      }
    }
  }
  return out;
}

}  // namespace triage::coord
