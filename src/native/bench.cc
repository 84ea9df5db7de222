// Native baselines of the stream micro-benchmarks (src/bench/stream.ts): the driver calls that the TS API wraps, in a
// plain C++ loop, so that `cuda-stream-pool bench micro` prints the library's cost beside the driver's own from the
// same process and run. See DESIGN.md "Measuring". Mechanism only: the caller validates the arguments.
//
// Runs on: the calling JS thread, which the loop blocks (a benchmark; nothing in the library calls it).
#include <chrono>
#include <string>
#include <vector>

#include "addon.h"
#include "check.h"
#include "context.h"
#include "loader.h"

namespace csp {
namespace {

// Driver objects one measurement creates, destroyed when it ends, also when a call in the loop threw.
class Scratch {
 public:
  explicit Scratch(int device) : device_(device) {}
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    if (stream_) check_quiet(drv().cuStreamSynchronize(stream_), device_);
    if (event_) check_quiet(drv().cuEventDestroy(event_), device_);
    if (stream_) check_quiet(drv().cuStreamDestroy(stream_), device_);
    if (module_) check_quiet(drv().cuModuleUnload(module_), device_);
  }

  CUstream stream() {
    if (!stream_)
      check(drv().cuStreamCreateWithPriority(&stream_, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreateWithPriority", device_,
            detail());
    return stream_;
  }

  CUevent event() {
    if (!event_) check(drv().cuEventCreate(&event_, CU_EVENT_DISABLE_TIMING), "cuEventCreate", device_, detail());
    return event_;
  }

  // Loads `image` (NUL-terminated PTX) and returns the kernel `name`.
  CUfunction kernel(const std::vector<char>& image, const char* name) {
    check(drv().cuModuleLoadDataEx(&module_, image.data(), 0, nullptr, nullptr), "cuModuleLoadDataEx", device_, detail());
    CUfunction function = nullptr;
    check(drv().cuModuleGetFunction(&function, module_, name), "cuModuleGetFunction", device_,
          detail() + ", kernel " + name);
    return function;
  }

  std::string detail() const { return "device " + std::to_string(device_) + " (native benchmark baseline)"; }
  int device() const { return device_; }

 private:
  int device_;
  CUstream stream_ = nullptr;
  CUevent event_ = nullptr;
  CUmodule module_ = nullptr;
};

// Nanoseconds per iteration of `body`, timed over `iterations` calls with the steady clock.
template <class Body>
double ns_per_op(int iterations, Body body) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) body();
  auto elapsed = std::chrono::steady_clock::now() - start;
  return std::chrono::duration<double, std::nano>(elapsed).count() / iterations;
}

// benchNative(kind, device, iterations, ptx?: Uint8Array) -> ns per operation. Kinds:
//   'streamCreateDestroy'  cuStreamCreateWithPriority(non-blocking) + cuStreamDestroy
//   'streamSynchronizeIdle' cuStreamSynchronize on an idle stream
//   'kernelSynchronize'    cuLaunchKernel(empty_kernel from `ptx`, 1 block of 1 thread) + cuStreamSynchronize
//   'eventRecord'          cuEventRecord of a timing-disabled event on an idle stream
Napi::Value bench_native(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::string kind = info[0].As<Napi::String>().Utf8Value();
  const int device = info[1].As<Napi::Number>().Int32Value();
  const int iterations = info[2].As<Napi::Number>().Int32Value();
  make_current(device);
  Scratch scratch(device);
  const std::string detail = scratch.detail();
  double ns = 0;
  if (kind == "streamCreateDestroy") {
    ns = ns_per_op(iterations, [&] {
      CUstream stream = nullptr;
      check(drv().cuStreamCreateWithPriority(&stream, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreateWithPriority", device, detail);
      check(drv().cuStreamDestroy(stream), "cuStreamDestroy", device, detail);
    });
  } else if (kind == "streamSynchronizeIdle") {
    CUstream stream = scratch.stream();
    ns = ns_per_op(iterations, [&] { check(drv().cuStreamSynchronize(stream), "cuStreamSynchronize", device, detail); });
  } else if (kind == "kernelSynchronize") {
    Napi::Uint8Array ptx = info[3].As<Napi::Uint8Array>();
    std::vector<char> image(ptx.Data(), ptx.Data() + ptx.ByteLength());
    image.push_back('\0');
    CUfunction function = scratch.kernel(image, "empty_kernel");
    CUstream stream = scratch.stream();
    ns = ns_per_op(iterations, [&] {
      check(drv().cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr), "cuLaunchKernel", device, detail);
      check(drv().cuStreamSynchronize(stream), "cuStreamSynchronize", device, detail);
    });
  } else if (kind == "eventRecord") {
    CUstream stream = scratch.stream();
    CUevent event = scratch.event();
    ns = ns_per_op(iterations, [&] { check(drv().cuEventRecord(event, stream), "cuEventRecord", device, detail); });
  } else {
    throw Napi::TypeError::New(env, "cuda-stream-pool internal: benchNative has no kind '" + kind + "'");
  }
  return Napi::Number::New(env, ns);
}

}  // namespace

void register_bench(Napi::Env env, Napi::Object exports) {
  exports.Set("benchNative", Napi::Function::New<js_entry<bench_native>>(env, "benchNative"));
}

}  // namespace csp
