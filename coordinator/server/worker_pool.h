#pragma once

// Threads of the coordinator's own for the handlers that block: reading a checkout, building a
// report or a patch. gRPC's callback API runs a handler on the threads that also accept and
// answer connections (two on a 2-core host); a handler that blocks there for seconds leaves a
// new client without its connection's first answer. The server hands those handlers to this
// pool instead (Guard::Offloaded).

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace triage::coord {

class WorkerPool {
 public:
  explicit WorkerPool(std::size_t threads);
  // Runs every task posted so far, then joins: a posted handler always finishes its call.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs task on one of the pool's threads, in the order posted.
  void Post(std::function<void()> task);

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace triage::coord
