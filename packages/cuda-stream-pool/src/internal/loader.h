// The CUDA driver loader: opens libcuda once per process at run time and resolves its entry points.
// No link-time dependency on libcuda, so the addon loads where there is no GPU (and reports why CUDA is missing).
#pragma once
#include <string>

#include "internal/cuda-driver.h"

namespace csp {

// The entry points, each with the ABI version that cuGetProcAddress returns for it when asked at the version the
// loader requests (kRequiredVersion, CUDA 12.0): the highest version N <= 12000 for which the toolkit's
// cudaTypedefs.h declares PFN_<name>_v<N>. cuda-driver.h declares PFN_<name> with that ABI, and
// test/native/cuda-driver-check.cc compares the two. To add an entry point: one X(name, version) here, one PFN_<name>
// in cuda-driver.h; the check then covers it.
#define CSP_DRIVER_FUNCTIONS(X)                                                                                   \
  X(cuInit, 2000) X(cuGetErrorName, 6000) X(cuGetErrorString, 6000) X(cuDeviceGet, 2000)                          \
  X(cuDeviceGetCount, 2000) X(cuDeviceGetName, 2000) X(cuDeviceGetAttribute, 2000) X(cuDeviceTotalMem, 3020)      \
  X(cuDeviceCanAccessPeer, 4000) X(cuDevicePrimaryCtxRetain, 7000) X(cuCtxSetCurrent, 4000)                       \
  X(cuCtxGetCurrent, 4000) X(cuCtxSynchronize, 2000) X(cuCtxGetStreamPriorityRange, 5050)                         \
  X(cuCtxEnablePeerAccess, 4000) X(cuStreamCreate, 2000) X(cuStreamCreateWithPriority, 5050)                      \
  X(cuStreamDestroy, 4000) X(cuStreamQuery, 2000) X(cuStreamSynchronize, 2000) X(cuStreamWaitEvent, 3020)        \
  X(cuStreamGetId, 12000) X(cuStreamGetPriority, 5050) X(cuStreamGetFlags, 5050) X(cuStreamWriteValue64, 11070)   \
  X(cuStreamWaitValue64, 11070) X(cuEventCreate, 2000) X(cuEventDestroy, 4000) X(cuEventRecord, 2000)             \
  X(cuEventQuery, 2000) X(cuEventSynchronize, 2000) X(cuEventElapsedTime, 2000) X(cuModuleLoadDataEx, 2010)      \
  X(cuModuleUnload, 2000) X(cuModuleGetFunction, 2000) X(cuFuncGetAttribute, 2020) X(cuFuncSetAttribute, 9000)   \
  X(cuLaunchKernel, 4000) X(cuLaunchKernelEx, 11060) X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050) \
  X(cuOccupancyMaxPotentialBlockSize, 6050) X(cuMemGetInfo, 3020)                         \
  X(cuMemAllocAsync, 11020) X(cuMemAllocFromPoolAsync, 11020) X(cuMemFreeAsync, 11020)                            \
  X(cuMemAllocManaged, 6000) X(cuMemPrefetchAsync, 8000) X(cuMemAdvise, 8000) X(cuMemHostAlloc, 2020)            \
  X(cuMemFreeHost, 2000) X(cuMemHostRegister, 6050) X(cuMemHostUnregister, 4000) X(cuMemFree, 3020)              \
  X(cuMemAlloc, 3020) X(cuMemGetAddressRange, 3020)                                                              \
  X(cuIpcGetMemHandle, 4010) X(cuIpcOpenMemHandle, 11000) X(cuIpcCloseMemHandle, 4010)                            \
  X(cuIpcGetEventHandle, 4010) X(cuIpcOpenEventHandle, 4010)                                                      \
  X(cuMemHostGetDevicePointer, 3020) X(cuMemcpyAsync, 4000) X(cuMemcpyHtoDAsync, 3020)                            \
  X(cuMemcpyDtoHAsync, 3020) X(cuMemcpyDtoDAsync, 3020) X(cuMemcpyPeerAsync, 4000) X(cuMemcpy2DAsync, 3020)     \
  X(cuMemsetD8Async, 3020)                                                                                        \
  X(cuMemsetD32Async, 3020) X(cuDeviceGetDefaultMemPool, 11020) X(cuMemPoolGetAttribute, 11020)                   \
  X(cuMemPoolSetAttribute, 11020) X(cuMemPoolTrimTo, 11020) X(cuMemPoolSetAccess, 11020)                             \
  X(cuMemPoolGetAccess, 11020) X(cuStreamBeginCapture, 10010)                                                    \
  X(cuStreamEndCapture, 10000) X(cuStreamIsCapturing, 10000) X(cuStreamGetCaptureInfo, 11030)                     \
  X(cuGraphInstantiateWithFlags, 11040) X(cuGraphLaunch, 10000) X(cuGraphExecUpdate, 12000)                       \
  X(cuGraphDestroy, 10000) X(cuGraphExecDestroy, 10000) X(cuGraphGetNodes, 10000)                                 \
  X(cuGraphKernelNodeGetParams, 12000) X(cuGraphExecKernelNodeSetParams, 12000)
// Newer than CUDA 12.0, each requested at the version it came with, and null on older drivers: used to list a
// module's kernels in error messages, to check a kernel's signature against its parameters, for batched copies (on a
// CUDA 12.8 driver cuMemcpyBatchAsync_v12080 holds the older ABI of cuMemcpyBatchAsync instead) and for partitions
// (green contexts: device/partition.cc).
#define CSP_OPTIONAL_DRIVER_FUNCTIONS(X)                                                                   \
  X(cuModuleGetFunctionCount, 12040) X(cuModuleEnumerateFunctions, 12040) X(cuFuncGetName, 12030)         \
  X(cuFuncGetParamInfo, 12040) X(cuMemcpyBatchAsync, 13000) X(cuDeviceGetDevResource, 12040)              \
  X(cuDevSmResourceSplitByCount, 12040) X(cuDevResourceGenerateDesc, 12040) X(cuGreenCtxCreate, 12040)    \
  X(cuGreenCtxGetDevResource, 12040) X(cuGreenCtxStreamCreate, 12050)

// The resolved table. Members carry the documented names, so calls read drv().cuStreamDestroy(stream).
struct Driver {
#define CSP_DECLARE(name, version) PFN_##name name = nullptr;
  CSP_DRIVER_FUNCTIONS(CSP_DECLARE)
  CSP_OPTIONAL_DRIVER_FUNCTIONS(CSP_DECLARE)
#undef CSP_DECLARE
  PFN_cuMemcpyBatchAsync_v12080 cuMemcpyBatchAsync_v12080 = nullptr;  // a 12.8 driver's, when cuMemcpyBatchAsync is null
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

// What the driver calls `code` (cuGetErrorName, cuGetErrorString), or "CUresult <number>" and a note where it has no
// name or text (a code it does not know, or no driver entry points): never another code's name. Never throws.
struct ResultText {
  std::string name;
  std::string description;
};
ResultText result_text(CUresult code);

}  // namespace csp
