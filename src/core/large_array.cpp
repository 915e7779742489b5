#include "grag/large_array.h"

#include <sys/mman.h>

#include <cstdint>

namespace grag::large_array_internal {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;  // x86-64 and arm64 (4 KiB base pages)

std::size_t RoundUp(std::size_t bytes) { return (bytes + kHugePage - 1) & ~(kHugePage - 1); }

}  // namespace

void* Allocate(std::size_t bytes, std::size_t alignment) {
  if (bytes < kHugePage)
    return ::operator new (bytes == 0 ? 1 : bytes, std::align_val_t{alignment});
  const std::size_t size = RoundUp(bytes);
  if (size < bytes) throw std::bad_alloc();  // the rounding overflowed
  // Map a huge page more than needed, then unmap the unaligned head and the tail: what remains
  // starts on a 2 MiB boundary, so every 2 MiB of it can be one huge page.
  const std::size_t mapped = size + kHugePage;
  void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto begin = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (begin + kHugePage - 1) & ~(std::uintptr_t{kHugePage} - 1);
  if (aligned > begin) munmap(raw, aligned - begin);
  const std::size_t tail = begin + mapped - (aligned + size);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + size), tail);
  void* p = reinterpret_cast<void*>(aligned);
  madvise(p, size, MADV_HUGEPAGE);  // advice: ignored (EINVAL) where THP is unavailable
  return p;
}

void Free(void* p, std::size_t bytes, std::size_t alignment) noexcept {
  if (p == nullptr) return;
  if (bytes < kHugePage) {
    ::operator delete (p, std::align_val_t{alignment});
    return;
  }
  munmap(p, RoundUp(bytes));
}

}  // namespace grag::large_array_internal
