// Native baseline of the graph micro-benchmark (src/graph.ts): cuGraphLaunch of a 3-node graph (copy in from
// pinned memory, empty_kernel, copy out to pinned memory) in a plain C++ loop, so that `cuda-stream-pool bench micro`
// prints GraphExec.launch() beside the driver's own cost from the same run. Mechanism only: the TS caller validates.
//
// Runs on: the calling JS thread, which the loop blocks (a benchmark; the loop is short).
#include <string>

#include "internal/loader.h"
#include "driver.h"

namespace csp::bench {
namespace {

// Every driver object of one measurement, destroyed when it ends, also when a call threw.
class GraphScratch {
 public:
  explicit GraphScratch(int device) : context_(device), device_(device) {}
  GraphScratch(const GraphScratch&) = delete;  // owns driver objects
  GraphScratch& operator=(const GraphScratch&) = delete;
  ~GraphScratch() {  // before context_ is restored
    if (stream_) drv().cuStreamSynchronize(stream_);
    if (exec_) drv().cuGraphExecDestroy(exec_);
    if (graph_) drv().cuGraphDestroy(graph_);
    if (memory_) drv().cuMemFreeAsync(memory_, stream_);
    if (stream_) drv().cuStreamSynchronize(stream_);
    if (stream_) drv().cuStreamDestroy(stream_);
    if (pinned_) drv().cuMemFreeHost(pinned_);
  }

  // Captures and instantiates the graph: `bytes` pinned -> device, empty_kernel (1 block of 1 thread), device -> pinned.
  void build(const std::string& ptx, size_t bytes) {
    CUfunction kernel = bench_kernel(device_, ptx, "empty_kernel");
    check(drv().cuStreamCreateWithPriority(&stream_, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreateWithPriority",
          device_);
    check(drv().cuMemHostAlloc(&pinned_, 2 * bytes, 0), "cuMemHostAlloc", device_);
    check(drv().cuMemAllocAsync(&memory_, bytes, stream_), "cuMemAllocAsync", device_);
    check(drv().cuStreamSynchronize(stream_), "cuStreamSynchronize", device_);
    char* host = static_cast<char*>(pinned_);
    check(drv().cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture", device_);
    CUresult queued = drv().cuMemcpyHtoDAsync(memory_, host, bytes, stream_);
    if (queued == CUDA_SUCCESS) queued = drv().cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, stream_, nullptr, nullptr);
    if (queued == CUDA_SUCCESS) queued = drv().cuMemcpyDtoHAsync(host + bytes, memory_, bytes, stream_);
    CUresult ended = drv().cuStreamEndCapture(stream_, &graph_);  // ends the capture also after a failed call
    check(queued, "cuMemcpyHtoDAsync/cuLaunchKernel/cuMemcpyDtoHAsync (captured)", device_);
    check(ended, "cuStreamEndCapture", device_);
    check(drv().cuGraphInstantiateWithFlags(&exec_, graph_, 0), "cuGraphInstantiateWithFlags", device_);
  }

  CUstream stream() const { return stream_; }
  CUgraphExec exec() const { return exec_; }

 private:
  ContextScope context_;
  int device_;
  CUstream stream_ = nullptr;
  void* pinned_ = nullptr;
  CUdeviceptr memory_ = 0;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

// graphLaunchLoop(device, iterations, ptx, bytes) -> ns per cuGraphLaunch: after one untimed launch and a
// synchronize, `iterations` launches queued back to back and timed with the steady clock; the stream is synchronized
// after the timing (untimed), as src/graph.ts times GraphExec.launch().
Napi::Value graph_launch_loop(const Napi::CallbackInfo& info) {
  const int device = info[0].As<Napi::Number>().Int32Value();
  const int64_t iterations = info[1].As<Napi::Number>().Int64Value();
  const std::string ptx = info[2].As<Napi::String>().Utf8Value();
  const size_t bytes = static_cast<size_t>(info[3].As<Napi::Number>().Int64Value());
  GraphScratch scratch(device);
  scratch.build(ptx, bytes);
  check(drv().cuGraphLaunch(scratch.exec(), scratch.stream()), "cuGraphLaunch", device);
  check(drv().cuStreamSynchronize(scratch.stream()), "cuStreamSynchronize", device);
  auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iterations; ++i)
    check(drv().cuGraphLaunch(scratch.exec(), scratch.stream()), "cuGraphLaunch", device);
  const double ns = iterations > 0 ? ns_since(start) / static_cast<double>(iterations) : 0;
  check(drv().cuStreamSynchronize(scratch.stream()), "cuStreamSynchronize", device);
  return Napi::Number::New(info.Env(), ns);
}

}  // namespace

void register_graph_baseline(Napi::Env env, Napi::Object exports) {
  exports.Set("graphLaunchLoop", Napi::Function::New<entry<graph_launch_loop>>(env, "graphLaunchLoop"));
}

}  // namespace csp::bench
