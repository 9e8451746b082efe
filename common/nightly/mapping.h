#pragma once

// The runs' records mapped to the checkout's entries (docs/nightly.md, section 1, "Mapping"):
// per test and arch, the records of every run, oldest first. Records that name nothing,
// duplicates and contradictions are counted and named, never guessed. Pure.

#include <string>
#include <vector>

#include "common/inventory/inventory.h"
#include "common/nightly/rules.h"
#include "triage/v1/nightly.pb.h"

namespace triage::nightly {

// One test of the checkout (or a test without an entry, in the file a new entry would go to).
struct MappedTest {
  std::string test_function;
  std::string key;
  const inventory::Document* document = nullptr;
  const inventory::Entry* entry = nullptr;  // nullptr: no entry
  std::vector<std::string> archs;           // the archs the runs recorded it on, sorted
  std::vector<History> histories;           // one per arch, in archs' order
};

struct Mapping {
  // Entries in inventory order (file, then entry), then the tests without an entry by key.
  std::vector<MappedTest> tests;
  v1::NightlyIntake intake;  // every count but candidates, already, flagged and unconfirmed
};

// The runs oldest first: by started_unix_ms when every run has one, else as given.
std::vector<const v1::NightlyRun*> OrderRuns(const std::vector<v1::NightlyRun>& runs);

// The test-config file a new entry for this key goes to (torch/jax/torch_llm by the test
// function; test_config_<run_mode>_<parallelism>.yaml by the key read with the checkout's
// grammar, single_device when the grammar has no parallelism); "" when the key does not parse,
// or is not a key that function makes (a jax key under test_all_models_torch).
std::string FileForNewEntry(std::string_view test_function, std::string_view key,
                            const inventory::KeyGrammar& grammar = inventory::DefaultKeyGrammar());

// A test without an entry whose key the inventory's grammar does not read is unmapped: "not a
// key of this checkout's grammar (<source>): <why>".
Mapping MapRuns(const inventory::Inventory& inventory, const std::vector<v1::NightlyRun>& runs);

}  // namespace triage::nightly
