// The device's default memory pool, which device buffers come from: its counters, release threshold and trim.
// Runs on: any JS thread.
#include <limits>

#include "binding/binding.h"
#include "internal/context.h"
#include "internal/loader.h"
#include "internal/memory.h"

namespace csp {
namespace {

// Bytes as JS numbers: exact up to 2**53; the "no limit" value UINT64_MAX reads as Infinity.
double bytes_number(cuuint64_t value) {
  if (value == std::numeric_limits<cuuint64_t>::max()) return std::numeric_limits<double>::infinity();
  return static_cast<double>(value);
}

cuuint64_t pool_attribute(int device, CUmemPool_attribute which, const char* name) {
  cuuint64_t value = 0;
  check(drv().cuMemPoolGetAttribute(default_pool(device), which, &value), "cuMemPoolGetAttribute", device,
        [&] { return std::string(device_text(device) + ", " + name); });
  return value;
}

// memoryPoolInfo(device) -> { usedBytes, reservedBytes, releaseThresholdBytes } of the default pool.
Napi::Value memory_pool_info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int device = info[0].As<Napi::Number>().Int32Value();
  make_current(device);
  Napi::Object out = Napi::Object::New(env);
  out.Set("usedBytes", bytes_number(pool_attribute(device, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, "used bytes")));
  out.Set("reservedBytes",
          bytes_number(pool_attribute(device, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, "reserved bytes")));
  out.Set("releaseThresholdBytes",
          bytes_number(pool_attribute(device, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, "release threshold")));
  return out;
}

// memoryPoolSetReleaseThreshold(device, bytes | Infinity)
Napi::Value memory_pool_set_release_threshold(const Napi::CallbackInfo& info) {
  int device = info[0].As<Napi::Number>().Int32Value();
  double requested = info[1].As<Napi::Number>().DoubleValue();
  cuuint64_t value = requested == std::numeric_limits<double>::infinity() ? std::numeric_limits<cuuint64_t>::max()
                                                                          : static_cast<cuuint64_t>(requested);
  make_current(device);
  check(drv().cuMemPoolSetAttribute(default_pool(device), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &value),
        "cuMemPoolSetAttribute", device, [&] { return std::string(device_text(device) + ", release threshold " + std::to_string(value)); });
  return info.Env().Undefined();
}

// memoryPoolTrim(device, bytesToKeep)
Napi::Value memory_pool_trim(const Napi::CallbackInfo& info) {
  int device = info[0].As<Napi::Number>().Int32Value();
  size_t keep = to_size(info[1]);
  make_current(device);
  check(drv().cuMemPoolTrimTo(default_pool(device), keep), "cuMemPoolTrimTo", device,
        [&] { return std::string(device_text(device) + ", keeping " + std::to_string(keep) + " bytes"); });
  return info.Env().Undefined();
}

}  // namespace

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kMemoryPoolExports[] = {
    {"memoryPoolInfo", "number", entry<memory_pool_info>},
    {"memoryPoolSetReleaseThreshold", "number, number", entry<memory_pool_set_release_threshold>},
    {"memoryPoolTrim", "number, number", entry<memory_pool_trim>},
};

void register_memory_pool(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kMemoryPoolExports);
}

}  // namespace csp
