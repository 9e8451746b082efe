#include "common/daemon/daemon.h"

#include <ctime>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/util/log.h"
#include "common/util/strings.h"

namespace triage::daemon {

StopSignals::StopSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
}

int StopSignals::Wait() const {
  int sig = 0;
  sigwait(&set_, &sig);
  return sig;
}

int StopSignals::WaitFor(std::chrono::milliseconds timeout) const {
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  const timespec slice{static_cast<time_t>(s.count()),
                       static_cast<long>(std::chrono::nanoseconds(timeout - s).count())};
  const int sig = sigtimedwait(&set_, nullptr, &slice);
  return sig > 0 ? sig : 0;
}

StopSignals Start() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  StopSignals signals;
  pthread_sigmask(SIG_BLOCK, &signals.set_, nullptr);
  return signals;
}

void SetUpLogging(std::string_view level, std::string_view tag) {
  spdlog::set_level(spdlog::level::from_str(std::string(level)));
  spdlog::set_pattern(util::StrCat("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [", tag, "] %v"));
}

SignalWatcher::SignalWatcher(const StopSignals& signals, std::function<void(int sig)> on_signal)
    : thread_([this, signals, on_signal = std::move(on_signal)] {
        while (!over_.load()) {
          if (int sig = signals.WaitFor(std::chrono::milliseconds(100)); sig > 0) {
            on_signal(sig);
            return;
          }
        }
      }) {}

SignalWatcher::~SignalWatcher() {
  over_.store(true);
  thread_.join();
}

}  // namespace triage::daemon
