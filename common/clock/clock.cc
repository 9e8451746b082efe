#include "common/clock/clock.h"

namespace triage {

SystemClock* SystemClock::Get() {
  static SystemClock clock;
  return &clock;
}

}  // namespace triage
