// The library's copy kernel: batches of small copies between device memory and pinned host memory in one launch
// (Note [copy kernel] in copy-kernel.cc).
#pragma once
#include <cstddef>
#include <vector>

#include "internal/cuda-driver.h"

namespace csp {

struct CopyPiece {
  CUdeviceptr destination;
  CUdeviceptr source;
  size_t bytes;
};

// The most pieces and the largest piece (bytes) the kernel takes; a batch beyond either goes to the driver.
constexpr size_t kCopyKernelMaxPieces = 128;
constexpr size_t kCopyKernelMaxPieceBytes = 64 * 1024;
// The fewest pieces worth a launch: one copy is as quick through the copy engine.
constexpr size_t kCopyKernelMinPieces = 2;

// The kernel for `device`, its module loaded on first use (the device's context is current); null where it cannot be
// had: a driver that cannot compile it for this GPU, or a load that failed (tried again next time unless the failure
// says the PTX can never load here). Never throws.
CUfunction copy_kernel(int device);

// Whether a kernel on `device` may address host memory registered with cuMemHostRegister by its host pointer
// (CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM); asked once. Never throws: false when unknown.
bool registered_memory_addressable(int device);

// Queues `pieces` (at most kCopyKernelMaxPieces, none empty) on `stream` with `kernel`, in one launch; the result of
// cuLaunchKernel (nothing is queued unless it is CUDA_SUCCESS).
CUresult launch_copy_kernel(CUfunction kernel, CUstream stream, const std::vector<CopyPiece>& pieces);

}  // namespace csp
