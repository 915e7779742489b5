// Memory for large arrays that are filled once and then scanned, such as the vectors a question
// reads from a query image (megabytes, read into a fresh process by every one-off `grag query`).
//
// On Linux a first touch of anonymous memory costs a page fault per 4 KiB page, and on a
// virtual machine a fault costs microseconds: reading a 6.4 MB array into fresh memory took
// ~9 ms, of a one-off local question's ~50. Arrays of 2 MiB and more therefore come straight
// from mmap, aligned to 2 MiB and marked MADV_HUGEPAGE, so that the kernel may back them with
// transparent huge pages (THP "always" or "madvise"): a fault per 2 MiB (the same array: ~1 ms).
// Where THP is off the advice is ignored and the array is ordinary memory. Smaller arrays use
// the global operator new.
//
// Growing a LargeVector (resize, the count constructor) default-initialises the new elements:
// for floats and other trivial types that leaves them unset, where std::vector would zero
// them. The arrays are filled right after they are sized (a blob read into them), and zeroing
// 6.4 MB first was 6.4 M instructions of a one-off question.
#pragma once

#include <cstddef>
#include <new>
#include <utility>
#include <vector>

namespace grag {

namespace large_array_internal {
// `bytes` (> 0) aligned to `alignment` (a power of two, at most 4 KiB); throws std::bad_alloc.
void* Allocate(std::size_t bytes, std::size_t alignment);
// What Allocate returned for the same `bytes` and `alignment`.
void Free(void* p, std::size_t bytes, std::size_t alignment) noexcept;
}  // namespace large_array_internal

template <typename T>
class LargeArrayAllocator {
 public:
  using value_type = T;
  static_assert(alignof(T) <= 4096, "LargeArrayAllocator aligns to at most a page");

  LargeArrayAllocator() noexcept = default;
  template <typename U>
  LargeArrayAllocator(const LargeArrayAllocator<U>&) noexcept {}  // NOLINT: allocator rebind

  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(large_array_internal::Allocate(n * sizeof(T), alignof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    large_array_internal::Free(p, n * sizeof(T), alignof(T));
  }

  // Default-initialises (see above); with arguments, constructs as std::allocator would.
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0) {
      ::new (static_cast<void*>(p)) U;
    } else {
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
  }

  template <typename U>
  bool operator==(const LargeArrayAllocator<U>&) const noexcept {
    return true;  // stateless: any instance frees what another allocated
  }
};

template <typename T>
using LargeVector = std::vector<T, LargeArrayAllocator<T>>;

}  // namespace grag
