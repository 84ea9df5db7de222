// Checked driver calls, the errors they raise, the per-device fault record and the live-object counters.
// NOT_READY is a status, never an error; sticky faults mark the device (Rules in src/internal/DESIGN.md).
#pragma once
#include <napi.h>
#include "internal/cuda-driver.h"

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "internal/never-throws.h"

namespace csp {

// A failed driver call, converted to the JS CudaError at the N-API boundary.
struct CudaFailure {
  CUresult code;
  std::string call;    // the driver function, for example cuStreamSynchronize
  std::string detail;  // our context: device, stream id, bytes
};

// Use after destroy, converted to the JS DestroyedError.
struct Destroyed {
  std::string resource;  // Stream, Event, StreamPool, ...
  std::string method;
};

// The driver cannot be used (no library, too old, no device); converted to CudaUnavailableError.
struct Unavailable {
  std::string reason;
  std::string component = "CUDA";  // or "NVRTC": the message then says NVRTC is missing, not CUDA
};

bool is_sticky(CUresult code);

// Throws CudaFailure for anything but CUDA_SUCCESS; records sticky faults against `device`.
void check(CUresult code, const char* call, int device, const std::string& detail = std::string());

// As check, but `describe()` builds the detail only when the call failed: hot paths build no strings and make no
// extra driver call (such as cuStreamGetId) on success.
template <class Describe, class = std::enable_if_t<std::is_invocable_r_v<std::string, Describe>>>
inline void check(CUresult code, const char* call, int device, Describe&& describe) {
  if (code != CUDA_SUCCESS) check(code, call, device, std::string(describe()));
}

// For destructors, finalizers and cleanup: never throws; records sticky faults; returns the code.
CUresult check_quiet(CUresult code, int device);

// The first sticky error seen on a device in this process, CUDA_SUCCESS while healthy. Any thread.
CUresult device_fault(int device);
void record_fault(int device, CUresult code);

// Throws Unavailable unless the driver loaded and has devices.
void require_driver();

struct LiveCounters {
  std::atomic<int64_t> streams{0}, events{0}, modules{0}, device_bytes{0}, pinned_bytes{0}, managed_bytes{0};
  std::atomic<int64_t> graphs{0}, graph_execs{0};  // driver graphs and executable graphs not yet destroyed
};
LiveCounters& live();

// Converts the exceptions above into JS errors through the factory that JS registered at load.
[[noreturn]] void rethrow_as_js(Napi::Env env);

// Wraps an N-API callback so that CudaFailure/Destroyed/Unavailable reach JS as their public classes.
template <Napi::Value (*F)(const Napi::CallbackInfo&)>
Napi::Value js_entry(const Napi::CallbackInfo& info) {
  try {
    return F(info);
  } catch (const Napi::Error&) {
    throw;
  } catch (...) {
    rethrow_as_js(info.Env());
  }
}

// Settles a promise's deferred from an AsyncWorker's OnOK/OnError: quietly does nothing when the environment is
// going away (napi_cannot_run_js), where there is nobody left to settle for.
template <class F>
void settle_quietly(F&& settle) {
  try {
    settle();
  } catch (const Napi::Error&) {
  }
}

}  // namespace csp
