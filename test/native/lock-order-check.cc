// Takes OrderedMutexes in the order its argument names, so test/native/lock-order.test.ts can check the lock order checker.
#include <cstdio>
#include <cstring>
#include <mutex>

#include "internal/lock-order.h"

int main(int argc, char** argv) {
  using csp::LockLevel;
  using csp::OrderedMutex;
  OrderedMutex registry{LockLevel::kPoolRegistry, "outer registry"};
  OrderedMutex leaf{LockLevel::kLeaf, "inner leaf"};
  OrderedMutex other_leaf{LockLevel::kLeaf, "another leaf"};
  const char* mode = argc > 1 ? argv[1] : "";
  if (std::strcmp(mode, "in-order") == 0) {
    std::lock_guard<OrderedMutex> a(registry);
    std::lock_guard<OrderedMutex> b(leaf);
  } else if (std::strcmp(mode, "released-first") == 0) {
    { std::lock_guard<OrderedMutex> b(leaf); }
    std::lock_guard<OrderedMutex> a(registry);
    std::lock_guard<OrderedMutex> b(leaf);
  } else if (std::strcmp(mode, "reversed") == 0) {
    std::lock_guard<OrderedMutex> b(leaf);
    std::lock_guard<OrderedMutex> a(registry);
  } else if (std::strcmp(mode, "same-level") == 0) {
    std::lock_guard<OrderedMutex> b(leaf);
    std::lock_guard<OrderedMutex> c(other_leaf);
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  std::puts("done");
  return 0;
}
