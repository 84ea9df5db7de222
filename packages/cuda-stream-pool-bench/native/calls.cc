// Native baselines of `cuda-stream-pool bench micro`: the driver calls behind a library call, in a plain C++ loop, so
// that each row prints the library's cost beside the driver's own from the same process and run. One definition each.
// Mechanism only: the TS caller (src/) validates the arguments.
//
// Runs on: the calling JS thread, which each loop blocks (a benchmark; the loops are short).
#include <cstdint>
#include <string>
#include <vector>

#include "internal/loader.h"
#include "driver.h"

namespace csp::bench {
namespace {

// Driver objects one measurement creates, destroyed when it ends, also when a call in the loop threw.
class Scratch {
 public:
  explicit Scratch(int device) : context_(device), device_(device) {}
  Scratch(const Scratch&) = delete;  // owns driver objects
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {  // before context_ is restored
    if (stream_) drv().cuStreamSynchronize(stream_);
    if (allocation_) drv().cuMemFreeAsync(allocation_, stream_);
    if (stream_) drv().cuStreamSynchronize(stream_);
    if (event_) drv().cuEventDestroy(event_);
    if (stream_) drv().cuStreamDestroy(stream_);
  }

  // A non-blocking stream of priority 0, as Stream.create() makes by default.
  CUstream stream() {
    if (!stream_)
      check(drv().cuStreamCreateWithPriority(&stream_, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreateWithPriority",
            device_);
    return stream_;
  }

  // A timing-disabled event, as Event.create() makes by default.
  CUevent event() {
    if (!event_) check(drv().cuEventCreate(&event_, CU_EVENT_DISABLE_TIMING), "cuEventCreate", device_);
    return event_;
  }

  // `bytes` of device memory from the device's default memory pool, in order on stream(), ready when this returns.
  CUdeviceptr allocation(size_t bytes) {
    CUmemoryPool pool = nullptr;
    CUdevice handle = 0;
    check(drv().cuDeviceGet(&handle, device_), "cuDeviceGet", device_);
    check(drv().cuDeviceGetDefaultMemPool(&pool, handle), "cuDeviceGetDefaultMemPool", device_);
    check(drv().cuMemAllocFromPoolAsync(&allocation_, bytes, pool, stream()), "cuMemAllocFromPoolAsync", device_);
    check(drv().cuStreamSynchronize(stream_), "cuStreamSynchronize", device_);
    return allocation_;
  }

 private:
  ContextScope context_;
  int device_;
  CUstream stream_ = nullptr;
  CUevent event_ = nullptr;
  CUdeviceptr allocation_ = 0;
};

int device_of(const Napi::CallbackInfo& info) { return info[0].As<Napi::Number>().Int32Value(); }
int64_t iterations_of(const Napi::CallbackInfo& info) { return info[1].As<Napi::Number>().Int64Value(); }

// Nanoseconds per iteration of `body`, timed over `iterations` calls with the steady clock.
template <class Body>
double ns_per_op(int64_t iterations, Body body) {
  auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iterations; ++i) body();
  return iterations > 0 ? ns_since(start) / static_cast<double>(iterations) : 0;
}

uint64_t to_u64(const Napi::Value& value) {
  bool lossless = true;
  return value.As<Napi::BigInt>().Uint64Value(&lossless);
}

// streamCreateDestroyLoop(device, iterations) -> ns per cuStreamCreateWithPriority(non-blocking, 0) + cuStreamDestroy:
// what Stream.create() + destroy() call, and what a task pays for a stream of its own.
Napi::Value stream_create_destroy_loop(const Napi::CallbackInfo& info) {
  int device = device_of(info);
  ContextScope context(device);
  double ns = ns_per_op(iterations_of(info), [&] {
    CUstream stream = nullptr;
    check(drv().cuStreamCreateWithPriority(&stream, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreateWithPriority", device);
    check(drv().cuStreamDestroy(stream), "cuStreamDestroy", device);
  });
  return Napi::Number::New(info.Env(), ns);
}

// streamSynchronizeIdleLoop(device, iterations) -> ns per cuStreamSynchronize on an idle stream.
Napi::Value stream_synchronize_idle_loop(const Napi::CallbackInfo& info) {
  int device = device_of(info);
  Scratch scratch(device);
  CUstream stream = scratch.stream();
  double ns = ns_per_op(iterations_of(info),
                        [&] { check(drv().cuStreamSynchronize(stream), "cuStreamSynchronize", device); });
  return Napi::Number::New(info.Env(), ns);
}

// kernelSynchronizeLoop(device, iterations, ptx) -> ns per cuLaunchKernel(empty_kernel, 1 block of 1 thread) +
// cuStreamSynchronize.
Napi::Value kernel_synchronize_loop(const Napi::CallbackInfo& info) {
  int device = device_of(info);
  Scratch scratch(device);
  CUfunction function = bench_kernel(device, info[2].As<Napi::String>().Utf8Value(), "empty_kernel");
  CUstream stream = scratch.stream();
  double ns = ns_per_op(iterations_of(info), [&] {
    check(drv().cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr), "cuLaunchKernel", device);
    check(drv().cuStreamSynchronize(stream), "cuStreamSynchronize", device);
  });
  return Napi::Number::New(info.Env(), ns);
}

// eventRecordLoop(device, iterations) -> ns per cuEventRecord of a timing-disabled event on an idle stream.
Napi::Value event_record_loop(const Napi::CallbackInfo& info) {
  int device = device_of(info);
  Scratch scratch(device);
  CUstream stream = scratch.stream();
  CUevent event = scratch.event();
  double ns =
      ns_per_op(iterations_of(info), [&] { check(drv().cuEventRecord(event, stream), "cuEventRecord", device); });
  return Napi::Number::New(info.Env(), ns);
}

// launchLoop(device, iterations, ptx, name, stream: bigint, params: Uint8Array, slotBytes) -> ns per cuLaunchKernel
// (grid 1, block 1, no shared memory) of the benchmark kernel `name` on the library's stream `stream` (its raw
// handle), with the arguments packed as kernel.launch() packs them: one slot of `slotBytes` per parameter. The stream
// is synchronized before and after, outside the timed loop.
Napi::Value launch_loop(const Napi::CallbackInfo& info) {
  int device = device_of(info);
  int64_t iterations = iterations_of(info);
  ContextScope context(device);
  const std::string name = info[3].As<Napi::String>().Utf8Value();
  CUfunction function = bench_kernel(device, info[2].As<Napi::String>().Utf8Value(), name.c_str());
  auto stream = reinterpret_cast<CUstream>(static_cast<uintptr_t>(to_u64(info[4])));
  auto params = info[5].As<Napi::Uint8Array>();
  size_t slot = info[6].As<Napi::Number>().Uint32Value();
  std::vector<void*> pointers;
  for (size_t offset = 0; slot && offset + slot <= params.ByteLength(); offset += slot)
    pointers.push_back(params.Data() + offset);
  void** args = pointers.empty() ? nullptr : pointers.data();
  check(drv().cuStreamSynchronize(stream), "cuStreamSynchronize", device);
  double ns = ns_per_op(iterations, [&] {
    check(drv().cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr), "cuLaunchKernel", device);
  });
  check(drv().cuStreamSynchronize(stream), "cuStreamSynchronize", device);
  return Napi::Number::New(info.Env(), ns);
}

// copyLoop(device, iterations, toDevice, host: Uint8Array, bytes) -> { enqueueNs, totalNs }: `iterations`
// cuMemcpyHtoDAsync (or cuMemcpyDtoHAsync) of `bytes` between `host` and device memory of its own, on a stream of its
// own, after one untimed warm-up copy. `host` is a PinnedBuffer's bytes (page-locked by the library), or a plain
// array: pageable memory, which the driver stages itself, blocking the thread until each copy has read (or written)
// it.
// enqueueNs: per copy, the calls alone; totalNs: from the first call until the stream is idle.
Napi::Value copy_loop(const Napi::CallbackInfo& info) {
  int device = device_of(info);
  int64_t iterations = iterations_of(info);
  bool to_device = info[2].As<Napi::Boolean>().Value();
  auto host_array = info[3].As<Napi::Uint8Array>();
  size_t bytes = static_cast<size_t>(info[4].As<Napi::Number>().Int64Value());
  Scratch scratch(device);
  CUstream stream = scratch.stream();
  CUdeviceptr memory = scratch.allocation(bytes);
  void* host = host_array.Data();
  auto copy = [&] {
    if (to_device)
      check(drv().cuMemcpyHtoDAsync(memory, host, bytes, stream), "cuMemcpyHtoDAsync", device);
    else
      check(drv().cuMemcpyDtoHAsync(host, memory, bytes, stream), "cuMemcpyDtoHAsync", device);
  };
  copy();
  check(drv().cuStreamSynchronize(stream), "cuStreamSynchronize", device);
  auto start = std::chrono::steady_clock::now();
  double enqueue = ns_per_op(iterations, copy);
  check(drv().cuStreamSynchronize(stream), "cuStreamSynchronize", device);
  double total = ns_since(start);
  Napi::Object out = Napi::Object::New(info.Env());
  out.Set("enqueueNs", enqueue);
  out.Set("totalNs", total);
  return out;
}

// allocFreeLoop(device, iterations, bytes) -> ns per cuMemAllocFromPoolAsync (the device's default pool) +
// cuMemFreeAsync pair on a stream of its own: the enqueue cost (the stream is synchronized after the clock stops).
Napi::Value alloc_free_loop(const Napi::CallbackInfo& info) {
  int device = device_of(info);
  int64_t iterations = iterations_of(info);
  size_t bytes = static_cast<size_t>(info[2].As<Napi::Number>().Int64Value());
  Scratch scratch(device);
  CUstream stream = scratch.stream();
  CUmemoryPool pool = nullptr;
  CUdevice handle = 0;
  check(drv().cuDeviceGet(&handle, device), "cuDeviceGet", device);
  check(drv().cuDeviceGetDefaultMemPool(&pool, handle), "cuDeviceGetDefaultMemPool", device);
  double ns = ns_per_op(iterations, [&] {
    CUdeviceptr memory = 0;
    check(drv().cuMemAllocFromPoolAsync(&memory, bytes, pool, stream), "cuMemAllocFromPoolAsync", device);
    check(drv().cuMemFreeAsync(memory, stream), "cuMemFreeAsync", device);
  });
  return Napi::Number::New(info.Env(), ns);
}

}  // namespace

void register_calls(Napi::Env env, Napi::Object exports) {
  auto add = [&](const char* name, Napi::Function function) { exports.Set(name, function); };
  add("streamCreateDestroyLoop",
      Napi::Function::New<entry<stream_create_destroy_loop>>(env, "streamCreateDestroyLoop"));
  add("streamSynchronizeIdleLoop",
      Napi::Function::New<entry<stream_synchronize_idle_loop>>(env, "streamSynchronizeIdleLoop"));
  add("kernelSynchronizeLoop", Napi::Function::New<entry<kernel_synchronize_loop>>(env, "kernelSynchronizeLoop"));
  add("eventRecordLoop", Napi::Function::New<entry<event_record_loop>>(env, "eventRecordLoop"));
  add("launchLoop", Napi::Function::New<entry<launch_loop>>(env, "launchLoop"));
  add("copyLoop", Napi::Function::New<entry<copy_loop>>(env, "copyLoop"));
  add("allocFreeLoop", Napi::Function::New<entry<alloc_free_loop>>(env, "allocFreeLoop"));
}

}  // namespace csp::bench
