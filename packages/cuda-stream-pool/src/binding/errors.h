// Checked driver calls, the errors they raise, and their conversion to the public JS error classes.
// NOT_READY is a status, never an error; sticky faults mark the device (internal/device-faults.h).
#pragma once
#include <napi.h>
#include "internal/cuda-driver.h"

#include <exception>
#include <string>
#include <type_traits>

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

// Throws Unavailable unless the driver loaded and has devices.
void require_driver();

// The JS CudaError for `failure`, made through the factory that JS registered at load, without throwing it.
Napi::Value cuda_error_value(Napi::Env env, const CudaFailure& failure);

// The JS error for `failure` (one of the exceptions above, or a system error, or any std::exception), not thrown.
Napi::Value js_error_of(Napi::Env env, std::exception_ptr failure);

// Converts the exceptions above into JS errors through the factory that JS registered at load.
[[noreturn]] void rethrow_as_js(Napi::Env env);

}  // namespace csp
