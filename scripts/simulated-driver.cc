// A simulated CUDA driver for testing the library on machines without a GPU: a libcuda.so.1 whose streams are
// asynchronous and whose calls can be made to fail on purpose. A test tool, not a second implementation of CUDA.
//   mkdir -p /tmp/simulated-driver
//   g++ -std=c++17 -O2 -pthread -shared -fPIC -I packages/cuda-stream-pool/src scripts/simulated-driver.cc -o /tmp/simulated-driver/libcuda.so.1
//   CUDA_STREAM_POOL_LIBCUDA=/tmp/simulated-driver/libcuda.so.1 node my-test.js
//
// What it models:
//  - Devices (SIMULATED_DRIVER_DEVICES, default 1), one primary context each, current per thread. Work queued under a
//    context other than its stream's (or with no context current) is refused with CUDA_ERROR_INVALID_CONTEXT.
//    cuCtxCreate_v2, cuCtxDestroy_v2 and cuCtxSetCurrent are exported for tests that make a context of their own.
//  - Streams run their operations in order on a thread of their own, each operation after a delay
//    (SIMULATED_DRIVER_OPERATION_DELAY_US, default 0): queries report not ready until the work has run, and blocking
//    waits block. With no delay (the default) it is the busy-stream mode for CPU measurements of the completion path:
//    work still runs on the stream's thread, so a wait right after queuing finds the stream busy and goes through the
//    library's poller. Events complete when their stream reaches them. cuStreamWriteValue64 writes when its turn comes;
//    cuStreamWaitValue64 holds its stream until the word satisfies it.
//  - Memory: device, managed and pinned memory are host memory. Every operation checks, when it runs, that the device
//    memory it touches is allocated; touching freed memory (a stream-ordered free already done, cuMemFree,
//    cuMemFreeHost) is a sticky CUDA_ERROR_ILLEGAL_ADDRESS, reported on stderr with the prefix "simulated driver:".
//    Memory freed by cuMemFree or cuMemFreeHost is poisoned (0xdb) and kept out of reuse for a while, so a late
//    access finds it. Stream-ordered frees return blocks to their device's memory pool, which reuses them, bytes and
//    all, for later stream-ordered allocations (oldest first); reserved and used bytes are counted, trimmed by
//    cuMemPoolTrimTo and, at synchronizing calls, down to the release threshold.
//    A copy of pageable host memory is synchronous, as the real driver's is. Pinned allocations are carved one after
//    another from one region, so neighbours touch as the driver's often do; a copy running from one into the next is
//    refused (CUDA_ERROR_INVALID_VALUE), as the driver refuses it.
//  - Sticky faults: once a device faults, its queued work is dropped and every call on it returns the fault.
//  - Handles of destroyed streams and events are refused (CUDA_ERROR_INVALID_HANDLE, and a line on stderr).
//  - Peer access: cuCtxEnablePeerAccess and the memory pools' access lists are recorded and reported; copies between
//    devices work with or without it (as the driver's staged peer copies do).
//  - The project's kernels (test/kernels, kernels/) run on the CPU, found by name: spin and hold sleep on their
//    stream's thread (so kernels of two streams overlap) and write %globaltimer stamps from the monotonic clock;
//    fill_u32, fma_steps and write_invalid write what the GPU would, through the same memory checks; so does the
//    library's own copy kernel, cuda_stream_pool_copy_pieces, whose pieces must be device or pinned memory.
//  - Engines and time, in real (scaled) time: one copy engine per direction, each running one copy between host and
//    device at a time, and a compute engine running kernels of any streams side by side, at most
//    SIMULATED_DRIVER_CONCURRENT_KERNELS (default 128, as many as a recent GPU) at once. A copy keeps its engine busy for its bytes over
//    SIMULATED_DRIVER_COPY_BYTES_PER_US, fma_steps for its elements times steps over SIMULATED_DRIVER_KERNEL_FMA_PER_US
//    (both default 0: no modelled time, only what the CPU takes), at least.
//  - The legacy default stream's implicit synchronization: its work waits for the work already queued on the device's
//    blocking streams (per-thread default streams among them), and theirs for the work already queued on it.
//  - Stream capture: work queued on a capturing stream becomes nodes of its graph, in the order it was queued; waiting
//    on an event recorded in a capture joins that capture (a fork), and the capture ends only once every stream that
//    joined was joined back (else CUDA_ERROR_STREAM_CAPTURE_UNJOINED). A query or synchronize of a capturing stream,
//    a device synchronize, a cuMemFree or a module unload during a conflicting capture (by its mode) invalidates it;
//    a query of an event recorded in an open capture is CUDA_ERROR_CAPTURED_EVENT; waiting on work outside the capture
//    is CUDA_ERROR_STREAM_CAPTURE_ISOLATION. Graphs instantiate, launch (their nodes one after another), update in
//    place when the topology and node types match, and take new kernel arguments.
// What it does not model (yet): other kernels do nothing but take their delay; allocations, frees and copies of
// pageable memory in a capture (the capture fails), child graphs.
//
// Failure injection, SIMULATED_DRIVER_FAIL: rules separated by commas, each
//     <entry point>[@<thread>[/<n>]]:<k>[+]=<action>
//   <entry point>  a driver function's name (cuEventCreate), or `operation`: every call that queues work.
//   <thread>/<n>   whose calls count: the n-th thread (default 1) that called into the driver under that name
//                  (pthread_setname_np; the library names its threads). Default: `main`, the process's main thread.
//                  `any`: the calls of every thread, counted together (repeatable when one thread makes them, such
//                  as a module load on whichever thread of libuv's pool takes it).
//   <k>[+]         the k-th call (from 1) of that entry point on that thread; with `+`, that call and every later one.
//   <action>       a CUresult name or number: the call fails with it and does nothing (a sticky result, such as
//                  CUDA_ERROR_ILLEGAL_ADDRESS, also faults the current context's device);
//                  fault:<CUresult>: the call succeeds, and its operation faults the device when it runs (sticky);
//                  lost: the call succeeds, but its operation has no effect (a ticket that never lands);
//                  stall:<ms>: the call blocks its thread for <ms> milliseconds (1 to 60000) before it does
//                  anything, then goes on as usual (a slow driver call, for what waits on that thread); not for
//                  `operation`;
//                  late:<ms>: the call does its work, then blocks its thread for <ms> milliseconds before it returns
//                  (what other threads see of the work while the caller has not heard back); not for `operation`.
//                  `fault:` and `lost` only for calls that queue work, and only they for `operation`.
//   SIMULATED_DRIVER_NO_64_BIT_MEMORY_OPERATIONS=1: devices lack 64-bit stream memory operations.
//   SIMULATED_DRIVER_VERSION=<n>: the CUDA version the driver reports, 12000 to 13010 (default 13000). Below 12080 it
//   has no cuMemcpyBatchAsync; from 12080 to 12090 it hands out that call's CUDA 12.8 form (with failIdx); from 13010
//   its green contexts report a work-queue configuration (a limit of 8, shared).
//   SIMULATED_DRIVER_NO_LAUNCH_ATTRIBUTES=1: devices have compute capability 8.0 and neither thread-block clusters nor
//   cooperative launch (by default: 9.0 and both).
//   SIMULATED_DRIVER_NO_HOST_POINTER_FOR_REGISTERED_MEMORY=1: kernels may not address registered host memory by its
//   host pointer (CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM is 0; by default 1).
//   A malformed rule or value (flags take 1 or 0; SIMULATED_DRIVER_DEVICES 1 to 64) ends the process with code 70.
//   SIMULATED_DRIVER_TRACE=1: each injected failure, and each thread's first call (with the name rules use for it),
//   is reported on stderr.
//   SIMULATED_DRIVER_COUNTS=<file>: at exit, each thread's calls of each entry point, counted as the rules count
//   them, are written to <file> as JSON ({"main/1": {"cuInit": 1, ...}, "csp-poller/1": {...}}).
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "internal/cuda-driver.h"

using namespace csp;

namespace {

// ---- Entry points and failure injection ------------------------------------------------------------------------

// The entry points handed out by cuGetProcAddress; SIM_ENTRY_POINTS adds the two the loader opens with dlsym and
// `operation`, the pseudo entry point that counts every call that queues work.
#define SIM_PROC_ENTRY_POINTS(X)                                                                                      \
  X(cuInit) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGet)      \
  X(cuDeviceGetCount) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDeviceCanAccessPeer)       \
  X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxSynchronize)                            \
  X(cuCtxGetStreamPriorityRange) X(cuCtxEnablePeerAccess) X(cuStreamCreate) X(cuStreamCreateWithPriority)          \
  X(cuStreamDestroy) X(cuStreamQuery) X(cuStreamSynchronize) X(cuStreamWaitEvent) X(cuStreamGetId)                 \
  X(cuStreamGetPriority) X(cuStreamGetFlags) X(cuStreamWriteValue64) X(cuStreamWaitValue64) X(cuEventCreate)       \
  X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery)                                                               \
  X(cuEventSynchronize) X(cuEventElapsedTime) X(cuModuleLoadDataEx) X(cuModuleUnload) X(cuModuleGetFunction)       \
  X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuLaunchKernelEx)                                  \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuOccupancyMaxPotentialBlockSize)                                \
  X(cuMemGetInfo) X(cuMemAllocAsync) X(cuMemAllocFromPoolAsync) X(cuMemFreeAsync) X(cuMemAllocManaged)             \
  X(cuMemPrefetchAsync) X(cuMemAdvise) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemFree)                             \
  X(cuMemHostGetDevicePointer) X(cuMemcpyAsync) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)                          \
  X(cuMemcpyDtoDAsync) X(cuMemcpyPeerAsync) X(cuMemsetD8Async) X(cuMemsetD32Async) X(cuDeviceGetDefaultMemPool)    \
  X(cuMemPoolGetAttribute) X(cuMemPoolSetAttribute) X(cuMemPoolTrimTo) X(cuMemPoolSetAccess)                       \
  X(cuMemPoolGetAccess) X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuStreamIsCapturing)                       \
  X(cuStreamGetCaptureInfo) X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphExecUpdate) X(cuGraphDestroy)  \
  X(cuGraphExecDestroy) X(cuGraphGetNodes) X(cuGraphKernelNodeGetParams) X(cuGraphExecKernelNodeSetParams)          \
  X(cuMemAlloc) X(cuMemGetAddressRange) X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle) X(cuIpcCloseMemHandle)           \
  X(cuIpcGetEventHandle) X(cuIpcOpenEventHandle) X(cuMemcpyBatchAsync) X(cuDeviceGetDevResource)                   \
  X(cuDevSmResourceSplitByCount) X(cuDevResourceGenerateDesc) X(cuGreenCtxCreate) X(cuGreenCtxGetDevResource)       \
  X(cuGreenCtxStreamCreate) X(cuMemHostRegister) X(cuMemHostUnregister) X(cuMemcpy2DAsync)
#define SIM_ENTRY_POINTS(X) SIM_PROC_ENTRY_POINTS(X) X(cuDriverGetVersion) X(cuGetProcAddress_v2) X(operation)

enum Entry : int {
#define SIM_ENUM(name) e_##name,
  SIM_ENTRY_POINTS(SIM_ENUM)
#undef SIM_ENUM
      kEntryCount
};
const char* const kEntryNames[] = {
#define SIM_NAME(name) #name,
    SIM_ENTRY_POINTS(SIM_NAME)
#undef SIM_NAME
};

struct ResultName {
  CUresult result;
  const char* name;
  const char* text;
};
#define SIM_RESULT(name, text) {name, #name, text}
const ResultName kResults[] = {
    SIM_RESULT(CUDA_SUCCESS, "no error"),
    SIM_RESULT(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    SIM_RESULT(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    SIM_RESULT(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
    SIM_RESULT(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    SIM_RESULT(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
    SIM_RESULT(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    SIM_RESULT(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"),
    SIM_RESULT(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
    SIM_RESULT(CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error encountered"),
    SIM_RESULT(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "peer access is not supported between these two devices"),
    SIM_RESULT(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed"),
    SIM_RESULT(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "the provided PTX was compiled with an unsupported toolchain"),
    SIM_RESULT(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    SIM_RESULT(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state"),
    SIM_RESULT(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    SIM_RESULT(CUDA_ERROR_NOT_READY, "device not ready"),
    SIM_RESULT(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
    SIM_RESULT(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch"),
    SIM_RESULT(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated"),
    SIM_RESULT(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "too many blocks in cooperative launch"),
    SIM_RESULT(CUDA_ERROR_INVALID_CLUSTER_SIZE, "invalid cluster size"),
    SIM_RESULT(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "part or all of the requested memory range is already mapped"),
    SIM_RESULT(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region"),
    SIM_RESULT(CUDA_ERROR_INVALID_RESOURCE_TYPE, "invalid resource type"),
    SIM_RESULT(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, "invalid resource configuration"),
    SIM_RESULT(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled"),
    SIM_RESULT(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled"),
    SIM_RESULT(CUDA_ERROR_ASSERT, "device-side assert triggered"),
    SIM_RESULT(CUDA_ERROR_HARDWARE_STACK_ERROR, "an illegal instruction was encountered"),
    SIM_RESULT(CUDA_ERROR_ILLEGAL_INSTRUCTION, "an illegal instruction was encountered"),
    SIM_RESULT(CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address"),
    SIM_RESULT(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"),
    SIM_RESULT(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
    SIM_RESULT(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    SIM_RESULT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing"),
    SIM_RESULT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "the capture was invalidated by an earlier error"),
    SIM_RESULT(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "the capture was not begun on this stream"),
    SIM_RESULT(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "a stream that joined the capture was not joined back"),
    SIM_RESULT(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "a dependency would cross the capture's boundary"),
    SIM_RESULT(CUDA_ERROR_CAPTURED_EVENT, "the event was last recorded in a capturing stream"),
    SIM_RESULT(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "a thread-local capture was ended on another thread"),
    SIM_RESULT(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "the graph update was not applied"),
    SIM_RESULT(CUDA_ERROR_TIMEOUT, "timeout"),
    SIM_RESULT(CUDA_ERROR_UNKNOWN, "unknown error"),
};
#undef SIM_RESULT

void report(const std::string& text) { std::fprintf(stderr, "simulated driver: %s\n", text.c_str()); }

// Ends the process at once, from any thread: exit() would run static destructors under other threads' feet.
[[noreturn]] void bad_configuration(const std::string& text) {
  report(text);
  std::fflush(stderr);
  _exit(70);
}

// A whole decimal number from 1 to `most`, or 0 when `text` is anything else.
unsigned long long whole_number(const std::string& text, unsigned long long most) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos) return 0;
  const unsigned long long value = std::stoull(text);
  return value <= most ? value : 0;
}

// A variable that takes `1` (on) or `0` (off, as unset or empty).
bool flag(const char* name) {
  const char* text = std::getenv(name);
  if (!text || !*text || std::strcmp(text, "0") == 0) return false;
  if (std::strcmp(text, "1") == 0) return true;
  bad_configuration(std::string(name) + "='" + text + "' is neither 1 nor 0");
}

bool tracing() {
  static const bool on = flag("SIMULATED_DRIVER_TRACE");
  return on;
}

bool no_launch_attributes() {
  static const bool on = flag("SIMULATED_DRIVER_NO_LAUNCH_ATTRIBUTES");
  return on;
}

bool registered_memory_not_addressable() {
  static const bool on = flag("SIMULATED_DRIVER_NO_HOST_POINTER_FOR_REGISTERED_MEMORY");
  return on;
}

bool no_64_bit_memory_operations() {
  static const bool on = flag("SIMULATED_DRIVER_NO_64_BIT_MEMORY_OPERATIONS");
  return on;
}

enum class Action { kFail, kFault, kLost, kStall, kLate };

struct Rule {
  int entry;
  std::string thread;  // a thread name; "main" is the process's main thread
  int ordinal;         // among threads of that name, by first call
  unsigned long long call;
  bool and_later;
  Action action;
  CUresult result;
  unsigned long long stall_ms;  // stall: and late:
};

CUresult parse_result(const std::string& text) {
  for (const ResultName& r : kResults)
    if (text == r.name && r.result != CUDA_SUCCESS) return r.result;
  if (const unsigned long long value = whole_number(text, 100000)) return static_cast<CUresult>(value);
  bad_configuration("SIMULATED_DRIVER_FAIL: '" + text + "' is not the name or number of a failure (CUDA_SUCCESS is none)");
}

// The entry points whose calls queue work in a stream (and `operation`, which counts them): only those can fault when
// their work runs, or lose it.
bool queues_work(int entry) {
  switch (entry) {
    case e_cuStreamWriteValue64: case e_cuStreamWaitValue64: case e_cuEventRecord: case e_cuStreamWaitEvent:
    case e_cuLaunchKernel: case e_cuLaunchKernelEx: case e_cuMemFreeAsync: case e_cuMemPrefetchAsync: case e_cuMemcpyAsync:
    case e_cuMemcpyHtoDAsync: case e_cuMemcpyDtoHAsync: case e_cuMemcpyDtoDAsync: case e_cuMemcpyPeerAsync:
    case e_cuMemsetD8Async: case e_cuMemsetD32Async: case e_cuGraphLaunch: case e_cuMemcpyBatchAsync: case e_cuMemcpy2DAsync:
    case e_operation:
      return true;
    default:
      return false;
  }
}

std::vector<Rule> parse_rules() {
  std::vector<Rule> rules;
  const char* spec = std::getenv("SIMULATED_DRIVER_FAIL");
  if (!spec) return rules;
  std::string all = spec;
  size_t start = 0;
  while (start < all.size()) {
    size_t comma = all.find(',', start);
    if (comma == std::string::npos) comma = all.size();
    const std::string text = all.substr(start, comma - start);
    start = comma + 1;
    if (text.empty()) continue;
    const size_t colon = text.find(':'), equals = text.find('=');
    if (colon == std::string::npos || equals == std::string::npos || equals < colon)
      bad_configuration("SIMULATED_DRIVER_FAIL: '" + text + "' is not <entry point>[@<thread>[/<n>]]:<k>[+]=<action>");
    Rule rule{};
    std::string who = text.substr(0, colon);
    rule.thread = "main";
    rule.ordinal = 1;
    const size_t at = who.find('@');
    if (at != std::string::npos) {
      rule.thread = who.substr(at + 1);
      who = who.substr(0, at);
      const size_t slash = rule.thread.find('/');
      if (slash != std::string::npos) {
        rule.ordinal = static_cast<int>(whole_number(rule.thread.substr(slash + 1), 1000000));
        rule.thread = rule.thread.substr(0, slash);
      }
      if (rule.thread.empty() || rule.thread.size() > 15)
        bad_configuration("SIMULATED_DRIVER_FAIL: '" + text + "' names no thread (a thread name has 1 to 15 characters)");
    }
    rule.entry = -1;
    for (int i = 0; i < kEntryCount; i++)
      if (who == kEntryNames[i]) rule.entry = i;
    if (rule.entry < 0) bad_configuration("SIMULATED_DRIVER_FAIL: '" + who + "' is not an entry point it simulates");
    std::string count = text.substr(colon + 1, equals - colon - 1);
    if (!count.empty() && count.back() == '+') {
      rule.and_later = true;
      count.pop_back();
    }
    rule.call = whole_number(count, ~0ull >> 1);
    if (rule.call == 0 || rule.ordinal < 1)
      bad_configuration("SIMULATED_DRIVER_FAIL: '" + text + "' needs a call number and thread number from 1, in digits");
    const std::string action = text.substr(equals + 1);
    if (action == "lost") {
      rule.action = Action::kLost;
    } else if (action.rfind("stall:", 0) == 0 || action.rfind("late:", 0) == 0) {
      const bool stall = action[0] == 's';
      rule.action = stall ? Action::kStall : Action::kLate;
      rule.stall_ms = whole_number(action.substr(stall ? 6 : 5), 60000);
      if (rule.stall_ms == 0)
        bad_configuration("SIMULATED_DRIVER_FAIL: '" + text + "': " + (stall ? "a stall" : "a late return") +
                          " takes a whole number of milliseconds from 1 to 60000");
    } else if (action.rfind("fault:", 0) == 0) {
      rule.action = Action::kFault;
      rule.result = parse_result(action.substr(6));
    } else {
      rule.action = Action::kFail;
      rule.result = parse_result(action);
    }
    if ((rule.action == Action::kStall || rule.action == Action::kLate) && rule.entry == e_operation)
      bad_configuration("SIMULATED_DRIVER_FAIL: '" + text + "': `operation` cannot stall or return late (name the entry point that should)");
    if (rule.action == Action::kFail && rule.entry == e_operation)
      bad_configuration("SIMULATED_DRIVER_FAIL: '" + text +
                        "': `operation` takes fault:<CUresult> or lost (to fail a call, name its entry point)");
    if ((rule.action == Action::kFault || rule.action == Action::kLost) && !queues_work(rule.entry))
      bad_configuration("SIMULATED_DRIVER_FAIL: '" + text + "': " + kEntryNames[rule.entry] +
                        " queues no work, so it cannot fault or be lost; fail it with a CUresult instead");
    rules.push_back(rule);
  }
  return rules;
}

const std::vector<Rule>& rules() {
  static const std::vector<Rule> parsed = parse_rules();
  return parsed;
}


// Each thread counts its own calls, so that a run repeats: the rules name threads, not timing.
struct ThreadCalls {
  std::string name;
  int ordinal = 0;
  std::atomic<unsigned long long> counts[kEntryCount] = {};
};

std::mutex threads_mutex;
// Containers that stream threads may still touch while exit() runs static destructors live on the heap and are never
// destroyed: a process that exits with simulated work running must not crash in the simulator.
std::vector<ThreadCalls*>& all_threads = *new std::vector<ThreadCalls*>();  // by first call; never freed

// SIMULATED_DRIVER_COUNTS=<file>: at exit, the calls of each thread (as the rules name it) of each entry point, as
// JSON: {"main/1": {"cuInit": 1, ...}, "csp-poller/1": {...}}. The fault sweep reads it to pick the calls to fail.
void write_counts() {
  const char* file = std::getenv("SIMULATED_DRIVER_COUNTS");
  FILE* out = file && *file ? std::fopen(file, "w") : nullptr;
  if (!out) return;
  std::lock_guard<std::mutex> lock(threads_mutex);
  std::fputs("{", out);
  for (size_t t = 0; t < all_threads.size(); t++) {
    const ThreadCalls& calls = *all_threads[t];
    std::fprintf(out, "%s\n  \"%s/%d\": {", t ? "," : "", calls.name.c_str(), calls.ordinal);
    bool first = true;
    for (int e = 0; e < kEntryCount; e++) {
      const unsigned long long n = calls.counts[e].load(std::memory_order_relaxed);
      if (n == 0) continue;
      std::fprintf(out, "%s\"%s\": %llu", first ? "" : ", ", kEntryNames[e], n);
      first = false;
    }
    std::fputs("}", out);
  }
  std::fputs("\n}\n", out);
  std::fclose(out);
}

bool counting() {
  static const bool on = [] {
    const char* file = std::getenv("SIMULATED_DRIVER_COUNTS");
    if (!file || !*file) return false;
    FILE* probe = std::fopen(file, "w");  // a path that cannot be written is said now, not lost at exit
    if (!probe) bad_configuration(std::string("SIMULATED_DRIVER_COUNTS: cannot write '") + file + "'");
    std::fclose(probe);
    std::atexit(write_counts);
    return true;
  }();
  return on;
}

ThreadCalls& thread_calls() {
  static auto& seen = *new std::unordered_map<std::string, int>();  // never destroyed, as `blocks`
  thread_local ThreadCalls* calls = nullptr;
  if (!calls) {
    calls = new ThreadCalls;
    char name[32] = "";
    pthread_getname_np(pthread_self(), name, sizeof name);
    calls->name = static_cast<pid_t>(syscall(SYS_gettid)) == getpid() ? "main" : name;
    std::lock_guard<std::mutex> lock(threads_mutex);
    calls->ordinal = ++seen[calls->name];
    all_threads.push_back(calls);
    if (tracing()) report("thread " + calls->name + "/" + std::to_string(calls->ordinal) + " calls the driver");
  }
  return *calls;
}

// The injected outcome of this call, if any.
struct Injection {
  bool any = false;
  Action action = Action::kFail;
  CUresult result = CUDA_SUCCESS;
  unsigned long long stall_ms = 0;
};

std::atomic<unsigned long long> all_threads_counts[kEntryCount];

Injection inject(Entry entry) {
  Injection out;
  const bool counted = counting();  // first: it registers the writer at exit
  if (rules().empty() && !tracing() && !counted) return out;
  ThreadCalls& calls = thread_calls();
  const unsigned long long call = calls.counts[entry].fetch_add(1, std::memory_order_relaxed) + 1;
  const unsigned long long any_call = all_threads_counts[entry].fetch_add(1) + 1;
  for (const Rule& rule : rules()) {
    if (rule.entry != entry) continue;
    const bool any = rule.thread == "any";
    if (!any && (rule.thread != calls.name || rule.ordinal != calls.ordinal)) continue;
    const unsigned long long counted = any ? any_call : call;
    if (counted == rule.call || (rule.and_later && counted > rule.call)) {
      out = {true, rule.action, rule.result, rule.stall_ms};
      if (tracing())
        report(std::string("injected into call ") + std::to_string(counted) + " of " + kEntryNames[entry] + " on " +
               calls.name + "/" + std::to_string(calls.ordinal));
      return out;
    }
  }
  return out;
}

// An injected failure's result; a sticky one (an illegal address, a launch failure, ...) also faults the current
// context's device, as a driver that returned it would be.
CUresult injected_failure(CUresult result);

// Blocks the calling thread as it leaves the entry point, after its work, when a rule says the call returns late.
struct LateReturn {
  const Injection& injected;
  ~LateReturn() {
    if (injected.any && injected.action == Action::kLate) std::this_thread::sleep_for(std::chrono::milliseconds(injected.stall_ms));
  }
};

// Fails the calling entry point at once when a rule says so. Declares `injected` for the queueing calls.
#define SIM_ENTER(name)                                                                \
  const Injection injected = inject(e_##name);                                         \
  const LateReturn late_return{injected};                                              \
  if (injected.any && injected.action == Action::kFail) return injected_failure(injected.result); \
  if (injected.any && injected.action == Action::kStall) std::this_thread::sleep_for(std::chrono::milliseconds(injected.stall_ms));

// A whole number from `least` (0 or 1) to `most`; 0 is returned as it is, for the caller to say why it is refused.
unsigned long long env_number(const char* name, unsigned long long fallback, unsigned long long least,
                              unsigned long long most) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  if (std::strcmp(text, "0") == 0) return 0;
  if (const unsigned long long value = whole_number(text, most)) return value;
  bad_configuration(std::string(name) + "='" + text + "' is not a whole number from " + std::to_string(least) +
                    " to " + std::to_string(most));
}

int driver_version() {
  static const int version = static_cast<int>(env_number("SIMULATED_DRIVER_VERSION", 13000, 12000, 13010));
  if (version < 12000)
    bad_configuration("SIMULATED_DRIVER_VERSION='" + std::string(std::getenv("SIMULATED_DRIVER_VERSION")) +
                      "' is not a whole number from 12000 to 13010");
  return version;
}


// ---- Devices, contexts, progress -----------------------------------------------------------------------------

struct Stream;

// The timing model: a copy engine per direction, each running one copy at a time, and a compute engine that runs
// kernels of any streams side by side, at most SIMULATED_DRIVER_CONCURRENT_KERNELS at once (default 128).
enum class Engine { kNone, kHostToDevice, kDeviceToHost, kCompute };
struct Engines {
  std::mutex to_device, to_host;
  std::mutex compute_mutex;
  std::condition_variable compute_free;
  unsigned long long kernels_running = 0;
};

struct Device {
  int ordinal = 0;
  std::atomic<int> fault{CUDA_SUCCESS};
  Engines engines;
  std::mutex mutex;
  std::vector<Stream*> streams;  // every stream ever made on it (destroyed ones may still have work)
  Stream* legacy = nullptr;
  std::atomic<unsigned long long> release_threshold{0};
  std::vector<bool> peers;
  std::vector<CUmemAccess_flags> pool_access;  // by device: access to this device's memory pool
};

int device_count() {
  // At least one device, at most as many as the library's tables hold.
  static const int count = [] {
    const unsigned long long n = env_number("SIMULATED_DRIVER_DEVICES", 1, 1, 64);
    if (n == 0) bad_configuration("SIMULATED_DRIVER_DEVICES=0: simulate at least one device");
    return static_cast<int>(n);
  }();
  return count;
}

Device* devices() {
  static Device* all = [] {
    auto* d = new Device[device_count()];
    for (int i = 0; i < device_count(); i++) {
      d[i].ordinal = i;
      d[i].peers.assign(device_count(), false);
      d[i].pool_access.assign(device_count(), CU_MEM_ACCESS_FLAGS_PROT_NONE);
      d[i].pool_access[i] = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    return d;
  }();
  return all;
}

CUcontext context_of(int device) { return reinterpret_cast<CUcontext>(&devices()[device]); }
thread_local Device* current = nullptr;

// Contexts made with cuCtxCreate beside the primary ones (under handles_mutex): a device of their own, with no work
// of the library's, so work on its streams queued while one is current is refused as under any other context.
std::unordered_set<Device*>& foreign_contexts = *new std::unordered_set<Device*>();

// Every completed operation and every fault wakes the blocking waits, which then check what they wait for.
std::mutex progress_mutex;
std::condition_variable progress;
void notify_progress() {
  std::lock_guard<std::mutex> lock(progress_mutex);
  progress.notify_all();
}

CUresult fault_of(const Device* d) { return static_cast<CUresult>(d->fault.load(std::memory_order_acquire)); }

void set_fault(Device* d, CUresult result, const std::string& why) {
  int expected = CUDA_SUCCESS;
  if (d->fault.compare_exchange_strong(expected, result) && !why.empty()) report(why);
  notify_progress();
}

bool sticky(CUresult result) {
  switch (result) {
    case CUDA_ERROR_ILLEGAL_ADDRESS: case CUDA_ERROR_LAUNCH_FAILED: case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION: case CUDA_ERROR_MISALIGNED_ADDRESS: case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC: case CUDA_ERROR_ASSERT: case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
      return true;
    default:
      return false;
  }
}

CUresult injected_failure(CUresult result) {
  if (sticky(result) && current) set_fault(current, result, "");
  return result;
}

// The current context's device, and no fault on it.
#define SIM_NEED_CONTEXT()                                \
  if (!current) return CUDA_ERROR_INVALID_CONTEXT;        \
  if (fault_of(current) != CUDA_SUCCESS) return fault_of(current);

// ---- Memory ---------------------------------------------------------------------------------------------------

enum class Kind { kDevice, kManaged, kPinned };
const char* const kKindNames[] = {"device memory", "managed memory", "pinned memory"};

struct Block {
  uintptr_t base;
  size_t size;  // what was asked for: the extent the checks allow
  Kind kind;
  int device;
  bool live;
  const char* freed_by;
  size_t capacity = 0;  // what was allocated (whole pages)
  bool pooled = false;  // a stream-ordered allocation: its free returns it to the device's pool
  bool carved = false;  // pinned memory, carved from the pinned region: never given to free()
  bool registered = false;  // host memory of the process, page-locked by cuMemHostRegister: never freed here
  // Interprocess memory (Note [simulated interprocess handles]): cuMemAlloc's memfd, open until the free; memory
  // mapped from a memfd (exported or imported) goes back with munmap; imported memory is another process's.
  int shared_fd = -1;
  unsigned long long shared_serial = 0;
  bool mapped = false;
  bool imported = false;
};

std::mutex memory_mutex;
std::map<uintptr_t, Block>& blocks = *new std::map<uintptr_t, Block>();  // by base address, freed ones included while quarantined
std::deque<uintptr_t>& quarantine = *new std::deque<uintptr_t>();
size_t quarantined_bytes = 0;
constexpr size_t kQuarantineBytes = 256u << 20;
constexpr size_t kDeviceBytes = 16ull << 30;  // each device's memory

// Each device's memory pool (under memory_mutex): the blocks its stream-ordered frees returned, oldest first, which
// later allocations reuse (with whatever bytes they hold); what it holds from the system (reserved) and hands out
// (used), in bytes, and the high-water marks.
struct MemoryPool {
  std::deque<uintptr_t> free_blocks;
  size_t reserved = 0, used = 0, reserved_high = 0, used_high = 0;
};
std::vector<MemoryPool>& memory_pools() {
  static auto* pools = new std::vector<MemoryPool>(device_count());  // never destroyed, as `blocks`
  return *pools;
}

size_t whole_pages(size_t size) { return std::max<size_t>((size + 4095) / 4096 * 4096, 4096); }

// Pinned memory is carved from one reserved region, downwards (as mmap places mappings), so that allocations made one
// after another are neighbours, the later one below, as the driver's often are: a copy that runs from one pinned allocation into the next is refused at the
// call (CUDA_ERROR_INVALID_VALUE), as the driver refuses it. Null once the region is used up.
void* carve_pinned(size_t capacity) {
  static constexpr size_t kRegionBytes = size_t{64} << 30;  // address space only: pages are touched when used
  static char* region = [] {
    void* p = mmap(nullptr, kRegionBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  }();
  static std::atomic<size_t> used{0};
  if (!region) return nullptr;
  const size_t offset = used.fetch_add(capacity) + capacity;
  return offset <= kRegionBytes ? region + kRegionBytes - offset : nullptr;
}

void* allocate(size_t size, Kind kind, int device) {
  const size_t capacity = whole_pages(size);
  void* p = kind == Kind::kPinned ? carve_pinned(capacity) : std::aligned_alloc(4096, capacity);
  if (!p) return nullptr;
  std::memset(p, kind == Kind::kDevice ? 0xa5 : 0, capacity);
  std::lock_guard<std::mutex> lock(memory_mutex);
  blocks[reinterpret_cast<uintptr_t>(p)] = {reinterpret_cast<uintptr_t>(p), size, kind, device, true, nullptr, capacity};
  blocks[reinterpret_cast<uintptr_t>(p)].carved = kind == Kind::kPinned;
  return p;
}

// Holds memory_mutex. Keeps a block that is no longer live for a while, so that a late access finds it freed, then
// gives its memory back.
void quarantine_block(uintptr_t base) {
  quarantine.push_back(base);
  quarantined_bytes += blocks.at(base).capacity;
  while (quarantined_bytes > kQuarantineBytes) {
    auto old = blocks.find(quarantine.front());
    quarantine.pop_front();
    quarantined_bytes -= old->second.capacity;
    if (old->second.carved)
      madvise(reinterpret_cast<void*>(old->first), old->second.capacity, MADV_DONTNEED);  // its pages go back
    else if (old->second.mapped)
      munmap(reinterpret_cast<void*>(old->first), old->second.capacity);
    else
      std::free(reinterpret_cast<void*>(old->first));
    blocks.erase(old);
  }
}

// A stream-ordered allocation: the oldest block of the device's pool that fits (at most twice the size), else a new
// one.
void* allocate_from_pool(size_t size, int device) {
  {
    std::lock_guard<std::mutex> lock(memory_mutex);
    MemoryPool& pool = memory_pools()[device];
    const size_t wanted = whole_pages(size);
    for (auto it = pool.free_blocks.begin(); it != pool.free_blocks.end(); ++it) {
      Block& b = blocks.at(*it);
      if (b.capacity < wanted || b.capacity > 2 * wanted) continue;
      b.live = true;
      b.size = size;
      b.freed_by = nullptr;
      pool.used += b.capacity;
      pool.used_high = std::max(pool.used_high, pool.used);
      void* reused = reinterpret_cast<void*>(b.base);
      pool.free_blocks.erase(it);
      return reused;
    }
  }
  void* p = allocate(size, Kind::kDevice, device);
  if (!p) return nullptr;
  std::lock_guard<std::mutex> lock(memory_mutex);
  Block& b = blocks.at(reinterpret_cast<uintptr_t>(p));
  b.pooled = true;
  MemoryPool& pool = memory_pools()[device];
  pool.reserved += b.capacity;
  pool.used += b.capacity;
  pool.reserved_high = std::max(pool.reserved_high, pool.reserved);
  pool.used_high = std::max(pool.used_high, pool.used);
  return p;
}

// Gives the pool's free blocks back to the system, oldest first, until it reserves at most `keep` bytes.
void trim_pool(int device, size_t keep) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  MemoryPool& pool = memory_pools()[device];
  while (pool.reserved > keep && !pool.free_blocks.empty()) {
    const uintptr_t base = pool.free_blocks.front();
    pool.free_blocks.pop_front();
    pool.reserved -= blocks.at(base).capacity;
    blocks.at(base).pooled = false;
    quarantine_block(base);
  }
}

// The block that holds [address, address + bytes), live or freed, or null. Holds memory_mutex.
Block* find_block(uintptr_t address, size_t bytes) {
  auto it = blocks.upper_bound(address);
  if (it == blocks.begin()) return nullptr;
  --it;
  Block& b = it->second;
  const size_t extent = b.size ? b.size : 1;
  return address >= b.base && address - b.base < extent && bytes <= extent - (address - b.base) ? &b : nullptr;
}

CUresult release(uintptr_t base, std::initializer_list<Kind> kinds, const char* by) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  auto it = blocks.find(base);
  if (it == blocks.end() || !it->second.live) return CUDA_ERROR_INVALID_VALUE;
  bool kind_ok = false;
  for (Kind k : kinds) kind_ok = kind_ok || it->second.kind == k;
  if (!kind_ok) return CUDA_ERROR_INVALID_VALUE;
  Block& b = it->second;
  b.live = false;
  b.freed_by = by;
  if (b.pooled) {  // keeps its bytes, as a pool's block does for the next allocation that reuses it
    MemoryPool& pool = memory_pools()[b.device];
    pool.used -= b.capacity;
    pool.free_blocks.push_back(base);
  } else {
    // Imported memory is the exporter's: its bytes stay. An export's memfd closes now, so no later import finds it.
    if (!b.imported) std::memset(reinterpret_cast<void*>(base), 0xdb, b.size);
    if (b.shared_fd >= 0) close(b.shared_fd);
    b.shared_fd = -1;
    quarantine_block(base);
  }
  return CUDA_SUCCESS;
}

/* Note [simulated interprocess handles]: device memory and events that another process can open, as the driver's
 * legacy IPC calls give them. cuMemAlloc's memory, and an interprocess event's state, live in a memfd mapped shared;
 * a handle names the exporting process, the memfd's descriptor there and a serial that the memfd's name carries. The
 * importer opens /proc/<pid>/fd/<fd>, checks the name (a descriptor number reused for another file is refused), and
 * maps it. So an import fails (CUDA_ERROR_INVALID_VALUE) once the exporter freed the memory, destroyed the event or
 * exited, as the driver refuses a handle it cannot open. An event's state is two counters: records made and records
 * done, in any process; a wait or query compares them. Memory from a stream-ordered pool cannot be exported, as with
 * the driver. */
struct IpcHandleData {
  char magic[8];  // "csp-mem" or "csp-evt"
  int32_t pid;
  int32_t fd;
  unsigned long long serial;
  unsigned long long bytes;
};
static_assert(sizeof(IpcHandleData) <= CU_IPC_HANDLE_SIZE, "an IPC handle holds 64 bytes");
std::atomic<unsigned long long> ipc_serial{1};

std::string ipc_name(int pid, unsigned long long serial) { return "csp-sim-ipc-" + std::to_string(pid) + "-" + std::to_string(serial); }

// A new memfd of `bytes` (whole pages), mapped shared; null when it cannot be made.
void* map_new_shared(size_t bytes, int* fd, unsigned long long* serial) {
  *serial = ipc_serial.fetch_add(1);
  *fd = static_cast<int>(syscall(SYS_memfd_create, ipc_name(getpid(), *serial).c_str(), 0u));
  if (*fd < 0) return nullptr;
  void* p = ftruncate(*fd, static_cast<off_t>(bytes)) == 0 ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0) : MAP_FAILED;
  if (p == MAP_FAILED) {
    close(*fd);
    return nullptr;
  }
  return p;
}

// Writes a handle of this process naming memfd `fd` (its `serial`) into the 64 bytes `out`.
void write_handle(char* out, const char* magic, int fd, unsigned long long serial, unsigned long long bytes) {
  IpcHandleData h{};
  std::memcpy(h.magic, magic, sizeof h.magic);
  h.pid = getpid();
  h.fd = fd;
  h.serial = serial;
  h.bytes = bytes;
  std::memset(out, 0, CU_IPC_HANDLE_SIZE);
  std::memcpy(out, &h, sizeof h);
}

// Maps the memfd a handle names, in the exporting process; null when it is gone (freed, destroyed, exited) or the
// handle is not one of this simulator's.
void* map_exported(const IpcHandleData& h, const char* magic, size_t bytes) {
  if (std::memcmp(h.magic, magic, sizeof h.magic) != 0 || h.pid == getpid()) return nullptr;
  const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  char target[256];
  const ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
  if (n <= 0) return nullptr;
  target[n] = 0;
  if (std::string(target).rfind("/memfd:" + ipc_name(h.pid, h.serial) + " ", 0) != 0) return nullptr;
  const int fd = open(path.c_str(), O_RDWR);
  if (fd < 0) return nullptr;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? nullptr : p;
}

// Whether an operation may touch [address, address + bytes) as device-visible memory (device, managed or mapped
// pinned), or as host memory (`host`: also pageable memory the driver does not know). At call time an unknown
// device address is CUDA_ERROR_INVALID_VALUE; when the operation runs, freed memory is an illegal address.
enum class Access { kDevice, kHost };
struct Range {
  uintptr_t address;
  size_t bytes;
  Access access;
};

CUresult check_at_call(const Range& r) {
  if (r.bytes == 0) return CUDA_SUCCESS;
  std::lock_guard<std::mutex> lock(memory_mutex);
  Block* b = find_block(r.address, r.bytes);
  if (r.access == Access::kHost) {
    // Host memory that starts in a pinned allocation must end in it; otherwise it is pageable, unknown to the driver.
    Block* first = find_block(r.address, 1);
    return !b && first && first->live && first->kind == Kind::kPinned ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  }
  return b ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// Empty when the range may be touched now; else why not.
std::string check_when_run(const Range& r) {
  if (r.bytes == 0) return {};
  std::lock_guard<std::mutex> lock(memory_mutex);
  Block* b = find_block(r.address, r.bytes);
  if (!b) {
    if (r.access == Access::kHost) return {};
    char text[128];
    std::snprintf(text, sizeof text, "%zu bytes at 0x%llx are not allocated", r.bytes,
                  static_cast<unsigned long long>(r.address));
    return text;
  }
  if (b->live) return {};
  char text[192];
  std::snprintf(text, sizeof text, "%zu bytes at 0x%llx lie in %s freed by %s", r.bytes,
                static_cast<unsigned long long>(r.address), kKindNames[static_cast<int>(b->kind)], b->freed_by);
  return text;
}

bool is_pinned_or_device(uintptr_t address) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  Block* b = find_block(address, 1);
  return b && b->live;
}

// Device or managed memory: the side of a copy that decides its engine.
bool on_device(uintptr_t address) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  Block* b = find_block(address, 1);
  return b && b->live && b->kind != Kind::kPinned;
}

// ---- Streams and their operations -----------------------------------------------------------------------------

// Blocks until `done()` or a fault on `d`; returns the fault or CUDA_SUCCESS.
template <class Done>
CUresult block_until(Device* d, Done done) {
  std::unique_lock<std::mutex> lock(progress_mutex);
  for (;;) {
    if (fault_of(d) != CUDA_SUCCESS) return fault_of(d);
    if (done()) return CUDA_SUCCESS;
    progress.wait_for(lock, std::chrono::milliseconds(1));
  }
}

struct Function;
// A kernel launch's shape, kept for the kernel nodes of captured graphs.
struct Launch {
  Function* function;
  unsigned grid[3], block[3], shared;
};

struct Operation {
  const char* what;
  std::vector<Range> ranges;  // checked when it runs
  std::function<void()> run;  // null: nothing to do
  Action injected = Action::kFail;
  bool has_injection = false;
  CUresult injected_result = CUDA_SUCCESS;
  Engine engine = Engine::kNone;
  double modelled_us = 0;  // the engine stays busy at least this long (microseconds), running `run` included
  CUgraphNodeType node_type = CU_GRAPH_NODE_TYPE_EMPTY;  // when captured
  std::shared_ptr<Launch> launch;  // kernels
  // Work of other streams that must run first: the legacy default stream's implicit synchronization.
  std::vector<std::pair<Stream*, unsigned long long>> after;
};

// Modelled rates; 0 (the default) models no duration, so work takes only the time it takes on the CPU.
double copy_bytes_per_us() {
  static const double rate = static_cast<double>(env_number("SIMULATED_DRIVER_COPY_BYTES_PER_US", 0, 0, 1ull << 40));
  return rate;
}
double kernel_fma_per_us() {
  static const double rate = static_cast<double>(env_number("SIMULATED_DRIVER_KERNEL_FMA_PER_US", 0, 0, 1ull << 40));
  return rate;
}

std::chrono::microseconds operation_delay() {
  static const auto delay = std::chrono::microseconds(env_number("SIMULATED_DRIVER_OPERATION_DELAY_US", 0, 0, 10000000));
  return delay;
}

unsigned long long concurrent_kernels() {
  static const unsigned long long limit = [] {
    const unsigned long long n = env_number("SIMULATED_DRIVER_CONCURRENT_KERNELS", 128, 1, 1024);
    if (n == 0) bad_configuration("SIMULATED_DRIVER_CONCURRENT_KERNELS=0: at least one kernel must be able to run");
    return n;
  }();
  return limit;
}

// Runs `run` on its engine of `device`, keeping the engine busy for at least `op.modelled_us`.
void run_on_engine(Device* device, const Operation& op, const std::function<void()>& run) {
  auto work = [&] {  // once the engine is ours
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(op.modelled_us);
    run();
    if (op.modelled_us > 0) std::this_thread::sleep_until(until);
  };
  Engines& e = device->engines;
  switch (op.engine) {
    case Engine::kNone: return work();
    case Engine::kHostToDevice: {
      std::lock_guard<std::mutex> lock(e.to_device);
      return work();
    }
    case Engine::kDeviceToHost: {
      std::lock_guard<std::mutex> lock(e.to_host);
      return work();
    }
    case Engine::kCompute: {
      {
        std::unique_lock<std::mutex> lock(e.compute_mutex);
        e.compute_free.wait(lock, [&] { return e.kernels_running < concurrent_kernels(); });
        e.kernels_running++;
      }
      work();
      {
        std::lock_guard<std::mutex> lock(e.compute_mutex);
        e.kernels_running--;
      }
      e.compute_free.notify_one();
      return;
    }
  }
}

std::atomic<unsigned long long> next_stream_id{1};

struct Stream {
  Device* device = nullptr;
  unsigned flags = 0;
  int priority = 0;
  unsigned multiprocessors = 0;  // a partition's stream: its multiprocessors (cooperative launches); 0: the device's
  unsigned long long id = 0;
  bool destroyed = false;  // under mutex
  bool started = false;    // its thread
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<Operation> queue;
  unsigned long long issued = 0;  // under mutex
  std::atomic<unsigned long long> completed{0};
  // Under capture_mutex: the capture it belongs to (begun on it, or joined by waiting on an event of it), the last
  // node it added (what its next captured work depends on), and whether that node still has to be joined back.
  struct Capture* capture = nullptr;
  struct Node* last_node = nullptr;
  bool unjoined = false;
  CUgraphNode dependency = nullptr;  // cuStreamGetCaptureInfo's one-element array
  void body();
};

std::mutex handles_mutex;
std::unordered_set<const void*>& live_handles = *new std::unordered_set<const void*>();

// Ends a handle's life; false, with `complaint` on stderr, when it was not alive (destroyed, or never made).
bool forget(const void* handle, const char* complaint) {
  std::lock_guard<std::mutex> lock(handles_mutex);
  if (live_handles.erase(handle) != 0) return true;
  report(complaint);
  return false;
}

bool live(const void* handle) {
  std::lock_guard<std::mutex> lock(handles_mutex);
  return live_handles.count(handle) != 0;
}

void Stream::body() {
  pthread_setname_np(pthread_self(), "sim-stream");
  const auto delay = operation_delay();
  for (;;) {
    Operation op;
    {
      std::unique_lock<std::mutex> lock(mutex);
      wake.wait(lock, [&] { return !queue.empty() || destroyed; });
      if (queue.empty()) return;  // destroyed and drained
      op = std::move(queue.front());
      queue.pop_front();
    }
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    for (const auto& [other, position] : op.after)
      block_until(device, [&] {
        return other->completed.load(std::memory_order_acquire) >= position || fault_of(other->device) != CUDA_SUCCESS;
      });
    if (fault_of(device) == CUDA_SUCCESS) {
      std::string bad;
      for (const Range& r : op.ranges)
        if (bad.empty()) bad = check_when_run(r);
      if (!bad.empty()) {
        set_fault(device, CUDA_ERROR_ILLEGAL_ADDRESS, std::string(op.what) + " on device " +
                                                          std::to_string(device->ordinal) + ": " + bad);
      } else if (op.has_injection && op.injected == Action::kFault) {
        set_fault(device, op.injected_result, "");
      } else if (!(op.has_injection && op.injected == Action::kLost) && op.run) {
        run_on_engine(device, op, op.run);
      }
    }
    // A faulted device's streams never finish their work: markers stay pending, as on a GPU.
    if (fault_of(device) == CUDA_SUCCESS) completed.fetch_add(1, std::memory_order_acq_rel);
    notify_progress();
  }
}

Stream* new_stream(Device* d, unsigned flags, int priority) {
  auto* s = new Stream;  // never deleted: a late call with its handle is refused, not a use after free
  s->device = d;
  s->flags = flags;
  s->priority = priority;
  s->id = next_stream_id.fetch_add(1);
  std::lock_guard<std::mutex> lock(d->mutex);
  d->streams.push_back(s);
  return s;
}

thread_local std::vector<Stream*> per_thread_streams;

// The stream a handle names under the current context, or null (and `*result` says why).
Stream* resolve(CUstream handle, const char* call, CUresult* result) {
  *result = CUDA_SUCCESS;
  if (!current) {
    *result = CUDA_ERROR_INVALID_CONTEXT;
    return nullptr;
  }
  if (handle == nullptr || handle == CU_STREAM_LEGACY) {
    std::lock_guard<std::mutex> lock(current->mutex);
    if (!current->legacy) {
      current->legacy = new Stream;
      current->legacy->device = current;
      current->legacy->id = next_stream_id.fetch_add(1);
      current->streams.push_back(current->legacy);
    }
    return current->legacy;
  }
  if (handle == CU_STREAM_PER_THREAD) {
    if (per_thread_streams.empty()) per_thread_streams.assign(device_count(), nullptr);
    Stream*& s = per_thread_streams[current->ordinal];
    if (!s) s = new_stream(current, 0, 0);
    return s;
  }
  if (!live(handle)) {
    report(std::string(call) + " got a stream handle that is destroyed or was never created");
    *result = CUDA_ERROR_INVALID_HANDLE;
    return nullptr;
  }
  auto* s = reinterpret_cast<Stream*>(handle);
  if (s->device != current) {
    *result = CUDA_ERROR_INVALID_CONTEXT;
    return nullptr;
  }
  return s;
}

// A stream for calls that do not need its context current (queries, synchronization, properties).
Stream* resolve_any_context(CUstream handle, const char* call) {
  if (handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) {
    CUresult ignored;
    return resolve(handle, call, &ignored);
  }
  if (!live(handle)) {
    report(std::string(call) + " got a stream handle that is destroyed or was never created");
    return nullptr;
  }
  return reinterpret_cast<Stream*>(handle);
}

// ---- Stream capture and graphs ---------------------------------------------------------------------------------
// A capture records the work queued on its streams as the nodes of a graph, in the order it was queued: a graph runs
// its nodes one after another (a valid order of any graph captured from streams). Graphs, nodes, captures and
// executable graphs are never freed, so a late call with a destroyed handle is refused, not a use after free.

struct Graph;
struct Node {
  Graph* graph;
  Operation op;
};
struct Graph {
  Device* device;
  std::vector<Node*> nodes;
};
struct Capture {
  Stream* origin;
  Graph* graph;
  CUstreamCaptureMode mode;
  std::thread::id thread;
  unsigned long long id;
  bool invalidated = false;
  bool ended = false;
  std::vector<Stream*> members;  // the origin, then the streams that joined
};

std::mutex capture_mutex;
std::atomic<unsigned long long> next_capture_id{1};

// Ends `c` on every stream in it. Holds capture_mutex.
void end_capture(Capture* c) {
  for (Stream* member : c->members) {
    member->capture = nullptr;
    member->last_node = nullptr;
    member->unjoined = false;
  }
  c->ended = true;
}

// Calls that would synchronize with work being captured, or take away what it refers to, invalidate the captures they
// conflict with: those of every thread in global mode, this thread's in thread-local mode; `all_modes` adds relaxed
// ones (a device-wide synchronize). True when there was one: the call then fails with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.
// A query or synchronize of a capturing stream invalidates its capture; true when it did.
bool invalidate_capture(Stream* s) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (!s->capture) return false;
  s->capture->invalidated = true;
  return true;
}

bool conflicts_with_capture(Device* d, bool all_modes) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  std::lock_guard<std::mutex> streams_lock(d->mutex);
  bool found = false;
  for (Stream* s : d->streams) {
    Capture* c = s->capture;
    if (!c || c->origin != s) continue;
    const bool conflicts = all_modes || c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
                           (c->mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && c->thread == std::this_thread::get_id());
    if (conflicts) c->invalidated = found = true;
  }
  return found;
}

unsigned long long enqueue(Stream* s, Operation op, const Injection& injected) {
  const Injection counted = inject(e_operation);
  // A stall has already run, in SIM_ENTER, and a late return runs there: they leave the `operation` rules their say
  // on this call.
  const Injection& chosen =
      injected.any && injected.action != Action::kStall && injected.action != Action::kLate ? injected : counted;
  if (chosen.any) {
    op.has_injection = true;
    op.injected = chosen.action;
    op.injected_result = chosen.result;
  }
  {
    std::lock_guard<std::mutex> lock(capture_mutex);
    if (Capture* c = s->capture) {
      op.after.clear();
      auto* node = new Node{c->graph, std::move(op)};
      c->graph->nodes.push_back(node);
      s->last_node = node;
      s->unjoined = s != c->origin;
      return 0;
    }
  }
  // The legacy default stream waits for the work already queued on the device's blocking streams (those made without
  // CU_STREAM_NON_BLOCKING, per-thread default streams among them), and they wait for the work already queued on it.
  Device* d = s->device;
  {
    std::lock_guard<std::mutex> devices_lock(d->mutex);
    const bool blocking = (s->flags & CU_STREAM_NON_BLOCKING) == 0;
    for (Stream* other : d->streams) {
      if (other == s || !blocking || (other->flags & CU_STREAM_NON_BLOCKING) != 0) continue;
      if (s != d->legacy && other != d->legacy) continue;
      std::lock_guard<std::mutex> other_lock(other->mutex);
      if (other->completed.load(std::memory_order_acquire) < other->issued) op.after.emplace_back(other, other->issued);
    }
  }
  std::unique_lock<std::mutex> lock(s->mutex);
  s->queue.push_back(std::move(op));
  const unsigned long long position = ++s->issued;
  if (!s->started) {
    s->started = true;
    std::thread([s] { s->body(); }).detach();
  }
  lock.unlock();
  s->wake.notify_one();
  return position;
}

bool drained(Stream* s) {
  std::lock_guard<std::mutex> lock(s->mutex);
  return s->completed.load(std::memory_order_acquire) >= s->issued;
}

// A call that queues work but makes no node when captured (an event's record, a wait on one) has no operation for an
// injected fault to fault when it runs: the device faults at the call instead. Returns CUDA_SUCCESS.
CUresult fault_now(Device* d, const Injection& injected) {
  if (injected.any && injected.action == Action::kFault) set_fault(d, injected.result, "");
  return CUDA_SUCCESS;
}

// A synchronizing call gives the device's pool memory above its release threshold back to the system, as the driver
// does; returns the call's result.
CUresult released_to_threshold(Device* d, CUresult result) {
  if (result == CUDA_SUCCESS) trim_pool(d->ordinal, d->release_threshold);
  return result;
}

// ---- Events ---------------------------------------------------------------------------------------------------

struct Event {
  Device* device = nullptr;
  unsigned flags = 0;
  std::mutex mutex;
  Stream* stream = nullptr;  // the last record's stream and position; null: never recorded
  unsigned long long position = 0;
  unsigned long long generation = 0;
  double done_ms = 0;  // when the last record ran
  // Under capture_mutex: the capture the last record was made in (null: outside any), its stream and that stream's
  // last node then.
  Capture* captured = nullptr;
  Stream* captured_from = nullptr;
  Node* captured_node = nullptr;
  // An interprocess event's records, made and done in any process (Note [simulated interprocess handles]).
  struct Shared {
    std::atomic<unsigned long long> recorded{0}, done{0};
  };
  Shared* shared = nullptr;
  int shared_fd = -1;  // the exporter's memfd, open until cuEventDestroy
  unsigned long long shared_serial = 0;
};

// True when the event's last record was made in a capture that is still open.
bool captured_event(Event* e) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  return e->captured && !e->captured->ended;
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Event* resolve_event(CUevent handle, const char* call) {
  if (!live(handle)) {
    report(std::string(call) + " got an event handle that is destroyed or was never created");
    return nullptr;
  }
  return reinterpret_cast<Event*>(handle);
}

bool event_done(Event* e) {
  if (e->shared) return e->shared->done.load(std::memory_order_acquire) >= e->shared->recorded.load(std::memory_order_acquire);
  std::lock_guard<std::mutex> lock(e->mutex);
  return !e->stream || e->stream->completed.load(std::memory_order_acquire) >= e->position;
}

// ---- Modules --------------------------------------------------------------------------------------------------

struct Function;
struct Module {
  Device* device;
  std::vector<std::string> entries;  // kernels a PTX image declares; empty: any name is taken
  // One function per name, as the driver hands out: an attribute set through one lookup holds for every other.
  std::mutex functions_mutex;
  std::map<std::string, Function*> functions;
};
struct Function {
  Module* module;
  std::string name;
  int max_dynamic_shared;  // kSharedPerBlock until cuFuncSetAttribute, as for a kernel without static shared memory
};

// ---- The project's kernels on the CPU --------------------------------------------------------------------------

// %globaltimer: nanoseconds of the monotonic clock, shared by every simulated device.
unsigned long long global_timer_ns() {
  return static_cast<unsigned long long>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

template <class T>
T argument(void** params, int index) {
  T value;
  std::memcpy(&value, params[index], sizeof value);
  return value;
}

// The launch of a kernel the simulator knows by name (the test kernels of test/kernels and the benchmark's of
// kernels/), as an operation whose arguments are read now, as the driver reads them at launch; any other kernel only
// takes its delay. `threads` is the grid's size in threads along x times the block's.
Operation kernel_work(const std::string& name, unsigned long long threads, void** params) {
  if (!params) return {"a kernel", {}, nullptr};
  if (name == "spin" || name == "hold") {
    const auto ns = argument<unsigned long long>(params, 0);
    const auto stamps = name == "spin" ? argument<unsigned long long>(params, 1) : 0;
    std::vector<Range> ranges;
    if (stamps) ranges.push_back({stamps, 16, Access::kDevice});
    return {"kernel spin", ranges, [ns, stamps] {
              const unsigned long long start = global_timer_ns();
              std::this_thread::sleep_for(std::chrono::nanoseconds(ns));
              if (!stamps) return;
              auto* out = reinterpret_cast<unsigned long long*>(stamps);
              out[0] = start;
              out[1] = global_timer_ns();
            }};
  }
  if (name == "cuda_stream_pool_copy_pieces") {
    // The library's copy kernel: (count, pieces[128] of { destination, source, bytes }) by value, read at launch.
    struct Piece {
      unsigned long long destination, source, bytes;
    };
    const unsigned count = std::min(argument<unsigned>(params, 0), 128u);
    std::vector<Piece> pieces(count);
    if (count > 0) std::memcpy(pieces.data(), params[1], count * sizeof(Piece));
    std::vector<Range> ranges;
    for (const Piece& p : pieces) {
      ranges.push_back({p.destination, p.bytes, Access::kDevice});
      ranges.push_back({p.source, p.bytes, Access::kDevice});
    }
    return {"kernel cuda_stream_pool_copy_pieces", ranges, [pieces] {
              for (const Piece& p : pieces)
                std::memmove(reinterpret_cast<void*>(p.destination), reinterpret_cast<const void*>(p.source), p.bytes);
            }};
  }
  if (name == "write_invalid") {
    const auto address = argument<unsigned long long>(params, 0);
    return {"kernel write_invalid", {{address, 4, Access::kDevice}}, [address] {
              *reinterpret_cast<volatile int*>(address) = 42;
            }};
  }
  if (name.rfind("store_u32_arguments_", 0) == 0) {
    // store_u32_arguments_<n>(out, n u32 values): writes the values to out[0..n) (a test's kernel of many arguments).
    const unsigned count = static_cast<unsigned>(std::strtoul(name.c_str() + 20, nullptr, 10));
    const auto out = argument<unsigned long long>(params, 0);
    std::vector<unsigned> values(count);
    for (unsigned i = 0; i < count; i++) values[i] = argument<unsigned>(params, static_cast<int>(i) + 1);
    return {"kernel store_u32_arguments", {{out, count * 4ull, Access::kDevice}}, [out, values] {
              if (!values.empty()) std::memcpy(reinterpret_cast<void*>(out), values.data(), values.size() * 4);
            }};
  }
  if (name == "fill_u32") {
    const auto out = argument<unsigned long long>(params, 0);
    const auto value = argument<unsigned>(params, 1);
    const unsigned long long n = std::min<unsigned long long>(argument<unsigned>(params, 2), threads);
    return {"kernel fill_u32", {{out, n * 4, Access::kDevice}}, [out, value, n] {
              auto* words = reinterpret_cast<unsigned*>(out);
              for (unsigned long long i = 0; i < n; i++) words[i] = value;
            }};
  }
  if (name == "fma_steps") {
    const auto data = argument<unsigned long long>(params, 0);
    const unsigned long long n = std::min<unsigned long long>(argument<unsigned>(params, 1), threads);
    const auto steps = argument<unsigned>(params, 2);
    const auto a = argument<float>(params, 3), b = argument<float>(params, 4);
    Operation op{"kernel fma_steps", {{data, n * 4, Access::kDevice}}, [data, n, steps, a, b] {
              auto* values = reinterpret_cast<float*>(data);
              for (unsigned long long i = 0; i < n; i++) {
                float v = values[i];
                for (unsigned s = 0; s < steps; s++) v = std::fmaf(v, a, b);  // one rounding, as fma.rn.f32
                values[i] = v;
              }
            }};
    if (kernel_fma_per_us() > 0) op.modelled_us = static_cast<double>(n) * steps / kernel_fma_per_us();
    return op;
  }
  return {"a kernel", {}, nullptr};
}

Operation kernel_operation(Function* function, const std::string& name, const unsigned grid[3],
                           const unsigned block[3], unsigned shared, void** params) {
  Operation op = kernel_work(name, static_cast<unsigned long long>(grid[0]) * block[0], params);
  op.engine = Engine::kCompute;
  op.node_type = CU_GRAPH_NODE_TYPE_KERNEL;
  op.launch = std::make_shared<Launch>(Launch{function, {grid[0], grid[1], grid[2]}, {block[0], block[1], block[2]}, shared});
  return op;
}

// ---- The entry points -----------------------------------------------------------------------------------------

extern "C" {

CUresult s_cuInit(unsigned flags) {
  SIM_ENTER(cuInit);
  // Every variable is read now, so that a malformed one ends the process at start-up rather than at first use.
  device_count();
  operation_delay();
  concurrent_kernels();
  copy_bytes_per_us();
  kernel_fma_per_us();
  no_64_bit_memory_operations();
  no_launch_attributes();
  registered_memory_not_addressable();
  driver_version();
  return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult s_cuGetErrorName(CUresult error, const char** name) {
  SIM_ENTER(cuGetErrorName);
  for (const ResultName& r : kResults)
    if (r.result == error) return (*name = r.name), CUDA_SUCCESS;
  *name = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}
CUresult s_cuGetErrorString(CUresult error, const char** text) {
  SIM_ENTER(cuGetErrorString);
  for (const ResultName& r : kResults)
    if (r.result == error) return (*text = r.text), CUDA_SUCCESS;
  *text = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}
CUresult s_cuDeviceGet(CUdevice* d, int ordinal) {
  SIM_ENTER(cuDeviceGet);
  if (ordinal < 0 || ordinal >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
CUresult s_cuDeviceGetCount(int* count) {
  SIM_ENTER(cuDeviceGetCount);
  *count = device_count();
  return CUDA_SUCCESS;
}
CUresult s_cuDeviceGetName(char* name, int length, CUdevice d) {
  SIM_ENTER(cuDeviceGetName);
  if (d < 0 || d >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, length, "Simulated GPU %d", d);
  return CUDA_SUCCESS;
}
// A device's launch limits: what cuDeviceGetAttribute and cuFuncGetAttribute report and what a launch is held to.
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlock[3] = {1024, 1024, 64};
constexpr unsigned kMaxGrid[3] = {2147483647, 65535, 65535};
constexpr int kSharedPerBlock = 49152;  // bytes; a kernel's dynamic shared memory until cuFuncSetAttribute raises it

CUresult s_cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice d) {
  SIM_ENTER(cuDeviceGetAttribute);
  if (d < 0 || d >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  switch (static_cast<int>(attribute)) {
    case 1: *value = kMaxThreadsPerBlock; break;
    case 2: case 3: case 4: *value = static_cast<int>(kMaxBlock[static_cast<int>(attribute) - 2]); break;
    case 5: case 6: case 7: *value = static_cast<int>(kMaxGrid[static_cast<int>(attribute) - 5]); break;
    case 8: *value = kSharedPerBlock; break;
    case 10: *value = 32; break;
    case 16: *value = 132; break;
    case 18: *value = 0; break;
    case 33: *value = d + 1; break;
    case 40: *value = 2; break;
    case 75: *value = no_launch_attributes() ? 8 : 9; break;
    case 76: *value = 0; break;
    case 97: *value = 232448; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: *value = registered_memory_not_addressable() ? 0 : 1; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: *value = 32; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
      *value = no_launch_attributes() ? 0 : 1;
      break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
      *value = no_64_bit_memory_operations() ? 0 : 1;
      break;
    default: *value = 1;
  }
  return CUDA_SUCCESS;
}
CUresult s_cuDeviceTotalMem(size_t* bytes, CUdevice d) {
  SIM_ENTER(cuDeviceTotalMem);
  if (d < 0 || d >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = kDeviceBytes;
  return CUDA_SUCCESS;
}
CUresult s_cuDeviceCanAccessPeer(int* can, CUdevice d, CUdevice peer) {
  SIM_ENTER(cuDeviceCanAccessPeer);
  if (d < 0 || d >= device_count() || peer < 0 || peer >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *can = d != peer;
  return CUDA_SUCCESS;
}
CUresult s_cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice d) {
  SIM_ENTER(cuDevicePrimaryCtxRetain);
  if (d < 0 || d >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *context = context_of(d);
  return CUDA_SUCCESS;
}
CUresult s_cuCtxSetCurrent(CUcontext context) {
  SIM_ENTER(cuCtxSetCurrent);
  if (context == nullptr) return (current = nullptr), CUDA_SUCCESS;
  for (int i = 0; i < device_count(); i++)
    if (context == context_of(i)) return (current = &devices()[i]), CUDA_SUCCESS;
  std::lock_guard<std::mutex> lock(handles_mutex);
  if (!foreign_contexts.count(reinterpret_cast<Device*>(context))) return CUDA_ERROR_INVALID_CONTEXT;
  current = reinterpret_cast<Device*>(context);
  return CUDA_SUCCESS;
}
CUresult s_cuCtxGetCurrent(CUcontext* context) {
  SIM_ENTER(cuCtxGetCurrent);
  *context = reinterpret_cast<CUcontext>(current);
  return CUDA_SUCCESS;
}
CUresult s_cuCtxSynchronize() {
  SIM_ENTER(cuCtxSynchronize);
  SIM_NEED_CONTEXT();
  Device* d = current;
  if (conflicts_with_capture(d, true)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return released_to_threshold(d, block_until(d, [d] {
                                 std::lock_guard<std::mutex> lock(d->mutex);
                                 for (Stream* s : d->streams)
                                   if (!drained(s)) return false;
                                 return true;
                               }));
}
CUresult s_cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  SIM_ENTER(cuCtxGetStreamPriorityRange);
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return CUDA_SUCCESS;
}
CUresult s_cuCtxEnablePeerAccess(CUcontext peer, unsigned flags) {
  SIM_ENTER(cuCtxEnablePeerAccess);
  SIM_NEED_CONTEXT();
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < device_count(); i++)
    if (peer == context_of(i)) {
      if (i == current->ordinal) return CUDA_ERROR_INVALID_DEVICE;
      std::lock_guard<std::mutex> lock(current->mutex);
      if (current->peers[i]) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
      current->peers[i] = true;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_CONTEXT;
}

CUresult create_stream(CUstream* stream, unsigned flags, int priority) {
  SIM_NEED_CONTEXT();
  if (flags > CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = new_stream(current, flags, priority < -5 ? -5 : priority > 0 ? 0 : priority);
  std::lock_guard<std::mutex> lock(handles_mutex);
  live_handles.insert(s);
  *stream = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}
CUresult s_cuStreamCreateWithPriority(CUstream* stream, unsigned flags, int priority) {
  SIM_ENTER(cuStreamCreateWithPriority);
  return create_stream(stream, flags, priority);
}
CUresult s_cuStreamCreate(CUstream* stream, unsigned flags) {
  SIM_ENTER(cuStreamCreate);
  return create_stream(stream, flags, 0);
}
// Partitions (green contexts): 132 multiprocessors split in steps of 8, as on an H100/H200. A partition's streams are
// ordinary streams of its device: which multiprocessors their kernels use is not modelled, except that a cooperative
// launch may have only as many blocks as the partition holds.
constexpr unsigned kMultiprocessors = 132, kPartitionStep = 8;
struct GreenContext {
  Device* device;
  unsigned multiprocessors;
};
CUdevResource sm_resource(unsigned count) {
  CUdevResource r{};
  r.type = CU_DEV_RESOURCE_TYPE_SM;
  r.sm.smCount = count;
  r.sm.minSmPartitionSize = kPartitionStep;
  r.sm.smCoscheduledAlignment = kPartitionStep;
  return r;
}
CUresult s_cuDeviceGetDevResource(CUdevice d, CUdevResource* result, CUdevResourceType type) {
  SIM_ENTER(cuDeviceGetDevResource);
  if (d < 0 || d >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  if (!result || type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  *result = sm_resource(kMultiprocessors);
  return CUDA_SUCCESS;
}
CUresult s_cuDevSmResourceSplitByCount(CUdevResource* result, unsigned* groups, const CUdevResource* input,
                                       CUdevResource* remaining, unsigned flags, unsigned count) {
  SIM_ENTER(cuDevSmResourceSplitByCount);
  if (!groups || !input || input->type != CU_DEV_RESOURCE_TYPE_SM || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  const unsigned size = std::max(kPartitionStep, (count + kPartitionStep - 1) / kPartitionStep * kPartitionStep);
  const unsigned fit = input->sm.smCount / size;
  if (!result) return (*groups = fit), CUDA_SUCCESS;
  if (*groups == 0 || fit == 0) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
  *groups = std::min(*groups, fit);
  for (unsigned i = 0; i < *groups; i++) result[i] = sm_resource(size);
  if (remaining) *remaining = sm_resource(input->sm.smCount - *groups * size);
  return CUDA_SUCCESS;
}
CUresult s_cuDevResourceGenerateDesc(CUdevResourceDesc* desc, CUdevResource* resources, unsigned count) {
  SIM_ENTER(cuDevResourceGenerateDesc);
  if (!desc || !resources || count != 1 || resources[0].type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_VALUE;
  *desc = reinterpret_cast<CUdevResourceDesc>(new unsigned(resources[0].sm.smCount));  // never freed, as the driver's
  return CUDA_SUCCESS;
}
CUresult s_cuGreenCtxCreate(CUgreenCtx* context, CUdevResourceDesc desc, CUdevice d, unsigned flags) {
  SIM_ENTER(cuGreenCtxCreate);
  if (!context || !desc || flags != CU_GREEN_CTX_DEFAULT_STREAM) return CUDA_ERROR_INVALID_VALUE;
  if (d < 0 || d >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *context = reinterpret_cast<CUgreenCtx>(new GreenContext{&devices()[d], *reinterpret_cast<unsigned*>(desc)});
  return CUDA_SUCCESS;
}
CUresult s_cuGreenCtxGetDevResource(CUgreenCtx context, CUdevResource* result, CUdevResourceType type) {
  SIM_ENTER(cuGreenCtxGetDevResource);
  if (!context) return CUDA_ERROR_INVALID_HANDLE;
  auto* green = reinterpret_cast<GreenContext*>(context);
  if (result && type == CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG && driver_version() >= 13010) {
    *result = CUdevResource{};
    result->type = type;
    result->wqConfig = {green->device->ordinal, 8, CU_WORKQUEUE_SCOPE_DEVICE_CTX};  // 8: CUDA_DEVICE_MAX_CONNECTIONS' default
    return CUDA_SUCCESS;
  }
  if (!result || type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  *result = sm_resource(green->multiprocessors);
  return CUDA_SUCCESS;
}
CUresult s_cuGreenCtxStreamCreate(CUstream* stream, CUgreenCtx context, unsigned flags, int priority) {
  SIM_ENTER(cuGreenCtxStreamCreate);
  if (!context) return CUDA_ERROR_INVALID_HANDLE;
  if (!stream || flags != CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;  // as the driver: non-blocking only
  Stream* s = new_stream(reinterpret_cast<GreenContext*>(context)->device, flags, priority < -5 ? -5 : priority > 0 ? 0 : priority);
  s->multiprocessors = reinterpret_cast<GreenContext*>(context)->multiprocessors;
  std::lock_guard<std::mutex> lock(handles_mutex);
  live_handles.insert(s);
  *stream = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}
CUresult s_cuStreamDestroy(CUstream stream) {
  SIM_ENTER(cuStreamDestroy);
  if (!forget(stream, "cuStreamDestroy got a stream handle that is destroyed or was never created"))
    return CUDA_ERROR_INVALID_HANDLE;
  auto* s = reinterpret_cast<Stream*>(stream);
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->destroyed = true;
  }
  s->wake.notify_one();
  return fault_of(s->device);
}
CUresult s_cuStreamQuery(CUstream stream) {
  SIM_ENTER(cuStreamQuery);
  Stream* s = resolve_any_context(stream, "cuStreamQuery");
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (fault_of(s->device) != CUDA_SUCCESS) return fault_of(s->device);
  if (invalidate_capture(s)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return drained(s) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult s_cuStreamSynchronize(CUstream stream) {
  SIM_ENTER(cuStreamSynchronize);
  Stream* s = resolve_any_context(stream, "cuStreamSynchronize");
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (invalidate_capture(s)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return released_to_threshold(s->device, block_until(s->device, [s] { return drained(s); }));
}
CUresult s_cuStreamGetId(CUstream stream, unsigned long long* id) {
  SIM_ENTER(cuStreamGetId);
  Stream* s = resolve_any_context(stream, "cuStreamGetId");
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  *id = s->id;
  return CUDA_SUCCESS;
}
CUresult s_cuStreamGetPriority(CUstream stream, int* priority) {
  SIM_ENTER(cuStreamGetPriority);
  Stream* s = resolve_any_context(stream, "cuStreamGetPriority");
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  *priority = s->priority;
  return CUDA_SUCCESS;
}
CUresult s_cuStreamGetFlags(CUstream stream, unsigned* flags) {
  SIM_ENTER(cuStreamGetFlags);
  Stream* s = resolve_any_context(stream, "cuStreamGetFlags");
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  *flags = s->flags;
  return CUDA_SUCCESS;
}

// Resolves `stream` under the current context for a call that queues work; returns on failure.
#define SIM_QUEUE_ON(name, stream)                       \
  SIM_NEED_CONTEXT();                                    \
  CUresult resolved_result;                              \
  Stream* s = resolve(stream, #name, &resolved_result);  \
  if (!s) return resolved_result;

CUresult s_cuStreamWriteValue64(CUstream stream, CUdeviceptr address, cuuint64_t value, unsigned flags) {
  SIM_ENTER(cuStreamWriteValue64);
  SIM_QUEUE_ON(cuStreamWriteValue64, stream);
  if (no_64_bit_memory_operations()) return CUDA_ERROR_NOT_SUPPORTED;
  if (address % 8 != 0 || flags > CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) return CUDA_ERROR_INVALID_VALUE;
  const Range range{address, 8, Access::kDevice};
  if (check_at_call(range) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  enqueue(s, {"cuStreamWriteValue64", {range}, [address, value] {
                __atomic_store_n(reinterpret_cast<cuuint64_t*>(address), value, __ATOMIC_RELEASE);
              }},
          injected);
  return CUDA_SUCCESS;
}
CUresult s_cuStreamWaitValue64(CUstream stream, CUdeviceptr address, cuuint64_t value, unsigned flags) {
  SIM_ENTER(cuStreamWaitValue64);
  SIM_QUEUE_ON(cuStreamWaitValue64, stream);
  if (no_64_bit_memory_operations()) return CUDA_ERROR_NOT_SUPPORTED;
  const unsigned condition = flags & ~static_cast<unsigned>(CU_STREAM_WAIT_VALUE_FLUSH);
  if (address % 8 != 0 || condition > CU_STREAM_WAIT_VALUE_NOR) return CUDA_ERROR_INVALID_VALUE;
  const Range range{address, 8, Access::kDevice};
  if (check_at_call(range) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  Device* d = s->device;
  enqueue(s, {"cuStreamWaitValue64", {range}, [address, value, condition, d] {
                const auto* word = reinterpret_cast<const cuuint64_t*>(address);
                block_until(d, [&] {
                  const cuuint64_t seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
                  switch (condition) {
                    case CU_STREAM_WAIT_VALUE_EQ: return seen == value;
                    case CU_STREAM_WAIT_VALUE_AND: return (seen & value) != 0;
                    case CU_STREAM_WAIT_VALUE_NOR: return ~(seen | value) != 0;
                    default: return static_cast<int64_t>(seen - value) >= 0;
                  }
                });
              }},
          injected);
  return CUDA_SUCCESS;
}

CUresult s_cuEventCreate(CUevent* event, unsigned flags) {
  SIM_ENTER(cuEventCreate);
  SIM_NEED_CONTEXT();
  if (flags & ~static_cast<unsigned>(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS))
    return CUDA_ERROR_INVALID_VALUE;
  if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
  auto* e = new Event;  // never deleted, like streams
  e->device = current;
  e->flags = flags;
  if (flags & CU_EVENT_INTERPROCESS) {
    void* page = map_new_shared(4096, &e->shared_fd, &e->shared_serial);
    if (!page) return CUDA_ERROR_OUT_OF_MEMORY;
    e->shared = new (page) Event::Shared;
  }
  std::lock_guard<std::mutex> lock(handles_mutex);
  live_handles.insert(e);
  *event = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}
CUresult s_cuEventDestroy(CUevent event) {
  SIM_ENTER(cuEventDestroy);
  if (!forget(event, "cuEventDestroy got an event handle that is destroyed or was never created"))
    return CUDA_ERROR_INVALID_HANDLE;
  Event* e = reinterpret_cast<Event*>(event);
  if (e->shared_fd >= 0) close(e->shared_fd);  // no later import finds it
  e->shared_fd = -1;
  return fault_of(e->device);
}
CUresult s_cuEventRecord(CUevent event, CUstream stream) {
  SIM_ENTER(cuEventRecord);
  SIM_QUEUE_ON(cuEventRecord, stream);
  Event* e = resolve_event(event, "cuEventRecord");
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  if (e->device != s->device) return CUDA_ERROR_INVALID_HANDLE;
  {
    std::lock_guard<std::mutex> lock(capture_mutex);
    e->captured = s->capture;
    e->captured_from = s;
    e->captured_node = s->last_node;
    if (s->capture) return fault_now(s->device, injected);  // a point in the capture for other streams, not a node
  }
  std::lock_guard<std::mutex> lock(e->mutex);
  const unsigned long long generation = ++e->generation;
  const unsigned long long record = e->shared ? e->shared->recorded.fetch_add(1) + 1 : 0;
  e->stream = s;
  e->position = enqueue(s, {"cuEventRecord", {}, [e, generation, record] {
                              std::lock_guard<std::mutex> lock(e->mutex);
                              if (e->generation == generation) e->done_ms = now_ms();
                              if (!e->shared) return;
                              unsigned long long done = e->shared->done.load();
                              while (done < record && !e->shared->done.compare_exchange_weak(done, record)) {
                              }
                            }},
                        injected);
  return CUDA_SUCCESS;
}
CUresult s_cuEventQuery(CUevent event) {
  SIM_ENTER(cuEventQuery);
  Event* e = resolve_event(event, "cuEventQuery");
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  if (fault_of(e->device) != CUDA_SUCCESS) return fault_of(e->device);
  if (captured_event(e)) return CUDA_ERROR_CAPTURED_EVENT;
  return event_done(e) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult s_cuEventSynchronize(CUevent event) {
  SIM_ENTER(cuEventSynchronize);
  Event* e = resolve_event(event, "cuEventSynchronize");
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  if (captured_event(e)) return CUDA_ERROR_CAPTURED_EVENT;
  return released_to_threshold(e->device, block_until(e->device, [e] { return event_done(e); }));
}
CUresult s_cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  SIM_ENTER(cuEventElapsedTime);
  Event* a = resolve_event(start, "cuEventElapsedTime");
  Event* b = resolve_event(end, "cuEventElapsedTime");
  if (!a || !b) return CUDA_ERROR_INVALID_HANDLE;
  if (fault_of(a->device) != CUDA_SUCCESS) return fault_of(a->device);
  if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  {
    std::lock_guard<std::mutex> la(a->mutex);
    if (!a->stream) return CUDA_ERROR_INVALID_HANDLE;
  }
  {
    std::lock_guard<std::mutex> lb(b->mutex);
    if (!b->stream) return CUDA_ERROR_INVALID_HANDLE;
  }
  if (!event_done(a) || !event_done(b)) return CUDA_ERROR_NOT_READY;
  // One lock at a time: `start` and `end` may be the same event.
  double started, ended;
  {
    std::lock_guard<std::mutex> la(a->mutex);
    started = a->done_ms;
  }
  {
    std::lock_guard<std::mutex> lb(b->mutex);
    ended = b->done_ms;
  }
  *ms = static_cast<float>(ended - started);
  return CUDA_SUCCESS;
}
CUresult s_cuStreamWaitEvent(CUstream stream, CUevent event, unsigned flags) {
  SIM_ENTER(cuStreamWaitEvent);
  SIM_QUEUE_ON(cuStreamWaitEvent, stream);
  Event* e = resolve_event(event, "cuStreamWaitEvent");
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  {
    // Waiting on a point of an open capture joins it (a fork), or, for the stream that began it, joins back the stream
    // the point was recorded on (a join); a capture cannot wait on work outside it.
    std::lock_guard<std::mutex> lock(capture_mutex);
    Capture* c = e->captured && !e->captured->ended ? e->captured : nullptr;
    if (c) {
      if (s->capture && s->capture != c) {
        s->capture->invalidated = c->invalidated = true;
        return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
      }
      if (!s->capture) {
        s->capture = c;
        c->members.push_back(s);
        s->last_node = e->captured_node;
        s->unjoined = true;
      } else if (s == c->origin && e->captured_from != s && e->captured_from->last_node == e->captured_node) {
        e->captured_from->unjoined = false;
      }
      return fault_now(s->device, injected);
    }
    if (s->capture && e->captured_from) {
      s->capture->invalidated = true;
      return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    }
  }
  Device* d = s->device;
  if (e->shared) {
    // Interprocess: the records made so far, in any process.
    const unsigned long long record = e->shared->recorded.load(std::memory_order_acquire);
    if (record == 0) return CUDA_SUCCESS;
    Event::Shared* shared = e->shared;
    enqueue(s, {"cuStreamWaitEvent", {}, [shared, record, d] {
                  block_until(d, [&] { return shared->done.load(std::memory_order_acquire) >= record; });
                }},
            injected);
    return CUDA_SUCCESS;
  }
  Stream* source;
  unsigned long long position;
  {
    std::lock_guard<std::mutex> lock(e->mutex);
    source = e->stream;
    position = e->position;
  }
  if (!source) return CUDA_SUCCESS;  // never recorded: nothing to wait for
  enqueue(s, {"cuStreamWaitEvent", {}, [source, position, d] {
                block_until(d, [&] {
                  return source->completed.load(std::memory_order_acquire) >= position ||
                         fault_of(source->device) != CUDA_SUCCESS;
                });
              }},
          injected);
  return CUDA_SUCCESS;
}

CUresult s_cuIpcGetEventHandle(CUipcEventHandle* handle, CUevent event) {
  SIM_ENTER(cuIpcGetEventHandle);
  Event* e = resolve_event(event, "cuIpcGetEventHandle");
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  if (e->shared_fd < 0) return CUDA_ERROR_INVALID_VALUE;  // not interprocess, or imported
  write_handle(handle->reserved, "csp-evt", e->shared_fd, e->shared_serial, 0);
  return CUDA_SUCCESS;
}
CUresult s_cuIpcOpenEventHandle(CUevent* event, CUipcEventHandle handle) {
  SIM_ENTER(cuIpcOpenEventHandle);
  SIM_NEED_CONTEXT();
  IpcHandleData h;
  std::memcpy(&h, handle.reserved, sizeof h);
  void* page = map_exported(h, "csp-evt", 4096);
  if (!page) return CUDA_ERROR_INVALID_VALUE;
  auto* e = new Event;  // never deleted, like streams
  e->device = current;
  e->flags = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
  e->shared = static_cast<Event::Shared*>(page);
  std::lock_guard<std::mutex> lock(handles_mutex);
  live_handles.insert(e);
  *event = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}

CUresult s_cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned, CUjit_option*, void**) {
  SIM_ENTER(cuModuleLoadDataEx);
  SIM_NEED_CONTEXT();
  if (!image) return CUDA_ERROR_INVALID_VALUE;
  auto* m = new Module{current, {}};
  // A PTX text names its kernels with `.entry <name>(`; a binary image is taken as holding any kernel.
  const auto* text = static_cast<const char*>(image);
  if (std::strncmp(text, "\x7f" "ELF", 4) != 0) {
    const std::string ptx(text, strnlen(text, 64u << 20));
    for (size_t at = ptx.find(".entry"); at != std::string::npos; at = ptx.find(".entry", at + 6)) {
      size_t begin = at + 6;
      while (begin < ptx.size() && std::isspace(static_cast<unsigned char>(ptx[begin]))) begin++;
      size_t end = begin;
      while (end < ptx.size() && (std::isalnum(static_cast<unsigned char>(ptx[end])) || ptx[end] == '_')) end++;
      m->entries.push_back(ptx.substr(begin, end - begin));
    }
    if (m->entries.empty()) {
      delete m;
      return CUDA_ERROR_INVALID_PTX;
    }
  }
  std::lock_guard<std::mutex> lock(handles_mutex);
  live_handles.insert(m);
  *module = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}
CUresult s_cuModuleUnload(CUmodule module) {
  SIM_ENTER(cuModuleUnload);
  if (live(module) && conflicts_with_capture(reinterpret_cast<Module*>(module)->device, false))
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (!forget(module, "cuModuleUnload got a module handle that is unloaded or was never loaded"))
    return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}
CUresult s_cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  SIM_ENTER(cuModuleGetFunction);
  if (!live(module) || !name) return CUDA_ERROR_INVALID_HANDLE;
  auto* m = reinterpret_cast<Module*>(module);
  bool found = m->entries.empty();
  for (const std::string& entry : m->entries) found = found || entry == name;
  if (!found) return CUDA_ERROR_NOT_FOUND;
  std::lock_guard<std::mutex> lock(m->functions_mutex);
  Function*& known = m->functions[name];
  if (!known) known = new Function{m, name, kSharedPerBlock};  // lives as long as the process
  *function = reinterpret_cast<CUfunction>(known);
  return CUDA_SUCCESS;
}
CUresult s_cuFuncGetAttribute(int* value, CUfunction_attribute attribute, CUfunction function) {
  SIM_ENTER(cuFuncGetAttribute);
  if (!function) return CUDA_ERROR_INVALID_HANDLE;
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = kMaxThreadsPerBlock; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *value = 16; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *value = reinterpret_cast<Function*>(function)->max_dynamic_shared;
      break;
    default: *value = 0;
  }
  return CUDA_SUCCESS;
}
CUresult s_cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute, int value) {
  SIM_ENTER(cuFuncSetAttribute);
  if (!function) return CUDA_ERROR_INVALID_HANDLE;
  if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return CUDA_ERROR_NOT_SUPPORTED;
  if (value < 0 || value > 232448) return CUDA_ERROR_INVALID_VALUE;
  reinterpret_cast<Function*>(function)->max_dynamic_shared = value;
  return CUDA_SUCCESS;
}
// Blocks of `threads` threads that one simulated multiprocessor holds at once: 2048 threads' worth.
int blocks_per_multiprocessor(unsigned threads) { return static_cast<int>(2048 / std::max(1u, threads)); }

// The checks and the queuing of cuLaunchKernel and cuLaunchKernelEx; `attributes` null for the former.
CUresult launch(Stream* s, Function* f, const unsigned grid[3], const unsigned block[3], unsigned shared,
                void** params, const CUlaunchAttribute* attributes, unsigned count, const Injection& injected) {
  if (!live(f->module)) return CUDA_ERROR_INVALID_HANDLE;
  if (f->module->device != s->device) return CUDA_ERROR_INVALID_HANDLE;
  const unsigned long long blocks = static_cast<unsigned long long>(grid[0]) * grid[1] * grid[2];
  const unsigned long long threads = static_cast<unsigned long long>(block[0]) * block[1] * block[2];
  if (blocks == 0 || threads == 0 || threads > kMaxThreadsPerBlock) return CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < 3; i++)
    if (block[i] > kMaxBlock[i] || grid[i] > kMaxGrid[i]) return CUDA_ERROR_INVALID_VALUE;
  if (shared > static_cast<unsigned>(f->max_dynamic_shared)) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < count; i++) {
    const CUlaunchAttribute& a = attributes[i];
    switch (a.id) {
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: {
        const auto& c = a.value.clusterDim;
        if (no_launch_attributes()) return CUDA_ERROR_NOT_SUPPORTED;
        if (c.x == 0 || c.y == 0 || c.z == 0 || c.x * c.y * c.z > 8) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
        if (grid[0] % c.x || grid[1] % c.y || grid[2] % c.z) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
        break;
      }
      case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
        if (!a.value.cooperative) break;
        if (no_launch_attributes()) return CUDA_ERROR_NOT_SUPPORTED;
        if (blocks > (s->multiprocessors ? s->multiprocessors : 132ull) * blocks_per_multiprocessor(static_cast<unsigned>(threads)))
          return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
        break;
      case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        break;  // in order anyway: letting the kernel start early is an allowance, not a promise
      case CU_LAUNCH_ATTRIBUTE_IGNORE:
        break;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  enqueue(s, kernel_operation(f, f->name, grid, block, shared, params), injected);
  return CUDA_SUCCESS;
}
CUresult s_cuLaunchKernel(CUfunction function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned shared, CUstream stream, void** params, void**) {
  SIM_ENTER(cuLaunchKernel);
  SIM_QUEUE_ON(cuLaunchKernel, stream);
  if (!function) return CUDA_ERROR_INVALID_HANDLE;
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  return launch(s, reinterpret_cast<Function*>(function), grid, block, shared, params, nullptr, 0, injected);
}
CUresult s_cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction function, void** params, void** extra) {
  SIM_ENTER(cuLaunchKernelEx);
  if (!config || extra || (config->numAttrs && !config->attrs)) return CUDA_ERROR_INVALID_VALUE;
  SIM_QUEUE_ON(cuLaunchKernelEx, config->hStream);
  if (!function) return CUDA_ERROR_INVALID_HANDLE;
  const unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
  const unsigned block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
  return launch(s, reinterpret_cast<Function*>(function), grid, block, config->sharedMemBytes, params, config->attrs,
                config->numAttrs, injected);
}
CUresult s_cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction function, int threads, size_t) {
  SIM_ENTER(cuOccupancyMaxActiveBlocksPerMultiprocessor);
  if (!function || !blocks) return CUDA_ERROR_INVALID_HANDLE;
  if (threads <= 0) return CUDA_ERROR_INVALID_VALUE;
  *blocks = blocks_per_multiprocessor(static_cast<unsigned>(threads));
  return CUDA_SUCCESS;
}
CUresult s_cuOccupancyMaxPotentialBlockSize(int* grid, int* block, CUfunction function, CUoccupancyB2DSize, size_t,
                                            int limit) {
  SIM_ENTER(cuOccupancyMaxPotentialBlockSize);
  if (!function) return CUDA_ERROR_INVALID_HANDLE;
  *block = limit > 0 && limit < 1024 ? limit : 1024;
  *grid = 132 * blocks_per_multiprocessor(static_cast<unsigned>(*block));  // what a cooperative launch may have
  return CUDA_SUCCESS;
}

CUresult s_cuMemGetInfo(size_t* free_bytes, size_t* total) {
  SIM_ENTER(cuMemGetInfo);
  SIM_NEED_CONTEXT();
  // Free: the total less what the device's memory pool reserves and its other live device and managed memory.
  size_t held = 0;
  {
    std::lock_guard<std::mutex> lock(memory_mutex);
    for (const auto& [base, b] : blocks)
      if (b.live && !b.pooled && b.kind != Kind::kPinned && b.device == current->ordinal) held += b.capacity;
    held += memory_pools()[current->ordinal].reserved;
  }
  *total = kDeviceBytes;
  *free_bytes = *total - std::min(held, *total);
  return CUDA_SUCCESS;
}
CUresult allocate_async(CUdeviceptr* pointer, size_t bytes, CUstream stream) {
  SIM_QUEUE_ON(cuMemAllocAsync, stream);
  if (invalidate_capture(s)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // allocation nodes are not simulated
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > kDeviceBytes) return CUDA_ERROR_OUT_OF_MEMORY;
  void* p = allocate_from_pool(bytes, s->device->ordinal);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult s_cuMemAllocFromPoolAsync(CUdeviceptr* pointer, size_t bytes, CUmemoryPool, CUstream stream) {
  SIM_ENTER(cuMemAllocFromPoolAsync);
  return allocate_async(pointer, bytes, stream);
}
CUresult s_cuMemAllocAsync(CUdeviceptr* pointer, size_t bytes, CUstream stream) {
  SIM_ENTER(cuMemAllocAsync);
  return allocate_async(pointer, bytes, stream);
}
CUresult s_cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
  SIM_ENTER(cuMemFreeAsync);
  SIM_QUEUE_ON(cuMemFreeAsync, stream);
  if (invalidate_capture(s)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // free nodes are not simulated
  {
    std::lock_guard<std::mutex> lock(memory_mutex);
    auto it = blocks.find(pointer);
    if (it == blocks.end() || !it->second.live || it->second.kind != Kind::kDevice) return CUDA_ERROR_INVALID_VALUE;
  }
  enqueue(s, {"cuMemFreeAsync", {}, [pointer] { release(pointer, {Kind::kDevice}, "cuMemFreeAsync"); }}, injected);
  return CUDA_SUCCESS;
}
CUresult s_cuMemAllocManaged(CUdeviceptr* pointer, size_t bytes, unsigned flags) {
  SIM_ENTER(cuMemAllocManaged);
  SIM_NEED_CONTEXT();
  if (bytes == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)) return CUDA_ERROR_INVALID_VALUE;
  void* p = allocate(bytes, Kind::kManaged, current->ordinal);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult managed_range(CUdeviceptr pointer, size_t bytes) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  Block* b = find_block(pointer, bytes);
  return b && b->live && b->kind == Kind::kManaged && bytes > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult s_cuMemPrefetchAsync(CUdeviceptr pointer, size_t bytes, CUdevice destination, CUstream stream) {
  SIM_ENTER(cuMemPrefetchAsync);
  SIM_QUEUE_ON(cuMemPrefetchAsync, stream);
  if (destination != CU_DEVICE_CPU && (destination < 0 || destination >= device_count())) return CUDA_ERROR_INVALID_DEVICE;
  if (managed_range(pointer, bytes) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  enqueue(s, {"cuMemPrefetchAsync", {{pointer, bytes, Access::kDevice}}, nullptr}, injected);
  return CUDA_SUCCESS;
}
CUresult s_cuMemAdvise(CUdeviceptr pointer, size_t bytes, CUmem_advise advice, CUdevice d) {
  SIM_ENTER(cuMemAdvise);
  SIM_NEED_CONTEXT();
  if (advice < CU_MEM_ADVISE_SET_READ_MOSTLY || advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY) return CUDA_ERROR_INVALID_VALUE;
  if (d != CU_DEVICE_CPU && (d < 0 || d >= device_count())) return CUDA_ERROR_INVALID_DEVICE;
  return managed_range(pointer, bytes);
}
CUresult s_cuMemHostAlloc(void** pointer, size_t bytes, unsigned flags) {
  SIM_ENTER(cuMemHostAlloc);
  SIM_NEED_CONTEXT();
  if (bytes == 0 || flags > 7) return CUDA_ERROR_INVALID_VALUE;
  void* p = allocate(bytes, Kind::kPinned, current->ordinal);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = p;
  return CUDA_SUCCESS;
}
// Registered host memory is pinned memory the simulator does not own: a copy queued with it reads or writes it when
// the copy runs, and a copy that runs after cuMemHostUnregister finds it unregistered (reported, like memory freed).
// Ranges overlapping a registration are refused, as the driver refuses them.
CUresult s_cuMemHostRegister(void* pointer, size_t bytes, unsigned flags) {
  SIM_ENTER(cuMemHostRegister);
  SIM_NEED_CONTEXT();
  if (!pointer || bytes == 0 || flags > 0xf) return CUDA_ERROR_INVALID_VALUE;
  const uintptr_t base = reinterpret_cast<uintptr_t>(pointer);
  std::lock_guard<std::mutex> lock(memory_mutex);
  for (auto it = blocks.lower_bound(base); it != blocks.end() && it->first < base + bytes;) {
    if (it->second.live) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    it = it->second.registered ? blocks.erase(it) : std::next(it);  // an ended registration of these pages
  }
  auto before = blocks.lower_bound(base);
  if (before != blocks.begin()) {
    --before;
    if (before->second.live && before->first + before->second.size > base) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  Block b{base, bytes, Kind::kPinned, current->ordinal, true, nullptr, bytes};
  b.registered = true;
  blocks[base] = b;
  return CUDA_SUCCESS;
}
CUresult s_cuMemHostUnregister(void* pointer) {
  SIM_ENTER(cuMemHostUnregister);
  SIM_NEED_CONTEXT();
  std::lock_guard<std::mutex> lock(memory_mutex);
  auto it = blocks.find(reinterpret_cast<uintptr_t>(pointer));
  if (it == blocks.end() || !it->second.live || !it->second.registered) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  it->second.live = false;
  it->second.freed_by = "cuMemHostUnregister";
  return CUDA_SUCCESS;
}
CUresult s_cuMemFreeHost(void* pointer) {
  SIM_ENTER(cuMemFreeHost);
  SIM_NEED_CONTEXT();
  return release(reinterpret_cast<uintptr_t>(pointer), {Kind::kPinned}, "cuMemFreeHost");
}
CUresult s_cuMemFree(CUdeviceptr pointer) {
  SIM_ENTER(cuMemFree);
  SIM_NEED_CONTEXT();
  if (conflicts_with_capture(current, false)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return release(pointer, {Kind::kDevice, Kind::kManaged}, "cuMemFree");
}

CUresult s_cuMemAlloc(CUdeviceptr* pointer, size_t bytes) {
  SIM_ENTER(cuMemAlloc);
  SIM_NEED_CONTEXT();
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > kDeviceBytes) return CUDA_ERROR_OUT_OF_MEMORY;
  const size_t capacity = whole_pages(bytes);
  int fd = -1;
  unsigned long long serial = 0;
  void* p = map_new_shared(capacity, &fd, &serial);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(p, 0xa5, capacity);
  std::lock_guard<std::mutex> lock(memory_mutex);
  Block& b = blocks[reinterpret_cast<uintptr_t>(p)] = {reinterpret_cast<uintptr_t>(p), bytes, Kind::kDevice, current->ordinal, true, nullptr, capacity};
  b.shared_fd = fd;
  b.shared_serial = serial;
  b.mapped = true;
  *pointer = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult s_cuMemGetAddressRange(CUdeviceptr* base, size_t* bytes, CUdeviceptr pointer) {
  SIM_ENTER(cuMemGetAddressRange);
  SIM_NEED_CONTEXT();
  std::lock_guard<std::mutex> lock(memory_mutex);
  Block* b = find_block(pointer, 1);
  if (!b || !b->live || b->kind != Kind::kDevice) return CUDA_ERROR_NOT_FOUND;
  if (base) *base = b->base;
  if (bytes) *bytes = b->size;
  return CUDA_SUCCESS;
}
CUresult s_cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr pointer) {
  SIM_ENTER(cuIpcGetMemHandle);
  SIM_NEED_CONTEXT();
  std::lock_guard<std::mutex> lock(memory_mutex);
  auto it = blocks.find(pointer);
  if (it == blocks.end() || !it->second.live || it->second.shared_fd < 0) return CUDA_ERROR_INVALID_VALUE;
  write_handle(handle->reserved, "csp-mem", it->second.shared_fd, it->second.shared_serial, it->second.size);
  return CUDA_SUCCESS;
}
CUresult s_cuIpcOpenMemHandle(CUdeviceptr* pointer, CUipcMemHandle handle, unsigned flags) {
  SIM_ENTER(cuIpcOpenMemHandle);
  SIM_NEED_CONTEXT();
  if (flags & ~static_cast<unsigned>(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) return CUDA_ERROR_INVALID_VALUE;
  IpcHandleData h;
  std::memcpy(&h, handle.reserved, sizeof h);
  if (h.bytes == 0 || h.bytes > kDeviceBytes) return CUDA_ERROR_INVALID_VALUE;
  const size_t capacity = whole_pages(h.bytes);
  void* p = map_exported(h, "csp-mem", capacity);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(memory_mutex);
  Block& b = blocks[reinterpret_cast<uintptr_t>(p)] = {reinterpret_cast<uintptr_t>(p), h.bytes, Kind::kDevice, current->ordinal, true, nullptr, capacity};
  b.mapped = true;
  b.imported = true;
  *pointer = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult s_cuIpcCloseMemHandle(CUdeviceptr pointer) {
  SIM_ENTER(cuIpcCloseMemHandle);
  SIM_NEED_CONTEXT();
  {
    std::lock_guard<std::mutex> lock(memory_mutex);
    auto it = blocks.find(pointer);
    if (it == blocks.end() || !it->second.live || !it->second.imported) return CUDA_ERROR_INVALID_VALUE;
  }
  return release(pointer, {Kind::kDevice}, "cuIpcCloseMemHandle");
}
CUresult s_cuMemHostGetDevicePointer(CUdeviceptr* device_pointer, void* host, unsigned flags) {
  SIM_ENTER(cuMemHostGetDevicePointer);
  SIM_NEED_CONTEXT();
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(memory_mutex);
  Block* b = find_block(reinterpret_cast<uintptr_t>(host), 1);
  if (!b || !b->live || b->kind != Kind::kPinned) return CUDA_ERROR_INVALID_VALUE;
  *device_pointer = reinterpret_cast<CUdeviceptr>(host);
  return CUDA_SUCCESS;
}

// Queues a copy of `bytes` from `source` to `destination`. A pageable host source is read now; a pageable host
// destination makes the call wait until the copy ran, as the driver's copies of pageable memory do.
CUresult queue_copy(Stream* s, const char* what, Range destination, Range source, const Injection& injected) {
  if (check_at_call(destination) != CUDA_SUCCESS || check_at_call(source) != CUDA_SUCCESS)
    return CUDA_ERROR_INVALID_VALUE;
  const size_t bytes = destination.bytes;
  if (bytes == 0) return CUDA_SUCCESS;
  const bool pageable_source = source.access == Access::kHost && !is_pinned_or_device(source.address);
  const bool pageable_destination = destination.access == Access::kHost && !is_pinned_or_device(destination.address);
  // Copies of pageable memory are not captured: the capture fails.
  if ((pageable_source || pageable_destination) && invalidate_capture(s)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  std::shared_ptr<std::vector<unsigned char>> snapshot;
  if (pageable_source) {
    const auto* from = reinterpret_cast<const unsigned char*>(source.address);
    snapshot = std::make_shared<std::vector<unsigned char>>(from, from + bytes);
  }
  Operation op{what, {destination}, [destination, source, snapshot, bytes] {
                 const void* from = snapshot ? snapshot->data() : reinterpret_cast<const void*>(source.address);
                 std::memmove(reinterpret_cast<void*>(destination.address), from, bytes);
               }};
  if (!pageable_source) op.ranges.push_back(source);
  op.node_type = CU_GRAPH_NODE_TYPE_MEMCPY;
  const bool from_device = on_device(source.address), to_device = on_device(destination.address);
  op.engine = from_device == to_device ? Engine::kNone : to_device ? Engine::kHostToDevice : Engine::kDeviceToHost;
  if (op.engine != Engine::kNone && copy_bytes_per_us() > 0) op.modelled_us = bytes / copy_bytes_per_us();
  const unsigned long long position = enqueue(s, std::move(op), injected);
  if (pageable_destination)
    return block_until(s->device, [s, position] { return s->completed.load() >= position; });
  return CUDA_SUCCESS;
}
CUresult s_cuMemcpyAsync(CUdeviceptr destination, CUdeviceptr source, size_t bytes, CUstream stream) {
  SIM_ENTER(cuMemcpyAsync);
  SIM_QUEUE_ON(cuMemcpyAsync, stream);
  return queue_copy(s, "cuMemcpyAsync", {destination, bytes, Access::kHost}, {source, bytes, Access::kHost}, injected);
}
CUresult s_cuMemcpyHtoDAsync(CUdeviceptr destination, const void* source, size_t bytes, CUstream stream) {
  SIM_ENTER(cuMemcpyHtoDAsync);
  SIM_QUEUE_ON(cuMemcpyHtoDAsync, stream);
  return queue_copy(s, "cuMemcpyHtoDAsync", {destination, bytes, Access::kDevice},
                    {reinterpret_cast<uintptr_t>(source), bytes, Access::kHost}, injected);
}
CUresult s_cuMemcpyDtoHAsync(void* destination, CUdeviceptr source, size_t bytes, CUstream stream) {
  SIM_ENTER(cuMemcpyDtoHAsync);
  SIM_QUEUE_ON(cuMemcpyDtoHAsync, stream);
  return queue_copy(s, "cuMemcpyDtoHAsync", {reinterpret_cast<uintptr_t>(destination), bytes, Access::kHost},
                    {source, bytes, Access::kDevice}, injected);
}
CUresult s_cuMemcpyDtoDAsync(CUdeviceptr destination, CUdeviceptr source, size_t bytes, CUstream stream) {
  SIM_ENTER(cuMemcpyDtoDAsync);
  SIM_QUEUE_ON(cuMemcpyDtoDAsync, stream);
  return queue_copy(s, "cuMemcpyDtoDAsync", {destination, bytes, Access::kDevice}, {source, bytes, Access::kDevice},
                    injected);
}
CUresult s_cuMemcpyPeerAsync(CUdeviceptr destination, CUcontext, CUdeviceptr source, CUcontext, size_t bytes,
                             CUstream stream) {
  SIM_ENTER(cuMemcpyPeerAsync);
  SIM_QUEUE_ON(cuMemcpyPeerAsync, stream);
  return queue_copy(s, "cuMemcpyPeerAsync", {destination, bytes, Access::kDevice}, {source, bytes, Access::kDevice},
                    injected);
}
// A batch: each copy is checked before any is queued, then queued as cuMemcpyAsync would queue it (a pageable source
// is read now, which is what CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL asks for; the copies run in order, which is
// one of the orders a batch allows).
CUresult batch_copy(Stream* s, CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                    CUmemcpyAttributes* attrs, size_t* starts, size_t attributes, const Injection& injected) {
  if (s == s->device->legacy || !dsts || !srcs || !sizes || count == 0 || !attrs || !starts ||
      attributes == 0 || attributes > count || starts[0] != 0)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t k = 0; k < attributes; k++) {
    if ((k > 0 && starts[k] <= starts[k - 1]) || starts[k] >= count) return CUDA_ERROR_INVALID_VALUE;
    const int order = attrs[k].srcAccessOrder;
    if (order < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM || order > CU_MEMCPY_SRC_ACCESS_ORDER_ANY) return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < count; i++)
    if (check_at_call({dsts[i], sizes[i], Access::kHost}) != CUDA_SUCCESS ||
        check_at_call({srcs[i], sizes[i], Access::kHost}) != CUDA_SUCCESS)
      return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; i++) {
    const CUresult r = queue_copy(s, "cuMemcpyBatchAsync", {dsts[i], sizes[i], Access::kHost},
                                  {srcs[i], sizes[i], Access::kHost}, injected);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}
CUresult s_cuMemcpyBatchAsync(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                              CUmemcpyAttributes* attrs, size_t* starts, size_t attributes, CUstream stream) {
  SIM_ENTER(cuMemcpyBatchAsync);
  SIM_QUEUE_ON(cuMemcpyBatchAsync, stream);
  return batch_copy(s, dsts, srcs, sizes, count, attrs, starts, attributes, injected);
}
// The CUDA 12.8 form: on failure, failIdx names the copy that failed, or SIZE_MAX when none in particular.
CUresult s_cuMemcpyBatchAsync_v12080(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                                     CUmemcpyAttributes* attrs, size_t* starts, size_t attributes, size_t* failed,
                                     CUstream stream) {
  SIM_ENTER(cuMemcpyBatchAsync);
  SIM_QUEUE_ON(cuMemcpyBatchAsync, stream);
  if (!failed) return CUDA_ERROR_INVALID_VALUE;
  *failed = SIZE_MAX;
  return batch_copy(s, dsts, srcs, sizes, count, attrs, starts, attributes, injected);
}
// A 2D copy: rows of WidthInBytes, each side's rows its pitch apart. Device and pinned (or registered) memory are
// read and written when the copy runs; pageable host memory is read now (a source) or waited for (a destination), as
// the driver's copies of pageable memory are.
CUresult s_cuMemcpy2DAsync(const CUDA_MEMCPY2D* copy, CUstream stream) {
  SIM_ENTER(cuMemcpy2DAsync);
  SIM_QUEUE_ON(cuMemcpy2DAsync, stream);
  if (!copy) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_MEMCPY2D c = *copy;
  auto side = [](CUmemorytype type, uintptr_t host, CUdeviceptr device) -> uintptr_t {
    return type == CU_MEMORYTYPE_HOST ? host : type == CU_MEMORYTYPE_DEVICE ? device : 0;
  };
  const uintptr_t src = side(c.srcMemoryType, reinterpret_cast<uintptr_t>(c.srcHost), c.srcDevice) + c.srcXInBytes + c.srcY * c.srcPitch;
  const uintptr_t dst = side(c.dstMemoryType, reinterpret_cast<uintptr_t>(c.dstHost), c.dstDevice) + c.dstXInBytes + c.dstY * c.dstPitch;
  if (c.WidthInBytes == 0 || c.Height == 0) return CUDA_SUCCESS;
  if (!src || !dst || c.srcPitch < c.WidthInBytes || c.dstPitch < c.WidthInBytes) return CUDA_ERROR_INVALID_VALUE;
  const size_t src_extent = (c.Height - 1) * c.srcPitch + c.WidthInBytes, dst_extent = (c.Height - 1) * c.dstPitch + c.WidthInBytes;
  const Range destination{dst, dst_extent, c.dstMemoryType == CU_MEMORYTYPE_HOST ? Access::kHost : Access::kDevice};
  const Range source{src, src_extent, c.srcMemoryType == CU_MEMORYTYPE_HOST ? Access::kHost : Access::kDevice};
  if (check_at_call(destination) != CUDA_SUCCESS || check_at_call(source) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  const bool pageable_source = source.access == Access::kHost && !is_pinned_or_device(src);
  const bool pageable_destination = destination.access == Access::kHost && !is_pinned_or_device(dst);
  if ((pageable_source || pageable_destination) && invalidate_capture(s)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  std::shared_ptr<std::vector<unsigned char>> snapshot;
  if (pageable_source) {
    const auto* from = reinterpret_cast<const unsigned char*>(src);
    snapshot = std::make_shared<std::vector<unsigned char>>(from, from + src_extent);
  }
  Operation op{"cuMemcpy2DAsync", {destination}, [c, src, dst, snapshot] {
                 const auto* from = snapshot ? snapshot->data() : reinterpret_cast<const unsigned char*>(src);
                 for (size_t y = 0; y < c.Height; y++)
                   std::memmove(reinterpret_cast<unsigned char*>(dst) + y * c.dstPitch, from + y * c.srcPitch, c.WidthInBytes);
               }};
  if (!pageable_source) op.ranges.push_back(source);
  op.node_type = CU_GRAPH_NODE_TYPE_MEMCPY;
  const bool from_device = on_device(src), to_device = on_device(dst);
  op.engine = from_device == to_device ? Engine::kNone : to_device ? Engine::kHostToDevice : Engine::kDeviceToHost;
  const unsigned long long position = enqueue(s, std::move(op), injected);
  if (pageable_destination)
    return block_until(s->device, [s, position] { return s->completed.load() >= position; });
  return CUDA_SUCCESS;
}
CUresult s_cuMemsetD8Async(CUdeviceptr destination, unsigned char value, size_t count, CUstream stream) {
  SIM_ENTER(cuMemsetD8Async);
  SIM_QUEUE_ON(cuMemsetD8Async, stream);
  const Range range{destination, count, Access::kDevice};
  if (check_at_call(range) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  Operation op{"cuMemsetD8Async", {range}, [destination, value, count] {
                std::memset(reinterpret_cast<void*>(destination), value, count);
              }};
  op.node_type = CU_GRAPH_NODE_TYPE_MEMSET;
  enqueue(s, std::move(op), injected);
  return CUDA_SUCCESS;
}
CUresult s_cuMemsetD32Async(CUdeviceptr destination, unsigned value, size_t count, CUstream stream) {
  SIM_ENTER(cuMemsetD32Async);
  SIM_QUEUE_ON(cuMemsetD32Async, stream);
  if (destination % 4 != 0 || count > SIZE_MAX / 4) return CUDA_ERROR_INVALID_VALUE;
  const Range range{destination, count * 4, Access::kDevice};
  if (check_at_call(range) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  Operation op{"cuMemsetD32Async", {range}, [destination, value, count] {
                auto* words = reinterpret_cast<unsigned*>(destination);
                for (size_t i = 0; i < count; i++) words[i] = value;
              }};
  op.node_type = CU_GRAPH_NODE_TYPE_MEMSET;
  enqueue(s, std::move(op), injected);
  return CUDA_SUCCESS;
}

CUresult s_cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice d) {
  SIM_ENTER(cuDeviceGetDefaultMemPool);
  if (d < 0 || d >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *pool = reinterpret_cast<CUmemoryPool>(&devices()[d]);
  return CUDA_SUCCESS;
}
CUresult s_cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute, void* value) {
  SIM_ENTER(cuMemPoolGetAttribute);
  auto* d = reinterpret_cast<Device*>(pool);
  auto* out = static_cast<cuuint64_t*>(value);
  switch (attribute) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *out = d->release_threshold; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: case CU_MEMPOOL_ATTR_USED_MEM_HIGH: {
      std::lock_guard<std::mutex> lock(memory_mutex);
      const MemoryPool& pool = memory_pools()[d->ordinal];
      *out = attribute == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT ? pool.reserved
             : attribute == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH  ? pool.reserved_high
             : attribute == CU_MEMPOOL_ATTR_USED_MEM_CURRENT   ? pool.used
                                                               : pool.used_high;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}
CUresult s_cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute, void* value) {
  SIM_ENTER(cuMemPoolSetAttribute);
  if (attribute != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) return CUDA_ERROR_INVALID_VALUE;
  reinterpret_cast<Device*>(pool)->release_threshold = *static_cast<cuuint64_t*>(value);
  return CUDA_SUCCESS;
}
CUresult s_cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  SIM_ENTER(cuMemPoolTrimTo);
  trim_pool(reinterpret_cast<Device*>(pool)->ordinal, keep);
  return CUDA_SUCCESS;
}
CUresult s_cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc* map, size_t count) {
  SIM_ENTER(cuMemPoolSetAccess);
  auto* d = reinterpret_cast<Device*>(pool);
  if (!map && count) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; i++) {
    const int id = map[i].location.id;
    if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || id < 0 || id >= device_count()) return CUDA_ERROR_INVALID_VALUE;
    if (id == d->ordinal && map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) return CUDA_ERROR_INVALID_DEVICE;
  }
  std::lock_guard<std::mutex> lock(d->mutex);
  for (size_t i = 0; i < count; i++) d->pool_access[map[i].location.id] = map[i].flags;
  return CUDA_SUCCESS;
}
CUresult s_cuMemPoolGetAccess(CUmemAccess_flags* flags, CUmemoryPool pool, CUmemLocation* location) {
  SIM_ENTER(cuMemPoolGetAccess);
  auto* d = reinterpret_cast<Device*>(pool);
  if (!location || location->id < 0 || location->id >= device_count()) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(d->mutex);
  *flags = d->pool_access[location->id];
  return CUDA_SUCCESS;
}

CUresult s_cuStreamBeginCapture(CUstream stream, CUstreamCaptureMode mode) {
  SIM_ENTER(cuStreamBeginCapture);
  SIM_QUEUE_ON(cuStreamBeginCapture, stream);
  if (mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  if (s == s->device->legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (s->capture) return CUDA_ERROR_ILLEGAL_STATE;
  auto* c = new Capture{s, new Graph{s->device, {}}, mode, std::this_thread::get_id(), next_capture_id.fetch_add(1)};
  c->members.push_back(s);
  s->capture = c;
  return CUDA_SUCCESS;
}
CUresult s_cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  SIM_ENTER(cuStreamEndCapture);
  SIM_QUEUE_ON(cuStreamEndCapture, stream);
  *graph = nullptr;
  std::lock_guard<std::mutex> lock(capture_mutex);
  Capture* c = s->capture;
  if (!c) return CUDA_ERROR_ILLEGAL_STATE;
  if (c->origin != s) {
    c->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  }
  if (c->mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && c->thread != std::this_thread::get_id())
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  bool unjoined = false;
  for (Stream* member : c->members) unjoined = unjoined || member->unjoined;
  end_capture(c);
  if (c->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  if (unjoined) return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
  {
    std::lock_guard<std::mutex> handles(handles_mutex);
    live_handles.insert(c->graph);
  }
  *graph = reinterpret_cast<CUgraph>(c->graph);
  return CUDA_SUCCESS;
}
CUresult s_cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  SIM_ENTER(cuStreamIsCapturing);
  Stream* s = resolve_any_context(stream, "cuStreamIsCapturing");
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> lock(capture_mutex);
  *status = !s->capture                ? CU_STREAM_CAPTURE_STATUS_NONE
            : s->capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                      : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}
CUresult s_cuStreamGetCaptureInfo(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                                  const CUgraphNode** dependencies, size_t* count) {
  SIM_ENTER(cuStreamGetCaptureInfo);
  Stream* s = resolve_any_context(stream, "cuStreamGetCaptureInfo");
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> lock(capture_mutex);
  Capture* c = s->capture;
  *status = !c ? CU_STREAM_CAPTURE_STATUS_NONE
               : c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  s->dependency = reinterpret_cast<CUgraphNode>(s->last_node);
  if (id) *id = c ? c->id : 0;
  if (graph) *graph = c ? reinterpret_cast<CUgraph>(c->graph) : nullptr;
  if (dependencies) *dependencies = c && s->last_node ? &s->dependency : nullptr;
  if (count) *count = c && s->last_node ? 1 : 0;
  return CUDA_SUCCESS;
}

Graph* resolve_graph(CUgraph handle) { return live(handle) ? reinterpret_cast<Graph*>(handle) : nullptr; }

// A node of a graph that is not destroyed, or null.
Node* resolve_node(CUgraphNode handle) {
  if (!handle) return nullptr;
  auto* node = reinterpret_cast<Node*>(handle);
  return live(node->graph) ? node : nullptr;
}

struct GraphExec {
  Device* device;
  std::vector<Node*> nodes;  // of the graph it was instantiated from, which name its nodes in later calls
  std::vector<Operation> ops;
};

CUresult s_cuGraphGetNodes(CUgraph handle, CUgraphNode* nodes, size_t* count) {
  SIM_ENTER(cuGraphGetNodes);
  Graph* g = resolve_graph(handle);
  if (!g || !count) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (nodes)
    for (size_t i = 0; i < std::min(*count, g->nodes.size()); i++) nodes[i] = reinterpret_cast<CUgraphNode>(g->nodes[i]);
  *count = g->nodes.size();
  return CUDA_SUCCESS;
}
CUresult s_cuGraphKernelNodeGetParams(CUgraphNode handle, CUDA_KERNEL_NODE_PARAMS* params) {
  SIM_ENTER(cuGraphKernelNodeGetParams);
  Node* node = resolve_node(handle);
  if (!node || !node->op.launch) return CUDA_ERROR_INVALID_VALUE;
  const Launch& l = *node->op.launch;
  *params = {};
  params->func = reinterpret_cast<CUfunction>(l.function);
  params->gridDimX = l.grid[0], params->gridDimY = l.grid[1], params->gridDimZ = l.grid[2];
  params->blockDimX = l.block[0], params->blockDimY = l.block[1], params->blockDimZ = l.block[2];
  params->sharedMemBytes = l.shared;
  return CUDA_SUCCESS;
}
CUresult s_cuGraphDestroy(CUgraph handle) {
  SIM_ENTER(cuGraphDestroy);
  if (!forget(handle, "cuGraphDestroy got a graph handle that is destroyed or was never made"))
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
CUresult s_cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph handle, unsigned long long flags) {
  SIM_ENTER(cuGraphInstantiateWithFlags);
  SIM_NEED_CONTEXT();
  Graph* g = resolve_graph(handle);
  if (!g || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto* e = new GraphExec{g->device, {}, {}};
  {
    std::lock_guard<std::mutex> lock(capture_mutex);
    e->nodes = g->nodes;
    for (Node* node : g->nodes) e->ops.push_back(node->op);
  }
  std::lock_guard<std::mutex> lock(handles_mutex);
  live_handles.insert(e);
  *exec = reinterpret_cast<CUgraphExec>(e);
  return CUDA_SUCCESS;
}
GraphExec* resolve_exec(CUgraphExec handle, const char* call) {
  if (live(handle)) return reinterpret_cast<GraphExec*>(handle);
  report(std::string(call) + " got an executable graph handle that is destroyed or was never made");
  return nullptr;
}
CUresult s_cuGraphLaunch(CUgraphExec handle, CUstream stream) {
  SIM_ENTER(cuGraphLaunch);
  SIM_QUEUE_ON(cuGraphLaunch, stream);
  GraphExec* e = resolve_exec(handle, "cuGraphLaunch");
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  if (e->device != s->device) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard<std::mutex> lock(capture_mutex);
    if (s->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // child graphs are not simulated
  }
  // An injected fault or loss applies to the launch's last node; nodes are not counted as operations of their own.
  for (size_t i = 0; i < e->ops.size(); i++) enqueue(s, e->ops[i], i + 1 == e->ops.size() ? injected : Injection{});
  return CUDA_SUCCESS;
}
CUresult s_cuGraphExecUpdate(CUgraphExec handle, CUgraph graph, CUgraphExecUpdateResultInfo* info) {
  SIM_ENTER(cuGraphExecUpdate);
  GraphExec* e = resolve_exec(handle, "cuGraphExecUpdate");
  Graph* g = resolve_graph(graph);
  if (!e || !g || !info) return CUDA_ERROR_INVALID_VALUE;
  *info = {};
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (g->nodes.size() != e->ops.size()) {
    info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  }
  for (size_t i = 0; i < g->nodes.size(); i++)
    if (g->nodes[i]->op.node_type != e->ops[i].node_type) {
      info->result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
      info->errorNode = reinterpret_cast<CUgraphNode>(g->nodes[i]);
      return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
  for (size_t i = 0; i < g->nodes.size(); i++) e->ops[i] = g->nodes[i]->op;
  return CUDA_SUCCESS;
}
CUresult s_cuGraphExecDestroy(CUgraphExec handle) {
  SIM_ENTER(cuGraphExecDestroy);
  if (!forget(handle, "cuGraphExecDestroy got an executable graph handle that is destroyed or was never made"))
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
CUresult s_cuGraphExecKernelNodeSetParams(CUgraphExec handle, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* params) {
  SIM_ENTER(cuGraphExecKernelNodeSetParams);
  GraphExec* e = resolve_exec(handle, "cuGraphExecKernelNodeSetParams");
  if (!e || !params || !params->func) return CUDA_ERROR_INVALID_VALUE;
  auto* f = reinterpret_cast<Function*>(params->func);
  std::lock_guard<std::mutex> lock(capture_mutex);
  const auto at = std::find(e->nodes.begin(), e->nodes.end(), reinterpret_cast<Node*>(node));
  if (at == e->nodes.end()) return CUDA_ERROR_INVALID_VALUE;
  Operation& op = e->ops[at - e->nodes.begin()];
  if (op.node_type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  const unsigned grid[3] = {params->gridDimX, params->gridDimY, params->gridDimZ};
  const unsigned block[3] = {params->blockDimX, params->blockDimY, params->blockDimZ};
  op = kernel_operation(f, f->name, grid, block, params->sharedMemBytes, params->kernelParams);
  return CUDA_SUCCESS;
}

}  // extern "C"
}  // namespace

extern "C" {
// For tests that make a context of their own (with dlopen, as a user's other CUDA code would), beside the library's
// primary contexts; the library never calls these.
__attribute__((visibility("default"))) CUresult cuCtxCreate_v2(CUcontext* context, unsigned flags, CUdevice d) {
  if (!context || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (d < 0 || d >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  auto* foreign = new Device;  // never deleted: a late use is refused
  foreign->ordinal = d;
  foreign->peers.assign(device_count(), false);
  foreign->pool_access.assign(device_count(), CU_MEM_ACCESS_FLAGS_PROT_NONE);
  {
    std::lock_guard<std::mutex> lock(handles_mutex);
    foreign_contexts.insert(foreign);
  }
  current = foreign;
  *context = reinterpret_cast<CUcontext>(foreign);
  return CUDA_SUCCESS;
}
__attribute__((visibility("default"))) CUresult cuCtxDestroy_v2(CUcontext context) {
  std::lock_guard<std::mutex> lock(handles_mutex);
  if (foreign_contexts.erase(reinterpret_cast<Device*>(context)) == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (current == reinterpret_cast<Device*>(context)) current = nullptr;
  return CUDA_SUCCESS;
}
__attribute__((visibility("default"))) CUresult cuCtxSetCurrent(CUcontext context) { return s_cuCtxSetCurrent(context); }

__attribute__((visibility("default"))) CUresult cuDriverGetVersion(int* version) {
  SIM_ENTER(cuDriverGetVersion);
  *version = driver_version();
  return CUDA_SUCCESS;
}
__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int requested, cuuint64_t,
                                                                   CUdriverProcAddressQueryResult* status) {
  SIM_ENTER(cuGetProcAddress_v2);
  static const std::unordered_map<std::string, void*> table = {
#define SIM_TABLE(name) {#name, reinterpret_cast<void*>(&s_##name)},
      SIM_PROC_ENTRY_POINTS(SIM_TABLE)
#undef SIM_TABLE
  };
  auto it = table.find(symbol);
  // cuMemcpyBatchAsync came with CUDA 12.8 and changed its form in 13.0: the one asked for, if the driver has it.
  const bool batch = it != table.end() && std::strcmp(symbol, "cuMemcpyBatchAsync") == 0;
  if (it == table.end() || (batch && (driver_version() < 12080 || requested < 12080))) {
    *pfn = nullptr;
    if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  if (batch && requested < 13000) {
    *pfn = reinterpret_cast<void*>(&s_cuMemcpyBatchAsync_v12080);
  } else if (batch && driver_version() < 13000) {
    *pfn = nullptr;
    if (status) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  } else {
    *pfn = it->second;
  }
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}
}
