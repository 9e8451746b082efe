#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/metrics/metrics.h"
#include "coordinator/persistence/group_commit.h"
#include "coordinator/persistence/store.h"

namespace triage::coord {

// What an operation does once its writes are durable: replies and announcements in order, then
// the `last` work (a sweep's merge), so that a watcher sees "completed" before "succeeded". If
// the writes were lost, replies get the error and the rest is dropped.
struct Effects {
  std::vector<GroupCommit::Item> now;
  std::vector<GroupCommit::Item> last;
  std::uint64_t ticket = 0;  // the store ticket the effects wait for (0: nothing)

  void push_back(std::function<void()> f) { now.push_back({std::move(f), nullptr}); }
  void Reply(std::function<void()> ok, std::function<void(const absl::Status&)> failed) {
    now.push_back({std::move(ok), std::move(failed)});
  }
  // done(answer) once durable, done(error) if lost: every Lease/Complete callback's reply.
  template <typename Callback, typename Value>
  void Answer(Callback done, Value answer) {
    Reply([done, answer = std::move(answer)]() mutable { done(std::move(answer)); },
          [done](const absl::Status& st) { done(st); });
  }
};

// The coordinator's write path (docs/architecture.md, "Persistence"): every state change is a
// named Mutation, staged into the store, and acknowledged only once a group commit made it
// durable. The journal owns the store's tickets and the coordinator's health, which follows the
// outcome of commits (staging succeeds even on a full disk, so it says nothing about health).
//
// Thread-safety: Stage and WaitForStaged are called under the owner's state lock (the journal
// relies on it to order tickets); Settle/SettleAndWait without it.
class Journal {
 public:
  // rebuild(why) runs on the committing thread after a commit failed; it must take the owner's
  // state lock, call Rewind and rebuild memory from the snapshot it returns.
  Journal(Store* store, CoordinatorMetrics* metrics,
          std::function<void(const absl::Status&)> rebuild);

  // Commits move to a committer thread (GroupCommit::Start); before that, each settle commits.
  void Start() { commits_.Start(); }
  void Stop() { commits_.Stop(); }

  // Stages m; after.ticket waits for it. An error (the store refused the write) leaves the
  // store as it was and marks the coordinator unhealthy.
  absl::Status Stage(const Mutation& m, Effects& after);
  // Makes after wait for everything staged so far: an answer that reflects state still being
  // committed (a retried grant, a duplicate result) is sent once that state is durable.
  void WaitForStaged(Effects& after) const { after.ticket = last_staged_; }
  // Hands the effects to the group commit; they run once their ticket is durable.
  void Settle(Effects& after);
  // The same, and waits until they ran: OK, or the error that lost the writes.
  absl::Status SettleAndWait(Effects& after);

  absl::StatusOr<Snapshot> Load() { return store_->Load(); }
  // The latest `limit` audit records, oldest first (the durable ones).
  absl::StatusOr<std::vector<AuditRecord>> AuditLog(int limit) { return store_->AuditLog(limit); }
  // A shard's attempts as the store has them (the durable ones).
  absl::StatusOr<std::vector<AttemptRecord>> Attempts(const std::string& shard_id) {
    return store_->Attempts(shard_id);
  }
  // After a failed commit (with the owner's lock held): everything staged since the last good
  // commit is gone from the store, also what was staged while that commit ran. Returns the
  // store's state to rebuild from; a store that cannot even be read ends the process, so that
  // a restart recovers from the database.
  Snapshot Rewind(const absl::Status& why);

  // Health: false after a failed commit or check until a commit succeeds. Probe (every tick)
  // notices a database file deleted or replaced under it, and while unhealthy tries a write.
  bool healthy() const { return healthy_.load(); }
  void Probe();

  GroupCommit::Stats stats() const { return commits_.stats(); }

 private:
  Store* const store_;
  CoordinatorMetrics* const metrics_;
  std::atomic<bool> healthy_{true};
  std::uint64_t last_staged_ = 0;  // the ticket of the latest staged mutation
  GroupCommit commits_;            // last: its threads use the members above
};

}  // namespace triage::coord
