// Bounded parallelism for LLM-bound work: a fixed number of workers pull items in order.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace grag {

// Calls fn(i) for every i in [0, count) on up to `workers` threads (the calling thread is one of
// them) and returns when all calls have returned. Items start in index order. fn must be
// thread-safe and must not throw. When `stop` becomes true, no further item starts.
inline void ParallelFor(size_t count, size_t workers, const std::function<void(size_t)>& fn,
                        const std::atomic<bool>* stop = nullptr) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (;;) {
      if (stop != nullptr && stop->load()) return;
      const size_t i = next.fetch_add(1);
      if (i >= count) return;
      fn(i);
    }
  };
  workers = std::max<size_t>(1, std::min(workers, count));
  std::vector<std::thread> threads;
  threads.reserve(workers - 1);
  for (size_t t = 1; t < workers; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
}

}  // namespace grag
