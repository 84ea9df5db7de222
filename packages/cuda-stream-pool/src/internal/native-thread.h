// Native threads without std::thread. libstdc++ is linked statically, and its thread code binds pthread_create to
// the symbol version of the glibc it was built on (2.34 here); these calls are in our own code, where glibc-compat.h
// binds them to their first versions, so the binaries keep the glibc floor the README states.
#pragma once
#include <pthread.h>
#include <time.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <system_error>

#include "internal/never-throws.h"

namespace csp {

// Starts `body` on a new thread (joinable) named `name` (at most 15 characters; debuggers, `top -H` and the simulated
// driver's failure injection show it). An exception leaving `body` is swallowed: nothing may escape a thread.
// Throws std::system_error when the thread cannot be created.
inline pthread_t start_thread(const char* name, std::function<void()> body) {
  // Test seam: CUDA_STREAM_POOL_FAIL_THREAD_START names a thread whose start fails as if the system had no thread
  // left, so that tests reach that path. Read on each start: threads start rarely.
  const char* fail = std::getenv("CUDA_STREAM_POOL_FAIL_THREAD_START");
  if (fail && std::strcmp(fail, name) == 0) throw std::system_error(EAGAIN, std::generic_category(), "pthread_create");
  struct Start {
    const char* name;
    std::function<void()> body;
  };
  auto* heap = new Start{name, std::move(body)};
  pthread_t thread;
  const int error = pthread_create(
      &thread, nullptr,
      [](void* argument) -> void* {
        std::unique_ptr<Start> start(static_cast<Start*>(argument));
        pthread_setname_np(pthread_self(), start->name);
        never_throws("a native thread of the library", start->body);
        return nullptr;
      },
      heap);
  if (error != 0) {
    delete heap;
    throw std::system_error(error, std::generic_category(), "pthread_create");
  }
  return thread;
}

// A hint to the core that this thread spins.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Starts `body` on a new thread named `name` that nobody joins.
inline void start_detached_thread(const char* name, std::function<void()> body) {
  pthread_detach(start_thread(name, std::move(body)));
}

// A condition variable for a mutex with native_handle() (std::mutex, OrderedMutex), on pthread_cond_t: std::condition_variable's code in the static libstdc++
// brings its thread-exit support, which needs glibc 2.34.
class Condition {
 public:
  // Timed waits run on the monotonic clock: a step of the wall clock neither stalls nor hurries them.
  Condition() {
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&cond_, &attributes);
    pthread_condattr_destroy(&attributes);
  }
  ~Condition() { pthread_cond_destroy(&cond_); }
  Condition(const Condition&) = delete;
  Condition& operator=(const Condition&) = delete;
  void notify_one() { pthread_cond_signal(&cond_); }
  void notify_all() { pthread_cond_broadcast(&cond_); }
  // Waits until `ready()` holds; `lock` (a std::unique_lock of a mutex with native_handle()) holds its mutex.
  template <class Lock, class Predicate>
  void wait(Lock& lock, Predicate ready) {
    while (!ready()) pthread_cond_wait(&cond_, lock.mutex()->native_handle());
  }
  // Waits until `ready()` holds or `duration` passed (by the monotonic clock).
  template <class Lock, class Predicate>
  void wait_for(Lock& lock, std::chrono::microseconds duration, Predicate ready) {
    timespec deadline{};
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    const long long nanoseconds = deadline.tv_nsec + static_cast<long long>(duration.count()) * 1000;
    deadline.tv_sec += static_cast<time_t>(nanoseconds / 1000000000);
    deadline.tv_nsec = static_cast<long>(nanoseconds % 1000000000);
    while (!ready())
      if (pthread_cond_timedwait(&cond_, lock.mutex()->native_handle(), &deadline) == ETIMEDOUT) return;
  }

 private:
  pthread_cond_t cond_;
};

}  // namespace csp
