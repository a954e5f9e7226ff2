// Replaces the (unaligned) global operator new/delete of the unit-test executable so tests can
// assert that a decoder or a server session never allocates a buffer as large as a length field
// it was handed before checking it. Allocations are forwarded to malloc/free unchanged; only
// requests of at least kLargeAllocation bytes are counted.
//
// Tests use it through this declaration (there is no header, on purpose):
//   namespace commprof_test { uint64_t LargeAllocationCount(); }
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace commprof_test {

inline constexpr std::size_t kLargeAllocation = std::size_t{16} << 20;  // wire::kMaxPayload
std::atomic<uint64_t> g_large_allocations{0};

uint64_t LargeAllocationCount() { return g_large_allocations.load(); }

}  // namespace commprof_test

namespace {

void* CountedAlloc(std::size_t n) noexcept {
  if (n >= commprof_test::kLargeAllocation) commprof_test::g_large_allocations.fetch_add(1);
  return std::malloc(n == 0 ? 1 : n);
}

void* CountedAllocOrThrow(std::size_t n) {
  void* p = CountedAlloc(n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t n) { return CountedAllocOrThrow(n); }
void* operator new[](std::size_t n) { return CountedAllocOrThrow(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return CountedAlloc(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return CountedAlloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
