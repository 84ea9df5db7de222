// Note [capture guard] in capture.h.
#include "stream/capture.h"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "device/device.h"
#include "internal/lock-order.h"
#include "internal/native-thread.h"
#include "internal/never-throws.h"

namespace csp {
namespace {

struct DeviceCounters {
  std::atomic<int> open_captures{0};
  std::atomic<int> calls_in_flight{0};
};
DeviceCounters g_counters[kMaxDevices];

// Deferred calls run on a thread of their own, never on the thread that closes the last capture: that may be the
// completion poller (a stream object's last reference can drop there), whose progress a cuCtxSynchronize may need, or a
// thread holding a capture on another device, for which these calls are unsafe.
struct Deferred {
  OrderedMutex mutex{LockLevel::kLeaf, "calls deferred by captures"};
  Condition wake;
  std::vector<std::function<void()>> calls[kMaxDevices];
  bool started = false;
};
Deferred& deferred() {
  static Deferred* lists = new Deferred();  // never destroyed: captures may close during exit
  return *lists;
}

// Some device has deferred calls and no capture open. Under the mutex.
bool runnable_locked() {
  for (int device = 0; device < kMaxDevices; device++)
    if (!deferred().calls[device].empty() && open_captures(device) == 0) return true;
  return false;
}

// The deferred-call thread: runs the calls of each device without open captures, each again through the guard (a
// capture may begin meanwhile: those calls wait for its close).
void run_deferred_forever() {
  for (;;) {
    std::vector<std::function<void()>> calls[kMaxDevices];
    {
      std::unique_lock<OrderedMutex> lock(deferred().mutex);
      deferred().wake.wait(lock, runnable_locked);
      for (int device = 0; device < kMaxDevices; device++)
        if (open_captures(device) == 0) calls[device].swap(deferred().calls[device]);
    }
    for (int device = 0; device < kMaxDevices; device++) {
      std::vector<std::function<void()>> kept;
      for (auto& call : calls[device]) {
        DeviceWideCall guard(device);
        if (guard.allowed())
          never_throws("a call deferred until captures close", call);
        else
          kept.push_back(std::move(call));
      }
      if (kept.empty()) continue;
      std::lock_guard<OrderedMutex> lock(deferred().mutex);
      auto& list = deferred().calls[device];
      list.insert(list.end(), std::make_move_iterator(kept.begin()), std::make_move_iterator(kept.end()));
    }
  }
}

// Wakes the deferred-call thread (starting it the first time) after deferred calls or capture counts changed. The
// mutex is taken first so that the thread is either before its check (and sees the change) or waiting (and wakes).
void wake_deferred() {
  {
    std::lock_guard<OrderedMutex> lock(deferred().mutex);
    if (!deferred().started) {
      deferred().started = true;
      start_detached_thread("csp-deferred", run_deferred_forever);
    }
  }
  deferred().wake.notify_one();
}

}  // namespace

DeviceWideCall::DeviceWideCall(int device) : device_(device) {
  g_counters[device].calls_in_flight.fetch_add(1, std::memory_order_seq_cst);
  allowed_ = g_counters[device].open_captures.load(std::memory_order_seq_cst) == 0;
  if (!allowed_) g_counters[device].calls_in_flight.fetch_sub(1, std::memory_order_seq_cst);
}

DeviceWideCall::~DeviceWideCall() {
  if (allowed_) g_counters[device_].calls_in_flight.fetch_sub(1, std::memory_order_seq_cst);
}

void outside_captures(int device, std::function<void()> call) noexcept {
  {
    DeviceWideCall guard(device);
    if (guard.allowed()) {
      never_throws("a device-wide call", call);
      return;
    }
  }
  // Out of memory or threads, the call is dropped (its handle leaks), which beats aborting the process.
  never_throws("deferring a call until captures close", [&] {
    {
      std::lock_guard<OrderedMutex> lock(deferred().mutex);
      deferred().calls[device].push_back(std::move(call));
    }
    wake_deferred();  // the capture that refused it may have closed before the call was queued
  });
}

std::vector<int> capture_guard_state() noexcept {
  std::vector<int> state;
  never_throws("reading the capture guard's state", [&] {
    std::lock_guard<OrderedMutex> lock(deferred().mutex);
    for (int device = 0; device < kMaxDevices; device++) {
      const int open = open_captures(device);
      const int waiting = static_cast<int>(deferred().calls[device].size());
      if (open || waiting) state.insert(state.end(), {device, open, waiting});
    }
  });
  return state;
}

int open_captures(int device) { return g_counters[device].open_captures.load(std::memory_order_seq_cst); }

void capture_opening(int device) {
  g_counters[device].open_captures.fetch_add(1, std::memory_order_seq_cst);
  while (g_counters[device].calls_in_flight.load(std::memory_order_seq_cst) > 0) std::this_thread::yield();
}

void capture_closing(int device) noexcept {
  if (g_counters[device].open_captures.fetch_sub(1, std::memory_order_seq_cst) != 1) return;
  bool waiting = false;
  {
    std::lock_guard<OrderedMutex> lock(deferred().mutex);
    waiting = !deferred().calls[device].empty();
  }
  if (waiting) never_throws("waking the deferred calls", wake_deferred);
}

}  // namespace csp
