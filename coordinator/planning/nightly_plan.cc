#include "coordinator/planning/nightly_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "agent/playbooks/catalog.h"
#include "common/inventory/key.h"
#include "common/nightly/decide.h"
#include "common/nightly/mapping.h"
#include "common/nightly/rules.h"
#include "common/util/strings.h"
#include "coordinator/planning/phases.h"

namespace triage::coord {
namespace {

using nightly::DecideMode;
using nightly::Judgement;

constexpr std::string_view kPlaybook = "nightly";

// One candidate (or reported judgement) of one test on one arch, ready for a shard.
struct Item {
  v1::ShardEntry entry;
  std::string loader;
  std::string arch;
  int min_devices = 1;
  double seconds = 0;  // the confirmation runs' expected device time
  enum class How { kConfirm, kNoConfirm, kUnconfirmed, kReport } how = How::kConfirm;
};

// The runs with only the records of the archs asked (none asked: every arch).
std::vector<v1::NightlyRun> RunsOnArchs(const v1::StartSweepRequest& req) {
  std::vector<v1::NightlyRun> runs(req.nightly().begin(), req.nightly().end());
  if (req.archs().empty()) return runs;
  const std::set<std::string> keep(req.archs().begin(), req.archs().end());
  for (auto& run : runs) {
    auto* records = run.mutable_records();
    records->erase(
        std::remove_if(records->begin(), records->end(),
                       [&](const v1::NightlyRecord& r) { return !keep.count(r.arch()); }),
        records->end());
  }
  return runs;
}

// One run of the test: the median of what the runs measured (when trusted), else its
// .test_durations time, else the playbook's estimate.
double OneRunSeconds(const nightly::History& h, const PlanOptions& options) {
  std::vector<double> measured;
  for (const auto& r : h.records) {
    if (r.duration_seconds() >= options.min_trusted_seconds)
      measured.push_back(r.duration_seconds());
  }
  if (!measured.empty()) {
    std::sort(measured.begin(), measured.end());
    return measured[measured.size() / 2];
  }
  if (auto d = options.durations.find(
          util::StrCat("tests/runner/test_models.py::", h.test_function, "[", h.key, "]"));
      d != options.durations.end() && d->second >= options.min_trusted_seconds) {
    return d->second;
  }
  if (auto e = options.playbook_estimates.find(std::string(kPlaybook));
      e != options.playbook_estimates.end()) {
    return e->second;
  }
  return options.default_estimate;
}

v1::ShardEntry EntryOf(const nightly::MappedTest& t, v1::NightlyCandidate candidate) {
  v1::ShardEntry se;
  se.set_key(t.key);
  se.set_file(t.document->path());
  se.set_flavor(candidate.kind());
  se.set_status(candidate.status());
  se.set_reason(candidate.reason());
  se.set_bringup_status(candidate.bringup_status());
  for (const auto& a : t.archs) candidate.add_archs(a);
  *se.mutable_nightly() = std::move(candidate);
  return se;
}

std::string LoaderOf(const nightly::MappedTest& t, const inventory::KeyGrammar& grammar) {
  if (t.entry != nullptr && !t.entry->loader.empty()) return t.entry->loader;
  auto parts = inventory::ParseKey(t.key, grammar);
  return parts.ok() ? parts->LoaderPath() : "";
}

// Shards of items grouped by (loader, arch, devices, how), in the order of their first item.
class Sharder {
 public:
  Sharder(const PlanOptions& options, const v1::NightlyOptions& nightly, const std::string& sweep,
          const std::string& ttxla, const std::string& forge, TimePoint now)
      : options_(options),
        nightly_(nightly),
        sweep_(sweep),
        ttxla_(ttxla),
        forge_(forge),
        now_(now) {}

  void Add(Item item) {
    const bool decided = item.how != Item::How::kConfirm;
    auto key = std::make_tuple(item.loader, item.arch, item.min_devices, decided);
    auto [it, inserted] = index_.try_emplace(key, groups_.size());
    if (inserted) groups_.emplace_back();
    groups_[it->second].push_back(std::move(item));
  }

  void Into(Plan& plan, const nightly::RuleOptions& rules) {
    for (auto& items : groups_) {
      const Item& first = items.front();
      ShardRecord s;
      s.id = planning::ShardId(sweep_, static_cast<int>(plan.shards.size()) + 1);
      s.sweep_id = sweep_;
      s.priority = options_.priority;
      v1::ShardSpec& spec = s.spec;
      spec.set_shard_id(s.id);
      spec.set_sweep_id(sweep_);
      spec.set_playbook(std::string(kPlaybook));
      spec.set_loader(first.loader);
      spec.set_wave(1);
      spec.set_phase(v1::PHASE_FULL);
      spec.set_arch(first.arch);
      spec.set_ttxla_commit(ttxla_);
      spec.set_forge_commit(forge_);
      spec.set_repo_url(options_.repo_url);
      spec.set_executor(options_.executor);
      for (const auto& [k, v] : options_.params) (*spec.mutable_params())[k] = v;
      spec.set_min_devices(first.min_devices);
      *spec.mutable_nightly_options() = nightly_;
      std::set<std::string> files;
      for (const auto& item : items) {
        *spec.add_entries() = item.entry;
        files.insert(item.entry.file());
        s.expected_seconds += item.seconds;
      }
      // A confirmation changes YAML entries only.
      for (const auto& f : files) spec.add_owned_files(f);
      spec.set_timeout_seconds(static_cast<std::int64_t>(std::max(1800.0, 3 * s.expected_seconds)));
      s.archs = {first.arch};
      if (first.how == Item::How::kConfirm) {
        s.state = ShardState::kQueued;
      } else {
        s.state = ShardState::kSucceeded;
        s.expected_seconds = 0;
        spec.set_decided_at_planning(true);
        ResultRecord r;
        r.lease_id = s.id + "-planned";
        r.shard_id = s.id;
        r.sweep_id = sweep_;
        r.accepted_at = now_;
        r.result.set_status(v1::ShardResult::SUCCEEDED);
        for (const auto& item : items) {
          *r.result.add_entries() = item.how == Item::How::kReport
                                        ? nightly::ReportOnly(item.entry)
                                        : nightly::DecideNightly(item.entry, {}, rules,
                                                                 item.how == Item::How::kNoConfirm
                                                                     ? DecideMode::kNoConfirm
                                                                     : DecideMode::kUnconfirmed);
        }
        plan.decided.push_back(std::move(r));
      }
      plan.shards.push_back(std::move(s));
    }
  }

 private:
  const PlanOptions& options_;
  const v1::NightlyOptions& nightly_;
  const std::string& sweep_;
  const std::string& ttxla_;
  const std::string& forge_;
  TimePoint now_;
  std::map<std::tuple<std::string, std::string, int, bool>, std::size_t> index_;
  std::vector<std::vector<Item>> groups_;
};

}  // namespace

Plan PlanNightly(const inventory::Inventory& inventory, const v1::StartSweepRequest& request,
                 const PlanOptions& options, const std::string& sweep_id,
                 const std::string& ttxla_commit, const std::string& forge_commit, TimePoint now) {
  Plan plan;
  const nightly::RuleOptions rules = nightly::RuleOptionsFrom(
      options.nightly_options ? *options.nightly_options : request.nightly_options());
  const v1::NightlyOptions written = nightly::ToProto(rules);
  nightly::Mapping mapping = nightly::MapRuns(inventory, RunsOnArchs(request));
  v1::NightlyIntake intake = mapping.intake;

  std::vector<Item> items;
  std::set<std::pair<std::string, std::string>> entries_seen;
  for (const auto& t : mapping.tests) {
    for (const auto& h : t.histories) {
      const Judgement j = nightly::Judge(h, nightly::Resolve(t.entry, h.arch), rules);
      if (j.kind == Judgement::Kind::kNothing) continue;
      Item item;
      item.entry = EntryOf(t, j.candidate);
      item.loader = LoaderOf(t, inventory.grammar);
      item.arch = h.arch;
      item.min_devices = std::max(1, j.candidate.min_devices());
      const double one = OneRunSeconds(h, options);
      item.entry.mutable_nightly()->set_expected_seconds(one);
      item.seconds = one * rules.confirm;
      item.entry.set_expected_seconds(item.seconds);
      if (j.kind == Judgement::Kind::kCandidate) {
        (*intake.mutable_candidates())[j.candidate.kind()]++;
        item.how = rules.no_confirm ? Item::How::kNoConfirm : Item::How::kConfirm;
      } else {
        item.how = Item::How::kReport;
        if (j.kind == Judgement::Kind::kAlready) intake.set_already(intake.already() + 1);
        if (j.kind == Judgement::Kind::kCapacity) intake.set_flagged(intake.flagged() + 1);
      }
      if (entries_seen.insert({item.entry.file(), item.entry.key()}).second) {
        plan.entries.push_back(item.entry);
        plan.entry_playbooks.emplace_back(kPlaybook);
      }
      items.push_back(std::move(item));
    }
  }

  // The device-time budget: the most valuable candidates first, shorter ones first within a
  // kind; what does not fit is reported unconfirmed, with the time all of them would take.
  double needed = 0;
  for (const auto& i : items) {
    if (i.how == Item::How::kConfirm) needed += i.seconds;
  }
  intake.set_confirm_seconds_needed(needed);
  intake.set_confirm_seconds_planned(needed);
  if (rules.max_device_hours > 0 && !rules.no_confirm) {
    std::vector<Item*> order;
    for (auto& i : items) {
      if (i.how == Item::How::kConfirm) order.push_back(&i);
    }
    std::stable_sort(order.begin(), order.end(), [](const Item* a, const Item* b) {
      return std::make_tuple(nightly::KindRank(a->entry.nightly().kind()), a->seconds) <
             std::make_tuple(nightly::KindRank(b->entry.nightly().kind()), b->seconds);
    });
    double left = rules.max_device_hours * 3600;
    for (Item* i : order) {
      if (i->seconds <= left) {
        left -= i->seconds;
      } else {
        i->how = Item::How::kUnconfirmed;
        intake.set_unconfirmed(intake.unconfirmed() + 1);
        intake.set_confirm_seconds_planned(intake.confirm_seconds_planned() - i->seconds);
      }
    }
  }

  Sharder sharder(options, written, sweep_id, ttxla_commit, forge_commit, now);
  for (auto& i : items) sharder.Add(std::move(i));
  sharder.Into(plan, rules);
  plan.nightly = std::move(intake);
  return plan;
}

Plan PlanRecheck(const inventory::Inventory& inventory, const v1::StartSweepRequest& request,
                 const PlanOptions& options, const std::string& sweep_id,
                 const std::string& ttxla_commit, const std::string& forge_commit, TimePoint now) {
  Plan plan;
  nightly::RuleOptions rules = nightly::RuleOptionsFrom(
      options.nightly_options ? *options.nightly_options : request.nightly_options());
  rules.confirm = std::max(2, rules.confirm);  // a pass is confirmed before a promotion
  rules.no_confirm = false;
  const v1::NightlyOptions written = nightly::ToProto(rules);
  std::vector<std::string> archs = options.archs;
  if (archs.empty()) archs = {"n150"};
  v1::RecheckCoverage coverage;

  struct Pick {
    Item item;
    std::int64_t last = 0;  // unix ms of the last recheck (0: never)
  };
  std::vector<Pick> picks;
  for (const auto& doc : inventory.documents) {
    if (doc.is_placeholders()) continue;
    if (!doc.ok()) {
      plan.problems.push_back(
          util::StrCat(doc.path(), ": not rechecked, the file has validation errors"));
      continue;
    }
    for (const auto& entry : doc.entries()) {
      if (!entry.parts) continue;
      // The archs it is skipped on: the merge places their outcomes over them together.
      std::vector<std::string> skipped_on;
      for (const auto& arch : archs) {
        if (nightly::Resolve(&entry, arch).status == "NOT_SUPPORTED_SKIP")
          skipped_on.push_back(arch);
      }
      for (const auto& arch : skipped_on) {
        const nightly::OnArch yaml = nightly::Resolve(&entry, arch);
        coverage.set_skipped(coverage.skipped() + 1);
        v1::NightlyCandidate c;
        c.set_kind("recheck");
        c.set_arch(arch);
        c.set_test_function(std::string(inventory::TestFunctionOfKey(entry.key, doc.grammar())));
        c.set_status(yaml.status);
        c.set_reason(yaml.reason);
        c.set_bringup_status(yaml.bringup_status);
        if (yaml.required_pcc) c.set_required_pcc(*yaml.required_pcc);
        if (!yaml.assert_pcc) c.set_assert_pcc(false);
        c.set_min_devices(nightly::MinDevices(entry.parts->parallelism, arch));
        c.set_rule("NOT_SUPPORTED_SKIP: rechecked with --force-run");
        for (const auto& a : skipped_on) c.add_archs(a);
        // A recorded duration sets the runs' time limit (the playbook's); an estimate only plans.
        double one = 0;
        if (auto d = options.durations.find(NodeId(doc, entry));
            d != options.durations.end() && d->second >= options.min_trusted_seconds) {
          one = d->second;
          c.set_expected_seconds(one);
        } else if (auto e = options.playbook_estimates.find(std::string(kPlaybook));
                   e != options.playbook_estimates.end()) {
          one = e->second;
        } else {
          one = options.default_estimate;
        }
        Pick p;
        p.item.entry.set_key(entry.key);
        p.item.entry.set_file(doc.path());
        p.item.entry.set_flavor("recheck");
        p.item.entry.set_status(yaml.status);
        p.item.entry.set_reason(yaml.reason);
        p.item.entry.set_bringup_status(yaml.bringup_status);
        p.item.min_devices = std::max(1, c.min_devices());
        *p.item.entry.mutable_nightly() = std::move(c);
        p.item.loader = !entry.loader.empty() ? entry.loader : entry.parts->LoaderPath();
        p.item.arch = arch;
        p.item.seconds = one * rules.confirm;
        p.item.entry.set_expected_seconds(p.item.seconds);
        if (options.rechecked != nullptr) {
          if (auto it = options.rechecked->find(RecheckKey(doc.path(), entry.key, arch));
              it != options.rechecked->end()) {
            p.last = it->second;
          }
        }
        picks.push_back(std::move(p));
      }
    }
  }
  // Never checked first, then the longest ago; the file order within.
  std::stable_sort(picks.begin(), picks.end(),
                   [](const Pick& a, const Pick& b) { return a.last < b.last; });
  double left = rules.max_device_hours > 0 ? rules.max_device_hours * 3600 : -1;
  std::vector<Item> items;
  std::set<std::pair<std::string, std::string>> entries_seen;
  for (auto& p : picks) {
    if (p.last > 0) coverage.set_checked_before(coverage.checked_before() + 1);
    if (left >= 0 && p.item.seconds > left) {
      coverage.set_left(coverage.left() + 1);
      if (p.last == 0) coverage.set_never_checked(coverage.never_checked() + 1);
      if (p.last > 0 &&
          (coverage.oldest_check_unix_ms() == 0 || p.last < coverage.oldest_check_unix_ms())) {
        coverage.set_oldest_check_unix_ms(p.last);
      }
      continue;
    }
    if (left >= 0) left -= p.item.seconds;
    coverage.set_selected(coverage.selected() + 1);
    if (entries_seen.insert({p.item.entry.file(), p.item.entry.key()}).second) {
      plan.entries.push_back(p.item.entry);
      plan.entry_playbooks.emplace_back(kPlaybook);
    }
    items.push_back(std::move(p.item));
  }
  v1::NightlyIntake intake;
  for (const auto& a : archs) intake.add_archs(a);
  if (coverage.selected() > 0) (*intake.mutable_candidates())["recheck"] = coverage.selected();
  Sharder sharder(options, written, sweep_id, ttxla_commit, forge_commit, now);
  for (auto& i : items) sharder.Add(std::move(i));
  sharder.Into(plan, rules);
  plan.nightly = std::move(intake);
  plan.recheck = std::move(coverage);
  return plan;
}

}  // namespace triage::coord
