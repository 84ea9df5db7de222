// Native baselines for src/bench/memory.ts (see the comment below). Runs on: the calling JS thread.
#include <chrono>

#include "context.h"
#include "loader.h"
#include "memory.h"

namespace csp {
namespace {

// Native baselines for src/bench/memory.ts: the same work as the TS calls, as plain driver loops. They block the
// calling thread for the whole loop (a benchmark's baseline, never library behaviour).

double elapsed_ns(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
}

// benchMemcpy(device, toDevice, bytes, iterations) -> nanoseconds for `iterations` copies of `bytes` between a
// pinned block and a device allocation on a private stream, from the first enqueue until the stream is idle.
Napi::Value bench_memcpy(const Napi::CallbackInfo& info) {
  int device = info[0].As<Napi::Number>().Int32Value();
  bool to_device = info[1].As<Napi::Boolean>().Value();
  size_t bytes = to_size(info[2]);
  int iterations = info[3].As<Napi::Number>().Int32Value();
  make_current(device);
  CUstream stream = nullptr;
  check(drv().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", device);
  CUdeviceptr dptr = 0;
  void* host = nullptr;
  double ns = 0;
  CUresult r = drv().cuMemAllocFromPoolAsync(&dptr, bytes, default_pool(device), stream);
  try {
    check(r, "cuMemAllocFromPoolAsync", device, [&] { return std::string(std::to_string(bytes) + " bytes"); });
    check(drv().cuMemHostAlloc(&host, bytes, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc", device);
    auto copy = [&] {
      return to_device ? drv().cuMemcpyHtoDAsync(dptr, host, bytes, stream)
                       : drv().cuMemcpyDtoHAsync(host, dptr, bytes, stream);
    };
    check(copy(), "cuMemcpyAsync", device);  // warm-up
    check(drv().cuStreamSynchronize(stream), "cuStreamSynchronize", device);
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; i++) check(copy(), "cuMemcpyAsync", device);
    check(drv().cuStreamSynchronize(stream), "cuStreamSynchronize", device);
    ns = elapsed_ns(start);
  } catch (...) {
    if (dptr) check_quiet(drv().cuMemFreeAsync(dptr, stream), device);
    check_quiet(drv().cuStreamSynchronize(stream), device);
    if (host) check_quiet(drv().cuMemFreeHost(host), device);
    check_quiet(drv().cuStreamDestroy(stream), device);
    throw;
  }
  check_quiet(drv().cuMemFreeAsync(dptr, stream), device);
  check_quiet(drv().cuStreamSynchronize(stream), device);
  check_quiet(drv().cuMemFreeHost(host), device);
  check_quiet(drv().cuStreamDestroy(stream), device);
  return Napi::Number::New(info.Env(), ns);
}

// benchAllocFree(device, bytes, iterations) -> nanoseconds for `iterations` cuMemAllocFromPoolAsync +
// cuMemFreeAsync pairs on a private stream (enqueue cost; the stream is synchronized after the clock stops).
Napi::Value bench_alloc_free(const Napi::CallbackInfo& info) {
  int device = info[0].As<Napi::Number>().Int32Value();
  size_t bytes = to_size(info[1]);
  int iterations = info[2].As<Napi::Number>().Int32Value();
  make_current(device);
  CUmemoryPool pool = default_pool(device);
  CUstream stream = nullptr;
  check(drv().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", device);
  double ns = 0;
  CUresult failure = CUDA_SUCCESS;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations && failure == CUDA_SUCCESS; i++) {
    CUdeviceptr dptr = 0;
    failure = drv().cuMemAllocFromPoolAsync(&dptr, bytes, pool, stream);
    if (failure == CUDA_SUCCESS) failure = drv().cuMemFreeAsync(dptr, stream);
  }
  ns = elapsed_ns(start);
  check_quiet(drv().cuStreamSynchronize(stream), device);
  check_quiet(drv().cuStreamDestroy(stream), device);
  check(failure, "cuMemAllocFromPoolAsync", device, [&] { return std::string(std::to_string(bytes) + " bytes"); });
  return Napi::Number::New(info.Env(), ns);
}

}  // namespace

void register_memory_bench(Napi::Env env, Napi::Object exports) {
  exports.Set("benchMemcpy", Napi::Function::New<js_entry<bench_memcpy>>(env, "benchMemcpy"));
  exports.Set("benchAllocFree", Napi::Function::New<js_entry<bench_alloc_free>>(env, "benchAllocFree"));
}

}  // namespace csp
