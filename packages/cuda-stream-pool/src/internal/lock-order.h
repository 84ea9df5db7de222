// Every mutex of the native layer, with its place in the lock order (Note [lock order] in native-object.h), and a checker of
// that order for tests and the soak.
//
// Note [lock order checker]: with CUDA_STREAM_POOL_CHECK_LOCK_ORDER=1 in the environment, each thread records the
// mutexes it holds, and taking one whose level is not strictly below (further down the list than) every mutex the
// thread already holds prints both mutexes to stderr and aborts the process: an order violation is a deadlock waiting
// for the right interleaving, so a test run must fail loudly on the first one, even when no deadlock happened. Without
// the variable the check costs one load of a flag per lock. `npm run test:gpu` and the soak set it.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace csp {

// The levels of Note [lock order], outermost first. A thread holding a mutex only takes mutexes of a higher level.
enum class LockLevel : int {
  kPoolRegistry = 1,
  kBufferUses = 2,
  kStreamMarker = 3,  // a stream's marker mutex, or a streamed copy's mutex
  kCache = 4,         // a staging arena, the pinned cache
  kMarkerPool = 5,    // the ticket slots, the event-marker pool (a busy staging chunk gives its event back here)
  kLeaf = 6,          // nothing is taken inside
};

inline bool lock_order_checked() {
  static const bool checked = [] {
    const char* value = std::getenv("CUDA_STREAM_POOL_CHECK_LOCK_ORDER");
    return value && std::strcmp(value, "1") == 0;
  }();
  return checked;
}

// A std::mutex with a level and a name. Meets Lockable, so std::lock_guard and std::unique_lock take it.
class OrderedMutex {
 public:
  OrderedMutex(LockLevel level, const char* name) : level_(level), name_(name) {}
  OrderedMutex(const OrderedMutex&) = delete;
  OrderedMutex& operator=(const OrderedMutex&) = delete;

  void lock() {
    if (lock_order_checked()) check_before_taking();
    mutex_.lock();
    if (lock_order_checked()) remember();
  }
  bool try_lock() {
    if (!mutex_.try_lock()) return false;
    if (lock_order_checked()) remember();  // a try never waits, so it cannot deadlock: no order to check
    return true;
  }
  void unlock() {
    if (lock_order_checked()) forget();
    mutex_.unlock();
  }
  std::mutex::native_handle_type native_handle() { return mutex_.native_handle(); }

 private:
  static constexpr int kMaxHeld = 16;
  struct Held {
    const OrderedMutex* mutexes[kMaxHeld];
    int count = 0;
  };
  static Held& held() {
    thread_local Held list;
    return list;
  }

  void check_before_taking() const {
    Held& list = held();
    for (int i = 0; i < list.count; i++) {
      const OrderedMutex* other = list.mutexes[i];
      if (static_cast<int>(other->level_) >= static_cast<int>(level_)) {
        std::fprintf(stderr,
                     "cuda-stream-pool: lock order violated: taking \"%s\" (level %d) while holding \"%s\" (level %d); "
                     "see Note [lock order] in internal/native-object.h\n",
                     name_, static_cast<int>(level_), other->name_, static_cast<int>(other->level_));
        std::abort();
      }
    }
  }
  void remember() {
    Held& list = held();
    if (list.count < kMaxHeld) list.mutexes[list.count++] = this;
  }
  void forget() {
    Held& list = held();
    for (int i = list.count - 1; i >= 0; i--)
      if (list.mutexes[i] == this) {
        for (int j = i; j + 1 < list.count; j++) list.mutexes[j] = list.mutexes[j + 1];
        list.count--;
        return;
      }
  }

  std::mutex mutex_;
  LockLevel level_;
  const char* name_;
};

}  // namespace csp
