// CUDA graphs: stream capture, graphs, executable graphs. Mechanism only; the policy (who may capture, what is
// illegal during a capture, what a graph keeps alive) is graph/graph.ts and stream/capture.ts. Runs on: the JS thread that
// called (main or worker). See Note [capture flag] in stream.h and Note [graph lifetime] below.
#include <thread>
#include <vector>

#include "binding/binding.h"
#include "internal/submission.h"
#include "internal/native-object.h"
#include "stream/capture.h"
#include "internal/context.h"
#include "internal/live-counters.h"
#include "internal/loader.h"
#include "kernel/module.h"
#include "stream/stream.h"

namespace csp {
namespace {

// Note [graph lifetime]: a CUgraph is destroyed when nobody needs it any more: its Graph wrapper (until destroy()) and
// every executable graph instantiated from it, because cuGraphExecKernelNodeSetParams names nodes of that graph. So
// the handle lives in a DriverGraph held by shared_ptr, and NativeGraph::destroy only drops the wrapper's share. An
// executable graph in flight may be destroyed: the driver frees it once its launches complete.
struct DriverGraph {
  CUgraph handle = nullptr;
  int device = 0;
  // The modules of its kernel nodes (Note [module lifetime]): members go after the destructor's cuGraphDestroy.
  std::vector<std::shared_ptr<LoadedModule>> modules;
  DriverGraph(CUgraph h, int d) : handle(h), device(d) { live().graphs++; }
  DriverGraph(const DriverGraph&) = delete;
  DriverGraph& operator=(const DriverGraph&) = delete;
  ~DriverGraph() {
    live().graphs--;
    if (make_current_quiet(device)) check_quiet(drv().cuGraphDestroy(handle), device);
  }
};

struct NativeGraph : NativeObject {
  static const napi_type_tag kTag;
  static constexpr const char* kName = "Graph";
  std::shared_ptr<DriverGraph> graph;
  ~NativeGraph() override { retire(); }

 protected:
  void release() override { graph.reset(); }
};
const napi_type_tag NativeGraph::kTag = {0x6373702d67726170ULL, 0x6800000000000009ULL};

struct NativeGraphExec : NativeObject {
  static const napi_type_tag kTag;
  static constexpr const char* kName = "GraphExec";
  CUgraphExec handle = nullptr;
  std::shared_ptr<DriverGraph> source;  // the graph instantiated: its nodes name this executable's nodes
  std::shared_ptr<DriverGraph> latest;  // the graph whose work the executable runs now (source, or the last update)
  ~NativeGraphExec() override { retire(); }

 protected:
  void release() override {
    if (handle) live().graph_execs--;
    if (handle && make_current_quiet(device)) check_quiet(drv().cuGraphExecDestroy(handle), device);
    handle = nullptr;
    source.reset();
    latest.reset();
  }
};
const napi_type_tag NativeGraphExec::kTag = {0x6373702d67657865ULL, 0x630000000000000aULL};

std::string where(const NativeStream& stream) { return "device " + std::to_string(stream.device); }

Napi::Value to_bigint(Napi::Env env, const void* handle) {
  return Napi::BigInt::New(env, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle)));
}

// streamBeginCapture(stream, mode): mode is a CUstreamCaptureMode (0 global, 1 thread-local, 2 relaxed).
Napi::Value stream_begin_capture(const Napi::CallbackInfo& info) {
  auto stream = unwrap_native<NativeStream>(info[0]);
  auto mode = static_cast<CUstreamCaptureMode>(info[1].As<Napi::Number>().Int32Value());
  Use<NativeStream> use(*stream, "Stream", "beginCapture");
  make_current(stream->device);
  NativeStream& state = stream->owner();
  // Counted before it begins, so that no device-wide call of another thread can invalidate it (Note [capture guard]).
  // A capture begun on this stream and still open (or opening, in another thread) keeps its count; this begin is
  // refused without calling the driver, which would refuse it too.
  if (state.capture_origin.exchange(true, std::memory_order_acq_rel))
    throw CudaFailure{CUDA_ERROR_ILLEGAL_STATE, "cuStreamBeginCapture",
                      where(*stream) + ": a capture begun on this stream is still open (in some thread)"};
  state.capture_wrapper.store(stream.get(), std::memory_order_relaxed);
  state.capture_thread.store(std::this_thread::get_id(), std::memory_order_relaxed);
  capture_opening(stream->device);
  // Set first: a query of another thread between the begin and the flag would invalidate the capture. A flag left
  // set by a failed begin is cleared by the next guard that asks the driver (Note [capture flag]).
  state.capturing.store(true, std::memory_order_release);
  CUresult r = drv().cuStreamBeginCapture(stream->handle, mode);
  if (r != CUDA_SUCCESS) capture_closed(*stream);
  check(r, "cuStreamBeginCapture", stream->device, where(*stream));
  return info.Env().Undefined();
}

// Ends the capture open on `stream` (its device's context current): cuStreamEndCapture, and once more when a failure
// left the stream capturing (the driver ends a capture on most of its errors, not on all), so that the stream is
// usable again. The capture is then over and uncounted whatever the outcome; a failed end's graph, if the driver made
// one, is destroyed. Returns the first end's result; never throws.
CUresult end_capture(NativeStream& stream, CUgraph& graph) {
  CUresult r = drv().cuStreamEndCapture(stream.handle, &graph);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (r != CUDA_SUCCESS && drv().cuStreamIsCapturing(stream.handle, &status) == CUDA_SUCCESS &&
      status != CU_STREAM_CAPTURE_STATUS_NONE) {
    CUgraph partial = nullptr;
    drv().cuStreamEndCapture(stream.handle, &partial);
    if (partial) check_quiet(drv().cuGraphDestroy(partial), stream.device);
  }
  stream.owner().capturing.store(false, std::memory_order_release);
  capture_closed(stream);
  if (r != CUDA_SUCCESS && graph) {
    check_quiet(drv().cuGraphDestroy(graph), stream.device);
    graph = nullptr;
  }
  return r;
}

// Note [abandoned captures]: a capture is ended by the JS code that began it, through the stream wrapper it began
// it on. Once that wrapper's handle is released in the thread that began the capture (its JS owner was collected,
// or the thread exited or was terminated, say while Graph.capture() awaited), nothing can end the capture, yet it
// would stay counted open (Note [capture guard] in capture.h) for the rest of the process: every device-wide call on
// the device would wait for it, and a forgotten buffer that the stream used, waiting to be freed, would keep the
// stream alive in turn. So that release ends the capture and destroys its graph, as an invalidated capture's end
// does. A stream already destroyed is left alone: its release closes the capture.
void abandon_forgotten_capture(const std::shared_ptr<void>& forgotten) {
  auto object = std::static_pointer_cast<NativeStream>(forgotten);
  NativeStream& state = object->owner();
  if (!state.capture_origin.load(std::memory_order_acquire) ||
      state.capture_wrapper.load(std::memory_order_relaxed) != object.get() ||
      state.capture_thread.load(std::memory_order_relaxed) != std::this_thread::get_id() || !object->enter())
    return;
  CUgraph graph = nullptr;
  if (make_current_quiet(object->device) && end_capture(*object, graph) == CUDA_SUCCESS && graph)
    check_quiet(drv().cuGraphDestroy(graph), object->device);
  capture_closed(*object);  // also when the context could not be made current
  object->leave();
}

// A created stream whose JS owner was collected (or whose thread ended) is destroyed as destroy() would, after its
// capture, if one was left open, is abandoned. Only its own handle does this: a pool's streams are the pool's, and a
// borrowed wrapper owns nothing.
void destroy_forgotten_stream(const std::shared_ptr<void>& forgotten) {
  abandon_forgotten_capture(forgotten);
  auto object = std::static_pointer_cast<NativeStream>(forgotten);
  // Its recorded work is issued first (deferred submission), so that destroy()'s record of its last work follows it.
  if (object->unissued()) await_issued(*object);
  object->destroy();
}

// streamEndCapture(stream) -> graph object. The capture is over whatever the outcome; an invalidated capture throws
// (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) and its partial graph, if the driver made one, is destroyed. A failure that
// left the stream capturing (the driver ends a capture on most of its errors, not on all) is followed by one more
// end, so that the stream is usable again; the first failure is the one thrown.
Napi::Value stream_end_capture(const Napi::CallbackInfo& info) {
  auto stream = unwrap_native<NativeStream>(info[0]);
  Use<NativeStream> use(*stream, "Stream", "endCapture");
  make_current(stream->device);
  CUgraph graph = nullptr;
  CUresult r = end_capture(*stream, graph);
  check(r, "cuStreamEndCapture", stream->device, where(*stream));
  auto object = make_native<NativeGraph>();
  object->device = stream->device;
  object->graph = std::make_shared<DriverGraph>(graph, stream->device);
  return wrap_native(info.Env(), object);
}

CUstreamCaptureStatus ask_driver(NativeStream& stream) {
  make_current(stream.device);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  check(drv().cuStreamIsCapturing(stream.handle, &status), "cuStreamIsCapturing", stream.device, where(stream));
  stream.owner().capturing.store(status != CU_STREAM_CAPTURE_STATUS_NONE, std::memory_order_release);
  return status;
}

// streamCaptureStatus(stream) -> 0 none, 1 active, 2 invalidated. No driver call unless the capture flag is set
// (Note [capture flag]).
Napi::Value stream_capture_status(const Napi::CallbackInfo& info) {
  auto stream = unwrap_native<NativeStream>(info[0]);
  if (!stream->owner().capturing.load(std::memory_order_acquire)) return Napi::Number::New(info.Env(), 0);
  Use<NativeStream> use(*stream, "Stream", "capturing", QueuesNoWork{});
  return Napi::Number::New(info.Env(), capture_status(*stream));
}

// streamCaptureRefresh(stream) -> as streamCaptureStatus, always asking the driver: after the stream waited on work
// of a capturing stream, which makes it join that capture.
Napi::Value stream_capture_refresh(const Napi::CallbackInfo& info) {
  auto stream = unwrap_native<NativeStream>(info[0]);
  Use<NativeStream> use(*stream, "Stream", "capturing", QueuesNoWork{});
  return Napi::Number::New(info.Env(), ask_driver(*stream));
}

// streamCaptureLastNode(stream) -> the node the stream's next captured work would depend on, as a bigint: right
// after a kernel launch, that launch's kernel node. 0n when there is not exactly one such node, or when the driver
// lacks cuStreamGetCaptureInfo at the 12.0 ABI (the launch is captured all the same; only its node is unnamed).
Napi::Value stream_capture_last_node(const Napi::CallbackInfo& info) {
  auto stream = unwrap_native<NativeStream>(info[0]);
  Use<NativeStream> use(*stream, "Stream", "kernel.launch");  // a launch asks for its captured node
  if (!drv().cuStreamGetCaptureInfo) return Napi::BigInt::New(info.Env(), uint64_t{0});
  make_current(stream->device);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  CUgraph graph = nullptr;
  const CUgraphNode* dependencies = nullptr;
  size_t count = 0;
  check(drv().cuStreamGetCaptureInfo(stream->handle, &status, &id, &graph, &dependencies, &count),
        "cuStreamGetCaptureInfo", stream->device, where(*stream));
  if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || count != 1) return Napi::BigInt::New(info.Env(), uint64_t{0});
  return to_bigint(info.Env(), dependencies[0]);
}

// graphNodeCount(graph) -> the number of nodes.
Napi::Value graph_node_count(const Napi::CallbackInfo& info) {
  auto graph = unwrap_native<NativeGraph>(info[0]);
  Use<NativeGraph> use(*graph, "Graph", "nodeCount");
  make_current(graph->device);
  size_t count = 0;
  check(drv().cuGraphGetNodes(graph->graph->handle, nullptr, &count), "cuGraphGetNodes", graph->device);
  return Napi::Number::New(info.Env(), static_cast<double>(count));
}

// graphKeepModules(graph, kernels: kernel ref[]): the driver graph holds the modules of these kernels (its kernel
// nodes' functions) until it is destroyed; kernels of an unloaded module are skipped.
Napi::Value graph_keep_modules(const Napi::CallbackInfo& info) {
  auto graph = unwrap_native<NativeGraph>(info[0]);
  Use<NativeGraph> use(*graph, "Graph", "capture");
  auto kernels = info[1].As<Napi::Array>();
  for (uint32_t i = 0; i < kernels.Length(); i++)
    if (auto module = kernel_module(kernels.Get(i))) graph->graph->modules.push_back(std::move(module));
  return info.Env().Undefined();
}

// graphInstantiate(graph) -> executable graph object.
Napi::Value graph_instantiate(const Napi::CallbackInfo& info) {
  auto graph = unwrap_native<NativeGraph>(info[0]);
  Use<NativeGraph> use(*graph, "Graph", "instantiate");
  make_current(graph->device);
  auto exec = make_native<NativeGraphExec>();
  exec->device = graph->device;
  check(drv().cuGraphInstantiateWithFlags(&exec->handle, graph->graph->handle, 0), "cuGraphInstantiateWithFlags",
        graph->device, "device " + std::to_string(graph->device));
  live().graph_execs++;
  exec->source = graph->graph;
  exec->latest = graph->graph;
  return wrap_native(info.Env(), exec);
}

// graphDestroy(graph): retires the object; it drops its share of the CUgraph (Note [graph lifetime]) once no call is in
// flight. Idempotent.
Napi::Value graph_destroy(const Napi::CallbackInfo& info) {
  unwrap_native<NativeGraph>(info[0])->retire();
  release_native(info[0]);
  return info.Env().Undefined();
}

// graphExecLaunch(exec, stream): queues one launch of the executable graph on the stream.
Napi::Value graph_exec_launch(const Napi::CallbackInfo& info) {
  auto exec = unwrap_native<NativeGraphExec>(info[0]);
  auto stream = unwrap_native<NativeStream>(info[1]);
  Use<NativeGraphExec> use(*exec, "GraphExec", "launch");
  Use<NativeStream> use_stream(*stream, "Stream", "graphExec.launch");
  make_current(stream->device);
  if (Submitter* submitter = recording_for(info.Env(), *stream)) {
    // Issued later; on a stream whose recorded work failed it is dropped, as every recorded operation is. An update
    // of the executable is an ordered call, so the launch runs the graph it was recorded with.
    record_operation(*submitter, Held<NativeStream>(std::move(stream), use_stream),
                     [e = Held<NativeGraphExec>(std::move(exec), use)](const FailurePointer& failure, const Held<NativeStream>& s) {
                       if (failure) return false;
                       make_current(s->device);
                       check(drv().cuGraphLaunch(e->handle, s->handle), "cuGraphLaunch", s->device, where(*s));
                       return true;
                     });
    return info.Env().Undefined();
  }
  check(drv().cuGraphLaunch(exec->handle, stream->handle), "cuGraphLaunch", stream->device, where(*stream));
  return info.Env().Undefined();
}

// graphExecUpdate(exec, graph) -> true when the executable was updated in place (cuGraphExecUpdate); false when the
// driver refused (CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE: another topology, node types or kernels' contexts), after
// which the executable is instantiated anew from `graph`. Either way later launches run `graph`'s work.
Napi::Value graph_exec_update(const Napi::CallbackInfo& info) {
  auto exec = unwrap_native<NativeGraphExec>(info[0]);
  auto graph = unwrap_native<NativeGraph>(info[1]);
  // Replaces the handle: safe because an executable graph is used by the one JS thread that made it (graph objects
  // are not thread-safe in the driver either), so no launch of it is in flight in this call.
  Use<NativeGraphExec> use(*exec, "GraphExec", "update");
  Use<NativeGraph> use_graph(*graph, "Graph", "update");
  make_current(exec->device);
  CUgraphExecUpdateResultInfo result{};
  CUresult r = drv().cuGraphExecUpdate(exec->handle, graph->graph->handle, &result);
  if (r == CUDA_SUCCESS) {
    exec->latest = graph->graph;
    return Napi::Boolean::New(info.Env(), true);
  }
  if (r != CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) check(r, "cuGraphExecUpdate", exec->device);
  CUgraphExec fresh = nullptr;
  check(drv().cuGraphInstantiateWithFlags(&fresh, graph->graph->handle, 0), "cuGraphInstantiateWithFlags",
        exec->device, "device " + std::to_string(exec->device));
  check_quiet(drv().cuGraphExecDestroy(exec->handle), exec->device);  // launches in flight still complete
  exec->handle = fresh;
  exec->source = graph->graph;
  exec->latest = graph->graph;
  return Napi::Boolean::New(info.Env(), false);
}

// graphExecSetKernelParams(exec, node: bigint, current: bigint, slots: Uint8Array): gives the executable's kernel
// node named by `node` (a node of the graph it was instantiated from) new arguments, one 8-byte little-endian slot
// each, for later launches. Its kernel, grid, block and shared memory stay those of `current`, the same node in the
// graph whose work the executable runs now (the last update's). The driver copies the values before it returns.
// Both handles come from captures of graphs the executable holds (`source`, `latest`), so they are alive.
Napi::Value graph_exec_set_kernel_params(const Napi::CallbackInfo& info) {
  auto exec = unwrap_native<NativeGraphExec>(info[0]);
  auto node = reinterpret_cast<CUgraphNode>(static_cast<uintptr_t>(to_uint64(info[1])));
  auto current = reinterpret_cast<CUgraphNode>(static_cast<uintptr_t>(to_uint64(info[2])));
  auto slots = info[3].As<Napi::Uint8Array>();
  Use<NativeGraphExec> use(*exec, "GraphExec", "setKernelArguments");
  make_current(exec->device);
  CUDA_KERNEL_NODE_PARAMS params{};
  check(drv().cuGraphKernelNodeGetParams(current, &params), "cuGraphKernelNodeGetParams", exec->device);
  std::vector<void*> pointers(slots.ByteLength() / kKernelArgSlotBytes);
  for (size_t i = 0; i < pointers.size(); i++) pointers[i] = slots.Data() + kKernelArgSlotBytes * i;
  params.kernelParams = pointers.empty() ? nullptr : pointers.data();
  params.extra = nullptr;
  check(drv().cuGraphExecKernelNodeSetParams(exec->handle, node, &params), "cuGraphExecKernelNodeSetParams",
        exec->device);
  return info.Env().Undefined();
}

// graphExecDestroy(exec): retires the object; the executable graph is destroyed once no call is in flight (launches
// already queued still complete). Idempotent.
Napi::Value graph_exec_destroy(const Napi::CallbackInfo& info) {
  unwrap_native<NativeGraphExec>(info[0])->retire();
  release_native(info[0]);
  return info.Env().Undefined();
}

}  // namespace

Napi::Value wrap_stream(Napi::Env env, std::shared_ptr<NativeStream> object, bool destroy_when_forgotten) {
  return wrap_native(env, std::move(object), destroy_when_forgotten ? destroy_forgotten_stream : abandon_forgotten_capture);
}

void capture_closed(NativeStream& stream) {
  NativeStream& state = stream.owner();
  if (state.capture_origin.exchange(false, std::memory_order_acq_rel)) capture_closing(state.device);
}

int capture_status(NativeStream& stream) {
  if (!stream.owner().capturing.load(std::memory_order_acquire)) return 0;
  return ask_driver(stream);
}

// captureGuardState() -> [device, open captures, calls waiting for them, ...] for each device with either (Note
// [capture guard] in capture.h); for diagnostics (the soak's end check).
static Napi::Value capture_guard_state_js(const Napi::CallbackInfo& info) {
  const std::vector<int> state = capture_guard_state();
  Napi::Array out = Napi::Array::New(info.Env(), state.size());
  for (size_t i = 0; i < state.size(); i++) out.Set(static_cast<uint32_t>(i), Napi::Number::New(info.Env(), state[i]));
  return out;
}

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kGraphExports[] = {
    {"captureGuardState", "", entry<capture_guard_state_js>},
    {"streamBeginCapture", "ref, number", entry<stream_begin_capture>},
    {"streamEndCapture", "ref", entry<stream_end_capture>},
    {"streamCaptureStatus", "ref", entry<stream_capture_status>},
    {"streamCaptureRefresh", "ref", entry<stream_capture_refresh>},
    {"streamCaptureLastNode", "ref", entry<stream_capture_last_node>},
    {"graphKeepModules", "ref, array", entry<graph_keep_modules>},
    {"graphNodeCount", "ref", entry<graph_node_count>},
    {"graphInstantiate", "ref", entry<graph_instantiate>},
    {"graphDestroy", "ref", entry<graph_destroy>},
    {"graphExecLaunch", "ref, ref", unordered<graph_exec_launch>},
    {"graphExecUpdate", "ref, ref", entry<graph_exec_update>},
    {"graphExecSetKernelParams", "ref, bigint, bigint, Uint8Array", entry<graph_exec_set_kernel_params>},
    {"graphExecDestroy", "ref", entry<graph_exec_destroy>},
};

void register_graph(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kGraphExports);
}

}  // namespace csp
