// The CUDA driver loader: opens libcuda once per process at run time and resolves its entry points.
// See DESIGN.md "Layers": no link-time dependency on libcuda, so the addon loads where there is no GPU.
#pragma once
#include <cuda.h>

#include <string>

namespace csp {

// Entry points resolved through cuGetProcAddress at the CUDA 12.0 ABI. Member names go through cuda.h's
// version macros (cuStreamDestroy -> cuStreamDestroy_v2), so calls read as the documented names.
struct Driver {
#define CSP_DRIVER_FUNCTIONS(X)                                                                           \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGet)                   \
  X(cuDeviceGetCount) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem)                     \
  X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxGetStreamPriorityRange)       \
  X(cuStreamCreate) X(cuStreamCreateWithPriority) X(cuStreamDestroy) X(cuStreamQuery) X(cuStreamSynchronize)               \
  X(cuStreamWaitEvent) X(cuStreamGetId) X(cuStreamGetPriority) X(cuStreamGetFlags) X(cuStreamGetCtx)     \
  X(cuLaunchHostFunc) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery)                \
  X(cuEventSynchronize) X(cuEventElapsedTime) X(cuModuleLoadDataEx) X(cuModuleUnload)                    \
  X(cuModuleGetFunction) X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuLaunchKernel)                    \
  X(cuOccupancyMaxPotentialBlockSize) X(cuMemAllocAsync) X(cuMemFreeAsync) X(cuMemHostAlloc) X(cuMemFreeHost)  \
  X(cuMemcpyAsync) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemsetD8Async)            \
  X(cuMemsetD32Async) X(cuDeviceGetDefaultMemPool) X(cuMemPoolGetAttribute) X(cuMemPoolSetAttribute)            \
  X(cuMemPoolTrimTo) X(cuMemGetInfo) X(cuMemAllocFromPoolAsync) X(cuStreamWriteValue64) X(cuStreamWaitValue64)  \
  X(cuMemHostGetDevicePointer) X(cuCtxSynchronize) X(cuMemAllocManaged) X(cuMemFree)
// CUDA 12.4+, used only to list a module's kernels in error messages and to check a kernel's signature against its
// parameters; null on older drivers.
#define CSP_OPTIONAL_DRIVER_FUNCTIONS(X) \
  X(cuModuleGetFunctionCount) X(cuModuleEnumerateFunctions) X(cuFuncGetName) X(cuFuncGetParamInfo)
#define CSP_DECLARE(name) decltype(&::name) name = nullptr;
  CSP_DRIVER_FUNCTIONS(CSP_DECLARE)
  CSP_OPTIONAL_DRIVER_FUNCTIONS(CSP_DECLARE)
#undef CSP_DECLARE
  // cuMemPrefetchAsync and cuMemAdvise as cuGetProcAddress hands them out at the CUDA 12.0 ABI we request: the
  // target is a CUdevice (CU_DEVICE_CPU, -1, for host memory). CUDA 13's cuda.h declares these names with the
  // CUmemLocation signatures of their _v2 variants (CUDA 12.2+), so they are typed here by hand rather than
  // through decltype, and named _v1 so that no header macro renames them.
  CUresult (*cuMemPrefetchAsync_v1)(CUdeviceptr ptr, size_t bytes, CUdevice target, CUstream stream) = nullptr;
  CUresult (*cuMemAdvise_v1)(CUdeviceptr ptr, size_t bytes, CUmem_advise advice, CUdevice device) = nullptr;
};

struct DriverState {
  bool available = false;
  std::string unavailable_reason;  // what was tried, what failed, what to do
  int driver_version = 0;          // cuDriverGetVersion, 0 when the library could not be opened
  int device_count = 0;
};

// Opens the driver and runs cuInit on first call; later calls return the same state. Any thread.
const DriverState& load_driver();

// The resolved table; only valid after load_driver() reported available (callers check through require_driver).
const Driver& drv();

}  // namespace csp
