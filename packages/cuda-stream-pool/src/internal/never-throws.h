// The one way the native layer keeps an exception from escaping code that the runtime, the driver or a thread of ours
// calls, and records what it caught so that the JS side can report it (cuda.callbackFailures()). No Node-API here, so
// that code built without it (the CPU checks of test/native) uses it too.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

namespace csp {

// What never_throws caught, process-wide: how many failures, and the last one's message. Written without allocating
// and without a lock that could throw (a spin flag around a fixed buffer), since it runs where nothing may throw.
class CallbackFailures {
 public:
  // Keeps "<where>: <what>", cut to 255 characters.
  void record(const char* where, const char* what) noexcept {
    count_.fetch_add(1, std::memory_order_relaxed);
    while (busy_.test_and_set(std::memory_order_acquire)) {
    }
    std::snprintf(last_, sizeof last_, "%s: %s", where, what);
    busy_.clear(std::memory_order_release);
  }

  uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }

  std::string last() {
    char copy[sizeof last_];
    while (busy_.test_and_set(std::memory_order_acquire)) {
    }
    std::memcpy(copy, last_, sizeof copy);
    busy_.clear(std::memory_order_release);
    return std::string(copy);  // allocates only once the flag is clear: a throw here leaves it usable
  }

 private:
  std::atomic<uint64_t> count_{0};
  std::atomic_flag busy_ = ATOMIC_FLAG_INIT;
  char last_[256] = {};
};

inline CallbackFailures& callback_failures() noexcept {
  static CallbackFailures failures;
  return failures;
}

// Runs the body of a callback that the runtime or a thread of ours calls (a finalizer, a cleanup hook, a thread-safe
// function's call, a thread's body, a native object's release): nothing may escape it, or the process aborts (std::terminate).
// A failure there has nobody to throw to (node-addon-api throws Napi::Error from any N-API call once a worker is
// terminating), so it is counted with its message, where cuda.callbackFailures() and the soak's checks see it.
// `where` names the callback in that message.
template <class F>
void never_throws(const char* where, F&& body) noexcept {
  try {
    body();
  } catch (const std::exception& error) {
    callback_failures().record(where, error.what());
  } catch (...) {
    callback_failures().record(where, "an exception that is not a std::exception");
  }
}

}  // namespace csp
