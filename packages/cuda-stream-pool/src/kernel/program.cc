// NVRTC, the CUDA runtime compiler: opened at run time (dlopen, never closed, process-wide) and driven off the JS
// thread. Mechanism only: kernel/program.ts picks the options (the architecture) and turns results into errors.
// Runs on: nvrtcLoad/nvrtcCompile are called on any JS thread; the work runs on a libuv worker thread.
//
// Note [nvrtc declared here]: the build machines (and CI) have no nvrtc.h, so the handful of NVRTC entry points
// used below are declared in this file. Their C ABI has been stable since CUDA 11.2: every function returns the
// enum nvrtcResult (an int, NVRTC_SUCCESS = 0) and programs are opaque pointers.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "binding/binding.h"
#include "binding/errors.h"

namespace csp {
namespace {

using NvrtcResult = int;  // enum nvrtcResult
struct NvrtcProgramOpaque;
using NvrtcProgram = NvrtcProgramOpaque*;
constexpr NvrtcResult kNvrtcSuccess = 0;

// See Note [nvrtc declared here]. Members are named after the NVRTC functions they hold.
struct Nvrtc {
  NvrtcResult (*nvrtcVersion)(int* major, int* minor) = nullptr;
  const char* (*nvrtcGetErrorString)(NvrtcResult result) = nullptr;
  NvrtcResult (*nvrtcCreateProgram)(NvrtcProgram* program, const char* source, const char* name, int header_count,
                                    const char* const* headers, const char* const* include_names) = nullptr;
  NvrtcResult (*nvrtcDestroyProgram)(NvrtcProgram* program) = nullptr;
  NvrtcResult (*nvrtcCompileProgram)(NvrtcProgram program, int option_count, const char* const* options) = nullptr;
  NvrtcResult (*nvrtcGetProgramLogSize)(NvrtcProgram program, size_t* bytes) = nullptr;
  NvrtcResult (*nvrtcGetProgramLog)(NvrtcProgram program, char* log) = nullptr;
  NvrtcResult (*nvrtcGetPTXSize)(NvrtcProgram program, size_t* bytes) = nullptr;
  NvrtcResult (*nvrtcGetPTX)(NvrtcProgram program, char* ptx) = nullptr;
  NvrtcResult (*nvrtcGetCUBINSize)(NvrtcProgram program, size_t* bytes) = nullptr;
  NvrtcResult (*nvrtcGetCUBIN)(NvrtcProgram program, char* cubin) = nullptr;
  // Optional (null when absent): the real architectures this NVRTC can emit code for.
  NvrtcResult (*nvrtcGetNumSupportedArchs)(int* count) = nullptr;
  NvrtcResult (*nvrtcGetSupportedArchs)(int* archs) = nullptr;
};

struct NvrtcState {
  bool available = false;
  std::string reason;  // what was tried, what failed, what to do
  std::string path;    // the library that was opened
  int major = 0;
  int minor = 0;
  std::vector<int> supported_archs;  // 75, 80, 90, ...; empty when NVRTC cannot list them
};

// Process-wide, like the driver table; holds no JS reference (src/internal/DESIGN.md).
Nvrtc g_nvrtc;
NvrtcState g_state;
std::once_flag g_once;

// The names to try, newest toolkit first; the unversioned name is the toolkit's development symlink.
const char* const kLibraryNames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};

template <class F>
bool resolve(void* lib, const char* name, F& slot) {
  slot = reinterpret_cast<F>(dlsym(lib, name));
  return slot != nullptr;
}

// Resolves every required entry point from `lib`; returns the missing names ("" when complete).
std::string resolve_all(void* lib, Nvrtc& api) {
  std::string missing;
  auto need = [&](bool found, const char* name) {
    if (!found) missing += missing.empty() ? name : std::string(", ") + name;
  };
#define CSP_NVRTC_REQUIRED(name) need(resolve(lib, #name, api.name), #name);
  CSP_NVRTC_REQUIRED(nvrtcVersion)
  CSP_NVRTC_REQUIRED(nvrtcGetErrorString)
  CSP_NVRTC_REQUIRED(nvrtcCreateProgram)
  CSP_NVRTC_REQUIRED(nvrtcDestroyProgram)
  CSP_NVRTC_REQUIRED(nvrtcCompileProgram)
  CSP_NVRTC_REQUIRED(nvrtcGetProgramLogSize)
  CSP_NVRTC_REQUIRED(nvrtcGetProgramLog)
  CSP_NVRTC_REQUIRED(nvrtcGetPTXSize)
  CSP_NVRTC_REQUIRED(nvrtcGetPTX)
  CSP_NVRTC_REQUIRED(nvrtcGetCUBINSize)
  CSP_NVRTC_REQUIRED(nvrtcGetCUBIN)
#undef CSP_NVRTC_REQUIRED
  resolve(lib, "nvrtcGetNumSupportedArchs", api.nvrtcGetNumSupportedArchs);
  resolve(lib, "nvrtcGetSupportedArchs", api.nvrtcGetSupportedArchs);
  return missing;
}

// NVRTC opens its builtins library (libnvrtc-builtins.so.MAJOR.MINOR) by name at the first compile. When NVRTC itself
// was found in a toolkit directory that is not on the loader's search path, that lookup can fail; loading the
// builtins from NVRTC's own directory first makes the later lookup find the already loaded copy (by its soname).
// A failure here is ignored: NVRTC's own lookup may still succeed, and if not, the compile reports it.
void preload_builtins(int major, int minor) {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(g_nvrtc.nvrtcVersion), &info) || !info.dli_fname) return;
  std::string self = info.dli_fname;
  size_t slash = self.rfind('/');
  if (slash == std::string::npos) return;
  std::string builtins =
      self.substr(0, slash + 1) + "libnvrtc-builtins.so." + std::to_string(major) + "." + std::to_string(minor);
  dlopen(builtins.c_str(), RTLD_NOW | RTLD_LOCAL);  // never closed, like NVRTC itself
}

void load_once() {
  std::vector<std::string> candidates;
  std::string looked;  // where we looked, in words, for the failure message
  const char* override_path = std::getenv("CUDA_STREAM_POOL_LIBNVRTC");
  if (override_path && *override_path) {
    candidates.push_back(override_path);
    looked = std::string(override_path) + " (from CUDA_STREAM_POOL_LIBNVRTC)";
  } else {
    std::vector<std::string> directories = {""};  // "": the dynamic loader's search path (LD_LIBRARY_PATH, ldconfig)
    std::string places = "the dynamic loader's search path (LD_LIBRARY_PATH, ld.so.cache)";
    const std::pair<const char*, const char*> roots[] = {
        {"CUDA_PATH", std::getenv("CUDA_PATH")}, {"CUDA_HOME", std::getenv("CUDA_HOME")}, {nullptr, "/usr/local/cuda"}};
    for (const auto& [variable, root] : roots) {
      if (!root || !*root) {
        places += std::string(", $") + variable + "/lib64 ($" + variable + " is unset)";
        continue;
      }
      std::string directory = std::string(root) + "/lib64/";
      places += ", " + directory + (variable ? std::string(" (from $") + variable + ")" : std::string());
      bool seen = false;
      for (const auto& d : directories) seen = seen || d == directory;
      if (!seen) directories.push_back(directory);
    }
    for (const auto& directory : directories)
      for (const char* name : kLibraryNames) candidates.push_back(directory + name);
    looked = std::string("libnvrtc.so.13, libnvrtc.so.12 and libnvrtc.so in ") + places;
  }
  std::string failures;
  for (const auto& path : candidates) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      // Not there is the usual case for all but one candidate; anything else (a broken file) is worth reporting.
      const char* why = dlerror();
      if (why && !std::strstr(why, "No such file")) failures += std::string(" ") + why + ".";
      continue;
    }
    Nvrtc api;
    std::string missing = resolve_all(lib, api);
    if (!missing.empty()) {
      failures += " " + path + " lacks " + missing + " (NVRTC older than CUDA 11.2?).";
      continue;  // left open: a library that was loaded may not be safe to unload
    }
    int major = 0, minor = 0;
    if (api.nvrtcVersion(&major, &minor) != kNvrtcSuccess) {
      failures += " " + path + ": nvrtcVersion failed.";
      continue;
    }
    g_nvrtc = api;
    g_state.path = path;
    g_state.major = major;
    g_state.minor = minor;
    int count = 0;
    if (api.nvrtcGetNumSupportedArchs && api.nvrtcGetSupportedArchs &&
        api.nvrtcGetNumSupportedArchs(&count) == kNvrtcSuccess && count > 0) {
      std::vector<int> archs(static_cast<size_t>(count));
      if (api.nvrtcGetSupportedArchs(archs.data()) == kNvrtcSuccess) g_state.supported_archs = std::move(archs);
    }
    preload_builtins(major, minor);
    g_state.available = true;
    return;
  }
  g_state.reason = "NVRTC (the CUDA runtime compiler, needed by Program.compile) could not be opened; looked for " +
                   looked + "." + (failures.empty() ? std::string(" None was found.") : failures) +
                   " Install the CUDA toolkit's NVRTC (libnvrtc, CUDA 12 or 13) and set CUDA_PATH to the toolkit root "
                   "or add its lib64 to LD_LIBRARY_PATH, or set CUDA_STREAM_POOL_LIBNVRTC to the library's path; or "
                   "compile ahead of time with nvcc and load the result with Module.load.";
}

const NvrtcState& load_nvrtc() {
  std::call_once(g_once, load_once);
  return g_state;
}

Napi::Object state_object(Napi::Env env, const NvrtcState& state) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("available", state.available);
  if (!state.available) {
    out.Set("reason", state.reason);
    return out;
  }
  out.Set("path", state.path);
  out.Set("major", state.major);
  out.Set("minor", state.minor);
  Napi::Array archs = Napi::Array::New(env, state.supported_archs.size());
  for (size_t i = 0; i < state.supported_archs.size(); i++) archs.Set(static_cast<uint32_t>(i), state.supported_archs[i]);
  out.Set("supportedArchs", archs);
  return out;
}

// Opens NVRTC on a worker thread: dlopen of a large library takes milliseconds that the event loop should not wait.
class LoadNvrtcWorker : public Napi::AsyncWorker {
 public:
  explicit LoadNvrtcWorker(Napi::Env env)
      : Napi::AsyncWorker(env, "cuda_stream_pool.nvrtc.load"), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise promise() { return deferred_.Promise(); }

  // Runs on: a libuv worker thread.
  void Execute() override { load_nvrtc(); }
  // Runs on: the JS thread that called nvrtcLoad.
  void OnOK() override {
    settle_quietly([&] { deferred_.Resolve(state_object(Env(), g_state)); });
  }

 private:
  Napi::Promise::Deferred deferred_;
};

// Destroys a program on every path out of a compile.
class ProgramGuard {
 public:
  explicit ProgramGuard(NvrtcProgram program) : program_(program) {}
  ~ProgramGuard() { g_nvrtc.nvrtcDestroyProgram(&program_); }
  ProgramGuard(const ProgramGuard&) = delete;
  ProgramGuard& operator=(const ProgramGuard&) = delete;

 private:
  NvrtcProgram program_;
};

class CompileWorker : public Napi::AsyncWorker {
 public:
  CompileWorker(Napi::Env env, std::string source, std::string name, std::vector<std::string> options, bool want_cubin)
      : Napi::AsyncWorker(env, "cuda_stream_pool.nvrtc.compile"),
        deferred_(Napi::Promise::Deferred::New(env)),
        source_(std::move(source)),
        name_(std::move(name)),
        options_(std::move(options)),
        want_cubin_(want_cubin) {}
  Napi::Promise promise() { return deferred_.Promise(); }

  // Runs on: a libuv worker thread. NVRTC needs no CUDA context.
  void Execute() override {
    const NvrtcState& state = load_nvrtc();
    if (!state.available) return;
    NvrtcProgram program = nullptr;
    call_ = "nvrtcCreateProgram";
    result_ = g_nvrtc.nvrtcCreateProgram(&program, source_.c_str(), name_.c_str(), 0, nullptr, nullptr);
    if (result_ != kNvrtcSuccess) return;
    ProgramGuard guard(program);
    std::vector<const char*> options;
    options.reserve(options_.size());
    for (const auto& option : options_) options.push_back(option.c_str());
    call_ = "nvrtcCompileProgram";
    result_ = g_nvrtc.nvrtcCompileProgram(program, static_cast<int>(options.size()), options.data());
    // The log holds warnings on success and the diagnostics on failure: always kept whole.
    size_t log_bytes = 0;
    if (g_nvrtc.nvrtcGetProgramLogSize(program, &log_bytes) == kNvrtcSuccess && log_bytes > 1) {
      std::vector<char> log(log_bytes);
      if (g_nvrtc.nvrtcGetProgramLog(program, log.data()) == kNvrtcSuccess) log_.assign(log.data(), strnlen(log.data(), log_bytes));
    }
    if (result_ != kNvrtcSuccess) return;
    if (want_cubin_) {
      size_t bytes = 0;
      call_ = "nvrtcGetCUBINSize";
      result_ = g_nvrtc.nvrtcGetCUBINSize(program, &bytes);
      if (result_ != kNvrtcSuccess) return;
      cubin_.resize(bytes);
      call_ = "nvrtcGetCUBIN";
      if (bytes) result_ = g_nvrtc.nvrtcGetCUBIN(program, cubin_.data());
      if (result_ != kNvrtcSuccess) return;
    }
    // PTX is the output for a virtual architecture (compute_XY); beside a CUBIN it is kept when NVRTC has it.
    size_t ptx_bytes = 0;
    NvrtcResult ptx_result = g_nvrtc.nvrtcGetPTXSize(program, &ptx_bytes);
    std::vector<char> ptx(ptx_bytes);
    if (ptx_result == kNvrtcSuccess && ptx_bytes > 1) ptx_result = g_nvrtc.nvrtcGetPTX(program, ptx.data());
    if (ptx_result == kNvrtcSuccess && ptx_bytes > 1) {
      ptx_.assign(ptx.data(), strnlen(ptx.data(), ptx_bytes));
      has_ptx_ = true;
    } else if (!want_cubin_) {
      call_ = ptx_result == kNvrtcSuccess ? "nvrtcGetPTXSize" : "nvrtcGetPTX";
      result_ = ptx_result;
      missing_output_ = ptx_result == kNvrtcSuccess;
    }
  }

  // Runs on: the JS thread that called nvrtcCompile.
  void OnOK() override {
    settle_quietly([&] {
      Napi::Env env = Env();
      if (!g_state.available) {
        try {
          throw Unavailable{g_state.reason, "NVRTC"};
        } catch (...) {
          try {
            rethrow_as_js(env);
          } catch (const Napi::Error& e) {
            deferred_.Reject(e.Value());
          }
        }
        return;
      }
      Napi::Object out = Napi::Object::New(env);
      out.Set("result", result_);
      out.Set("resultName", missing_output_ ? "an empty PTX output" : g_nvrtc.nvrtcGetErrorString(result_));
      out.Set("call", call_);
      out.Set("log", log_);
      if (result_ == kNvrtcSuccess) {
        if (want_cubin_) {
          Napi::Uint8Array cubin = Napi::Uint8Array::New(env, cubin_.size());
          if (!cubin_.empty()) std::memcpy(cubin.Data(), cubin_.data(), cubin_.size());
          out.Set("cubin", cubin);
        }
        if (has_ptx_) out.Set("ptx", ptx_);
      }
      deferred_.Resolve(out);
    });
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::string source_;
  std::string name_;
  std::vector<std::string> options_;
  bool want_cubin_;
  NvrtcResult result_ = kNvrtcSuccess;
  std::string call_;
  std::string log_;
  std::vector<char> cubin_;
  std::string ptx_;
  bool has_ptx_ = false;
  bool missing_output_ = false;
};

// nvrtcLoad() -> Promise<{ available, reason } | { available, path, major, minor, supportedArchs }>; opens NVRTC
// on first call (any thread of the process), then answers from memory.
Napi::Value nvrtc_load(const Napi::CallbackInfo& info) {
  auto* worker = new LoadNvrtcWorker(info.Env());
  Napi::Promise promise = worker->promise();
  worker->Queue();
  return promise;
}

// nvrtcCompile(source, name, options: string[], wantCubin) -> Promise<{ result, resultName, call, log, cubin?, ptx? }>;
// rejects with CudaUnavailableError when NVRTC cannot be opened. A failed compile resolves with its result and log.
Napi::Value nvrtc_compile(const Napi::CallbackInfo& info) {
  std::string source = info[0].As<Napi::String>().Utf8Value();
  std::string name = info[1].As<Napi::String>().Utf8Value();
  Napi::Array list = info[2].As<Napi::Array>();
  std::vector<std::string> options;
  for (uint32_t i = 0; i < list.Length(); i++) options.push_back(list.Get(i).As<Napi::String>().Utf8Value());
  bool want_cubin = info[3].As<Napi::Boolean>().Value();
  auto* worker = new CompileWorker(info.Env(), std::move(source), std::move(name), std::move(options), want_cubin);
  Napi::Promise promise = worker->promise();
  worker->Queue();
  return promise;
}

}  // namespace

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kNvrtcExports[] = {
    {"nvrtcLoad", "", entry<nvrtc_load>},
    {"nvrtcCompile", "string, string, array, boolean", entry<nvrtc_compile>},
};

void register_nvrtc(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kNvrtcExports);
}

}  // namespace csp
