#include "coordinator/merge/guards_merge.h"

#include <algorithm>

#include "common/command/guards.h"
#include "common/util/strings.h"
#include "coordinator/planning/shared_wave.h"

namespace triage::merge {

void HoldWorkaroundsForReview(const std::vector<CommandWork>& results, const PccBefore& before,
                              std::map<std::pair<std::string, std::string>, EntryMerge*>& entries,
                              std::set<const coord::ResultRecord*>& held, MergeOutput& out) {
  for (const auto& r : results) {
    if (r.shard->spec.executor() != "command" || coord::IsWaveShard(r.shard->spec)) continue;
    const v1::ShardResult& res = r.record->result;
    std::vector<command::Workaround> found;
    for (const auto& fe : res.file_edits()) {
      for (auto& w : command::ScanFileDiff(fe.repo(), fe.diff())) found.push_back(std::move(w));
    }
    const auto floors = command::PccFloors(res);
    for (const auto& o : res.entries()) {
      // The farm's own decision, where it replaced the command's edit, is not the command's
      // change: it follows the checkout's conventions (an incorrect result's assert_pcc false).
      if (!o.changed() || o.command_check() == "replaced by the farm's decision") continue;
      const std::string arch = o.edit().arch();
      std::optional<double> floor;
      if (auto f = floors.find({o.file(), o.key()}); f != floors.end()) floor = f->second;
      for (auto& w : command::ScanEntryEdit(o.edit(), before(o.file(), o.key(), arch), floor)) {
        found.push_back(std::move(w));
      }
    }
    if (found.empty()) continue;
    held.insert(r.record);
    WorkaroundsFound w;
    w.shard = r.shard->id;
    w.found = found;
    std::vector<std::string> lines;
    for (const auto& f : found) lines.push_back(command::Describe(f));
    for (const auto& o : res.entries()) {
      auto it = entries.find({o.file(), o.key()});
      if (it == entries.end()) continue;
      if (std::find(w.entries.begin(), w.entries.end(), o.key()) == w.entries.end()) {
        w.entries.push_back(o.key());
      }
      for (const auto& line : lines) it->second->review.push_back(line);
      KeepAsItWas(*it->second, util::StrCat("not landed: shard ", r.shard->id,
                                            "'s change holds a workaround; a reviewer decides "
                                            "(docs/remediation.md, \"Guards\")"));
    }
    out.workarounds.push_back(std::move(w));
  }
}

}  // namespace triage::merge
