#include "coordinator/persistence/group_commit.h"

#include <algorithm>
#include <chrono>

namespace triage::coord {
namespace {

const absl::Status& LostStatus() {
  static const absl::Status kLost = absl::UnavailableError(
      "the store lost this change (its commit failed); the coordinator reloaded its state");
  return kLost;
}

}  // namespace

GroupCommit::GroupCommit(Store* store, std::function<void(const absl::Status&)> on_flush_failure,
                         Observer observe)
    : store_(store), on_flush_failure_(std::move(on_flush_failure)), observe_(std::move(observe)) {}

GroupCommit::~GroupCommit() { Stop(); }

void GroupCommit::Start() {
  std::lock_guard lock(mu_);
  if (background_ || stopping_) return;
  background_ = true;
  committer_ = std::thread([this] { CommitterLoop(); });
  finisher_ = std::thread([this] { FinisherLoop(); });
}

void GroupCommit::Stop() {
  {
    std::lock_guard lock(mu_);
    if (!background_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  committer_.join();  // it drains what waits first
  {
    std::lock_guard lock(mu_);
    background_ = false;
  }
  finisher_wake_.notify_all();
  finisher_.join();  // it runs what is queued first
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  // What was submitted while the threads wound down (a merge's final write) is flushed here.
  Submit(0, {});
}

bool GroupCommit::IsLostLocked(std::uint64_t ticket) const {
  return std::any_of(lost_.begin(), lost_.end(),
                     [&](const auto& r) { return ticket > r.first && ticket <= r.second; });
}

void GroupCommit::Lost(std::uint64_t through) {
  std::lock_guard lock(mu_);
  if (through > durable_) lost_.emplace_back(durable_, through);
}

GroupCommit::Stats GroupCommit::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void GroupCommit::ResolveLocked(std::vector<Item>* ready, std::vector<Item>* lost) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const bool is_lost = IsLostLocked(it->first);
    if (!is_lost && it->first > durable_) break;  // ordered: the rest waits too
    auto* into = is_lost ? lost : ready;
    for (auto& item : it->second) into->push_back(std::move(item));
    it = waiting_.erase(it);
  }
}

bool GroupCommit::FlushLocked(std::unique_lock<std::mutex>& lock) {
  if (waiting_.empty() || flushing_) return false;
  flushing_ = true;
  const std::uint64_t before = durable_;  // only this thread moves it
  lock.unlock();
  const auto start = std::chrono::steady_clock::now();
  auto durable = store_->Flush();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!durable.ok()) on_flush_failure_(durable.status());
  const bool committed = durable.ok() && *durable > before;
  if (observe_ && (committed || !durable.ok())) {
    observe_(seconds, committed ? *durable - before : 0, durable.ok());
  }
  lock.lock();
  flushing_ = false;
  if (!durable.ok() || committed) ++stats_.flushes;
  if (committed) {
    stats_.committed += *durable - durable_;
    durable_ = *durable;
  }
  return true;
}

void GroupCommit::ResolveAndRunLocked(std::unique_lock<std::mutex>& lock) {
  std::vector<Item> ready;
  std::vector<Item> lost;
  ResolveLocked(&ready, &lost);
  if (ready.empty() && lost.empty()) return;
  auto slow =
      std::stable_partition(ready.begin(), ready.end(), [](const Item& i) { return !i.last; });
  if (background_ && slow != ready.end()) {
    for (auto it = slow; it != ready.end(); ++it) finisher_queue_.push_back(std::move(*it));
    ready.erase(slow, ready.end());
    finisher_wake_.notify_one();
  }
  lock.unlock();
  for (auto& item : ready) item.ok();
  for (auto& item : lost) {
    if (item.failed) item.failed(LostStatus());
  }
  lock.lock();
}

void GroupCommit::Submit(std::uint64_t ticket, std::vector<Item> items) {
  std::unique_lock lock(mu_);
  waiting_.emplace(ticket, std::move(items));
  ResolveAndRunLocked(lock);  // nothing to wait for: at once, on this thread
  if (waiting_.empty()) return;
  if (background_) {
    wake_.notify_one();
    return;
  }
  // Inline: flush until nothing waits, unless another thread is flushing (it goes on for us).
  while (FlushLocked(lock)) ResolveAndRunLocked(lock);
}

void GroupCommit::CommitterLoop() {
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || (!waiting_.empty() && !flushing_); });
    if (waiting_.empty()) {
      if (stopping_) return;
      continue;
    }
    if (FlushLocked(lock)) ResolveAndRunLocked(lock);
  }
}

void GroupCommit::FinisherLoop() {
  std::unique_lock lock(mu_);
  while (true) {
    finisher_wake_.wait(lock, [&] { return !background_ || !finisher_queue_.empty(); });
    if (finisher_queue_.empty()) return;
    Item item = std::move(finisher_queue_.front());
    finisher_queue_.pop_front();
    lock.unlock();
    item.ok();
    lock.lock();
  }
}

}  // namespace triage::coord
