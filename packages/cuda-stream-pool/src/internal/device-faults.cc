// The sticky-fault record per device, and the cross-device dependencies (Note [cross-device dependencies]).
#include "internal/device-faults.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "binding/errors.h"
#include "device/device.h"
#include "internal/context.h"
#include "internal/loader.h"

namespace csp {
namespace {
std::atomic<int> g_faults[kMaxDevices];
// g_dependents[d][p]: how many streams of device d have device p in their set.
std::atomic<uint32_t> g_dependents[kMaxDevices][kMaxDevices];

template <class F>
void for_each_device(uint64_t devices, F&& f) {
  for (; devices; devices &= devices - 1) f(__builtin_ctzll(devices));
}

void count(int home, uint64_t devices, int delta) {
  if (home < 0 || home >= kMaxDevices) return;
  for_each_device(devices, [&](int device) { g_dependents[home][device].fetch_add(static_cast<uint32_t>(delta)); });
}
}  // namespace

bool is_sticky(CUresult code) {
  switch (code) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_EXTERNAL_DEVICE:
      return true;
    default:
      return false;
  }
}

void record_fault(int device, CUresult code) {
  if (device < 0 || device >= kMaxDevices) return;
  int expected = CUDA_SUCCESS;
  g_faults[device].compare_exchange_strong(expected, static_cast<int>(code));
}

CUresult device_fault(int device) {
  if (device < 0 || device >= kMaxDevices) return CUDA_SUCCESS;
  return static_cast<CUresult>(g_faults[device].load(std::memory_order_relaxed));
}

void ask_fault(int device) {
  if (device_fault(device) != CUDA_SUCCESS) return;
  try {
    make_current(device);
    check_quiet(drv().cuStreamQuery(library_stream(device)), device);
  } catch (...) {
    // no context or no stream: nothing to ask; the device's own waits still report
  }
}

// Note [cross-device dependencies]: a record counts itself before adding its devices, and a clear checks the count
// after removing: a record it raced either added its devices after the removal or is seen, and then the removed
// devices go back (too many kept is safe; one lost is a wrong result).
DependencySnapshot DeviceDependencies::snapshot() const {
  if (devices_.load(std::memory_order_acquire) == 0) return {};
  DependencySnapshot seen;
  seen.records = records_.load();
  seen.devices = devices_.load();
  return seen;
}

void DeviceDependencies::add(uint64_t devices, int home) {
  if (!devices) return;
  records_.fetch_add(1);
  const uint64_t before = devices_.fetch_or(devices);
  count(home, devices & ~before, +1);
}

void DeviceDependencies::replace(uint64_t devices) {
  records_.fetch_add(1);
  devices_.store(devices);
}

void DeviceDependencies::clear(const DependencySnapshot& seen, int home) {
  if (!seen.devices) return;
  const uint64_t before = devices_.fetch_and(~seen.devices);
  count(home, before & seen.devices, -1);
  if (records_.load() == seen.records) return;
  const uint64_t again = devices_.fetch_or(seen.devices);
  count(home, seen.devices & ~again, +1);
}

void DeviceDependencies::forget(int home) {
  if (devices_.load(std::memory_order_relaxed)) count(home, devices_.exchange(0), -1);
}

uint64_t device_dependencies(int device) {
  uint64_t devices = 0;
  if (device < 0 || device >= kMaxDevices) return devices;
  for (int other = 0; other < kMaxDevices; other++)
    if (g_dependents[device][other].load(std::memory_order_relaxed) != 0) devices |= device_bit(other);
  return devices;
}

DependencyFault dependency_fault(uint64_t devices, bool ask) {
  DependencyFault found;
  for_each_device(devices, [&](int device) {
    if (found.code != CUDA_SUCCESS) return;
    if (ask) ask_fault(device);
    if (CUresult code = device_fault(device)) found = {device, code};
  });
  return found;
}

DependencyFault settle_dependencies(DeviceDependencies& set, const DependencySnapshot& seen, int home) {
  const DependencyFault fault = dependency_fault(seen.devices, true);
  if (fault.code == CUDA_SUCCESS) set.clear(seen, home);
  return fault;
}

DependencyFault poll_until_done(const std::function<CUresult()>& query, uint64_t devices) {
  using Clock = std::chrono::steady_clock;
  auto next_ask = Clock::now();
  for (unsigned round = 0;; round++) {
    if (query() != CUDA_ERROR_NOT_READY) return {};
    if (Clock::now() >= next_ask) {
      const DependencyFault fault = dependency_fault(devices, true);
      if (fault.code != CUDA_SUCCESS) return fault;
      next_ask = Clock::now() + std::chrono::milliseconds(10);
    }
    // Yields first, as a short wait on a GPU ends within microseconds; then sleeps, as cuStreamSynchronize would.
    if (round < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

DependencyFault synchronize_with_dependencies(DeviceDependencies& set, int device, int home,
                                              const std::function<CUresult()>& query, const std::function<void()>& block) {
  const DependencySnapshot seen = set.snapshot();
  if (seen.devices) {
    // Polled: once a device the work waited on faults, the driver's blocking wait would never return (Note
    // [cross-device dependencies]).
    const DependencyFault fault = poll_until_done(query, seen.devices);
    make_current(device);
    if (fault.code != CUDA_SUCCESS) return fault;
  }
  block();
  if (!seen.devices) return {};
  const DependencyFault fault = settle_dependencies(set, seen, home);
  make_current_quiet(device);
  return fault;
}

}  // namespace csp
