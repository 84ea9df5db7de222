// Checked driver calls and their conversion to the public error classes.
#include "binding/errors.h"

#include <cerrno>
#include <system_error>

#include "binding/binding.h"
#include "internal/device-faults.h"
#include "internal/loader.h"

namespace csp {

void check(CUresult code, const char* call, int device, const std::string& detail) {
  if (code == CUDA_SUCCESS) return;
  if (is_sticky(code)) record_fault(device, code);
  throw CudaFailure{code, call, detail};
}

CUresult check_quiet(CUresult code, int device) {
  if (is_sticky(code)) record_fault(device, code);
  return code;
}

void require_driver() {
  const DriverState& state = load_driver();
  if (!state.available) throw Unavailable{state.unavailable_reason};
}

Napi::Value cuda_error_value(Napi::Env env, const CudaFailure& f) {
  Napi::Function factory = AddonData::of(env).error_factory.Value();
  const ResultText text = result_text(f.code);
  return factory.Call({Napi::String::New(env, "cuda"), Napi::Number::New(env, f.code), Napi::String::New(env, text.name),
                       Napi::String::New(env, text.description), Napi::String::New(env, f.call),
                       Napi::String::New(env, f.detail), Napi::Boolean::New(env, is_sticky(f.code))});
}

Napi::Value js_error_of(Napi::Env env, std::exception_ptr failure) {
  Napi::Function factory = AddonData::of(env).error_factory.Value();
  try {
    std::rethrow_exception(failure);
  } catch (const CudaFailure& f) {
    return cuda_error_value(env, f);
  } catch (const Destroyed& d) {
    return factory.Call(
        {Napi::String::New(env, "destroyed"), Napi::String::New(env, d.resource), Napi::String::New(env, d.method)});
  } catch (const Unavailable& u) {
    return factory.Call({Napi::String::New(env, "unavailable"), Napi::String::New(env, u.reason),
                         Napi::String::New(env, u.component)});
  } catch (const std::bad_alloc&) {
    return Napi::Error::New(env, "cuda-stream-pool: out of host memory").Value();
  } catch (const std::system_error& e) {
    // As Node's own system errors: the errno name in `code` (a thread that could not start: EAGAIN).
    Napi::Error system = Napi::Error::New(env, e.what());
    const int number = e.code().value();
    system.Set("code", number == EAGAIN ? "EAGAIN" : number == ENOMEM ? "ENOMEM" : number == EPERM ? "EPERM" : "ERR_SYSTEM");
    system.Set("errno", Napi::Number::New(env, -number));
    return system.Value();
  } catch (const std::exception& e) {
    return Napi::Error::New(env, std::string("cuda-stream-pool internal error: ") + e.what()).Value();
  }
}

void rethrow_as_js(Napi::Env env) {
  Napi::Value error = js_error_of(env, std::current_exception());
  throw Napi::Error(env, error);
}

}  // namespace csp
