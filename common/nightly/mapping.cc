#include "common/nightly/mapping.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "common/inventory/key.h"
#include "common/nightly/behaviour.h"
#include "common/nightly/record.h"
#include "common/util/strings.h"

namespace triage::nightly {
namespace {

constexpr std::size_t kMaxExamples = 20;

using TestId = std::pair<std::string, std::string>;  // (test function, key)

void Example(v1::NightlyIntake& intake, std::string text) {
  if (static_cast<std::size_t>(intake.examples_size()) < kMaxExamples) {
    intake.add_examples(std::move(text));
  }
}

// Two records of one test and arch in one run tell the same when their outcome and bringup
// status agree.
bool SameOutcome(const v1::NightlyRecord& a, const v1::NightlyRecord& b) {
  return a.outcome() == b.outcome() && BehaviourOf(a) == BehaviourOf(b);
}

// Where each key of a framework is defined: (document, entry), or several (ambiguous).
struct Defined {
  std::vector<std::pair<const inventory::Document*, const inventory::Entry*>> at;
};

}  // namespace

std::vector<const v1::NightlyRun*> OrderRuns(const std::vector<v1::NightlyRun>& runs) {
  std::vector<const v1::NightlyRun*> out;
  for (const auto& r : runs) out.push_back(&r);
  const bool all_timed = std::all_of(
      out.begin(), out.end(), [](const v1::NightlyRun* r) { return r->started_unix_ms() > 0; });
  if (all_timed) {
    std::stable_sort(out.begin(), out.end(), [](const v1::NightlyRun* a, const v1::NightlyRun* b) {
      return a->started_unix_ms() < b->started_unix_ms();
    });
  }
  return out;
}

std::string FileForNewEntry(std::string_view test_function, std::string_view key,
                            const inventory::KeyGrammar& grammar) {
  const std::string_view framework = FrameworkOfTestFunction(test_function);
  auto parts = inventory::ParseKey(key, grammar);
  if (framework.empty() || !parts.ok()) return "";
  // The key's own grammar must be its function's: tt-xla's ids are made by the function.
  if (inventory::TestFunctionOfKey(key, grammar) != test_function) return "";
  const std::string_view parallelism =
      parts->parallelism.empty() ? std::string_view("single_device") : parts->parallelism;
  return util::StrCat(inventory::kTestConfigDir, "/", framework, "/test_config_", parts->run_mode,
                      "_", parallelism, ".yaml");
}

Mapping MapRuns(const inventory::Inventory& inventory, const std::vector<v1::NightlyRun>& runs) {
  Mapping out;
  v1::NightlyIntake& intake = out.intake;
  const std::vector<const v1::NightlyRun*> ordered = OrderRuns(runs);
  intake.set_runs(static_cast<int>(ordered.size()));
  for (const v1::NightlyRun* run : ordered) intake.add_run_labels(run->label());

  // Files with errors of their own are never edited. An error that spans files (a key defined
  // in two of them) concerns that key only: it is not mapped (below), the file's other entries
  // are.
  std::set<std::string> bad_files;
  for (const auto& doc : inventory.documents) {
    if (!doc.ok()) bad_files.insert(doc.path());
  }
  // framework -> key -> where it is defined.
  std::map<std::string, std::map<std::string, Defined>> defined;
  for (const auto& ref : inventory.TestEntries()) {
    const std::string& framework = ref.document->framework();
    defined[framework][ref.entry->key].at.emplace_back(ref.document, ref.entry);
  }

  // test -> arch -> records, oldest run first (one per run after duplicates are settled).
  std::map<TestId, std::map<std::string, std::vector<v1::NightlyRecord>>> tests;
  std::set<std::string> archs;
  for (const v1::NightlyRun* run : ordered) {
    intake.set_testcases(intake.testcases() + run->testcases());
    intake.set_not_model_tests(intake.not_model_tests() + run->not_model_tests());
    intake.set_left_out(intake.left_out() + run->problems_size());
    // Identical copies the intake counted instead of keeping: records and duplicates both.
    intake.set_records(intake.records() + run->duplicate_testcases());
    intake.set_duplicates(intake.duplicates() + run->duplicate_testcases());
    std::map<std::tuple<std::string, std::string, std::string>,
             std::vector<const v1::NightlyRecord*>>
        in_run;
    for (const auto& r : run->records()) {
      intake.set_records(intake.records() + 1);
      in_run[{r.test_function(), r.key(), r.arch()}].push_back(&r);
    }
    for (const auto& [id, records] : in_run) {
      const auto& [fn, key, arch] = id;
      const bool agree = std::all_of(records.begin(), records.end(), [&](const auto* r) {
        return SameOutcome(*r, *records.front());
      });
      if (!agree) {
        intake.set_contradictory(intake.contradictory() + 1);
        std::vector<std::string> where;
        for (const auto* r : records) {
          where.push_back(
              util::StrCat(r->source(), " ", v1::NightlyRecord::Outcome_Name(r->outcome())));
        }
        Example(intake, util::StrCat("contradictory: ", fn, "[", key, "] on ", arch, " in run ",
                                     run->label(), ": ", util::StrJoin(where, ", ")));
        continue;
      }
      intake.set_duplicates(intake.duplicates() + static_cast<int>(records.size()) - 1);
      tests[{fn, key}][arch].push_back(*records.front());
      archs.insert(arch);
    }
  }
  for (const auto& a : archs) intake.add_archs(a);

  std::vector<MappedTest> with_entry, without;
  for (auto& [id, by_arch] : tests) {
    const auto& [fn, key] = id;
    int records = 0;
    for (const auto& [arch, rs] : by_arch) records += static_cast<int>(rs.size());
    MappedTest t;
    t.test_function = fn;
    t.key = key;
    std::string unmapped;
    const std::string framework(FrameworkOfTestFunction(fn));
    auto fw = defined.find(framework);
    const Defined* d = nullptr;
    if (fw != defined.end()) {
      auto it = fw->second.find(key);
      if (it != fw->second.end()) d = &it->second;
    }
    if (d != nullptr && d->at.size() > 1) {
      std::vector<std::string> files;
      for (const auto& [doc, e] : d->at) files.push_back(doc->path());
      unmapped = util::StrCat("defined in ", util::StrJoin(files, " and "));
    } else if (d != nullptr) {
      t.document = d->at[0].first;
      t.entry = d->at[0].second;
      if (bad_files.count(t.document->path())) {
        unmapped = util::StrCat(t.document->path(), " has validation errors");
      }
    } else if (std::string why = inventory::KeyMismatch(key, inventory.grammar); !why.empty()) {
      // A key of another time's runner (or of none): named, never fatal.
      unmapped = util::StrCat("not a key of this checkout's grammar (", inventory.grammar.source,
                              "): ", why);
    } else {
      const std::string file = FileForNewEntry(fn, key, inventory.grammar);
      t.document = file.empty() ? nullptr : inventory.FindDocument(file);
      if (t.document == nullptr) {
        unmapped = "no entry, and no test-config file to add one to";
      } else if (bad_files.count(file)) {
        unmapped = util::StrCat(file, " has validation errors");
      }
    }
    if (!unmapped.empty()) {
      intake.set_unmapped(intake.unmapped() + records);
      Example(intake, util::StrCat("unmapped: ", fn, "[", key, "]: ", unmapped));
      continue;
    }
    intake.set_mapped(intake.mapped() + records);
    for (auto& [arch, rs] : by_arch) {
      History h;
      h.test_function = fn;
      h.key = key;
      h.arch = arch;
      h.records = std::move(rs);
      t.archs.push_back(arch);
      t.histories.push_back(std::move(h));
    }
    // The capacity rule asks which other archs ran the test to its end in their latest run.
    for (auto& h : t.histories) {
      for (const auto& other : t.histories) {
        if (&other != &h && !other.records.empty() && RanToEnd(BehaviourOf(other.records.back()))) {
          h.completed_elsewhere.push_back(other.arch);
        }
      }
    }
    (t.entry != nullptr ? with_entry : without).push_back(std::move(t));
  }
  // Inventory order: by the file's place, then the entry's line.
  std::map<const inventory::Document*, std::size_t> doc_rank;
  for (std::size_t i = 0; i < inventory.documents.size(); ++i) {
    doc_rank[&inventory.documents[i]] = i;
  }
  std::sort(with_entry.begin(), with_entry.end(), [&](const MappedTest& a, const MappedTest& b) {
    return std::make_tuple(doc_rank[a.document], a.entry->first_line) <
           std::make_tuple(doc_rank[b.document], b.entry->first_line);
  });
  out.tests = std::move(with_entry);
  for (auto& t : without) out.tests.push_back(std::move(t));
  return out;
}

}  // namespace triage::nightly
