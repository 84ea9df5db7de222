// Driver state, device properties, peer access (Note [peer access]), fault state and live-object counters.
// Runs on: any JS thread.
#include <atomic>
#include <string>

#include "binding/binding.h"
#include "binding/errors.h"
#include "internal/context.h"
#include "internal/device-faults.h"
#include "internal/live-counters.h"
#include "internal/loader.h"
#include "internal/memory.h"

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
  out.Set("cooperativeLaunch", attribute(dev, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, ordinal) != 0);
  out.Set("clusterLaunch", attribute(dev, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, ordinal) != 0);
  out.Set("pitchAlignment", attribute(dev, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, ordinal));
  out.Set("totalMemoryBytes", static_cast<double>(total));
  out.Set("greatestPriority", greatest);
  out.Set("leastPriority", least);
  return out;
}

// Note [peer access]: a device reads and writes another device's memory directly (kernels through its pointers,
// copies over NVLink or PCIe without the host) only once access is enabled in that direction. Two switches cover the
// memory the library deals with: cuCtxEnablePeerAccess maps the peer context's ordinary allocations (cuMemAlloc,
// memory of other libraries), and cuMemPoolSetAccess on the peer's default memory pool maps its stream-ordered
// allocations, which the first switch does not cover and DeviceBuffer uses. enablePeerAccess sets both; both last as
// long as the contexts, which the library retains until exit. Without access, copies between the devices still work:
// the driver stages them through host memory. Whether access is enabled is asked of the pool (cuMemPoolGetAccess):
// the driver has no query for the context switch. Nothing here is locked: the driver serializes both switches, and
// a second enable finds them set. Some drivers were reported to drop peer writes into a pool's allocations once its
// access was set (Turing, driver 590): the GPU suite checks the bytes of peer copies and of a peer kernel's writes
// after enabling access.

CUdevice device_handle(int ordinal) {
  CUdevice dev = 0;
  check(drv().cuDeviceGet(&dev, ordinal), "cuDeviceGet", ordinal);
  return dev;
}

std::string peer_text(int ordinal, int peer) {
  return "device " + std::to_string(ordinal) + " accessing the memory of device " + std::to_string(peer);
}

// deviceCanAccessPeer(ordinal, peer) -> whether `ordinal` can access `peer`'s memory directly (cuDeviceCanAccessPeer).
Napi::Value device_can_access_peer(const Napi::CallbackInfo& info) {
  const int ordinal = info[0].As<Napi::Number>().Int32Value();
  const int peer = info[1].As<Napi::Number>().Int32Value();
  make_current(ordinal);
  int can = 0;
  check(drv().cuDeviceCanAccessPeer(&can, device_handle(ordinal), device_handle(peer)), "cuDeviceCanAccessPeer",
        ordinal, [&] { return peer_text(ordinal, peer); });
  return Napi::Boolean::New(info.Env(), can != 0);
}

// deviceEnablePeerAccess(ordinal, peer): `ordinal` may access `peer`'s memory from now on; idempotent. Leaves the
// peer's context current. Throws CUDA_ERROR_PEER_ACCESS_UNSUPPORTED where there is no peer path.
Napi::Value device_enable_peer_access(const Napi::CallbackInfo& info) {
  const int ordinal = info[0].As<Napi::Number>().Int32Value();
  const int peer = info[1].As<Napi::Number>().Int32Value();
  const CUdevice dev = device_handle(ordinal);
  const CUcontext peer_context = primary_context(peer);
  make_current(ordinal);
  int can = 0;
  check(drv().cuDeviceCanAccessPeer(&can, dev, device_handle(peer)), "cuDeviceCanAccessPeer", ordinal,
        [&] { return peer_text(ordinal, peer); });
  if (!can)
    throw CudaFailure{CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "cuCtxEnablePeerAccess",
                      peer_text(ordinal, peer) + ": cuDeviceCanAccessPeer reports no peer path between them (copies "
                      "between them still work, staged through host memory)"};
  CUresult r = drv().cuCtxEnablePeerAccess(peer_context, 0);
  if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
    check(r, "cuCtxEnablePeerAccess", ordinal, [&] { return peer_text(ordinal, peer); });
  make_current(peer);
  if (attribute(device_handle(peer), CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, peer)) {
    CUmemAccessDesc access{{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    check(drv().cuMemPoolSetAccess(default_pool(peer), &access, 1), "cuMemPoolSetAccess", peer,
          [&] { return peer_text(ordinal, peer) + " (the default memory pool of device " + std::to_string(peer) + ")"; });
  }
  return info.Env().Undefined();
}

// devicePeerAccessEnabled(ordinal, peer) -> whether `peer`'s default memory pool grants `ordinal` read-write access
// (cuMemPoolGetAccess); false where the peer has no memory pools.
Napi::Value device_peer_access_enabled(const Napi::CallbackInfo& info) {
  const int ordinal = info[0].As<Napi::Number>().Int32Value();
  const int peer = info[1].As<Napi::Number>().Int32Value();
  make_current(peer);
  if (!attribute(device_handle(peer), CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, peer))
    return Napi::Boolean::New(info.Env(), false);
  CUmemLocation location{CU_MEM_LOCATION_TYPE_DEVICE, device_handle(ordinal)};
  CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  check(drv().cuMemPoolGetAccess(&flags, default_pool(peer), &location), "cuMemPoolGetAccess", peer,
        [&] { return peer_text(ordinal, peer); });
  return Napi::Boolean::New(info.Env(), flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
}

// currentDevice() -> the device whose primary context is current on this thread, -1 when none is (for tests).
Napi::Value current_device_js(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), current_device());
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
  out.Set("leakedDeviceBytes", static_cast<double>(c.leaked_device_bytes.load()));
  out.Set("pinnedBytes", static_cast<double>(c.pinned_bytes.load()));
  out.Set("managedBytes", static_cast<double>(c.managed_bytes.load()));
  out.Set("registeredBytes", static_cast<double>(c.registered_bytes.load()));
  out.Set("graphs", static_cast<double>(c.graphs.load()));
  out.Set("graphExecs", static_cast<double>(c.graph_execs.load()));
  Napi::Array contexts = Napi::Array::New(env);
  for (int device = 0; device < kMaxDevices; device++)
    if (context_retained(device)) contexts.Set(contexts.Length(), device);
  out.Set("contexts", contexts);
  return out;
}

// callbackFailures() -> { count, last }: what never_throws caught, process-wide (last: undefined when none).
Napi::Value callback_failures_js(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object out = Napi::Object::New(env);
  const uint64_t count = callback_failures().count();
  out.Set("count", static_cast<double>(count));
  out.Set("last", count ? Napi::Value(Napi::String::New(env, callback_failures().last())) : env.Undefined());
  return out;
}

// claimEnvironmentWarning() -> true for the first caller of the process: the one thread that reports unknown values
// of the library's environment variables.
Napi::Value claim_environment_warning(const Napi::CallbackInfo& info) {
  static std::atomic<bool> claimed{false};
  return Napi::Boolean::New(info.Env(), !claimed.exchange(true));
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

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kDeviceExports[] = {
    {"setErrorFactory", "function", plain<set_error_factory>},
    {"driverState", "", entry<driver_state>},
    {"deviceInfo", "number", entry<device_info>},
    {"deviceCanAccessPeer", "number, number", entry<device_can_access_peer>},
    {"deviceEnablePeerAccess", "number, number", entry<device_enable_peer_access>},
    {"devicePeerAccessEnabled", "number, number", entry<device_peer_access_enabled>},
    {"currentDevice", "", entry<current_device_js>},
    {"deviceFault", "number", entry<device_fault_js>},
    {"liveObjects", "", entry<live_objects>},
    {"callbackFailures", "", entry<callback_failures_js>},
    {"cudaError", "number, string, string", plain<cuda_error>},
    {"claimEnvironmentWarning", "", plain<claim_environment_warning>},
};

void register_device(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kDeviceExports);
}

}  // namespace csp
