// Opens libcuda.so.1 (or CUDA_STREAM_POOL_LIBCUDA) once, never closes it, and resolves entry points by version.
#include "loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace csp {
namespace {

Driver g_driver;
DriverState g_state;
std::once_flag g_once;

// The ABI we compile against: entry points are requested at this version so that a newer driver hands out the
// 12.0 behaviour and a newer cuda.h cannot silently change a signature under us.
constexpr int kRequiredVersion = 12000;

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

void load_once() {
  const char* override_path = std::getenv("CUDA_STREAM_POOL_LIBCUDA");
  const std::string path = override_path && *override_path ? override_path : "libcuda.so.1";
  const std::string how = override_path && *override_path ? " (from CUDA_STREAM_POOL_LIBCUDA)" : "";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    g_state.unavailable_reason = "tried to open the CUDA driver library " + path + how + ", which failed: " +
                                 (why ? why : "unknown error") +
                                 ". Install the NVIDIA driver (CUDA 12.0 or newer), run on a machine with an NVIDIA "
                                 "GPU, or set CUDA_STREAM_POOL_LIBCUDA to the path of libcuda.so.1.";
    return;
  }
  using GetVersion = CUresult (*)(int*);
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get_version = reinterpret_cast<GetVersion>(dlsym(lib, "cuDriverGetVersion"));
  auto get_proc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
  int version = 0;
  if (!get_version || get_version(&version) != CUDA_SUCCESS) {
    g_state.unavailable_reason = "opened " + path + how +
                                 " but it has no working cuDriverGetVersion; it is not a CUDA driver library. "
                                 "Reinstall the NVIDIA driver or fix CUDA_STREAM_POOL_LIBCUDA.";
    return;
  }
  g_state.driver_version = version;
  if (version < kRequiredVersion || !get_proc) {
    g_state.unavailable_reason = "the CUDA driver in " + path + " supports CUDA " + version_text(version) +
                                 ", but cuda-stream-pool needs CUDA " + version_text(kRequiredVersion) +
                                 " or newer. Update the NVIDIA driver.";
    return;
  }
  std::string missing;
  auto resolve = [&](const char* name, void** slot) {
    CUdriverProcAddressQueryResult status{};
    if (get_proc(name, slot, kRequiredVersion, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS || !*slot) {
      *slot = nullptr;
      missing += missing.empty() ? name : std::string(", ") + name;
    }
  };
  // '#name' is the documented name; 'g_driver.name' expands through cuda.h's version macros.
#define CSP_RESOLVE(name) resolve(#name, reinterpret_cast<void**>(&g_driver.name));
  CSP_DRIVER_FUNCTIONS(CSP_RESOLVE)
#undef CSP_RESOLVE
  resolve("cuMemPrefetchAsync", reinterpret_cast<void**>(&g_driver.cuMemPrefetchAsync_v1));
  resolve("cuMemAdvise", reinterpret_cast<void**>(&g_driver.cuMemAdvise_v1));
  auto resolve_optional = [&](const char* name, void** slot) {
    CUdriverProcAddressQueryResult status{};
    if (get_proc(name, slot, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS) *slot = nullptr;
  };
#define CSP_RESOLVE_OPTIONAL(name) resolve_optional(#name, reinterpret_cast<void**>(&g_driver.name));
  CSP_OPTIONAL_DRIVER_FUNCTIONS(CSP_RESOLVE_OPTIONAL)
#undef CSP_RESOLVE_OPTIONAL
  if (!missing.empty()) {
    g_state.unavailable_reason = "the CUDA driver in " + path + " (CUDA " + version_text(version) +
                                 ") lacks entry points " + missing + ". Update the NVIDIA driver.";
    return;
  }
  CUresult init = g_driver.cuInit(0);
  if (init != CUDA_SUCCESS) {
    const char* name = nullptr;
    const char* text = nullptr;
    g_driver.cuGetErrorName(init, &name);
    g_driver.cuGetErrorString(init, &text);
    g_state.unavailable_reason = std::string("loaded the CUDA driver (CUDA ") + version_text(version) +
                                 ") but cuInit failed with " + (name ? name : "an unknown error") + ": " +
                                 (text ? text : "") +
                                 ". Check that an NVIDIA GPU is present and visible (nvidia-smi, "
                                 "CUDA_VISIBLE_DEVICES).";
    return;
  }
  int count = 0;
  if (g_driver.cuDeviceGetCount(&count) != CUDA_SUCCESS || count <= 0) {
    g_state.unavailable_reason = "the CUDA driver (CUDA " + version_text(version) +
                                 ") reports no usable device. Check nvidia-smi and CUDA_VISIBLE_DEVICES.";
    return;
  }
  g_state.device_count = count;
  g_state.available = true;
}

}  // namespace

const DriverState& load_driver() {
  std::call_once(g_once, load_once);
  return g_state;
}

const Driver& drv() { return g_driver; }

}  // namespace csp
