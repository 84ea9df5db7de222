// The benchmark addon's driver access: see driver.h.
#include "driver.h"

#include <map>
#include <mutex>

#include "internal/loader.h"

namespace csp::bench {
namespace {

std::mutex g_mutex;
std::map<int, CUcontext> g_contexts;  // retained primary contexts, never released
std::map<int, CUmodule> g_modules;    // the benchmark PTX per device, never unloaded

}  // namespace

void make_current(int device) {
  const DriverState& state = load_driver();
  if (!state.available) throw Unavailable{state.unavailable_reason};
  if (device < 0 || device >= state.device_count) throw Failure{CUDA_ERROR_INVALID_DEVICE, "cuDeviceGet", device};
  CUcontext context = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto found = g_contexts.find(device);
    if (found == g_contexts.end()) {
      CUdevice handle = 0;
      check(drv().cuDeviceGet(&handle, device), "cuDeviceGet", device);
      check(drv().cuDevicePrimaryCtxRetain(&context, handle), "cuDevicePrimaryCtxRetain", device);
      g_contexts[device] = context;
    } else {
      context = found->second;
    }
  }
  check(drv().cuCtxSetCurrent(context), "cuCtxSetCurrent", device);
}

ContextScope::ContextScope(int device) {
  // load_driver() first: without a driver there is no table to ask, and make_current reports why.
  if (load_driver().available) check(drv().cuCtxGetCurrent(&previous_), "cuCtxGetCurrent", device);
  make_current(device);
}

ContextScope::~ContextScope() { drv().cuCtxSetCurrent(previous_); }

CUfunction bench_kernel(int device, const std::string& ptx, const char* name) {
  CUmodule module = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto found = g_modules.find(device);
    if (found == g_modules.end()) {
      check(drv().cuModuleLoadDataEx(&module, ptx.c_str(), 0, nullptr, nullptr), "cuModuleLoadDataEx", device);
      g_modules[device] = module;
    } else {
      module = found->second;
    }
  }
  CUfunction function = nullptr;
  check(drv().cuModuleGetFunction(&function, module, name), "cuModuleGetFunction", device);
  return function;
}

Napi::Error to_js_error(Napi::Env env, std::exception_ptr error) {
  auto* data = env.GetInstanceData<EnvironmentData>();
  bool factory = data && !data->error_factory.IsEmpty();
  try {
    std::rethrow_exception(error);
  } catch (const Failure& f) {
    std::string detail = "device " + std::to_string(f.device) + " (native benchmark baseline)";
    if (!factory)
      return Napi::Error::New(env, std::string(f.call) + " failed with CUresult " + std::to_string(f.code) + " on " +
                                       detail);
    return Napi::Error(env, data->error_factory.Call({Napi::String::New(env, "cuda"), Napi::Number::New(env, f.code),
                                                      Napi::String::New(env, f.call), Napi::String::New(env, detail)}));
  } catch (const Unavailable& u) {
    if (!factory) return Napi::Error::New(env, u.reason);
    return Napi::Error(
        env, data->error_factory.Call({Napi::String::New(env, "unavailable"), Napi::String::New(env, u.reason)}));
  } catch (const std::bad_alloc&) {
    return Napi::Error::New(env, "cuda-stream-pool bench: out of host memory");
  } catch (const std::exception& e) {
    return Napi::Error::New(env, std::string("cuda-stream-pool bench internal error: ") + e.what());
  } catch (...) {
    return Napi::Error::New(env, "cuda-stream-pool bench internal error: an unknown exception");
  }
}

}  // namespace csp::bench
