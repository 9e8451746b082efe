#pragma once

// A checkout's maintenance rounds read from its git history (docs/nightly.md, "Learned from the
// checkout"): the commits before a sweep's commit that changed test-config files, oldest first,
// each with the entries whose fields it changed, for LearnPolicy.

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/git/git.h"
#include "common/inventory/document.h"
#include "common/nightly/learn.h"

namespace triage::nightly {

struct HistoryOptions {
  std::string since;     // YYYY-MM-DD: no older commit ("" = no limit)
  int max_commits = 60;  // the newest commits read at most
};

// The rounds, and the documents their entries point into.
struct MaintenanceHistory {
  std::vector<Round> rounds;  // oldest first
  std::deque<inventory::Document> documents;
  int commits = 0;  // commits read (rounds with no changed entry included)
};

// The commits that changed tests/runner/test_config before and at `commit` (first parents
// only), newest max_commits of them; each file parsed at the commit and its parent with the key
// grammar of its runner at that commit. A key that is new, gone or whose fields differ is a
// change. Fails only when git cannot list the history.
absl::StatusOr<std::unique_ptr<MaintenanceHistory>> ReadMaintenanceHistory(
    const git::Git& git, const std::string& commit, const HistoryOptions& options = {});

// The policy the history at `commit` teaches (LearnPolicy over ReadMaintenanceHistory), and
// what it was learned from.
struct CheckoutPolicy {
  Learned learned;
  int rounds = 0;              // commits that changed entries
  int commits = 0;             // commits read
  std::string oldest, newest;  // the rounds' dates
  // "12 maintenance rounds (2025-10-02 to 2026-08-30) in the newest 60 commits that changed
  // tests/runner/test_config"
  std::string Describe() const;
};
absl::StatusOr<CheckoutPolicy> LearnFromCheckout(const git::Git& git, const std::string& commit,
                                                 const HistoryOptions& options = {});

}  // namespace triage::nightly
