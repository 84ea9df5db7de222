// A CUDA driver that does nothing, for measuring the library's own cost per call on any machine: every call
// succeeds at once, device memory is host memory (malloc; an allocation malloc refuses is out of memory), single
// copies and fills are memcpy/memset, a stream memory write lands immediately, so every stream is always idle. Batched
// copies (cuMemcpyBatchAsync, the library's copy kernel) and kernels do nothing. Nothing here is a GPU: results are
// meaningless, timings are not.
//   mkdir -p /tmp/null-driver
//   g++ -std=c++17 -O2 -shared -fPIC -I packages/cuda-stream-pool/src scripts/null-driver.cc -o /tmp/null-driver/libcuda.so.1
//   CUDA_STREAM_POOL_LIBCUDA=/tmp/null-driver/libcuda.so.1 npx cuda-stream-pool bench micro
// `bench micro` then shows each row's cost with the driver's taken out (its C baselines call the same stubs).
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "internal/cuda-driver.h"

using namespace csp;

namespace {
std::atomic<unsigned long long> next_id{1};
thread_local CUcontext current = nullptr;
template <class T>
T fresh() { return reinterpret_cast<T>(static_cast<uintptr_t>(0x100000 + 16 * next_id.fetch_add(1))); }
// Every entry point without a stub of its own: it writes no outputs, so only calls whose outputs the library does not
// read on the measured paths may land here. Called through other function types, which the x86-64 and arm64 calling
// conventions allow for a function that reads no arguments.
CUresult ok_any() { return CUDA_SUCCESS; }

extern "C" {
CUresult s_cuInit(unsigned) { return CUDA_SUCCESS; }
CUresult s_cuGetErrorName(CUresult, const char** n) { *n = "CUDA_ERROR_NULL_DRIVER"; return CUDA_SUCCESS; }
CUresult s_cuGetErrorString(CUresult, const char** n) { *n = "null driver"; return CUDA_SUCCESS; }
// NULL_DRIVER_DEVICES=n shows n devices (default 1), for the library's multi-device bookkeeping (contexts, peers).
int device_count() {
  const char* n = std::getenv("NULL_DRIVER_DEVICES");
  return n && std::atoi(n) > 0 ? std::atoi(n) : 1;
}
CUresult s_cuDeviceGet(CUdevice* d, int o) { *d = o; return o >= 0 && o < device_count() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE; }
CUresult s_cuDeviceGetCount(int* c) { *c = device_count(); return CUDA_SUCCESS; }
CUresult s_cuDeviceGetName(char* n, int len, CUdevice) { std::strncpy(n, "null driver", len); return CUDA_SUCCESS; }
CUresult s_cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  switch (static_cast<int>(a)) {
    case 1: *v = 1024; break;
    case 2: case 3: *v = 1024; break;
    case 4: *v = 64; break;
    case 5: *v = 2147483647; break;
    case 6: case 7: *v = 65535; break;
    case 8: *v = 49152; break;
    case 10: *v = 32; break;
    case 16: *v = 132; break;
    case 75: *v = 9; break;
    case 76: *v = 0; break;
    default: *v = 1;
  }
  return CUDA_SUCCESS;
}
CUresult s_cuDeviceTotalMem(size_t* b, CUdevice) { *b = 140ull << 30; return CUDA_SUCCESS; }
CUresult s_cuDeviceCanAccessPeer(int* c, CUdevice, CUdevice) { *c = 0; return CUDA_SUCCESS; }
CUresult s_cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) { *c = reinterpret_cast<CUcontext>(0x1000 + 16 * d); return CUDA_SUCCESS; }
CUresult s_cuCtxSetCurrent(CUcontext c) { current = c; return CUDA_SUCCESS; }
CUresult s_cuCtxGetCurrent(CUcontext* c) { *c = current; return CUDA_SUCCESS; }
CUresult s_cuCtxGetStreamPriorityRange(int* l, int* g) { *l = 0; *g = -5; return CUDA_SUCCESS; }
CUresult s_cuStreamCreate(CUstream* s, unsigned) { *s = fresh<CUstream>(); return CUDA_SUCCESS; }
CUresult s_cuStreamCreateWithPriority(CUstream* s, unsigned, int) { *s = fresh<CUstream>(); return CUDA_SUCCESS; }
CUresult s_cuStreamGetId(CUstream s, unsigned long long* id) { *id = reinterpret_cast<uintptr_t>(s); return CUDA_SUCCESS; }
CUresult s_cuStreamGetPriority(CUstream, int* p) { *p = 0; return CUDA_SUCCESS; }
CUresult s_cuStreamGetFlags(CUstream, unsigned* f) { *f = 0; return CUDA_SUCCESS; }
CUresult s_cuStreamWriteValue64(CUstream, CUdeviceptr a, cuuint64_t v, unsigned) {
  __atomic_store_n(reinterpret_cast<cuuint64_t*>(a), v, __ATOMIC_RELEASE);
  return CUDA_SUCCESS;
}
CUresult s_cuEventCreate(CUevent* e, unsigned) { *e = fresh<CUevent>(); return CUDA_SUCCESS; }
CUresult s_cuEventElapsedTime(float* ms, CUevent, CUevent) { *ms = 0; return CUDA_SUCCESS; }
CUresult s_cuModuleLoadDataEx(CUmodule* m, const void*, unsigned, void*, void**) { *m = fresh<CUmodule>(); return CUDA_SUCCESS; }
CUresult s_cuModuleGetFunction(CUfunction* f, CUmodule, const char*) { *f = fresh<CUfunction>(); return CUDA_SUCCESS; }
CUresult s_cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction) {
  *v = static_cast<int>(a) == 0 ? 1024 : 0;
  return CUDA_SUCCESS;
}
CUresult s_cuOccupancyMaxPotentialBlockSize(int* g, int* b, CUfunction, void*, size_t, int) { *g = 132; *b = 1024; return CUDA_SUCCESS; }
CUresult s_cuMemGetInfo(size_t* f, size_t* t) { *f = 130ull << 30; *t = 140ull << 30; return CUDA_SUCCESS; }
// Stream-ordered allocations come from a cache of blocks by size, as the driver's memory pool reuses them, so that a
// measured alloc + free does not pay for mapping fresh pages each time.
std::mutex pool_mutex;
std::unordered_map<CUdeviceptr, size_t> pool_sizes;
std::unordered_multimap<size_t, CUdeviceptr> pool_free;
CUresult s_cuMemAllocFromPoolAsync(CUdeviceptr* p, size_t n, CUmemoryPool, CUstream) {
  std::lock_guard<std::mutex> lock(pool_mutex);
  auto it = pool_free.find(n);
  if (it != pool_free.end()) {
    *p = it->second;
    pool_free.erase(it);
  } else {
    void* memory = std::malloc(n ? n : 1);
    if (!memory) return CUDA_ERROR_OUT_OF_MEMORY;
    *p = reinterpret_cast<CUdeviceptr>(memory);
    pool_sizes[*p] = n;
  }
  return CUDA_SUCCESS;
}
CUresult s_cuMemAllocAsync(CUdeviceptr* p, size_t n, CUstream s) { return s_cuMemAllocFromPoolAsync(p, n, nullptr, s); }
CUresult s_cuMemFreeAsync(CUdeviceptr p, CUstream) {
  std::lock_guard<std::mutex> lock(pool_mutex);
  pool_free.emplace(pool_sizes.at(p), p);
  return CUDA_SUCCESS;
}
CUresult s_cuMemAllocManaged(CUdeviceptr* p, size_t n, unsigned) { *p = reinterpret_cast<CUdeviceptr>(std::calloc(1, n)); return CUDA_SUCCESS; }
CUresult s_cuMemFree(CUdeviceptr p) { std::free(reinterpret_cast<void*>(p)); return CUDA_SUCCESS; }
CUresult s_cuMemHostAlloc(void** p, size_t n, unsigned) { *p = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096); std::memset(*p, 0, n); return CUDA_SUCCESS; }
CUresult s_cuMemFreeHost(void* p) { std::free(p); return CUDA_SUCCESS; }
CUresult s_cuMemHostGetDevicePointer(CUdeviceptr* d, void* h, unsigned) { *d = reinterpret_cast<CUdeviceptr>(h); return CUDA_SUCCESS; }
CUresult s_cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream) { std::memmove(reinterpret_cast<void*>(d), reinterpret_cast<void*>(s), n); return CUDA_SUCCESS; }
CUresult s_cuMemcpyHtoDAsync(CUdeviceptr d, const void* s, size_t n, CUstream) { std::memcpy(reinterpret_cast<void*>(d), s, n); return CUDA_SUCCESS; }
CUresult s_cuMemcpyDtoHAsync(void* d, CUdeviceptr s, size_t n, CUstream) { std::memcpy(d, reinterpret_cast<void*>(s), n); return CUDA_SUCCESS; }
CUresult s_cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream) { std::memmove(reinterpret_cast<void*>(d), reinterpret_cast<void*>(s), n); return CUDA_SUCCESS; }
CUresult s_cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream) { std::memset(reinterpret_cast<void*>(d), v, n); return CUDA_SUCCESS; }
CUresult s_cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream) {
  auto* w = reinterpret_cast<unsigned*>(d);
  for (size_t i = 0; i < n; i++) w[i] = v;
  return CUDA_SUCCESS;
}
CUresult s_cuDeviceGetDefaultMemPool(CUmemoryPool* p, CUdevice) { *p = reinterpret_cast<CUmemoryPool>(0x2000); return CUDA_SUCCESS; }
CUresult s_cuMemPoolGetAttribute(CUmemoryPool, CUmemPool_attribute, void* v) { std::memset(v, 0, 8); return CUDA_SUCCESS; }

}
}  // namespace

extern "C" {
__attribute__((visibility("default"))) CUresult cuDriverGetVersion(int* v) { *v = 13000; return CUDA_SUCCESS; }
__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int, cuuint64_t, CUdriverProcAddressQueryResult* status) {
  static const std::unordered_map<std::string, void*> table = {
#define S(name) {#name, reinterpret_cast<void*>(&s_##name)}
      S(cuInit), S(cuGetErrorName), S(cuGetErrorString), S(cuDeviceGet), S(cuDeviceGetCount), S(cuDeviceGetName),
      S(cuDeviceGetAttribute), S(cuDeviceTotalMem), S(cuDeviceCanAccessPeer), S(cuDevicePrimaryCtxRetain),
      S(cuCtxSetCurrent), S(cuCtxGetCurrent), S(cuCtxGetStreamPriorityRange), S(cuStreamCreate),
      S(cuStreamCreateWithPriority), S(cuStreamGetId), S(cuStreamGetPriority), S(cuStreamGetFlags),
      S(cuStreamWriteValue64), S(cuEventCreate), S(cuEventElapsedTime), S(cuModuleLoadDataEx), S(cuModuleGetFunction),
      S(cuFuncGetAttribute), S(cuOccupancyMaxPotentialBlockSize), S(cuMemGetInfo), S(cuMemAllocAsync),
      S(cuMemAllocFromPoolAsync), S(cuMemFreeAsync), S(cuMemAllocManaged), S(cuMemFree), S(cuMemHostAlloc),
      S(cuMemFreeHost), S(cuMemHostGetDevicePointer), S(cuMemcpyAsync), S(cuMemcpyHtoDAsync), S(cuMemcpyDtoHAsync),
      S(cuMemcpyDtoDAsync), S(cuMemsetD8Async), S(cuMemsetD32Async), S(cuDeviceGetDefaultMemPool),
      S(cuMemPoolGetAttribute),
#undef S
  };
  static const char* optional[] = {"cuModuleGetFunctionCount", "cuModuleEnumerateFunctions", "cuFuncGetName", "cuFuncGetParamInfo"};
  for (const char* name : optional)
    if (std::strcmp(name, symbol) == 0) {
      *pfn = nullptr;
      if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
      return CUDA_ERROR_NOT_FOUND;
    }
  auto it = table.find(symbol);
  *pfn = it != table.end() ? it->second : reinterpret_cast<void*>(&ok_any);
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}
}
