#pragma once

// The on-call verbs: shards (list, with the stuck filter; requeue, cancel), agents (list,
// drain, undrain) and the audit log.

#include <ostream>

#include "coordinator/triagectl/farm_common.h"

namespace triage::ctl::farm {

// `shards list [--sweep S] [--state X] [--stuck] [--stuck-minutes N]`: one row per shard.
int RunShardsList(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);
// `shard requeue ID --reason R`: the shard's new state.
int RunShardRequeue(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);
// `shard cancel ID [--reason R]`: the shard's new state.
int RunShardCancel(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);
// `agents list`: one row per agent.
int RunAgentsList(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);
// `agents drain ID --reason R`: the agent's new state.
int RunAgentDrain(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);
// `agents undrain ID [--reason R]`: the agent's new state.
int RunAgentUndrain(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);
// `audit list [--sweep S] [--limit N]`, `sweep audit S`: one row per action, oldest first.
int RunAuditList(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);

}  // namespace triage::ctl::farm
