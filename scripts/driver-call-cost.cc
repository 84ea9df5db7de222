// What the small driver calls that the library makes around the calls a C loop makes cost, in ns per call (medians of
// nine runs): cuCtxGetCurrent (each entry point's check of the current context), cuStreamGetId (read once per
// Stream.create), cuStreamIsCapturing, cuStreamQuery on an idle stream; and the C loops of `bench micro`'s
// alloc + free and create + destroy rows, bare and with the library's extra calls added. With scripts/call-gap.mjs
// it tells whether a ratio's miss on a GPU is the driver's cost of those calls or the library's own work. The last
// rows tell whether cuStreamGetId on a new stream costs work that the stream's first operation would pay anyway (then
// asking later would only move the cost). Needs no
// CUDA toolkit (the library's own declarations); on the GPU machine, from the repository root:
//   g++ -std=c++17 -O2 -I packages/cuda-stream-pool/src scripts/driver-call-cost.cc -ldl -o /tmp/driver-call-cost
//   /tmp/driver-call-cost               (CUDA_STREAM_POOL_LIBCUDA=/tmp/null-driver/libcuda.so.1 for the null driver)
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "internal/cuda-driver.h"

using namespace csp;  // the declarations live in the library's namespace

namespace {

void* library = nullptr;
PFN_cuGetProcAddress get_proc = nullptr;

template <class F>
F entry(const char* name) {
  void* pointer = nullptr;
  CUdriverProcAddressQueryResult status{};
  if (get_proc(name, &pointer, 12000, 0, &status) != CUDA_SUCCESS || pointer == nullptr) {
    std::fprintf(stderr, "the driver has no %s\n", name);
    std::exit(1);
  }
  return reinterpret_cast<F>(pointer);
}

void check(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return;
  std::fprintf(stderr, "%s failed with CUresult %d\n", call, static_cast<int>(result));
  std::exit(1);
}

template <class F>
double ns_per_call(int calls, F&& body) {
  std::vector<double> runs;
  for (int run = 0; run < 10; run++) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; i++) body();
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / calls;
    if (run > 0) runs.push_back(ns);  // the first run warms up
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace

int main() {
  const char* path = std::getenv("CUDA_STREAM_POOL_LIBCUDA");
  library = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    std::fprintf(stderr, "cannot open the CUDA driver: %s\n", dlerror());
    return 1;
  }
  get_proc = reinterpret_cast<PFN_cuGetProcAddress>(dlsym(library, "cuGetProcAddress_v2"));
  if (!get_proc) {
    std::fprintf(stderr, "the driver has no cuGetProcAddress_v2\n");
    return 1;
  }
  auto init = entry<PFN_cuInit>("cuInit");
  auto device_get = entry<PFN_cuDeviceGet>("cuDeviceGet");
  auto retain = entry<PFN_cuDevicePrimaryCtxRetain>("cuDevicePrimaryCtxRetain");
  auto set_current = entry<PFN_cuCtxSetCurrent>("cuCtxSetCurrent");
  auto get_current = entry<PFN_cuCtxGetCurrent>("cuCtxGetCurrent");
  auto create = entry<PFN_cuStreamCreateWithPriority>("cuStreamCreateWithPriority");
  auto destroy = entry<PFN_cuStreamDestroy>("cuStreamDestroy");
  auto query = entry<PFN_cuStreamQuery>("cuStreamQuery");
  auto synchronize = entry<PFN_cuStreamSynchronize>("cuStreamSynchronize");
  auto get_id = entry<PFN_cuStreamGetId>("cuStreamGetId");
  auto is_capturing = entry<PFN_cuStreamIsCapturing>("cuStreamIsCapturing");
  auto default_pool = entry<PFN_cuDeviceGetDefaultMemPool>("cuDeviceGetDefaultMemPool");
  auto alloc_async = entry<PFN_cuMemAllocFromPoolAsync>("cuMemAllocFromPoolAsync");
  auto free_async = entry<PFN_cuMemFreeAsync>("cuMemFreeAsync");
  auto memset_async = entry<PFN_cuMemsetD8Async>("cuMemsetD8Async");

  check(init(0), "cuInit");
  CUdevice device = 0;
  check(device_get(&device, 0), "cuDeviceGet");
  CUcontext context = nullptr;
  check(retain(&context, device), "cuDevicePrimaryCtxRetain");
  check(set_current(context), "cuCtxSetCurrent");
  CUstream stream = nullptr;
  check(create(&stream, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreateWithPriority");
  CUmemoryPool pool = nullptr;
  check(default_pool(&pool, device), "cuDeviceGetDefaultMemPool");

  CUcontext current = nullptr;
  unsigned long long id = 0;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  const int small = 100000, pairs = 2000;
  std::printf("cuCtxGetCurrent                       %8.1f ns\n", ns_per_call(small, [&] { get_current(&current); }));
  std::printf("cuStreamGetId                         %8.1f ns\n", ns_per_call(small, [&] { get_id(stream, &id); }));
  std::printf("cuStreamIsCapturing                   %8.1f ns\n", ns_per_call(small, [&] { is_capturing(stream, &capture); }));
  std::printf("cuStreamQuery, idle stream            %8.1f ns\n", ns_per_call(small, [&] { query(stream); }));
  auto pair = [&](int context_checks) {
    CUdeviceptr memory = 0;
    for (int i = 0; i < context_checks; i++) get_current(&current);
    check(alloc_async(&memory, 1 << 20, pool, stream), "cuMemAllocFromPoolAsync");
    for (int i = 0; i < context_checks; i++) get_current(&current);
    check(free_async(memory, stream), "cuMemFreeAsync");
  };
  std::printf("alloc + free (1 MiB)                  %8.1f ns\n", ns_per_call(pairs, [&] { pair(0); }));
  std::printf("alloc + free, 4 cuCtxGetCurrent added %8.1f ns\n", ns_per_call(pairs, [&] { pair(2); }));
  check(synchronize(stream), "cuStreamSynchronize");
  auto stream_pair = [&](bool library_calls) {
    CUstream made = nullptr;
    if (library_calls) get_current(&current);
    check(create(&made, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreateWithPriority");
    if (library_calls) {
      get_id(made, &id);
      get_current(&current);
    }
    check(destroy(made), "cuStreamDestroy");
  };
  std::printf("create + destroy                      %8.1f ns\n", ns_per_call(pairs, [&] { stream_pair(false); }));
  std::printf("create + destroy, the library's calls %8.1f ns\n", ns_per_call(pairs, [&] { stream_pair(true); }));
  // Whether cuStreamGetId on a new stream costs the driver work that the stream's first operation would do anyway:
  // the same pair with a 1-byte memset queued on the new stream, with and without the id read before it.
  CUdeviceptr byte = 0;
  check(alloc_async(&byte, 1, pool, stream), "cuMemAllocFromPoolAsync");
  check(synchronize(stream), "cuStreamSynchronize");
  auto used_pair = [&](bool read_id) {
    CUstream made = nullptr;
    check(create(&made, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreateWithPriority");
    if (read_id) get_id(made, &id);
    check(memset_async(byte, 0, 1, made), "cuMemsetD8Async");
    check(destroy(made), "cuStreamDestroy");
  };
  auto id_pair = [&] {
    CUstream made = nullptr;
    check(create(&made, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreateWithPriority");
    get_id(made, &id);
    check(destroy(made), "cuStreamDestroy");
  };
  for (int round = 0; round < 2; round++) {
    std::printf("create + destroy, round %d             %8.1f ns\n", round, ns_per_call(pairs, [&] { stream_pair(false); }));
    std::printf("create + cuStreamGetId + destroy       %8.1f ns\n", ns_per_call(pairs, id_pair));
    std::printf("create + 1-byte memset + destroy       %8.1f ns\n", ns_per_call(pairs, [&] { used_pair(false); }));
    std::printf("create + id + 1-byte memset + destroy  %8.1f ns\n", ns_per_call(pairs, [&] { used_pair(true); }));
    check(synchronize(nullptr), "cuStreamSynchronize");
  }
  check(destroy(stream), "cuStreamDestroy");
  return 0;
}
