#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

namespace triage {

using TimePoint = std::chrono::system_clock::time_point;
using Duration = std::chrono::system_clock::duration;

// Time is injected: leases, heartbeats and timeouts read a Clock, so tests advance a FakeClock
// instead of sleeping.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
  // Waits on cv (lock held, as cv.wait_for) until d has passed on this clock or wake() holds;
  // wake() is checked whenever cv is notified. Returns wake(). A real clock waits a monotonic
  // duration, so a step of the wall clock neither shortens nor stretches the wait.
  virtual bool WaitFor(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Duration d,
                       const std::function<bool()>& wake) const {
    return cv.wait_for(lock, d, wake);
  }
};

class SystemClock : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::system_clock::now(); }
  static SystemClock* Get();
};

class FakeClock : public Clock {
 public:
  explicit FakeClock(TimePoint start = TimePoint(std::chrono::seconds(1'700'000'000)))
      : now_(start) {}
  TimePoint Now() const override {
    std::lock_guard lock(mu_);
    return now_;
  }
  void Advance(Duration d) {
    std::lock_guard lock(mu_);
    now_ += d;
  }
  void Set(TimePoint t) {
    std::lock_guard lock(mu_);
    now_ = t;
  }
  // Ends once the fake time has reached Now() + d (a test advances it) or wake() holds; both are
  // checked at every notification of cv and every millisecond of real time.
  bool WaitFor(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Duration d,
               const std::function<bool()>& wake) const override {
    const TimePoint deadline = Now() + d;
    while (!wake()) {
      if (Now() >= deadline) return false;
      cv.wait_for(lock, std::chrono::milliseconds(1));
    }
    return true;
  }

 private:
  mutable std::mutex mu_;
  TimePoint now_;
};

inline std::int64_t ToUnixMillis(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
inline TimePoint FromUnixMillis(std::int64_t ms) {
  return TimePoint(std::chrono::milliseconds(ms));
}
inline double ToSeconds(Duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace triage
