#include "common/nightly/policy_options.h"

#include "common/util/strings.h"

namespace triage::nightly {

namespace {

// The fields a client may not set, and a file name without its text.
absl::Status CheckAskedFields(const v1::NightlyOptions& asked) {
  if (!asked.policy_yaml().empty() || !asked.policy_sources().empty() ||
      !asked.policy_learned_from().empty()) {
    return absl::InvalidArgumentError(
        "nightly_options.policy_yaml, policy_sources and policy_learned_from are resolved by the "
        "coordinator: give a policy file as policy_text (triagectl sweep start --policy FILE)");
  }
  if (asked.policy_text().empty() && !asked.policy_file().empty()) {
    return absl::InvalidArgumentError(util::StrCat(
        "nightly_options.policy_file ", asked.policy_file(), " without its text (policy_text)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckAskedPolicy(const v1::NightlyOptions& asked) {
  if (auto st = CheckAskedFields(asked); !st.ok()) return st;
  if (asked.policy_text().empty()) return absl::OkStatus();
  return ReadPolicy(asked.policy_text(), PolicyFileName(asked)).status();
}

std::string PolicyFileName(const v1::NightlyOptions& asked) {
  return asked.policy_file().empty() ? std::string("nightly_options.policy_text")
                                     : asked.policy_file();
}

absl::StatusOr<v1::NightlyOptions> ResolvePolicy(const v1::NightlyOptions& asked,
                                                 const Policy* learned,
                                                 const std::string& learned_from) {
  if (auto st = CheckAskedFields(asked); !st.ok()) return st;
  const bool learn = learned != nullptr && !asked.no_learn();
  Policy policy = learn ? *learned : Policy{};
  if (!asked.policy_text().empty()) {
    auto over = ReadPolicy(asked.policy_text(), PolicyFileName(asked), policy);
    if (!over.ok()) return over.status();
    policy = std::move(*over);
  }
  // The numbers of the older flags, over the file: the narrowest ask wins.
  if (asked.pcc_step() > 0) {
    policy.grid = asked.pcc_step();
    policy.sources["grid"] = "--pcc-step";
  }
  if (asked.pcc_margin() > 0) {
    policy.margin = asked.pcc_margin();
    policy.sources["margin"] = "--pcc-margin";
  }
  if (asked.pcc_far_below() > 0) {
    policy.lowest["default"] = asked.pcc_far_below();
    policy.sources["lowest"] = "--pcc-far-below";
  }
  if (policy.margin >= policy.grid) {
    return absl::InvalidArgumentError(
        util::StrCat("the nightly policy's margin (", policy.margin, ", from ",
                     policy.sources.count("margin") ? policy.sources["margin"] : "default",
                     ") must be smaller than its grid (", policy.grid, ", from ",
                     policy.sources.count("grid") ? policy.sources["grid"] : "default", ")"));
  }
  v1::NightlyOptions out = asked;
  out.set_policy_yaml(PolicyYaml(policy));
  out.mutable_policy_sources()->insert(policy.sources.begin(), policy.sources.end());
  out.set_policy_learned_from(learn ? learned_from : "");
  return out;
}

}  // namespace triage::nightly
