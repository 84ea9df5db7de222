// Modules and kernels: load PTX/CUBIN/fatbin, look up functions, launch with packed arguments. Policy (signatures,
// argument checks, defaults) lives in kernel/module.ts. Runs on: any JS thread; module loading runs on a libuv worker thread (the
// driver JIT-compiles PTX, which can take long).
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include <array>

#include "binding/binding.h"
#include "device/partition.h"
#include "internal/submission.h"
#include "stream/capture.h"
#include "binding/errors.h"
#include "internal/context.h"
#include "internal/live-counters.h"
#include "internal/loader.h"
#include "kernel/module.h"
#include "internal/never-throws.h"
#include "stream/stream.h"

namespace csp {
namespace {

// A kernel's launch limits as the driver reported them, read on the first recorded launch (Note [deferred
// submission]); -1 until then, and again after setMaxDynamicSharedMemBytes changed one.
struct KernelLimits {
  std::atomic<int> max_threads{-1}, max_dynamic_shared{-1};
};

struct NativeModule : NativeObject {
  static const napi_type_tag kTag;
  static constexpr const char* kName = "Module";
  CUmodule handle = nullptr;  // loaded->handle, valid while the object is not retired
  std::shared_ptr<LoadedModule> loaded;
  // The limits of each function looked up, shared by every Kernel of that function: the driver hands out one
  // CUfunction per name, so an attribute set through one Kernel holds for the others too.
  std::shared_ptr<KernelLimits> limits_of(CUfunction function) {
    std::lock_guard<OrderedMutex> lock(limits_mutex_);
    auto& limits = limits_[function];
    if (!limits) limits = std::make_shared<KernelLimits>();
    return limits;
  }
  ~NativeModule() override { destroy(); }
  // Retires the object at once; its share of the module goes when no call is in flight (Note [handle guard]), and the
  // module is unloaded once no graph holds it either (Note [module lifetime]). Idempotent; never throws.
  void destroy() { retire(); }

 protected:
  void release() override { loaded.reset(); }

 private:
  OrderedMutex limits_mutex_{LockLevel::kLeaf, "kernel limits"};
  std::unordered_map<CUfunction, std::shared_ptr<KernelLimits>> limits_;
};
const napi_type_tag NativeModule::kTag = {0x6373702d6d6f6475ULL, 0x6c65000000000003ULL};

// A kernel keeps its module's object alive; its handle is only used under a Use<NativeModule> of that object, so never
// after the module was unloaded.
struct NativeKernel {
  static const napi_type_tag kTag;
  static constexpr const char* kName = "Kernel";
  std::shared_ptr<NativeModule> module;
  CUfunction handle = nullptr;
  std::string name;
  std::shared_ptr<KernelLimits> limits;  // shared with the other Kernels of the same function
};
const napi_type_tag NativeKernel::kTag = {0x6373702d6b65726eULL, 0x656c000000000004ULL};

class LoadWorker : public Napi::AsyncWorker {
 public:
  LoadWorker(Napi::Env env, int device, std::vector<char> image)
      : Napi::AsyncWorker(env, "cuda_stream_pool.module.load"),
        deferred_(Napi::Promise::Deferred::New(env)),
        device_(device),
        image_(std::move(image)) {}
  Napi::Promise promise() { return deferred_.Promise(); }

  // Runs on: a libuv worker thread.
  void Execute() override {
    try {
      make_current(device_);
      char log[16384] = {};
      CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
      void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof(log)))};
      CUmodule module = nullptr;
      CUresult r = drv().cuModuleLoadDataEx(&module, image_.data(), 2, options, values);
      if (r != CUDA_SUCCESS) {
        std::string detail = "device " + std::to_string(device_);
        log[sizeof(log) - 1] = '\0';
        if (log[0]) detail += "; JIT log: " + std::string(log);
        check(r, "cuModuleLoadDataEx", device_, detail);
      }
      object_ = make_native<NativeModule>();
      object_->device = device_;
      object_->handle = module;
      object_->loaded = std::make_shared<LoadedModule>(module, device_);
    } catch (...) {
      failure_ = std::current_exception();
    }
  }

  // Runs on: the JS thread that called moduleLoad.
  void OnOK() override {
    settle_quietly([&] {
      Napi::Env env = Env();
      if (!failure_) {
        deferred_.Resolve(wrap_native(env, object_));
        return;
      }
      try {
        try {
          std::rethrow_exception(failure_);
        } catch (...) {
          rethrow_as_js(env);
        }
      } catch (const Napi::Error& e) {
        deferred_.Reject(e.Value());
      }
    });
  }

 private:
  Napi::Promise::Deferred deferred_;
  int device_;
  std::vector<char> image_;
  std::shared_ptr<NativeModule> object_;
  std::exception_ptr failure_;
};

// moduleLoad(device, image: Uint8Array) -> Promise<object>. The image is copied and NUL-terminated here, so PTX text
// never makes the driver read past its end (a CUBIN or fatbin ignores the extra byte).
Napi::Value module_load(const Napi::CallbackInfo& info) {
  int device = info[0].As<Napi::Number>().Int32Value();
  require_driver();
  auto bytes = info[1].As<Napi::Uint8Array>();
  const char* data = reinterpret_cast<const char*>(bytes.Data());
  std::vector<char> image;
  image.reserve(bytes.ByteLength() + 1);
  image.assign(data, data + bytes.ByteLength());
  image.push_back('\0');
  auto* worker = new LoadWorker(info.Env(), device, std::move(image));
  Napi::Promise promise = worker->promise();
  worker->Queue();
  return promise;
}

// moduleUnload(ref): cuModuleUnload once calls in flight are done; idempotent; never throws after a fault.
Napi::Value module_unload(const Napi::CallbackInfo& info) {
  unwrap_native<NativeModule>(info[0])->destroy();
  release_native(info[0]);
  return info.Env().Undefined();
}

// moduleFunctionNames(ref) -> string[] (empty where the driver cannot enumerate, before CUDA 12.4)
Napi::Value module_function_names(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto module = unwrap_native<NativeModule>(info[0]);
  Use<NativeModule> use(*module, "Module", "getFunction");
  Napi::Array names = Napi::Array::New(env);
  const Driver& d = drv();
  if (!d.cuModuleGetFunctionCount || !d.cuModuleEnumerateFunctions || !d.cuFuncGetName) return names;
  make_current(module->device);
  unsigned count = 0;
  if (d.cuModuleGetFunctionCount(&count, module->handle) != CUDA_SUCCESS) return names;
  std::vector<CUfunction> functions(count);
  if (count && d.cuModuleEnumerateFunctions(functions.data(), count, module->handle) != CUDA_SUCCESS) return names;
  for (unsigned i = 0; i < count; i++) {
    const char* name = nullptr;
    if (d.cuFuncGetName(&name, functions[i]) == CUDA_SUCCESS && name) names.Set(names.Length(), name);
  }
  return names;
}

// moduleGetFunction(ref, name) -> kernel ref; CUDA_ERROR_NOT_FOUND when the name is unknown.
Napi::Value module_get_function(const Napi::CallbackInfo& info) {
  auto module = unwrap_native<NativeModule>(info[0]);
  std::string name = info[1].As<Napi::String>().Utf8Value();
  Use<NativeModule> use(*module, "Module", "getFunction");
  make_current(module->device);
  auto kernel = make_native<NativeKernel>();
  kernel->module = module;
  kernel->name = name;
  check(drv().cuModuleGetFunction(&kernel->handle, module->handle, name.c_str()), "cuModuleGetFunction",
        module->device, "kernel \"" + name + "\" of a module on device " + std::to_string(module->device));
  kernel->limits = module->limits_of(kernel->handle);
  return wrap_native(info.Env(), kernel);
}

std::string describe(const NativeKernel& kernel) {
  return "kernel \"" + kernel.name + "\" on device " + std::to_string(kernel.module->device);
}

// kernelParamSizes(kernel) -> number[] (each parameter's size in bytes, in order), or null where the driver cannot
// tell (before CUDA 12.4).
Napi::Value kernel_param_sizes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto kernel = unwrap_native<NativeKernel>(info[0]);
  Use<NativeModule> use(*kernel->module, "Module", "getFunction");
  const Driver& d = drv();
  if (!d.cuFuncGetParamInfo) return env.Null();
  make_current(kernel->module->device);
  // Under lazy loading (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2) a function may not be loaded yet;
  // reading an attribute loads it, so the parameter list below is the kernel's own.
  int registers = 0;
  if (drv().cuFuncGetAttribute(&registers, CU_FUNC_ATTRIBUTE_NUM_REGS, kernel->handle) != CUDA_SUCCESS) return env.Null();
  Napi::Array sizes = Napi::Array::New(env);
  // A kernel's parameters fit in 32 KiB, so there are at most that many; the driver answers INVALID_VALUE past the
  // last one.
  for (size_t i = 0; i < 32768; i++) {
    size_t offset = 0, bytes = 0;
    CUresult r = d.cuFuncGetParamInfo(kernel->handle, i, &offset, &bytes);
    if (r == CUDA_ERROR_INVALID_VALUE) break;
    if (r != CUDA_SUCCESS) return env.Null();
    sizes.Set(static_cast<uint32_t>(i), static_cast<double>(bytes));
  }
  return sizes;
}

// kernelAttributes(kernel) -> { registers, maxThreadsPerBlock, staticSharedMemBytes, localMemBytes,
// maxDynamicSharedMemBytes }
Napi::Value kernel_attributes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto kernel = unwrap_native<NativeKernel>(info[0]);
  Use<NativeModule> use(*kernel->module, "Module", "attributes");
  make_current(kernel->module->device);
  auto get = [&](CUfunction_attribute which) {
    int value = 0;
    check(drv().cuFuncGetAttribute(&value, which, kernel->handle), "cuFuncGetAttribute", kernel->module->device,
          describe(*kernel));
    return value;
  };
  Napi::Object out = Napi::Object::New(env);
  out.Set("registers", get(CU_FUNC_ATTRIBUTE_NUM_REGS));
  out.Set("maxThreadsPerBlock", get(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
  out.Set("staticSharedMemBytes", get(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES));
  out.Set("localMemBytes", get(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES));
  out.Set("maxDynamicSharedMemBytes", get(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES));
  return out;
}

// kernelMaxPotentialBlockSize(kernel, dynamicSharedMemBytes, blockSizeLimit) -> { minGridSize, blockSize }
Napi::Value kernel_max_potential_block_size(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto kernel = unwrap_native<NativeKernel>(info[0]);
  size_t shared = static_cast<size_t>(info[1].As<Napi::Number>().Int64Value());
  int limit = info[2].As<Napi::Number>().Int32Value();
  Use<NativeModule> use(*kernel->module, "Module", "maxPotentialBlockSize");
  make_current(kernel->module->device);
  int min_grid = 0, block = 0;
  check(drv().cuOccupancyMaxPotentialBlockSize(&min_grid, &block, kernel->handle, nullptr, shared, limit),
        "cuOccupancyMaxPotentialBlockSize", kernel->module->device,
        describe(*kernel) + ", " + std::to_string(shared) + " bytes of dynamic shared memory per block");
  Napi::Object out = Napi::Object::New(env);
  out.Set("minGridSize", min_grid);
  out.Set("blockSize", block);
  return out;
}

int device_attribute(int device, CUdevice_attribute which) {
  CUdevice dev = 0;
  int value = -1;
  if (drv().cuDeviceGet(&dev, device) != CUDA_SUCCESS) return -1;
  if (drv().cuDeviceGetAttribute(&value, which, dev) != CUDA_SUCCESS) return -1;
  return value;
}

// kernelSetMaxDynamicSharedMemBytes(kernel, bytes)
Napi::Value kernel_set_max_dynamic_shared(const Napi::CallbackInfo& info) {
  auto kernel = unwrap_native<NativeKernel>(info[0]);
  int bytes = info[1].As<Napi::Number>().Int32Value();
  Use<NativeModule> use(*kernel->module, "Module", "setMaxDynamicSharedMemBytes");
  int device = kernel->module->device;
  make_current(device);
  CUresult r = drv().cuFuncSetAttribute(kernel->handle, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
  kernel->limits->max_dynamic_shared.store(-1, std::memory_order_relaxed);
  if (r == CUDA_SUCCESS) return info.Env().Undefined();
  std::string detail = describe(*kernel) + ", " + std::to_string(bytes) + " bytes of dynamic shared memory";
  int optin = device_attribute(device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  int fixed = 0;
  if (optin >= 0 && drv().cuFuncGetAttribute(&fixed, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, kernel->handle) == CUDA_SUCCESS)
    detail += " (the device allows " + std::to_string(optin) + " bytes of shared memory per block, and the kernel uses " +
              std::to_string(fixed) + " statically, so at most " + std::to_string(optin - fixed) + " dynamically)";
  check(r, "cuFuncSetAttribute", device, detail);
  return info.Env().Undefined();
}

// Launch attributes beyond the shape, set through cuLaunchKernelEx; a launch with none is a plain cuLaunchKernel.
struct LaunchAttributes {
  unsigned cluster[3] = {0, 0, 0};  // blocks per thread-block cluster; 0: no cluster dimension
  bool cooperative = false;         // every block resident at once (grid-wide synchronization is legal)
  bool programmatic = false;        // programmatic stream serialization: may start before the previous kernel ends
};

// The most blocks of `kernel` that a cooperative launch of this block size and shared memory may have on `stream`:
// what fits at once on the device, or on the stream's partition (Note [partitions] in device/partition.cc). -1 when
// the driver cannot say.
long long cooperative_block_limit(const NativeKernel& kernel, const NativeStream& stream, unsigned threads,
                                  unsigned shared) {
  const int device = kernel.module->device;
  int per_multiprocessor = 0;
  if (drv().cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, kernel.handle, static_cast<int>(threads),
                                                        shared) != CUDA_SUCCESS)
    return -1;
  const int multiprocessors = stream.partition >= 0
                                  ? static_cast<int>(partition_multiprocessors(device, stream.partition))
                                  : device_attribute(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  return multiprocessors <= 0 ? -1 : static_cast<long long>(per_multiprocessor) * multiprocessors;
}

// The context of a failed launch: the kernel, the launch shape and attributes, the stream, and the kernel's own limits
// (read only now, on the failure path), so that "invalid argument" says which limit was crossed.
std::string launch_detail(const NativeKernel& kernel, const NativeStream& stream, const unsigned* grid, const unsigned* block,
                          unsigned shared, const LaunchAttributes* attributes = nullptr) {
  auto dims = [](const unsigned* d) {
    return "[" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) + "]";
  };
  const unsigned long long threads = static_cast<unsigned long long>(block[0]) * block[1] * block[2];
  std::string detail = "kernel \"" + kernel.name + "\" with grid " + dims(grid) + ", block " + dims(block) + " (" +
                       std::to_string(threads) + (threads == 1 ? " thread) and " : " threads) and ") + std::to_string(shared) +
                       " bytes of dynamic shared memory";
  if (attributes) {
    if (attributes->cluster[0]) detail += ", clusters of " + dims(attributes->cluster) + " blocks";
    if (attributes->cooperative) detail += ", cooperative";
    if (attributes->programmatic) detail += ", programmatic dependent launch";
  }
  detail += ", on device " + std::to_string(kernel.module->device);
  unsigned long long id = 0;
  if (drv().cuStreamGetId(stream.handle, &id) == CUDA_SUCCESS) detail += ", stream " + std::to_string(id);
  int most_threads = 0, dynamic = 0;
  if (drv().cuFuncGetAttribute(&most_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, kernel.handle) == CUDA_SUCCESS &&
      drv().cuFuncGetAttribute(&dynamic, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, kernel.handle) ==
          CUDA_SUCCESS)
    detail += " (this kernel allows at most " + std::to_string(most_threads) + " threads per block and " +
              std::to_string(dynamic) + " bytes of dynamic shared memory; setMaxDynamicSharedMemBytes raises the latter)";
  if (attributes && attributes->cooperative && threads <= 1024) {
    const long long limit = cooperative_block_limit(kernel, stream, static_cast<unsigned>(threads), shared);
    if (limit >= 0)
      detail += "; a cooperative launch of this block size has room for at most " + std::to_string(limit) +
                " blocks at once";
  }
  return detail;
}

// Kernel parameters arrive as one slot per argument (kKernelArgSlotBytes); cuLaunchKernel reads each parameter's
// own size from the start of its slot and copies the values before it returns, so the slots can be reused.
constexpr unsigned kInlineParams = 32;

// A cooperative launch of more blocks than fit at once on the stream's device or partition, refused before the
// driver with the error the driver gives (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE), in either submission mode, so
// that the refusal is the same whether or not the launch is recorded. Left to the driver when occupancy is unknown.
void check_cooperative_grid(const NativeKernel& kernel, const NativeStream& stream, const unsigned (&grid)[3],
                            const unsigned (&block)[3], unsigned shared, const LaunchAttributes* attributes) {
  if (!attributes || !attributes->cooperative) return;
  const unsigned long long threads = static_cast<unsigned long long>(block[0]) * block[1] * block[2];
  if (threads == 0 || threads > 1024) return;  // the driver refuses the shape itself
  const long long limit = cooperative_block_limit(kernel, stream, static_cast<unsigned>(threads), shared);
  if (limit >= 0 && static_cast<unsigned long long>(grid[0]) * grid[1] * grid[2] > static_cast<unsigned long long>(limit))
    check(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "cuLaunchKernelEx", kernel.module->device,
          launch_detail(kernel, stream, grid, block, shared, attributes));
}

// A launch whose shape the driver would refuse, refused now with the error the driver gives (CUDA_ERROR_INVALID_VALUE
// from cuLaunchKernel, with launch_detail): a recorded launch is issued later, and validation stays synchronous.
// The device's dimension limits and the kernel's attributes are read once and cached.
void check_launch_shape(NativeKernel& kernel, const NativeStream& stream, const unsigned (&grid)[3],
                        const unsigned (&block)[3], unsigned shared, const LaunchAttributes* attributes) {
  const int device = kernel.module->device;
  static std::atomic<int> limits[kMaxDevices][6] = {};  // block x, y, z, grid x, y, z; 0 until read
  auto limit = [&](int index, CUdevice_attribute attribute) {
    int value = limits[device][index].load(std::memory_order_relaxed);
    if (value == 0) {
      CUdevice handle = 0;
      check(drv().cuDeviceGet(&handle, device), "cuDeviceGet", device);
      check(drv().cuDeviceGetAttribute(&value, attribute, handle), "cuDeviceGetAttribute", device);
      limits[device][index].store(value, std::memory_order_relaxed);
    }
    return static_cast<unsigned>(value);
  };
  auto attribute = [&](std::atomic<int>& cached, CUfunction_attribute which) {
    int value = cached.load(std::memory_order_relaxed);
    if (value < 0) {
      check(drv().cuFuncGetAttribute(&value, which, kernel.handle), "cuFuncGetAttribute", device);
      cached.store(value, std::memory_order_relaxed);
    }
    return static_cast<unsigned long long>(value);
  };
  const unsigned long long threads = static_cast<unsigned long long>(block[0]) * block[1] * block[2];
  const bool refused = block[0] > limit(0, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X) ||
                       block[1] > limit(1, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y) ||
                       block[2] > limit(2, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z) ||
                       grid[0] > limit(3, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X) ||
                       grid[1] > limit(4, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y) ||
                       grid[2] > limit(5, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z) ||
                       threads > attribute(kernel.limits->max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK) ||
                       shared > attribute(kernel.limits->max_dynamic_shared, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  const char* call = attributes ? "cuLaunchKernelEx" : "cuLaunchKernel";
  if (refused) check(CUDA_ERROR_INVALID_VALUE, call, device, launch_detail(kernel, stream, grid, block, shared, attributes));
  check_cooperative_grid(kernel, stream, grid, block, shared, attributes);
}

// The driver call of kernelLaunch and kernelLaunchWithAttributes, by the calling thread or the submission thread:
// `slots` holds one slot per argument.
void issue_launch(const NativeKernel& kernel, const NativeStream& stream, const unsigned* grid, const unsigned* block,
                  unsigned shared, const uint8_t* slots, size_t slot_bytes, const LaunchAttributes* attributes) {
  const size_t count = slot_bytes / kKernelArgSlotBytes;
  void* inline_pointers[kInlineParams];
  std::vector<void*> heap_pointers;
  void** pointers = inline_pointers;
  if (count > kInlineParams) {
    heap_pointers.resize(count);
    pointers = heap_pointers.data();
  }
  // The driver only reads the parameters; its signature takes them as void*.
  for (size_t i = 0; i < count; i++) pointers[i] = const_cast<uint8_t*>(slots) + kKernelArgSlotBytes * i;
  const int device = kernel.module->device;
  make_current(device);
  if (!attributes) {
    CUresult r = drv().cuLaunchKernel(kernel.handle, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared,
                                      stream.handle, count ? pointers : nullptr, nullptr);
    if (r != CUDA_SUCCESS) check(r, "cuLaunchKernel", device, launch_detail(kernel, stream, grid, block, shared));
    return;
  }
  CUlaunchAttribute list[3] = {};
  unsigned listed = 0;
  if (attributes->cluster[0]) {
    list[listed].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    list[listed].value.clusterDim = {attributes->cluster[0], attributes->cluster[1], attributes->cluster[2]};
    listed++;
  }
  if (attributes->cooperative) {
    list[listed].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    list[listed++].value.cooperative = 1;
  }
  if (attributes->programmatic) {
    list[listed].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    list[listed++].value.programmaticStreamSerializationAllowed = 1;
  }
  const CUlaunchConfig config{grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, stream.handle, list, listed};
  CUresult r = drv().cuLaunchKernelEx(&config, kernel.handle, count ? pointers : nullptr, nullptr);
  if (r != CUDA_SUCCESS) check(r, "cuLaunchKernelEx", device, launch_detail(kernel, stream, grid, block, shared, attributes));
}

// A recorded launch's argument slots: in place when they are few (most kernels), so that the operation fits its
// ring slot and recording allocates nothing; on the heap otherwise.
class ArgumentCopy {
 public:
  ArgumentCopy(const uint8_t* data, size_t size) : size_(size) {
    if (size <= sizeof(in_place_))
      std::memcpy(in_place_, data, size);
    else
      on_heap_.assign(data, data + size);
  }
  uint8_t* data() { return size_ <= sizeof(in_place_) ? in_place_ : on_heap_.data(); }
  size_t size() const { return size_; }

 private:
  uint8_t in_place_[48];
  std::vector<uint8_t> on_heap_;
  size_t size_;
};

// The body of kernelLaunch and kernelLaunchWithAttributes (`attributes` null for the former), after each read its
// arguments. Every value is already validated by kernel/kernel.ts; params holds one slot per argument.
Napi::Value launch(Napi::Env env, const Borrowed<NativeKernel>& kernel, const Borrowed<NativeStream>& stream,
                   const unsigned (&grid)[3], const unsigned (&block)[3], unsigned shared, const uint8_t* params,
                   size_t param_bytes, const LaunchAttributes* attributes) {
  Use<NativeModule> use(*kernel->module, "Module", "kernel.launch");
  Use<NativeStream> use_stream(*stream, "Stream", "kernel.launch");
  if (Submitter* submitter = recording_for(env, *stream)) {
    make_current(kernel->module->device);
    check_launch_shape(*kernel, *stream, grid, block, shared, attributes);
    // The operation takes this call's entries and references. The argument slots are copied: the next launch
    // writes the thread's argument scratch again.
    Held<NativeModule> module(kernel->module, use);
    record_operation(*submitter, Held<NativeStream>(stream.shared(), use_stream),
                     [k = kernel.shared(), m = std::move(module), slots = ArgumentCopy(params, param_bytes),
                      grid = std::array<unsigned, 3>{grid[0], grid[1], grid[2]},
                      block = std::array<unsigned, 3>{block[0], block[1], block[2]}, shared,
                      with = attributes != nullptr, copied = attributes ? *attributes : LaunchAttributes{}](
                         const FailurePointer& failure, const Held<NativeStream>& s) mutable {
                       if (failure) return false;
                       issue_launch(*k, *s, grid.data(), block.data(), shared, slots.data(), slots.size(),
                                    with ? &copied : nullptr);
                       return true;
                     });
    return env.Undefined();
  }
  if (attributes && attributes->cooperative) {
    make_current(kernel->module->device);
    check_cooperative_grid(*kernel, *stream, grid, block, shared, attributes);
  }
  issue_launch(*kernel, *stream, grid, block, shared, params, param_bytes, attributes);
  return env.Undefined();
}

// kernelLaunch(), operands (Note [operand scratch] in binding/binding.h) kernel, stream: the launch's shape is in the
// launch scratch (Note [launch scratch]): grid x, y, z, block x, y, z, dynamic shared memory bytes, and in word 11 the
// byte count of the argument slots at the start of the argument scratch.
Napi::Value kernel_launch(const Napi::CallbackInfo& info) {
  const Operands operands(info.Env());
  const uint32_t* shape = launch_scratch(info.Env());
  const unsigned grid[3] = {shape[0], shape[1], shape[2]};
  const unsigned block[3] = {shape[3], shape[4], shape[5]};
  return launch(info.Env(), operands.borrow<NativeKernel>(0), operands.borrow<NativeStream>(1), grid, block, shape[6],
                launch_arguments(info.Env(), shape[11]), shape[11], nullptr);
}

// kernelLaunchWithAttributes(): as kernelLaunch, and the launch scratch's words 7 to 10 hold the
// cluster dimensions (0 for none) and the flags (1 cooperative, 2 programmatic dependent launch).
Napi::Value kernel_launch_with_attributes(const Napi::CallbackInfo& info) {
  const Operands operands(info.Env());
  const uint32_t* shape = launch_scratch(info.Env());
  const unsigned grid[3] = {shape[0], shape[1], shape[2]};
  const unsigned block[3] = {shape[3], shape[4], shape[5]};
  LaunchAttributes attributes;
  attributes.cluster[0] = shape[7];
  attributes.cluster[1] = shape[8];
  attributes.cluster[2] = shape[9];
  attributes.cooperative = (shape[10] & 1) != 0;
  attributes.programmatic = (shape[10] & 2) != 0;
  return launch(info.Env(), operands.borrow<NativeKernel>(0), operands.borrow<NativeStream>(1), grid, block, shape[6],
                launch_arguments(info.Env(), shape[11]), shape[11], &attributes);
}

}  // namespace

LoadedModule::LoadedModule(CUmodule h, int d) : handle(h), device(d) { live().modules++; }

LoadedModule::~LoadedModule() {
  // cuModuleUnload invalidates a capture open on the device in any thread: it waits for the captures to close.
  never_throws("module unload", [&] {  // making the std::function may allocate
    outside_captures(device, [module = handle, device = device] {
      if (make_current_quiet(device)) check_quiet(drv().cuModuleUnload(module), device);
      live().modules--;
    });
  });
}

std::shared_ptr<LoadedModule> kernel_module(const Napi::Value& kernel) {
  auto object = unwrap_native<NativeKernel>(kernel);
  NativeModule& module = *object->module;
  if (module.retired()) return nullptr;
  Use<NativeModule> use(module, "Module", "graph");
  return module.loaded;
}

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kModuleExports[] = {
    {"moduleLoad", "number, Uint8Array", entry<module_load>},
    {"moduleUnload", "ref", entry<module_unload>},
    {"moduleFunctionNames", "ref", entry<module_function_names>},
    {"moduleGetFunction", "ref, string", entry<module_get_function>},
    {"kernelParamSizes", "ref", entry<kernel_param_sizes>},
    {"kernelAttributes", "ref", entry<kernel_attributes>},
    {"kernelMaxPotentialBlockSize", "ref, number, number", entry<kernel_max_potential_block_size>},
    {"kernelSetMaxDynamicSharedMemBytes", "ref, number", entry<kernel_set_max_dynamic_shared>},
    {"kernelLaunch", "", unordered<kernel_launch>},
    {"kernelLaunchWithAttributes", "", unordered<kernel_launch_with_attributes>},
};

void register_module(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kModuleExports);
}

}  // namespace csp
