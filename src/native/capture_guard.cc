// Note [capture guard] in capture_guard.h.
#include "capture_guard.h"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "devices.h"
#include "lock_order.h"

namespace csp {
namespace {

struct DeviceCounters {
  std::atomic<int> open_captures{0};
  std::atomic<int> calls_in_flight{0};
};
DeviceCounters g_counters[kMaxDevices];

struct Deferred {
  OrderedMutex mutex{LockLevel::kLeaf, "calls deferred by captures"};
  std::vector<std::function<void()>> calls[kMaxDevices];
};
Deferred& deferred() {
  static Deferred* lists = new Deferred();  // never destroyed: captures may close during exit
  return *lists;
}

// Runs the device's deferred calls that the guard allows; keeps the rest for the next close. Loops while calls are
// left and no capture is open any more, since the capture that refused them may have closed before they were kept.
void run_deferred(int device) {
  for (;;) {
    std::vector<std::function<void()>> calls;
    {
      std::lock_guard<OrderedMutex> lock(deferred().mutex);
      calls.swap(deferred().calls[device]);
    }
    if (calls.empty()) return;
    std::vector<std::function<void()>> kept;
    for (auto& call : calls) {
      DeviceWideCall guard(device);
      if (guard.allowed())
        call();
      else
        kept.push_back(std::move(call));
    }
    if (kept.empty()) return;
    {
      std::lock_guard<OrderedMutex> lock(deferred().mutex);
      auto& list = deferred().calls[device];
      list.insert(list.end(), std::make_move_iterator(kept.begin()), std::make_move_iterator(kept.end()));
    }
    if (open_captures(device) > 0) return;  // that capture's close runs them
  }
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

void outside_captures(int device, std::function<void()> call) {
  {
    DeviceWideCall guard(device);
    if (guard.allowed()) {
      call();
      return;
    }
  }
  {
    std::lock_guard<OrderedMutex> lock(deferred().mutex);
    deferred().calls[device].push_back(std::move(call));
  }
  // The capture that refused it may have closed (and run the list) before the call was queued.
  if (open_captures(device) == 0) run_deferred(device);
}

int open_captures(int device) { return g_counters[device].open_captures.load(std::memory_order_seq_cst); }

void capture_opening(int device) {
  g_counters[device].open_captures.fetch_add(1, std::memory_order_seq_cst);
  while (g_counters[device].calls_in_flight.load(std::memory_order_seq_cst) > 0) std::this_thread::yield();
}

void capture_closing(int device) {
  if (g_counters[device].open_captures.fetch_sub(1, std::memory_order_seq_cst) == 1) run_deferred(device);
}

}  // namespace csp
