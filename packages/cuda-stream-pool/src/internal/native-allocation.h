// How native objects are allocated: cache-line aligned, from one plain malloc each.
//
// Note [native allocation]: native objects keep counters that one thread writes while another reads them on cache
// lines of their own, so their types are aligned to a cache line. std::make_shared of such a type takes glibc's
// aligned allocation (memalign), which on the null driver cost more instructions than the rest of
// DeviceBuffer.alloc() and, at the free, set off the heap's consolidation. make_native takes one malloc a cache line
// larger than the object instead, aligns the object inside it and keeps the block's start in the word before the
// object, for the free. Node-API-free, so that test/native/native-allocation-check.cc builds it alone.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace csp {

// Counters that one thread writes and another reads or writes start a cache line of their own (x86-64 and arm64
// lines are 64 bytes), so that the JS thread recording work and a native thread issuing it do not take the line from
// each other on every operation.
constexpr std::size_t kCacheLineBytes = 64;

// An allocator of cache-line aligned memory from plain malloc (Note [native allocation]); std::allocate_shared rebinds
// it to its control block with the object inside.
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(std::size_t count) {
    static_assert(alignof(T) <= kCacheLineBytes, "no native object is aligned beyond a cache line");
    void* block = std::malloc(count * sizeof(T) + kCacheLineBytes + sizeof(void*));
    if (!block) throw std::bad_alloc();
    const auto start = reinterpret_cast<std::uintptr_t>(block) + sizeof(void*);
    const std::uintptr_t aligned = (start + kCacheLineBytes - 1) & ~(kCacheLineBytes - 1);
    reinterpret_cast<void**>(aligned)[-1] = block;
    return reinterpret_cast<T*>(aligned);
  }
  void deallocate(T* object, std::size_t) { std::free(reinterpret_cast<void**>(object)[-1]); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const CacheLineAllocator<U>&) const { return false; }
};

// A new native object of kind T, shared, its memory as Note [native allocation] says.
template <class T>
std::shared_ptr<T> make_native() {
  return std::allocate_shared<T>(CacheLineAllocator<T>());
}

}  // namespace csp
