#pragma once

#include <chrono>
#include <cstdint>
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
