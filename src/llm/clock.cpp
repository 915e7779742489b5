#include <thread>

#include "grag/llm.h"

namespace grag {
namespace {

class SystemClock final : public Clock {
 public:
  TimePoint Now() override { return std::chrono::steady_clock::now(); }
  void SleepUntil(TimePoint deadline) override { std::this_thread::sleep_until(deadline); }
  std::chrono::system_clock::time_point WallNow() override {
    return std::chrono::system_clock::now();
  }
};

}  // namespace

std::unique_ptr<Clock> MakeSystemClock() { return std::make_unique<SystemClock>(); }

}  // namespace grag
