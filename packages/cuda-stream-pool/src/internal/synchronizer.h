// Device-wide waits off the JS thread: one native thread per device per environment that waits in cuCtxSynchronize
// for device.synchronize() and frees managed memory once the device's queued work is done. See
// Note [device synchronizer].
#pragma once
#include <napi.h>
#include "internal/cuda-driver.h"

#include <cstddef>
#include <memory>

namespace csp {

struct Synchronizers;  // per environment; held by AddonData and by its threads

// This environment's synchronizers, created on first use. Runs on: the JS thread.
std::shared_ptr<Synchronizers> synchronizers_of(Napi::Env env);

// Frees managed memory `ptr` (`bytes` long, counted in live().managed_bytes until then) of `device` once all work queued on the device before this call is done: the device's
// synchronizer thread runs cuCtxSynchronize, then cuMemFree. When that thread is gone (the environment was torn
// down), frees on the calling thread after its own cuCtxSynchronize. Never throws. Runs on: any thread.
void free_managed_after_work(const std::weak_ptr<Synchronizers>& owner, int device, CUdeviceptr ptr, size_t bytes);

}  // namespace csp
