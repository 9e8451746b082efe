#include "coordinator/scheduling/demand.h"

#include <algorithm>
#include <set>

#include "common/util/strings.h"

namespace triage::coord {
namespace {

template <typename R>
bool Has(const R& range, std::string_view s) {
  return std::find(range.begin(), range.end(), s) != range.end();
}

// "arch p150", "arch n150 or p150", plus the cpu-only alternative of probe work.
std::string Needs(const Requirement& r) {
  std::string what =
      r.archs.empty() ? std::string() : util::StrCat("arch ", util::StrJoin(r.archs, " or "));
  if (r.cpu_ok)
    what = what.empty() ? "a cpu_only agent" : util::StrCat(what, " or a cpu_only agent");
  if (what.empty()) what = "no agent at all";
  return util::StrCat(what, " with executor ", r.executor);
}

std::string Names(const std::vector<const AgentRecord*>& agents, std::string_view state) {
  std::vector<std::string> names;
  for (const auto* a : agents) names.push_back(a->dims.agent_id());
  std::sort(names.begin(), names.end());
  constexpr std::size_t kShown = 5;
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < kShown; ++i) {
    util::StrAppend(&out, i == 0 ? "" : ", ", names[i]);
  }
  if (names.size() > kShown) util::StrAppend(&out, " and ", names.size() - kShown, " more");
  return util::StrCat(out, names.size() == 1 ? " is " : " are ", state);
}

}  // namespace

Requirement Requirement::Of(const ShardRecord& s) {
  return {s.spec.executor(), s.spec.playbook(), s.archs, s.cpu_ok};
}

bool AgentOffers(const v1::AgentDimensions& dims, std::string_view executor,
                 std::string_view playbook, const std::vector<std::string>& archs, bool cpu_ok,
                 bool device_probes) {
  if (dims.executors_size() > 0 ? !Has(dims.executors(), executor) : executor != "native") {
    return false;
  }
  if (dims.playbooks_size() > 0 && !Has(dims.playbooks(), playbook)) return false;
  if (dims.cpu_only()) return cpu_ok;
  return (!archs.empty() && Has(archs, dims.arch())) || (cpu_ok && device_probes);
}

bool AgentOffers(const v1::AgentDimensions& dims, const Requirement& r, bool device_probes) {
  return AgentOffers(dims, r.executor, r.playbook, r.archs, r.cpu_ok, device_probes);
}

void Demand::Add(const std::string& sweep_id, const Requirement& r, bool waiting, int delta) {
  auto key = std::make_pair(sweep_id, r);
  auto it = open_.find(key);
  if (it == open_.end()) {
    if (delta <= 0) return;
    it = open_.emplace(std::move(key), Count{}).first;
  }
  (waiting ? it->second.waiting : it->second.queued) += delta;
  if (it->second.queued <= 0 && it->second.waiting <= 0) open_.erase(it);
}

std::vector<Unservable> Demand::Evaluate(const std::vector<const AgentRecord*>& agents) const {
  std::vector<Unservable> out;
  for (const auto& [key, c] : open_) {
    const int count = c.queued + c.waiting;
    const Requirement& r = key.second;
    std::vector<const AgentRecord*> drained, offline;
    bool served = false;
    for (const auto* a : agents) {
      if (!AgentOffers(a->dims, r, device_probes_)) continue;
      if (a->offline) {
        offline.push_back(a);
      } else if (a->draining) {
        drained.push_back(a);
      } else {
        served = true;
        break;
      }
    }
    if (served) continue;
    Unservable u;
    u.sweep_id = key.first;
    u.requirement = r;
    u.shards = count;
    u.queued = c.queued;
    u.arch = r.archs.empty() ? "cpu" : r.archs.front();
    std::string why;
    if (!drained.empty()) {
      u.reason = "drained";
      why = Names(drained, "drained");
    } else if (!offline.empty()) {
      u.reason = "offline";
      why = Names(offline, "offline");
    } else {
      // No registered agent offers it: say what the agents of the right kind lack.
      std::vector<const AgentRecord*> kind;
      for (const auto* a : agents) {
        if (a->dims.cpu_only() ? r.cpu_ok : Has(r.archs, a->dims.arch())) kind.push_back(a);
      }
      const bool executor_offered = std::any_of(kind.begin(), kind.end(), [&](const auto* a) {
        return a->dims.executors_size() > 0 ? Has(a->dims.executors(), r.executor)
                                            : r.executor == "native";
      });
      if (kind.empty()) {
        u.reason = "arch";
        why = r.archs.empty()
                  ? std::string("no cpu_only agent is registered")
                  : util::StrCat("no agent of arch ", util::StrJoin(r.archs, " or "),
                                 r.cpu_ok ? " and no cpu_only agent" : "", " is registered");
      } else if (!executor_offered) {
        u.reason = "executor";
        why = util::StrCat("the agents of that arch do not offer executor ", r.executor);
      } else {
        u.reason = "playbook";
        why = util::StrCat("the agents of that arch do not take playbook ", r.playbook);
      }
    }
    u.message = util::StrCat(count, count == 1 ? " shard needs " : " shards need ", Needs(r),
                             " (playbook ", r.playbook, "): no live agent offers it (", why, ")");
    out.push_back(std::move(u));
  }
  return out;
}

std::int64_t EstimateEta(const std::map<std::string, LaneProgress>& lanes, TimePoint now,
                         int min_results) {
  double eta = 0;
  bool any_open = false;
  for (const auto& [lane, p] : lanes) {
    if (p.open <= 0) continue;
    any_open = true;
    if (p.unservable || p.results < min_results) return -1;
    const double elapsed = ToSeconds(now - p.first_start);
    if (elapsed <= 0) return -1;
    eta = std::max(eta, p.open * elapsed / p.results);
  }
  return any_open ? static_cast<std::int64_t>(eta + 0.5) : 0;
}

}  // namespace triage::coord
