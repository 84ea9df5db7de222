// A small program of its own around packages/cuda-stream-pool/src/internal/native-thread.h: it times one Condition::wait_for of 50 ms while the
// wall clock (CLOCK_REALTIME) reads an hour ahead of its true value, as it would after being stepped back by an hour
// during the wait, and prints the milliseconds the wait took. test/native/condition-clock.test.ts runs it.
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>

#include "internal/native-thread.h"

// Every clock_gettime of this program, native-thread.h's included, comes here.
extern "C" int clock_gettime(clockid_t clock, struct timespec* time) {
  const long result = syscall(SYS_clock_gettime, clock, time);
  if (clock == CLOCK_REALTIME) time->tv_sec += 3600;
  return static_cast<int>(result);
}

double monotonic_ms() {
  timespec now{};
  syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

int main() {
  csp::Condition condition;
  std::mutex mutex;
  std::unique_lock<std::mutex> lock(mutex);
  const double start = monotonic_ms();
  condition.wait_for(lock, std::chrono::milliseconds(50), [] { return false; });
  std::printf("%.1f\n", monotonic_ms() - start);
  return 0;
}
