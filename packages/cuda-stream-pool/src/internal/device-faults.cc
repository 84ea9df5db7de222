// The sticky-fault record per device.
#include "internal/device-faults.h"

#include <atomic>

#include "device/device.h"

namespace csp {
namespace {
std::atomic<int> g_faults[kMaxDevices];
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

}  // namespace csp
