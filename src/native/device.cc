// Driver state, device properties, fault state and live-object counters. Runs on: any JS thread.
#include <string>

#include "addon.h"
#include "check.h"
#include "context.h"
#include "loader.h"

namespace csp {
namespace {

Napi::Value driver_state(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const DriverState& state = load_driver();
  Napi::Object out = Napi::Object::New(env);
  out.Set("available", state.available);
  out.Set("reason", state.available ? env.Undefined() : Napi::String::New(env, state.unavailable_reason));
  out.Set("driverVersion", state.driver_version ? Napi::Number::New(env, state.driver_version) : env.Undefined());
  out.Set("deviceCount", state.device_count);
  return out;
}

int attribute(CUdevice dev, CUdevice_attribute which, int ordinal) {
  int value = 0;
  check(drv().cuDeviceGetAttribute(&value, which, dev), "cuDeviceGetAttribute", ordinal);
  return value;
}

// deviceInfo(ordinal) -> plain properties, read once by the TS Device.
Napi::Value device_info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int ordinal = info[0].As<Napi::Number>().Int32Value();
  make_current(ordinal);
  CUdevice dev = 0;
  check(drv().cuDeviceGet(&dev, ordinal), "cuDeviceGet", ordinal);
  char name[256] = {};
  check(drv().cuDeviceGetName(name, sizeof(name), dev), "cuDeviceGetName", ordinal);
  size_t total = 0;
  check(drv().cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem", ordinal);
  int least = 0, greatest = 0;
  check(drv().cuCtxGetStreamPriorityRange(&least, &greatest), "cuCtxGetStreamPriorityRange", ordinal);
  Napi::Object out = Napi::Object::New(env);
  out.Set("name", name);
  out.Set("major", attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, ordinal));
  out.Set("minor", attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, ordinal));
  out.Set("multiprocessorCount", attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ordinal));
  out.Set("asyncEngineCount", attribute(dev, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, ordinal));
  out.Set("memoryPoolsSupported", attribute(dev, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, ordinal) != 0);
  out.Set("totalMemoryBytes", static_cast<double>(total));
  out.Set("greatestPriority", greatest);
  out.Set("leastPriority", least);
  return out;
}

// deviceFault(ordinal) -> the first sticky CUresult seen on the device, 0 while healthy.
Napi::Value device_fault_js(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), device_fault(info[0].As<Napi::Number>().Int32Value()));
}

Napi::Value live_objects(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  LiveCounters& c = live();
  Napi::Object out = Napi::Object::New(env);
  out.Set("streams", static_cast<double>(c.streams.load()));
  out.Set("events", static_cast<double>(c.events.load()));
  out.Set("modules", static_cast<double>(c.modules.load()));
  out.Set("deviceBytes", static_cast<double>(c.device_bytes.load()));
  out.Set("pinnedBytes", static_cast<double>(c.pinned_bytes.load()));
  out.Set("managedBytes", static_cast<double>(c.managed_bytes.load()));
  Napi::Array contexts = Napi::Array::New(env);
  for (int device = 0; device < kMaxDevices; device++)
    if (context_retained(device)) contexts.Set(contexts.Length(), device);
  out.Set("contexts", contexts);
  return out;
}

// cudaError(code, call, detail) -> the CudaError for a status found by a poll; never throws it.
Napi::Value cuda_error(const Napi::CallbackInfo& info) {
  try {
    throw CudaFailure{static_cast<CUresult>(info[0].As<Napi::Number>().Int32Value()),
                      info[1].As<Napi::String>().Utf8Value(), info[2].As<Napi::String>().Utf8Value()};
  } catch (...) {
    try {
      rethrow_as_js(info.Env());
    } catch (const Napi::Error& e) {
      return e.Value();
    }
  }
}

Napi::Value set_error_factory(const Napi::CallbackInfo& info) {
  AddonData::of(info.Env()).error_factory = Napi::Persistent(info[0].As<Napi::Function>());
  return info.Env().Undefined();
}

}  // namespace

void register_device(Napi::Env env, Napi::Object exports) {
  exports.Set("setErrorFactory", Napi::Function::New<set_error_factory>(env, "setErrorFactory"));
  exports.Set("driverState", Napi::Function::New<js_entry<driver_state>>(env, "driverState"));
  exports.Set("deviceInfo", Napi::Function::New<js_entry<device_info>>(env, "deviceInfo"));
  exports.Set("deviceFault", Napi::Function::New<js_entry<device_fault_js>>(env, "deviceFault"));
  exports.Set("liveObjects", Napi::Function::New<js_entry<live_objects>>(env, "liveObjects"));
  exports.Set("cudaError", Napi::Function::New<cuda_error>(env, "cudaError"));
}

}  // namespace csp
