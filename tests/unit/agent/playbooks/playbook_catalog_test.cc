// The playbook catalog and registry (docs/playbooks.md, "Adding a playbook"): names, rule
// fragments, estimates, and the default classification rules they make.

#include <algorithm>
#include <set>

#include "agent/playbooks/catalog.h"
#include "agent/playbooks/registry.h"
#include "common/classify/classify.h"
#include "gtest/gtest.h"

namespace triage::playbooks {
namespace {

TEST(PlaybookCatalog, NamesAreUniqueAndEveryRunnerIsCatalogued) {
  std::set<std::string_view> names;
  for (const auto& item : Catalog()) {
    ASSERT_NE(item.entry, nullptr);
    EXPECT_TRUE(names.insert(item.entry->name).second) << item.entry->name << " listed twice";
    EXPECT_FALSE(item.entry->version.empty()) << item.entry->name;
    EXPECT_GT(item.entry->estimate_seconds, 0) << item.entry->name;
    EXPECT_EQ(FindInCatalog(item.entry->name), &item);
  }
  EXPECT_EQ(FindInCatalog("no_such_playbook"), nullptr);

  std::set<std::string_view> runners;
  for (const Playbook* p : RegisteredPlaybooks()) {
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(runners.insert(p->Name()).second) << p->Name() << " registered twice";
    const CatalogItem* item = FindInCatalog(p->Name());
    ASSERT_NE(item, nullptr) << p->Name();
    EXPECT_TRUE(item->has_runner) << p->Name();
    EXPECT_EQ(&p->Catalog(), item->entry) << "a playbook answers with its own catalog entry";
    // A nightly sweep's confirmation runner probes nothing: it runs the tests as they are.
    EXPECT_EQ(p->ProbeModes().empty(), p->Catalog().selection == CatalogEntry::Selection::kNightly)
        << p->Name();
    EXPECT_EQ(FindPlaybook(p->Name()), p);
  }
  for (const auto& item : Catalog()) {
    EXPECT_EQ(runners.count(item.entry->name) == 1, item.has_runner) << item.entry->name;
  }
  EXPECT_EQ(runners, (std::set<std::string_view>{"unpack_forward_output", "dtype_bfloat16",
                                                 "missing_inputs", "nightly"}));
}

TEST(PlaybookCatalog, EveryRuleFragmentParsesAsItsPlaybooksRule) {
  for (const auto& item : Catalog()) {
    if (item.entry->selection != CatalogEntry::Selection::kByReason) {
      EXPECT_TRUE(item.entry->rules.empty()) << item.entry->name << ": never classified";
      continue;
    }
    const std::string name(item.entry->name);
    auto rules = classify::Classifier::FromYaml("playbooks:\n" + RuleYaml(*item.entry), name);
    ASSERT_TRUE(rules.ok()) << rules.status();
    EXPECT_EQ(rules->Playbooks(), std::vector<std::string>{name});
    EXPECT_FALSE(rules->Flavors(name).empty()) << name;
  }
}

// The built-in rules are every fragment, in registration order, each playbook with the flavors
// its own fragment gives; the document `triagectl inventory rules` prints reads back the same.
TEST(PlaybookCatalog, DefaultRulesAreTheCataloguedFragmentsInOrder) {
  std::vector<std::string> order;
  for (const auto& item : Catalog()) {
    if (item.entry->selection == CatalogEntry::Selection::kByReason) {
      order.emplace_back(item.entry->name);
    }
  }
  EXPECT_EQ(DefaultClassifier().Playbooks(), order);
  EXPECT_EQ(std::count(order.begin(), order.end(), "nightly"), 0)
      << "nightly sweeps select their entries from the runs, not by reason";
  for (const auto& item : Catalog()) {
    if (item.entry->selection != CatalogEntry::Selection::kByReason) continue;
    const std::string name(item.entry->name);
    auto own = classify::Classifier::FromYaml("playbooks:\n" + RuleYaml(*item.entry), name);
    ASSERT_TRUE(own.ok()) << own.status();
    EXPECT_EQ(DefaultClassifier().Flavors(name), own->Flavors(name)) << name;
  }
  auto printed = classify::Classifier::FromYaml(CatalogRulesYaml(), "printed");
  ASSERT_TRUE(printed.ok()) << printed.status();
  EXPECT_EQ(printed->Playbooks(), order);
  EXPECT_EQ(CatalogRulesYaml().rfind("# ", 0), 0u) << "the printed rules start with their title";
}

TEST(PlaybookCatalog, EstimatesAreTheCataloguedOnes) {
  EXPECT_EQ(CatalogEstimates(), (std::map<std::string, double>{{"unpack_forward_output", 900},
                                                               {"dtype_bfloat16", 900},
                                                               {"missing_inputs", 900},
                                                               {"nightly", 300}}));
}

TEST(PlaybookCatalog, TheGateIsTheRulesFlavors) {
  const Playbook* unpack = FindPlaybook("unpack_forward_output");
  ASSERT_NE(unpack, nullptr);
  EXPECT_TRUE(unpack->Takes("not_implemented"));
  EXPECT_TRUE(unpack->Takes("no_handler"));
  EXPECT_FALSE(unpack->Takes("cross_dtype"));
  const Playbook* dtype = FindPlaybook("dtype_bfloat16");
  ASSERT_NE(dtype, nullptr);
  EXPECT_TRUE(dtype->Takes("cross_dtype"));
  EXPECT_TRUE(dtype->Takes("op_not_implemented"));
  EXPECT_FALSE(dtype->Takes("decoder_input_ids"));
}

TEST(PlaybookCatalog, ThePhasePlanIsFullProbeVerify) {
  const Playbook* p = FindPlaybook("dtype_bfloat16");
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->Plan(v1::PHASE_FULL).probe_and_fix);
  EXPECT_TRUE(p->Plan(v1::PHASE_FULL).verify);
  EXPECT_TRUE(p->Plan(v1::PHASE_PROBE).probe_and_fix);
  EXPECT_FALSE(p->Plan(v1::PHASE_PROBE).verify);
  EXPECT_FALSE(p->Plan(v1::PHASE_VERIFY).probe_and_fix);
  EXPECT_TRUE(p->Plan(v1::PHASE_VERIFY).verify);
}

}  // namespace
}  // namespace triage::playbooks
