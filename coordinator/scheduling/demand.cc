#include "coordinator/scheduling/demand.h"

#include <algorithm>
#include <functional>
#include <set>
#include <utility>

#include "common/util/strings.h"

namespace triage::coord {
namespace {

template <typename R>
bool Has(const R& range, std::string_view s) {
  return std::find(range.begin(), range.end(), s) != range.end();
}

int MinDevices(const ShardRecord& s) { return std::max(1, s.spec.min_devices()); }

bool OffersExecutor(const v1::AgentDimensions& dims, std::string_view executor) {
  return dims.executors_size() > 0 ? Has(dims.executors(), executor) : executor == "native";
}

// The native executor runs tt-xla's runner: an agent whose self-check failed cannot.
bool RunsRunner(const v1::AgentDimensions& dims, std::string_view executor) {
  return executor != "native" || dims.runner_problem().empty();
}

bool HasDevices(const v1::AgentDimensions& dims, int min_devices) {
  return min_devices <= 1 || dims.device_count() >= min_devices;
}

bool Offers(const v1::AgentDimensions& dims, std::string_view executor, std::string_view playbook,
            const std::vector<std::string>& archs, bool cpu_ok, int min_devices,
            bool device_probes) {
  if (!OffersExecutor(dims, executor) || !RunsRunner(dims, executor)) return false;
  if (dims.playbooks_size() > 0 && !Has(dims.playbooks(), playbook)) return false;
  if (dims.cpu_only()) return cpu_ok;
  return (!archs.empty() && Has(archs, dims.arch()) && HasDevices(dims, min_devices)) ||
         (cpu_ok && device_probes);
}

// "arch p150", "arch n150 or p150", plus the cpu-only alternative of probe work.
std::string Needs(const Requirement& r) {
  std::string what =
      r.archs.empty() ? std::string() : util::StrCat("arch ", util::StrJoin(r.archs, " or "));
  if (r.cpu_ok)
    what = what.empty() ? "a cpu_only agent" : util::StrCat(what, " or a cpu_only agent");
  if (what.empty()) what = "no agent at all";
  if (r.min_devices > 1 && !r.archs.empty()) {
    return util::StrCat(what, " with ", r.min_devices, " devices and executor ", r.executor);
  }
  return util::StrCat(what, " with executor ", r.executor);
}

// Up to five names, sorted, each followed by what describe says of it.
std::string Listed(std::vector<const AgentRecord*> agents,
                   const std::function<std::string(const AgentRecord&)>& describe) {
  std::sort(agents.begin(), agents.end(),
            [](const auto* a, const auto* b) { return a->dims.agent_id() < b->dims.agent_id(); });
  constexpr std::size_t kShown = 5;
  std::string out;
  for (std::size_t i = 0; i < agents.size() && i < kShown; ++i) {
    util::StrAppend(&out, i == 0 ? "" : ", ", agents[i]->dims.agent_id(), describe(*agents[i]));
  }
  if (agents.size() > kShown) util::StrAppend(&out, " and ", agents.size() - kShown, " more");
  return out;
}

std::string Names(const std::vector<const AgentRecord*>& agents, std::string_view state) {
  return util::StrCat(Listed(agents, [](const AgentRecord&) { return std::string(); }),
                      agents.size() == 1 ? " is " : " are ", state);
}

// No registered agent offers r: what the agents of the right kind (its archs, or cpu_only ones
// for probe work) lack, narrowing them down one requirement at a time. Returns the reason (a
// metric label) and sets why.
std::string Lacking(const Requirement& r, const std::vector<const AgentRecord*>& agents,
                    std::string& why) {
  std::vector<const AgentRecord*> kind;
  for (const auto* a : agents) {
    if (a->dims.cpu_only() ? r.cpu_ok : Has(r.archs, a->dims.arch())) kind.push_back(a);
  }
  if (kind.empty()) {
    why = r.archs.empty()
              ? std::string("no cpu_only agent is registered")
              : util::StrCat("no agent of arch ", util::StrJoin(r.archs, " or "),
                             r.cpu_ok ? " and no cpu_only agent" : "", " is registered");
    return "arch";
  }
  // Keeps the agents that meet pred; true when none does.
  auto none = [&kind](const std::function<bool(const v1::AgentDimensions&)>& pred) {
    std::vector<const AgentRecord*> left;
    for (const auto* a : kind) {
      if (pred(a->dims)) left.push_back(a);
    }
    if (left.empty()) return true;
    kind = std::move(left);
    return false;
  };
  if (none([&](const auto& d) { return OffersExecutor(d, r.executor); })) {
    why = util::StrCat("the agents of that arch do not offer executor ", r.executor);
    return "executor";
  }
  if (none([&](const auto& d) {
        return d.playbooks_size() == 0 || Has(d.playbooks(), r.playbook);
      })) {
    why = util::StrCat("the agents of that arch do not take playbook ", r.playbook);
    return "playbook";
  }
  if (none([&](const auto& d) { return d.cpu_only() || HasDevices(d, r.min_devices); })) {
    why = util::StrCat("the agents of that arch have fewer than ", r.min_devices,
                       " devices: ", Listed(kind, [](const AgentRecord& a) {
                         return util::StrCat(" has ", a.dims.device_count());
                       }));
    return "devices";
  }
  // The first one's problem (they are most often the same).
  bool first = true;
  why = util::StrCat("the agents of that arch cannot run tt-xla's runner: ",
                     Listed(kind, [&first](const AgentRecord& a) {
                       if (!std::exchange(first, false)) return std::string();
                       return util::StrCat(" (", a.dims.runner_problem(), ")");
                     }));
  return "runner";
}

}  // namespace

Requirement Requirement::Of(const ShardRecord& s) {
  return {s.spec.executor(), s.spec.playbook(), s.archs, s.cpu_ok, MinDevices(s)};
}

bool AgentOffers(const v1::AgentDimensions& dims, const Requirement& r, bool device_probes) {
  return Offers(dims, r.executor, r.playbook, r.archs, r.cpu_ok, r.min_devices, device_probes);
}

bool AgentOffers(const v1::AgentDimensions& dims, const ShardRecord& s, bool device_probes) {
  return Offers(dims, s.spec.executor(), s.spec.playbook(), s.archs, s.cpu_ok, MinDevices(s),
                device_probes);
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
      u.reason = Lacking(r, agents, why);
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
