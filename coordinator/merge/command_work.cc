// A command sweep's agent runs against its entries, and its shared fixes with the entries each
// fixed (docs/remediation.md, "Fix once, verify many" and "Shared fixes beyond the loader").

#include "coordinator/merge/command_work.h"

#include <map>
#include <set>

#include "common/command/shared_scope.h"
#include "common/util/strings.h"

namespace triage::merge {

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
