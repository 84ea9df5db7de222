// Native baseline of the graph micro-benchmark (src/bench/graph.ts): cuGraphLaunch of a 3-node graph (copy in from
// pinned memory, empty_kernel, copy out to pinned memory) in a plain C++ loop, so that `cuda-stream-pool bench micro`
// prints GraphExec.launch() beside the driver's own cost from the same run. See DESIGN.md "Measuring".
//
// Runs on: the calling JS thread, which the loop blocks (a benchmark; nothing in the library calls it).
// Register with register_graph_baseline(env, exports); exports benchGraphLaunch(device, iterations, bytes, ptx).
#include <napi.h>

#include <chrono>
#include <string>
#include <vector>

#include "../check.h"
#include "../context.h"
#include "../loader.h"

namespace csp {
namespace {

// Every driver object of one measurement, destroyed when it ends, also when a call threw.
class GraphScratch {
 public:
  explicit GraphScratch(int device) : device_(device) {}
  GraphScratch(const GraphScratch&) = delete;
  GraphScratch& operator=(const GraphScratch&) = delete;
  ~GraphScratch() {
    if (stream_) check_quiet(drv().cuStreamSynchronize(stream_), device_);
    if (exec_) check_quiet(drv().cuGraphExecDestroy(exec_), device_);
    if (graph_) check_quiet(drv().cuGraphDestroy(graph_), device_);
    if (device_memory_) check_quiet(drv().cuMemFreeAsync(device_memory_, stream_), device_);
    if (stream_) check_quiet(drv().cuStreamSynchronize(stream_), device_);
    if (stream_) check_quiet(drv().cuStreamDestroy(stream_), device_);
    if (pinned_) check_quiet(drv().cuMemFreeHost(pinned_), device_);
    if (module_) check_quiet(drv().cuModuleUnload(module_), device_);
  }

  // Builds the graph: copy `bytes` pinned -> device, empty_kernel from `image` (NUL-terminated PTX), copy back.
  void build(const std::vector<char>& image, size_t bytes) {
    const std::string where = "device " + std::to_string(device_) + " (native graph baseline)";
    check(drv().cuModuleLoadDataEx(&module_, image.data(), 0, nullptr, nullptr), "cuModuleLoadDataEx", device_, where);
    CUfunction kernel = nullptr;
    check(drv().cuModuleGetFunction(&kernel, module_, "empty_kernel"), "cuModuleGetFunction", device_, where);
    check(drv().cuStreamCreateWithPriority(&stream_, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreateWithPriority", device_,
          where);
    check(drv().cuMemHostAlloc(&pinned_, 2 * bytes, 0), "cuMemHostAlloc", device_, where);
    check(drv().cuMemAllocAsync(&device_memory_, bytes, stream_), "cuMemAllocAsync", device_, where);
    check(drv().cuStreamSynchronize(stream_), "cuStreamSynchronize", device_, where);
    char* host = static_cast<char*>(pinned_);
    check(drv().cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture", device_,
          where);
    CUresult queued = drv().cuMemcpyHtoDAsync(device_memory_, host, bytes, stream_);
    if (queued == CUDA_SUCCESS)
      queued = drv().cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, stream_, nullptr, nullptr);
    if (queued == CUDA_SUCCESS) queued = drv().cuMemcpyDtoHAsync(host + bytes, device_memory_, bytes, stream_);
    CUresult ended = drv().cuStreamEndCapture(stream_, &graph_);  // ends the capture also after a failed call
    check(queued, "captured call", device_, where);
    check(ended, "cuStreamEndCapture", device_, where);
    check(drv().cuGraphInstantiateWithFlags(&exec_, graph_, 0), "cuGraphInstantiateWithFlags", device_, where);
  }

  CUstream stream() const { return stream_; }
  CUgraphExec exec() const { return exec_; }

 private:
  int device_;
  CUmodule module_ = nullptr;
  CUstream stream_ = nullptr;
  void* pinned_ = nullptr;
  CUdeviceptr device_memory_ = 0;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

// benchGraphLaunch(device, iterations, bytes, ptx: Uint8Array) -> ns per cuGraphLaunch: `iterations` launches queued
// back to back and timed with the steady clock, after one untimed launch; the stream is synchronized before the
// timing and after it (untimed), as src/bench/graph.ts times GraphExec.launch().
Napi::Value bench_graph_launch(const Napi::CallbackInfo& info) {
  const int device = info[0].As<Napi::Number>().Int32Value();
  const int iterations = info[1].As<Napi::Number>().Int32Value();
  const size_t bytes = static_cast<size_t>(info[2].As<Napi::Number>().Int64Value());
  Napi::Uint8Array ptx = info[3].As<Napi::Uint8Array>();
  std::vector<char> image(ptx.Data(), ptx.Data() + ptx.ByteLength());
  image.push_back('\0');
  make_current(device);
  GraphScratch scratch(device);
  scratch.build(image, bytes);
  const std::string where = "device " + std::to_string(device) + " (native graph baseline)";
  check(drv().cuGraphLaunch(scratch.exec(), scratch.stream()), "cuGraphLaunch", device, where);
  check(drv().cuStreamSynchronize(scratch.stream()), "cuStreamSynchronize", device, where);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i)
    check(drv().cuGraphLaunch(scratch.exec(), scratch.stream()), "cuGraphLaunch", device, where);
  auto elapsed = std::chrono::steady_clock::now() - start;
  check(drv().cuStreamSynchronize(scratch.stream()), "cuStreamSynchronize", device, where);
  return Napi::Number::New(info.Env(), std::chrono::duration<double, std::nano>(elapsed).count() / iterations);
}

}  // namespace

void register_graph_baseline(Napi::Env env, Napi::Object exports) {
  exports.Set("benchGraphLaunch", Napi::Function::New<js_entry<bench_graph_launch>>(env, "benchGraphLaunch"));
}

}  // namespace csp
