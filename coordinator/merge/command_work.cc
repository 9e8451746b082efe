// A command sweep's agent runs against its entries, and its shared fixes with the entries each
// fixed (docs/remediation.md, "Fix once, verify many" and "Shared fixes beyond the loader").

#include "coordinator/merge/command_work.h"

#include <map>
#include <set>

#include "common/command/shared_scope.h"
#include "common/util/strings.h"
#include "coordinator/planning/fan_out.h"
#include "coordinator/planning/shared_wave.h"

namespace triage::merge {
namespace {

// Each wave's findings by the lead shard whose change it checked, with its shard id.
std::map<std::string, std::pair<std::string, coord::WaveFindings>> WavesByLead(
    const std::vector<CommandWork>& results) {
  std::map<std::string, std::pair<std::string, coord::WaveFindings>> waves;
  for (const auto& r : results) {
    if (!coord::IsWaveShard(r.shard->spec)) continue;
    coord::WaveFindings f;
    if (!coord::ReadWaveFindings(r.record->result, f)) continue;
    waves[r.shard->spec.fan_out().lead_shard()] = {r.shard->id, std::move(f)};
  }
  return waves;
}

bool FixedByLead(const v1::EntryOutcome& o, const std::string& lead, bool own) {
  if (o.verdict() != coord::kPassVerdict) return false;
  if (own) return o.fixed_by().empty() && o.command_check() != "replaced by the farm's decision";
  return o.fixed_by() == util::StrCat("shard ", lead);
}

}  // namespace

void KeepAsItWas(EntryMerge& entry, std::string why) {
  for (auto& [arch, kept] : entry.outcomes) kept.set_changed(false);
  entry.review.push_back(std::move(why));
}

void HoldBackBrokenSharedFixes(const std::vector<coord::ShardRecord>& shards,
                               const std::vector<CommandWork>& results,
                               std::map<std::pair<std::string, std::string>, EntryMerge*>& entries,
                               std::set<const coord::ResultRecord*>& held_back, MergeOutput& out) {
  const auto waves = WavesByLead(results);
  std::vector<std::pair<std::string, std::string>> hold;  // (lead, why)
  for (const auto& [lead, wave] : waves) {
    const coord::WaveFindings& f = wave.second;
    if (f.broke.empty()) continue;
    hold.emplace_back(
        lead, util::StrCat("held back: ", util::StrJoin(f.shared_files, ", "), " of shard ", lead,
                           " failed passing entries in its wave (shard ", wave.first,
                           "): ", util::StrJoin(f.broke, "; ")));
  }
  // A wave that has not checked its lead's shared fix (still to run, or failed) holds it back
  // too: a shared fix lands checked or not at all.
  for (const auto& s : shards) {
    if (!coord::IsWaveShard(s.spec)) continue;
    const std::string& lead = s.spec.fan_out().lead_shard();
    if (waves.count(lead)) continue;
    for (const auto& r : results) {
      if (r.shard->id != lead || !coord::CommandEditsLand(r.record->result)) continue;
      std::vector<std::string> files;
      for (const auto& fe : r.record->result.file_edits()) {
        if (coord::IsSharedEdit(r.shard->spec, fe)) files.push_back(fe.repo() + ":" + fe.path());
      }
      if (files.empty()) continue;
      hold.emplace_back(lead, util::StrCat("held back: ", util::StrJoin(files, ", "), " of shard ",
                                           lead, " was not checked: its wave (shard ", s.id,
                                           ") has no result (", coord::ShardStateName(s.state),
                                           s.last_error.empty() ? "" : ": " + s.last_error, ")"));
    }
  }
  for (const auto& [lead, why] : hold) {
    out.conflicts.push_back(util::StrCat("shared: ", why));
    out.conflict_counts["shared"]++;
    std::vector<std::string> fixed;
    for (const auto& r : results) {
      const bool own = r.shard->id == lead;
      if (own) held_back.insert(r.record);
      for (const auto& o : r.record->result.entries()) {
        if (!FixedByLead(o, lead, own)) continue;
        auto it = entries.find({o.file(), o.key()});
        if (it == entries.end()) continue;
        KeepAsItWas(*it->second, util::StrCat("not landed: its fix was ", why,
                                              " (docs/remediation.md, \"The shared fix's wave\")"));
      }
    }
  }
}

void SummariseCommandWork(const std::vector<CommandWork>& results, MergeOutput& out) {
  std::set<std::pair<std::string, std::string>> entries;
  std::map<std::string, std::vector<std::string>> fixed_by_lead;  // "shard <id>" -> keys
  for (const auto& r : results) {
    if (r.shard->spec.executor() != "command") continue;
    const v1::ShardResult& res = r.record->result;
    out.command_runs.runs += res.command_runs();
    for (const auto& o : res.entries()) {
      entries.insert({o.file(), o.key()});
      if (o.fixed_by().empty() || o.verdict() != "pass") continue;
      ++out.command_runs.without_run;
      fixed_by_lead[o.fixed_by()].push_back(o.key());
    }
  }
  out.command_runs.entries = static_cast<int>(entries.size());
  const std::set<std::string> changed(out.changed_files.begin(), out.changed_files.end());
  std::map<std::string, std::size_t> listed;  // file + diff -> its shared fix (identical edits)
  const auto waves = WavesByLead(results);
  for (const auto& r : results) {
    if (r.shard->spec.executor() != "command") continue;
    const v1::ShardResult& res = r.record->result;
    std::map<std::string, std::string> cluster_of;
    for (const auto& e : r.shard->spec.entries())
      cluster_of[e.file() + "\n" + e.key()] = e.cluster();
    for (const auto& fe : res.file_edits()) {
      if (!command::OutsideLoader(r.shard->spec.loader(), fe.repo(), fe.path())) continue;
      SharedFix fix;
      fix.file = util::StrCat(fe.repo(), "/", fe.path());
      fix.shard = r.shard->id;
      for (const auto& o : res.entries()) {
        if (o.verdict() != "pass" || o.command_check() == "replaced by the farm's decision") {
          continue;
        }
        fix.fixed.push_back(o.key());
        if (fix.cluster.empty()) fix.cluster = cluster_of[o.file() + "\n" + o.key()];
        if (fix.fingerprint.empty()) fix.fingerprint = o.summary().fingerprint();
      }
      const auto& more = fixed_by_lead[util::StrCat("shard ", r.shard->id)];
      fix.fixed.insert(fix.fixed.end(), more.begin(), more.end());
      fix.landed = r.lands && changed.count(fix.file) > 0;
      if (auto w = waves.find(r.shard->id); w != waves.end()) {
        fix.wave_shard = w->second.first;
        const coord::WaveFindings& f = w->second.second;
        for (const auto& c : f.checked) {
          (c.selected ? fix.wave_selected : fix.wave_passing).push_back(c.key);
          if (c.selected && c.verdict == coord::kPassVerdict) {
            fix.wave_selected_pass.push_back(c.key);
          }
        }
        fix.wave_broke = f.broke;
        fix.wave_not_affected = f.not_affected;
      }
      // The same change made by several shards (each found the bug itself) is one fix.
      auto [at, fresh] = listed.try_emplace(fix.file + "\n" + fe.diff(), out.shared_fixes.size());
      if (!fresh) {
        SharedFix& first = out.shared_fixes[at->second];
        first.fixed.insert(first.fixed.end(), fix.fixed.begin(), fix.fixed.end());
        first.landed = first.landed || fix.landed;
        continue;
      }
      out.shared_fixes.push_back(std::move(fix));
    }
  }
}

}  // namespace triage::merge
