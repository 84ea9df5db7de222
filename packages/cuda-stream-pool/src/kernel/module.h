// A loaded module, shared by its Module object and every graph whose kernel nodes launch its functions.
#pragma once

#include <memory>

#include <napi.h>

#include "internal/cuda-driver.h"

namespace csp {

// Kernel arguments arrive as one little-endian slot of this many bytes each (kernelLaunch, graphExecSetKernelParams);
// KERNEL_ARG_SLOT_BYTES in src/binding/binding.ts is the same number (test/cpu/contract.test.ts).
constexpr unsigned kKernelArgSlotBytes = 8;

// Note [module lifetime]: a CUmodule is unloaded when nobody can use its functions any more: its Module object (until
// unload()) and every driver graph captured with one of its kernels, since instantiating, updating or destroying
// such a graph reads the functions (the driver crashes on an unloaded one). So the handle lives here, held by
// shared_ptr, and Module.unload() only drops the object's share. Counted in live().modules while it lives.
struct LoadedModule {
  CUmodule handle = nullptr;
  int device = 0;
  LoadedModule(CUmodule h, int d);
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;
  // Unloads once no capture is open on the device (cuModuleUnload would invalidate it). Never throws.
  ~LoadedModule();
};

// The loaded module of a kernel object (from moduleGetFunction), or null once its module was unloaded. JS thread.
std::shared_ptr<LoadedModule> kernel_module(const Napi::Value& kernel);

}  // namespace csp
