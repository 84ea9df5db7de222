// Opens libcuda.so.1 (or CUDA_STREAM_POOL_LIBCUDA) once, never closes it, and resolves entry points by version.
#include "internal/loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

namespace csp {
namespace {

Driver g_driver;
DriverState g_state;
std::once_flag g_once;

// The ABI of cuda-driver.h: required entry points are requested at this version so that a newer driver hands out
// the 12.0 behaviour that the declared function types describe.
constexpr int kRequiredVersion = 12000;

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

// The advice when CUDA_STREAM_POOL_LIBCUDA names something that is no working driver library: the path is the user's
// to fix, not the installed driver.
constexpr const char* kFixTheVariable =
    "Set CUDA_STREAM_POOL_LIBCUDA to the path of a CUDA driver library (libcuda.so.1, CUDA 12.0 or newer), or unset it "
    "to use the installed NVIDIA driver.";

void load_once() {
  const char* override_path = std::getenv("CUDA_STREAM_POOL_LIBCUDA");
  const std::string path = override_path && *override_path ? override_path : "libcuda.so.1";
  const std::string how = override_path && *override_path ? " (from CUDA_STREAM_POOL_LIBCUDA)" : "";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    // dlopen looks a bare name up in the library search path, never in the current folder: said when the file is
    // there, in the current folder, and so was meant.
    const std::string bare = !how.empty() && path.find('/') == std::string::npos && access(path.c_str(), F_OK) == 0
                                 ? " A name without a '/' is looked up in the system's library folders, not in the "
                                   "current folder, where " + path + " is: give its path, such as ./" + path + "."
                                 : "";
    g_state.unavailable_reason = "tried to open the CUDA driver library " + path + how + ", which failed: " +
                                 (why ? why : "unknown error") + ". " +
                                 (how.empty() ? "Install the NVIDIA driver (CUDA 12.0 or newer), run on a machine with "
                                                "an NVIDIA GPU, or set CUDA_STREAM_POOL_LIBCUDA to the path of libcuda.so.1."
                                              : kFixTheVariable) + bare;
    return;
  }
  auto get_version = reinterpret_cast<PFN_cuDriverGetVersion>(dlsym(lib, "cuDriverGetVersion"));
  auto get_proc = reinterpret_cast<PFN_cuGetProcAddress>(dlsym(lib, "cuGetProcAddress_v2"));
  int version = 0;
  if (!get_version || get_version(&version) != CUDA_SUCCESS) {
    g_state.unavailable_reason = "opened " + path + how + " but it has no working cuDriverGetVersion; it is not a CUDA driver library. " +
                                 (how.empty() ? "Reinstall the NVIDIA driver." : kFixTheVariable);
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
#define CSP_RESOLVE(name, abi_version) resolve(#name, reinterpret_cast<void**>(&g_driver.name));
  CSP_DRIVER_FUNCTIONS(CSP_RESOLVE)
#undef CSP_RESOLVE
  // Asked at the version each came with, so a later driver cannot hand out a later ABI than cuda-driver.h declares.
  auto resolve_optional = [&](const char* name, int abi_version, void** slot) {
    CUdriverProcAddressQueryResult status{};
    if (version < abi_version || get_proc(name, slot, abi_version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS)
      *slot = nullptr;
  };
#define CSP_RESOLVE_OPTIONAL(name, abi_version) \
  resolve_optional(#name, abi_version, reinterpret_cast<void**>(&g_driver.name));
  CSP_OPTIONAL_DRIVER_FUNCTIONS(CSP_RESOLVE_OPTIONAL)
#undef CSP_RESOLVE_OPTIONAL
  if (!g_driver.cuMemcpyBatchAsync && version < 13000)
    resolve_optional("cuMemcpyBatchAsync", 12080, reinterpret_cast<void**>(&g_driver.cuMemcpyBatchAsync_v12080));
  if (!missing.empty()) {
    g_state.unavailable_reason = "the CUDA driver in " + path + " (CUDA " + version_text(version) +
                                 ") lacks entry points " + missing + ". Update the NVIDIA driver.";
    return;
  }
  CUresult init = g_driver.cuInit(0);
  if (init != CUDA_SUCCESS) {
    const ResultText failure = result_text(init);
    g_state.unavailable_reason = std::string("loaded the CUDA driver (CUDA ") + version_text(version) +
                                 ") but cuInit failed with " + failure.name + ": " + failure.description +
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

ResultText result_text(CUresult code) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (g_driver.cuGetErrorName && g_driver.cuGetErrorName(code, &name) != CUDA_SUCCESS) name = nullptr;
  if (g_driver.cuGetErrorString && g_driver.cuGetErrorString(code, &text) != CUDA_SUCCESS) text = nullptr;
  return {name ? name : "CUresult " + std::to_string(static_cast<int>(code)),
          text ? text : "the driver has no description of this code"};
}

const DriverState& load_driver() {
  std::call_once(g_once, load_once);
  return g_state;
}

const Driver& drv() { return g_driver; }

}  // namespace csp
