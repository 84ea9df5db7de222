// Modules and kernels: load PTX/CUBIN/fatbin, look up functions, launch with packed arguments.
// Runs on: any JS thread; module loading runs on a libuv worker thread (JIT compiling PTX can take long).
#include <string>
#include <vector>

#include "addon.h"
#include "context.h"
#include "loader.h"
#include "stream.h"

namespace csp {
namespace {

struct ModuleBox : Box {
  static const napi_type_tag kTag;
  static constexpr const char* kName = "Module";
  CUmodule handle = nullptr;
  ~ModuleBox() override { destroy(); }
  void destroy() {
    std::unique_lock<std::shared_mutex> lock(mutex);
    if (destroyed) return;
    destroyed = true;
    if (make_current_quiet(device)) check_quiet(drv().cuModuleUnload(handle), device);
    live().modules--;
  }
};
const napi_type_tag ModuleBox::kTag = {0x6373702d6d6f6475ULL, 0x6c65000000000003ULL};

// A kernel keeps its module alive; its handle is only used while the module's box is alive and not unloaded.
struct KernelBox {
  static const napi_type_tag kTag;
  static constexpr const char* kName = "Kernel";
  std::shared_ptr<ModuleBox> module;
  CUfunction handle = nullptr;
  std::string name;
};
const napi_type_tag KernelBox::kTag = {0x6373702d6b65726eULL, 0x656c000000000004ULL};

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
      char log[8192] = {};
      CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
      void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof(log)))};
      CUmodule module = nullptr;
      CUresult r = drv().cuModuleLoadDataEx(&module, image_.data(), 2, options, values);
      if (r != CUDA_SUCCESS) {
        std::string detail = "device " + std::to_string(device_);
        if (log[0]) detail += "; JIT log: " + std::string(log);
        check(r, "cuModuleLoadDataEx", device_, detail);
      }
      box_ = std::make_shared<ModuleBox>();
      box_->device = device_;
      box_->handle = module;
      live().modules++;
    } catch (...) {
      failure_ = std::current_exception();
    }
  }
  void OnOK() override {
    Napi::Env env = Env();
    if (failure_) {
      try {
        try {
          std::rethrow_exception(failure_);
        } catch (...) {
          rethrow_as_js(env);
        }
      } catch (const Napi::Error& e) {
        deferred_.Reject(e.Value());
      }
      return;
    }
    deferred_.Resolve(wrap_box(env, box_));
  }

 private:
  Napi::Promise::Deferred deferred_;
  int device_;
  std::vector<char> image_;
  std::shared_ptr<ModuleBox> box_;
  std::exception_ptr failure_;
};

// moduleLoad(device, image: Uint8Array) -> Promise<box>. PTX text must be NUL-terminated (the TS layer adds it).
Napi::Value module_load(const Napi::CallbackInfo& info) {
  int device = info[0].As<Napi::Number>().Int32Value();
  require_driver();
  auto bytes = info[1].As<Napi::Uint8Array>();
  std::vector<char> image(reinterpret_cast<char*>(bytes.Data()), reinterpret_cast<char*>(bytes.Data()) + bytes.ByteLength());
  auto* worker = new LoadWorker(info.Env(), device, std::move(image));
  Napi::Promise promise = worker->promise();
  worker->Queue();
  return promise;
}

Napi::Value module_unload(const Napi::CallbackInfo& info) {
  unwrap_box<ModuleBox>(info[0])->destroy();
  return info.Env().Undefined();
}

// moduleFunctionNames(box) -> string[] (empty where the driver cannot enumerate, before CUDA 12.4)
Napi::Value module_function_names(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto module = unwrap_box<ModuleBox>(info[0]);
  Use<ModuleBox> use(*module, "Module", "getFunction");
  Napi::Array names = Napi::Array::New(env);
  const Driver& d = drv();
  if (!d.cuModuleGetFunctionCount || !d.cuModuleEnumerateFunctions || !d.cuFuncGetName) return names;
  make_current(module->device);
  unsigned count = 0;
  if (d.cuModuleGetFunctionCount(&count, module->handle) != CUDA_SUCCESS) return names;
  std::vector<CUfunction> functions(count);
  if (d.cuModuleEnumerateFunctions(functions.data(), count, module->handle) != CUDA_SUCCESS) return names;
  for (unsigned i = 0; i < count; i++) {
    const char* name = nullptr;
    if (d.cuFuncGetName(&name, functions[i]) == CUDA_SUCCESS && name) names.Set(names.Length(), name);
  }
  return names;
}

// moduleGetFunction(box, name) -> kernel box; CUDA_ERROR_NOT_FOUND when the name is unknown.
Napi::Value module_get_function(const Napi::CallbackInfo& info) {
  auto module = unwrap_box<ModuleBox>(info[0]);
  std::string name = info[1].As<Napi::String>().Utf8Value();
  Use<ModuleBox> use(*module, "Module", "getFunction");
  make_current(module->device);
  auto kernel = std::make_shared<KernelBox>();
  kernel->module = module;
  kernel->name = name;
  check(drv().cuModuleGetFunction(&kernel->handle, module->handle, name.c_str()), "cuModuleGetFunction",
        module->device, "kernel \"" + name + "\"");
  return wrap_box(info.Env(), kernel);
}

// kernelAttributes(kernel) -> { registers, maxThreadsPerBlock, staticSharedMemBytes, localMemBytes }
Napi::Value kernel_attributes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto kernel = unwrap_box<KernelBox>(info[0]);
  Use<ModuleBox> use(*kernel->module, "Module", "attributes");
  make_current(kernel->module->device);
  auto get = [&](CUfunction_attribute which) {
    int value = 0;
    check(drv().cuFuncGetAttribute(&value, which, kernel->handle), "cuFuncGetAttribute", kernel->module->device,
          "kernel \"" + kernel->name + "\"");
    return value;
  };
  Napi::Object out = Napi::Object::New(env);
  out.Set("registers", get(CU_FUNC_ATTRIBUTE_NUM_REGS));
  out.Set("maxThreadsPerBlock", get(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
  out.Set("staticSharedMemBytes", get(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES));
  out.Set("localMemBytes", get(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES));
  return out;
}

// kernelMaxPotentialBlockSize(kernel, dynamicSharedMemBytes) -> { minGridSize, blockSize }
Napi::Value kernel_max_potential_block_size(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto kernel = unwrap_box<KernelBox>(info[0]);
  size_t shared = static_cast<size_t>(info[1].As<Napi::Number>().Int64Value());
  Use<ModuleBox> use(*kernel->module, "Module", "maxPotentialBlockSize");
  make_current(kernel->module->device);
  int min_grid = 0, block = 0;
  check(drv().cuOccupancyMaxPotentialBlockSize(&min_grid, &block, kernel->handle, nullptr, shared, 0),
        "cuOccupancyMaxPotentialBlockSize", kernel->module->device, "kernel \"" + kernel->name + "\"");
  Napi::Object out = Napi::Object::New(env);
  out.Set("minGridSize", min_grid);
  out.Set("blockSize", block);
  return out;
}

// kernelSetMaxDynamicSharedMemory(kernel, bytes)
Napi::Value kernel_set_max_dynamic_shared(const Napi::CallbackInfo& info) {
  auto kernel = unwrap_box<KernelBox>(info[0]);
  int bytes = info[1].As<Napi::Number>().Int32Value();
  Use<ModuleBox> use(*kernel->module, "Module", "setMaxDynamicSharedMemory");
  make_current(kernel->module->device);
  check(drv().cuFuncSetAttribute(kernel->handle, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
        "cuFuncSetAttribute", kernel->module->device,
        "kernel \"" + kernel->name + "\", " + std::to_string(bytes) + " bytes of dynamic shared memory");
  return info.Env().Undefined();
}

// kernelLaunch(kernel, stream, grid[3], block[3], sharedMemBytes, params: Uint8Array, count, shape: string)
// params holds one 8-byte slot per argument, already packed and range-checked by the TS layer.
Napi::Value kernel_launch(const Napi::CallbackInfo& info) {
  auto kernel = unwrap_box<KernelBox>(info[0]);
  auto stream = unwrap_box<StreamBox>(info[1]);
  auto grid = info[2].As<Napi::Array>();
  auto block = info[3].As<Napi::Array>();
  unsigned shared = info[4].As<Napi::Number>().Uint32Value();
  auto params = info[5].As<Napi::Uint8Array>();
  unsigned count = info[6].As<Napi::Number>().Uint32Value();
  Use<ModuleBox> use(*kernel->module, "Module", "launch");
  Use<StreamBox> use_stream(*stream, "Stream", "launch");
  unsigned g[3], b[3];
  for (unsigned i = 0; i < 3; i++) {
    g[i] = grid.Get(i).As<Napi::Number>().Uint32Value();
    b[i] = block.Get(i).As<Napi::Number>().Uint32Value();
  }
  std::vector<void*> pointers(count);
  for (unsigned i = 0; i < count; i++) pointers[i] = params.Data() + 8 * i;
  make_current(kernel->module->device);
  CUresult r = drv().cuLaunchKernel(kernel->handle, g[0], g[1], g[2], b[0], b[1], b[2], shared, stream->handle,
                                    count ? pointers.data() : nullptr, nullptr);
  if (r != CUDA_SUCCESS)
    check(r, "cuLaunchKernel", kernel->module->device,
          "kernel \"" + kernel->name + "\" with " + info[7].As<Napi::String>().Utf8Value());
  return info.Env().Undefined();
}

}  // namespace

void register_module(Napi::Env env, Napi::Object exports) {
  exports.Set("moduleLoad", Napi::Function::New<js_entry<module_load>>(env, "moduleLoad"));
  exports.Set("moduleUnload", Napi::Function::New<js_entry<module_unload>>(env, "moduleUnload"));
  exports.Set("moduleFunctionNames", Napi::Function::New<js_entry<module_function_names>>(env, "moduleFunctionNames"));
  exports.Set("moduleGetFunction", Napi::Function::New<js_entry<module_get_function>>(env, "moduleGetFunction"));
  exports.Set("kernelAttributes", Napi::Function::New<js_entry<kernel_attributes>>(env, "kernelAttributes"));
  exports.Set("kernelMaxPotentialBlockSize",
              Napi::Function::New<js_entry<kernel_max_potential_block_size>>(env, "kernelMaxPotentialBlockSize"));
  exports.Set("kernelSetMaxDynamicSharedMemory",
              Napi::Function::New<js_entry<kernel_set_max_dynamic_shared>>(env, "kernelSetMaxDynamicSharedMemory"));
  exports.Set("kernelLaunch", Napi::Function::New<js_entry<kernel_launch>>(env, "kernelLaunch"));
}

}  // namespace csp
