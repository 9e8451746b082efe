#include "coordinator/triagectl/nightly_policy_cmd.h"

#include <fstream>
#include <sstream>

#include "common/git/git.h"
#include "common/nightly/history.h"
#include "common/nightly/learn.h"
#include "common/nightly/policy.h"
#include "coordinator/triagectl/inventory_cmd.h"
#include "nlohmann/json.hpp"

namespace triage::ctl {
namespace {

bool IsDate(const std::string& s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

}  // namespace

int RunNightlyPolicy(const NightlyPolicyOptions& o, std::ostream& out, std::ostream& err) {
  if (!o.since.empty() && !IsDate(o.since)) {
    err << "triagectl: --since " << o.since << ": expected a date YYYY-MM-DD\n";
    return kExitUsage;
  }
  if (o.output != "yaml" && o.output != "json") {
    err << "triagectl: -o " << o.output << ": expected yaml or json\n";
    return kExitUsage;
  }
  git::Git git(o.repo);
  auto commit = git.RevParse(o.rev);
  if (!commit.ok()) {
    err << "triagectl: --repo " << o.repo << ": cannot read revision " << o.rev << ": "
        << commit.status().message() << "\n";
    return kExitUsage;
  }
  nightly::HistoryOptions history_options;
  history_options.since = o.since;
  history_options.max_commits = o.commits;
  auto history = nightly::LearnFromCheckout(git, *commit, history_options);
  if (!history.ok()) {
    err << "triagectl: --repo " << o.repo
        << ": cannot read its history: " << history.status().message() << "\n";
    return kExitUsage;
  }
  const nightly::Learned& learned = history->learned;
  nightly::Policy policy = learned.policy;
  if (!o.policy.empty()) {
    std::ifstream in(o.policy);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      err << "triagectl: --policy " << o.policy << ": cannot read it\n";
      return kExitUsage;
    }
    auto over = nightly::ReadPolicy(text.str(), o.policy, policy);
    if (!over.ok()) {
      err << "triagectl: --policy " << over.status().message() << "\n";
      return kExitUsage;
    }
    policy = std::move(*over);
  }
  const int rounds = history->rounds;
  if (o.output == "json") {
    nlohmann::json j;
    j["commit"] = *commit;
    j["commits_read"] = history->commits;
    j["rounds"] = rounds;
    nlohmann::json knobs = nlohmann::json::object();
    for (std::string_view knob : nightly::kPolicyKnobs) {
      const std::string k(knob);
      auto src = policy.sources.find(k);
      nlohmann::json item = {{"source", src == policy.sources.end() ? "default" : src->second}};
      nlohmann::json evidence = nlohmann::json::array();
      if (auto ev = learned.evidence.find(k); ev != learned.evidence.end() &&
                                              src != policy.sources.end() &&
                                              nightly::IsLearnedSource(src->second)) {
        for (const auto& e : ev->second) {
          evidence.push_back(
              {{"value", e.value}, {"commit", e.commit}, {"date", e.date}, {"key", e.key}});
        }
      }
      item["evidence"] = std::move(evidence);
      knobs[k] = std::move(item);
    }
    // The values, as the policy file has them.
    nlohmann::json values = {{"grid", policy.grid},
                             {"margin", policy.margin},
                             {"enable", policy.enable},
                             {"lowest", policy.lowest},
                             {"nonsense", policy.nonsense},
                             {"pcc_comment", policy.pcc_comment},
                             {"skip_bringup", policy.skip_bringup_status},
                             {"unknown_stage", policy.unknown_stage},
                             {"hang_reason", policy.hang_reason},
                             {"oom_reason", policy.oom_reason},
                             {"crash_reason", policy.crash_reason}};
    for (auto& [k, v] : values.items()) knobs[k]["value"] = v;
    j["knobs"] = std::move(knobs);
    out << j.dump(2) << "\n";
    return kExitOk;
  }
  out << "# nightly policy of " << o.repo << " at " << commit->substr(0, 12) << ": learned from "
      << history->Describe() << (o.since.empty() ? "" : " since " + o.since) << "\n";
  out << nightly::PolicyYaml(policy);
  return kExitOk;
}

}  // namespace triage::ctl
