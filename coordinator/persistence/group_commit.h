#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/persistence/store.h"

namespace triage::coord {

// Acknowledgements that wait for the store. Each operation stages its mutation (Store::Stage,
// under the coordinator's lock, which only queues it) and then submits its callbacks with the
// mutation's ticket. They run once a Flush made the ticket durable, or get an error if it was
// lost.
//
// Inline (until Start, and after Stop): whoever submits flushes, unless another thread is
// flushing, in which case Submit returns at once and that thread flushes the new work too. A
// single-threaded caller (the unit tests) sees its callbacks run before Submit returns.
//
// Background (after Start): a committer thread flushes whenever something waits and runs the
// callbacks, so RPC threads never write to the database; everything staged while a commit is in
// progress goes into the next one (group commit). Long callbacks (a sweep's merge, marked
// `last`) run on a second thread so that they never hold up commits.
class GroupCommit {
 public:
  struct Item {
    std::function<void()> ok;
    std::function<void(const absl::Status&)> failed;  // may be empty: dropped when lost
    bool last = false;  // may take long: runs after the others, off the committer thread
  };
  // on_flush_failure runs on the flushing thread, without locks of this class, after a Flush
  // failed. It must leave the coordinator consistent with the store and call Lost().
  // observe(seconds, mutations, ok) is called after each Flush that committed or failed.
  using Observer = std::function<void(double seconds, std::uint64_t mutations, bool ok)>;
  GroupCommit(Store* store, std::function<void(const absl::Status&)> on_flush_failure,
              Observer observe = nullptr);
  ~GroupCommit();

  void Start();
  // Flushes what waits, runs the remaining callbacks and joins the threads.
  void Stop();

  // Runs items once ticket is durable (ok) or lost (failed); ticket 0 means nothing to wait for.
  void Submit(std::uint64_t ticket, std::vector<Item> items);
  // Every ticket above the last durable one, up to through, is lost.
  void Lost(std::uint64_t through);

  struct Stats {
    std::uint64_t flushes = 0;    // Flush calls that found something to commit (or failed)
    std::uint64_t committed = 0;  // tickets made durable
  };
  Stats stats() const;

 private:
  bool IsLostLocked(std::uint64_t ticket) const;
  // Moves the waiting items that are resolved into ready / lost.
  void ResolveLocked(std::vector<Item>* ready, std::vector<Item>* lost);
  // Flushes once (mu_ released meanwhile); false when nothing waited.
  bool FlushLocked(std::unique_lock<std::mutex>& lock);
  // Runs what is resolved (mu_ released meanwhile); `last` items go to the finisher if any.
  void ResolveAndRunLocked(std::unique_lock<std::mutex>& lock);
  void CommitterLoop();
  void FinisherLoop();

  Store* const store_;
  const std::function<void(const absl::Status&)> on_flush_failure_;
  const Observer observe_;
  mutable std::mutex mu_;
  std::condition_variable wake_;           // committer: something waits, or stop
  std::condition_variable finisher_wake_;  // finisher: work, or stop
  bool background_ = false;
  bool stopping_ = false;
  bool flushing_ = false;
  std::uint64_t durable_ = 0;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> lost_;  // (after, through] ranges
  std::multimap<std::uint64_t, std::vector<Item>> waiting_;
  std::deque<Item> finisher_queue_;
  std::thread committer_;
  std::thread finisher_;
  Stats stats_;
};

}  // namespace triage::coord
