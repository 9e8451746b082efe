#include "agent/playbooks/playbook.h"

#include <algorithm>

#include "agent/playbooks/shard_run.h"
#include "common/classify/classify.h"

namespace triage::playbooks {

bool Playbook::Takes(std::string_view flavor) const {
  auto rules = classify::Classifier::FromYaml(std::string("playbooks:\n") + RuleYaml(Catalog()),
                                              std::string(Name()));
  if (!rules.ok()) return false;
  const auto flavors = rules->Flavors(Name());
  return std::find(flavors.begin(), flavors.end(), flavor) != flavors.end();
}

PhasePlan Playbook::Plan(v1::ShardPhase phase) const {
  PhasePlan plan;
  plan.probe_and_fix = phase != v1::PHASE_VERIFY;
  plan.verify = phase != v1::PHASE_PROBE;
  return plan;
}

void Playbook::Decide(ShardRun&, EntryWork& work, const Verification& verification) const {
  DecideFromVerification(work, verification);
}

absl::StatusOr<v1::ShardResult> Playbook::Run(PlaybookContext& ctx) const {
  ShardRun run(ctx, *this);
  return run.Run();
}

}  // namespace triage::playbooks
