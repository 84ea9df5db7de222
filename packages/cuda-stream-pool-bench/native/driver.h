// The benchmark addon's access to the driver: checked calls that reach JS as the library's error classes, the device's
// primary context made current on any thread, and the benchmark kernels loaded once per device. The driver table is
// the library's loader, compiled into this binary from the same source (packages/cuda-stream-pool/src/internal/loader.cc); nothing else of the
// library is, so the library's per-environment state and completion machinery never enter this binary.
#pragma once
#include <napi.h>
#include "internal/cuda-driver.h"

#include <chrono>
#include <exception>
#include <string>

namespace csp::bench {

// A failed driver call; reaches JS as the library's CudaError.
struct Failure {
  CUresult code;
  const char* call;  // the driver function, for example cuStreamSynchronize
  int device;
};

// No usable driver; reaches JS as CudaUnavailableError with the loader's reason.
struct Unavailable {
  std::string reason;
};

// Per-environment data (main thread or worker): the error factory JS registered with setErrorFactory.
struct EnvironmentData {
  Napi::FunctionReference error_factory;  // ('cuda', code, call, detail) | ('unavailable', reason) => Error
};

// Throws Failure unless `code` is CUDA_SUCCESS.
inline void check(CUresult code, const char* call, int device) {
  if (code != CUDA_SUCCESS) throw Failure{code, call, device};
}

// Opens the driver (Unavailable without one), checks `device`, retains its primary context once per process (the one
// the library uses too) and makes it current on the calling thread. Any thread.
void make_current(int device);

// Makes the device's context current on a thread this addon borrows (the JS thread, a libuv worker thread) for the
// scope's life, then restores the context that was current before, so the caller's thread is left as it was found.
class ContextScope {
 public:
  explicit ContextScope(int device);
  ContextScope(const ContextScope&) = delete;  // restores once
  ContextScope& operator=(const ContextScope&) = delete;
  ~ContextScope();

 private:
  CUcontext previous_ = nullptr;
};

// The kernel `name` of the benchmark PTX (kernels/bench.ptx, given as text), loaded on first use per device and kept
// until the process exits, like the retained context. Any thread; the device's context must be current.
CUfunction bench_kernel(int device, const std::string& ptx, const char* name);

// The JS error for a Failure, Unavailable or other exception, made by the environment's error factory. JS thread.
Napi::Error to_js_error(Napi::Env env, std::exception_ptr error);

// Wraps an N-API callback so that Failure and Unavailable reach JS as the library's error classes.
template <Napi::Value (*F)(const Napi::CallbackInfo&)>
Napi::Value entry(const Napi::CallbackInfo& info) {
  try {
    return F(info);
  } catch (const Napi::Error&) {
    throw;
  } catch (...) {
    throw to_js_error(info.Env(), std::current_exception());
  }
}

// Nanoseconds from `start` to now on the steady clock.
inline double ns_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace csp::bench
