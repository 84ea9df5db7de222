#include "internal/copy-kernel.h"

#include <algorithm>
#include <mutex>

#include "device/device.h"
#include "internal/copy-kernel-ptx.h"
#include "internal/loader.h"
#include "internal/lock-order.h"

namespace csp {

// Note [copy kernel]: the copy engines take a few microseconds per copy however small it is (on an H200, 64 copies
// of 4 KiB from pinned memory take about 170 us one by one and 130 us in one cuMemcpyBatchAsync), so a batch of small
// copies is bound by their number, not their bytes. A kernel moves them all at once: the multiprocessors read and
// write pinned host memory through its unified address as they do device memory, and one launch of 64 blocks moves
// those 64 pieces in about 19 us. stream.copyBatch() uses it when every piece is device memory of the stream's
// device or pinned host memory (registered memory only where the device may address it by its host pointer), there
// are 2 to 128 pieces and none is over 64 KiB; larger pieces move at the bus's bandwidth on a copy engine while the
// kernel would hold multiprocessors. The pieces travel in the launch's parameters (24 bytes each, 3 KiB in all, under
// the 4 KiB every supported driver takes), so there is no table in memory to write, keep alive or order. Each piece
// gets blocks of its own (16 KiB per block); 16-byte vectors where both ends are 16-byte aligned, bytes elsewhere.
// The module is the PTX of copy-kernel.cu, compiled by the driver on the first batch on each device (about a
// millisecond) and kept as long as the primary context, that is, the process; cuda.liveObjects().modules counts the
// user's modules only. It runs on the stream's multiprocessors like any kernel: in a partition, on that partition's;
// behind a saturating kernel, after it. Where the module cannot be had, or a launch is refused without a sticky
// fault, the batch goes the driver's way (cuMemcpyBatchAsync, or one by one): the same bytes either way.

namespace {

// The mirror of copy-kernel.cu's parameters.
struct PieceParameter {
  unsigned long long destination;
  unsigned long long source;
  unsigned long long bytes;
};
struct PiecesParameter {
  PieceParameter piece[kCopyKernelMaxPieces];
};
static_assert(sizeof(PiecesParameter) == 3072, "the kernel's second parameter is 3072 bytes");

constexpr unsigned kThreadsPerBlock = 256;
constexpr size_t kBytesPerBlock = kThreadsPerBlock * 16 * 4;  // four 16-byte vectors per thread

struct KernelState {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  bool never = false;          // the PTX cannot load on this device
  int registered_host = -1;    // registered_memory_addressable's answer, -1 until asked
};

OrderedMutex& kernels_mutex() {
  static OrderedMutex mutex{LockLevel::kLeaf, "copy kernels"};
  return mutex;
}

KernelState& state_of(int device) {
  static KernelState states[kMaxDevices];
  return states[device];
}

// Results that say the PTX will never load on this device with this driver.
bool permanent(CUresult r) {
  return r == CUDA_ERROR_INVALID_PTX || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION || r == CUDA_ERROR_NO_BINARY_FOR_GPU ||
         r == CUDA_ERROR_JIT_COMPILER_NOT_FOUND || r == CUDA_ERROR_JIT_COMPILATION_DISABLED || r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_NOT_SUPPORTED ||
         r == CUDA_ERROR_NOT_FOUND;
}

}  // namespace

CUfunction copy_kernel(int device) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  std::lock_guard<OrderedMutex> lock(kernels_mutex());
  KernelState& state = state_of(device);
  if (state.function || state.never) return state.function;
  const Driver& driver = drv();
  CUmodule module = nullptr;
  CUresult r = driver.cuModuleLoadDataEx(&module, kCopyKernelPtx, 0, nullptr, nullptr);
  if (r != CUDA_SUCCESS) {
    state.never = permanent(r);
    return nullptr;
  }
  CUfunction function = nullptr;
  r = driver.cuModuleGetFunction(&function, module, "cuda_stream_pool_copy_pieces");
  if (r != CUDA_SUCCESS) {
    driver.cuModuleUnload(module);
    state.never = permanent(r);
    return nullptr;
  }
  state.module = module;
  state.function = function;
  return function;
}

bool registered_memory_addressable(int device) {
  if (device < 0 || device >= kMaxDevices) return false;
  std::lock_guard<OrderedMutex> lock(kernels_mutex());
  KernelState& state = state_of(device);
  if (state.registered_host < 0) {
    CUdevice handle = 0;
    int value = 0;
    if (drv().cuDeviceGet(&handle, device) != CUDA_SUCCESS ||
        drv().cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, handle) != CUDA_SUCCESS)
      return false;  // asked again next time
    state.registered_host = value != 0 ? 1 : 0;
  }
  return state.registered_host == 1;
}

CUresult launch_copy_kernel(CUfunction kernel, CUstream stream, const std::vector<CopyPiece>& pieces) {
  PiecesParameter parameter{};
  size_t largest = 0;
  for (size_t i = 0; i < pieces.size(); i++) {
    parameter.piece[i] = {pieces[i].destination, pieces[i].source, pieces[i].bytes};
    largest = std::max(largest, pieces[i].bytes);
  }
  unsigned count = static_cast<unsigned>(pieces.size());
  void* arguments[] = {&count, &parameter};
  const unsigned blocks_per_piece = static_cast<unsigned>((largest + kBytesPerBlock - 1) / kBytesPerBlock);
  return drv().cuLaunchKernel(kernel, count, blocks_per_piece, 1, kThreadsPerBlock, 1, 1, 0, stream, arguments, nullptr);
}

}  // namespace csp
