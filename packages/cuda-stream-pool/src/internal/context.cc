// Primary context per device, retained once and never released: a retained primary context outlives every stream,
// event and buffer of the process, so nothing needs to order its release against them.
#include "internal/context.h"

#include <atomic>
#include <mutex>
#include <string>

#include "binding/errors.h"
#include "internal/loader.h"
#include "internal/lock-order.h"

namespace csp {
namespace {

std::atomic<CUcontext> g_contexts[kMaxDevices] = {};

// First use of a device in the process: the retain is serialized so that it happens once.
CUcontext retain(int device) {
  static OrderedMutex mutex{LockLevel::kLeaf, "primary context retain"};
  std::lock_guard<OrderedMutex> lock(mutex);
  CUcontext ctx = g_contexts[device].load(std::memory_order_acquire);
  if (ctx) return ctx;
  require_driver();
  if (device < 0 || device >= load_driver().device_count)
    throw CudaFailure{CUDA_ERROR_INVALID_DEVICE, "cuDeviceGet", "device " + std::to_string(device)};
  CUdevice dev = 0;
  check(drv().cuDeviceGet(&dev, device), "cuDeviceGet", device);
  check(drv().cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain", device);
  g_contexts[device].store(ctx, std::memory_order_release);
  return ctx;
}

}  // namespace

CUcontext primary_context(int device) {
  if (device < 0 || device >= kMaxDevices)
    throw CudaFailure{CUDA_ERROR_INVALID_DEVICE, "cuDeviceGet", "device " + std::to_string(device)};
  CUcontext ctx = g_contexts[device].load(std::memory_order_acquire);
  return ctx ? ctx : retain(device);
}

// Note [current context]: every entry point makes its device's primary context current on the calling thread. The
// steady state is one cuCtxGetCurrent (a thread-local read inside the driver) and no lock: a thread-local record
// of our own would be wrong as soon as another CUDA library makes its own context current on the same thread. The
// caller's context is not restored afterwards. An entry point that touches objects of two devices (a peer copy, a
// wait on another device's event or stream, a free after uses on another device's streams) makes each object's
// device current for the driver calls on that object: an event is created and recorded in the context of the stream
// it is recorded on, and a stream is waited on or written to in its own context.
void make_current(int device) {
  CUcontext ctx = primary_context(device);
  CUcontext current = nullptr;
  if (drv().cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == ctx) return;
  check(drv().cuCtxSetCurrent(ctx), "cuCtxSetCurrent", device);
}

bool context_retained(int device) {
  return device >= 0 && device < kMaxDevices && g_contexts[device].load(std::memory_order_acquire) != nullptr;
}

int current_device() {
  CUcontext current = nullptr;
  if (load_driver().available && drv().cuCtxGetCurrent(&current) == CUDA_SUCCESS && current)
    for (int device = 0; device < kMaxDevices; device++)
      if (g_contexts[device].load(std::memory_order_acquire) == current) return device;
  return -1;
}

int context_device() {
  const int current = current_device();
  if (current >= 0) return current;
  for (int device = 0; device < kMaxDevices; device++)
    if (g_contexts[device].load(std::memory_order_acquire)) return device;
  return 0;
}

CUstream library_stream(int device) {
  static OrderedMutex mutex{LockLevel::kLeaf, "library streams"};
  static CUstream streams[kMaxDevices] = {};
  std::lock_guard<OrderedMutex> lock(mutex);
  if (!streams[device])
    check(drv().cuStreamCreate(&streams[device], CU_STREAM_NON_BLOCKING), "cuStreamCreate", device,
          [&] { return "device " + std::to_string(device) + " (the library's own stream)"; });
  return streams[device];
}

bool make_current_quiet(int device) {
  try {
    make_current(device);
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace csp
