#pragma once

// The start-up both daemons (triage-coordinator, triage-agent) share: process settings taken
// before any thread starts, SIGINT/SIGTERM handling and the log format (docs/observability.md,
// "Logs").

#include <signal.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string_view>
#include <thread>

namespace triage::daemon {

// SIGINT and SIGTERM, the signals that stop a daemon. They are blocked in every thread and only
// ever taken by Wait/WaitFor, so no thread is interrupted by them.
class StopSignals {
 public:
  // Waits for one of them; returns its number.
  int Wait() const;
  // Waits up to timeout; returns the signal's number, or 0 when none came.
  int WaitFor(std::chrono::milliseconds timeout) const;

 private:
  friend StopSignals Start();
  StopSignals();
  sigset_t set_;
};

// The first thing in a daemon's main, before any thread starts (threads inherit the signal
// mask): blocks the stop signals, and turns off abseil's mutex deadlock detection. Debian's
// abseil checks every absl::Mutex (gRPC's locks) for deadlock cycles, which about doubles the
// CPU cost of an RPC; the check is a debugging aid, not needed in production.
StopSignals Start();

// The log level (trace, debug, info, warn, error; as validated by the daemons' settings) and
// the line format "<ISO time with ms> <level> [<tag>] <message>".
void SetUpLogging(std::string_view level, std::string_view tag);

// Calls on_signal(sig) from its own thread for the first stop signal that comes while it lives,
// for a daemon whose work may also end on its own (the agent: a fatal error, drained,
// max_shards). It polls rather than blocking in sigwait, so that the destructor ends the thread
// without sending anyone a signal: a signal sent to end the wait would be taken for an
// operator's, and only a real signal is to be logged as one.
class SignalWatcher {
 public:
  SignalWatcher(const StopSignals& signals, std::function<void(int sig)> on_signal);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  std::atomic<bool> over_{false};
  std::thread thread_;
};

}  // namespace triage::daemon
