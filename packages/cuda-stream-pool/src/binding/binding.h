// Per-environment state (one per main thread or worker): every JS reference the addon holds lives here.
// Process-wide state is only the driver table, contexts, pools, guards and counters (src/internal/DESIGN.md).
// Also how JS calls in: the export tables, and js_entry, the wrapper every exported function goes through.
#pragma once
#include <napi.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "binding/errors.h"
#include "internal/handle-table.h"
#include "internal/native-object.h"

namespace csp {

struct Channel;        // completion.h
class Submitter;       // internal/submission.h
struct Synchronizers;  // synchronizer.h

struct AddonData {
  Napi::FunctionReference error_factory;  // (kind, ...) => Error, set by JS at load
  std::shared_ptr<Channel> channel;       // poller -> JS thread hand-off, created by completionInit
  int environment_id = 0;                 // process-unique, names this thread as a lease holder
  std::shared_ptr<Synchronizers> synchronizers;  // device-wide waits (synchronizer.cc), created on first use
  // The environment's fact, launch and operand scratch arrays (Note [fact scratch], Note [launch scratch], Note
  // [operand scratch]), made on first use, and where their elements are.
  Napi::Reference<Napi::TypedArrayOf<uint64_t>> fact_array;
  Napi::Reference<Napi::Uint32Array> launch_array;
  Napi::Reference<Napi::Float64Array> operand_array;  // Note [operand scratch]
  Napi::Reference<Napi::TypedArrayOf<uint8_t>> argument_array;  // Note [launch scratch]
  uint64_t* facts = nullptr;
  uint32_t* launch_shape = nullptr;
  double* operands = nullptr;
  uint8_t* arguments = nullptr;
  Napi::ObjectReference shared;  // threadShared(): JS state of every copy of the library's modules in this thread
  HandleTable handles;
  // Last, so that it goes first at teardown: what is still recorded is issued while everything else is still here.
  // Deferred mode only: the submission threads, made on first record, each issuing the streams assigned to it
  // (internal/submission.h).
  std::vector<std::unique_ptr<Submitter>> submitters;

  AddonData();
  ~AddonData();

  static AddonData& of(Napi::Env env) { return *env.GetInstanceData<AddonData>(); }
};

// Note [fact scratch]: facts a call hands back to JS without making a JS object (a new or freed buffer's address, a
// destroyed stream's handle and id) are written to a BigUint64Array of kFactSlots that the addon made for the thread, and read
// by the caller only when it still needs them. A result object or array per call cost more than the call.
constexpr size_t kFactSlots = 4;
uint64_t* fact_scratch(Napi::Env env);

// Note [launch scratch]: a launch's shape (grid x, y, z, block x, y, z, dynamic shared memory bytes, cluster x, y, z
// and attribute flags; kLaunchSlots 32-bit words) is written by kernel.launch() into a Uint32Array that the addon
// made for the thread, right before the native call, instead of passed as eleven numbers: reading them through
// Node-API was about a quarter of a recorded launch (null driver, one CPU: 312 -> 236 ns). Word 11 is the byte count
// of the argument slots, which JS copies into the thread's argument scratch, a Uint8Array of kArgumentScratchBytes
// that the addon also made: a typed array passed as an argument cost two napi_get_typedarray_info calls, about 400
// instructions, a third of the native launch call. It holds the slots of any kernel the driver can launch (at most
// 32,764 bytes of parameters of at least 4 bytes each: 8,191 slots of 8 bytes), and it is never replaced, so that
// every evaluation of the binding module in the thread writes where the launch reads.
constexpr size_t kLaunchSlots = 12;
constexpr size_t kArgumentScratchBytes = 65536;
const uint32_t* launch_scratch(Napi::Env env);
// The argument scratch's first `bytes` bytes; a logic_error beyond it (JS refuses such a launch first).
const uint8_t* launch_arguments(Napi::Env env, size_t bytes);

// Note [operand scratch]: the hottest calls that name several objects (a copy between device and pinned memory: the
// stream, two buffers, two offsets and a byte count) take no arguments; JS writes their operands, handles and sizes
// as numbers, into a Float64Array of kOperandSlots that the addon made for the thread, right before the call. Six
// arguments read through Node-API (a type check and a conversion each, and the environment's data looked up per
// handle) were about a quarter of a pinned copy's own cost on the null driver.
constexpr size_t kOperandSlots = 6;

// One call's view of its operands (Note [operand scratch]). Any value that is no handle of the kind, or no size, is
// refused as find_native and to_size refuse an argument.
class Operands {
 public:
  explicit Operands(Napi::Env env);
  template <class B>
  Borrowed<B> borrow(size_t slot) const {
    return borrow_native<B>(env_, data_.handles, values_[slot]);
  }
  template <class B>
  std::shared_ptr<B> unwrap(size_t slot) const {
    return std::static_pointer_cast<B>(find_native<B>(env_, data_.handles, values_[slot]));
  }
  // A byte count or offset: an integer from 0 to 2^53 (the TS layer checked the real range); else a RangeError.
  size_t size(size_t slot) const;
  int environment() const { return data_.environment_id; }

 private:
  Napi::Env env_;
  AddonData& data_;
  const double* values_;
};

// One function a concept file exports: its JS name, the kinds of the arguments JS passes it (comma-separated, each
// one of number, bigint, boolean, string, ref, ref? (a NativeRef or undefined), object, array, function, Uint8Array,
// ArrayBuffer), and its maker. The table is the native side's only list: test/cpu/contract.test.ts checks it against
// NativeBinding (src/binding/binding.ts) and against how each function reads `info`, so that neither drifts.
struct Export {
  const char* name;
  const char* args;
  Napi::Function (*make)(Napi::Env env, const char* name, void* data);
};

// Waits until everything the environment recorded was issued (Note [deferred submission] in
// internal/submission.h); nothing to do in direct mode.
void issue_recorded(Napi::Env env);

// Wraps an N-API callback so that CudaFailure/Destroyed/Unavailable reach JS as their public classes. `Ordered`: the
// call first waits until everything this environment recorded was issued (every call but the recording ones and
// pure bookkeeping, Note [deferred submission]).
// Whether the calling thread is in an ordered call (js_entry with Ordered): its stream uses then also wait for the
// operations other threads recorded on the stream (NativeStream::entered_for_use).
extern thread_local bool in_ordered_call;

// Whether this process records stream-ordered operations (CUDA_STREAM_POOL_SUBMISSION=deferred). Read once.
bool deferred_mode();

template <Napi::Value (*F)(const Napi::CallbackInfo&), bool Ordered = true>
Napi::Value js_entry(const Napi::CallbackInfo& info) {
  struct OrderedScope {
    bool before = in_ordered_call;
    OrderedScope() { in_ordered_call = Ordered; }
    ~OrderedScope() { in_ordered_call = before; }
  };
  try {
    if (!deferred_mode()) return F(info);
    OrderedScope scope;
    if (Ordered) issue_recorded(info.Env());
    return F(info);
  } catch (const Napi::Error&) {
    throw;
  } catch (...) {
    rethrow_as_js(info.Env());
  }
}

// A function whose C++ exceptions reach JS as the library's error classes (js_entry).
template <Napi::Value (*F)(const Napi::CallbackInfo&)>
Napi::Function entry(Napi::Env env, const char* name, void* data) {
  return Napi::Function::New<js_entry<F>>(env, name, data);
}

// A function that records stream-ordered work (or makes no driver call): it does not wait for recorded work first.
template <Napi::Value (*F)(const Napi::CallbackInfo&)>
Napi::Function unordered(Napi::Env env, const char* name, void* data) {
  return Napi::Function::New<js_entry<F, false>>(env, name, data);
}

// A function that must run without js_entry (it registers or builds the error factory's errors itself).
template <Napi::Value (*F)(const Napi::CallbackInfo&)>
Napi::Function plain(Napi::Env env, const char* name, void* data) {
  return Napi::Function::New<F>(env, name, data);
}

// Settles a promise's deferred from an AsyncWorker's OnOK/OnError: quietly does nothing when the environment is
// going away (napi_cannot_run_js), where there is nobody left to settle for.
template <class F>
void settle_quietly(F&& settle) {
  try {
    settle();
  } catch (const Napi::Error&) {
  }
}

// Adds every function of `table` to the exports; `data` becomes each one's info.Data().
template <size_t N>
void export_all(Napi::Env env, Napi::Object exports, const Export (&table)[N], void* data = nullptr) {
  for (const Export& row : table) exports.Set(row.name, row.make(env, row.name, data));
}

// Each concept file adds its functions to the exports object.
void register_device(Napi::Env env, Napi::Object exports);
void register_partition(Napi::Env env, Napi::Object exports);
void register_stream(Napi::Env env, Napi::Object exports);
void register_event(Napi::Env env, Napi::Object exports);
void register_completion(Napi::Env env, Napi::Object exports);
void register_module(Napi::Env env, Napi::Object exports);
void register_pool(Napi::Env env, Napi::Object exports);
void register_device_buffer(Napi::Env env, Napi::Object exports);
void register_ipc(Napi::Env env, Napi::Object exports);
void register_pinned(Napi::Env env, Napi::Object exports);
void register_host_registration(Napi::Env env, Napi::Object exports);
void register_copy(Napi::Env env, Napi::Object exports);
void register_staging(Napi::Env env, Napi::Object exports);
void register_memory_pool(Napi::Env env, Napi::Object exports);
void register_nvrtc(Napi::Env env, Napi::Object exports);
void register_synchronizer(Napi::Env env, Napi::Object exports);
void register_managed(Napi::Env env, Napi::Object exports);
void register_graph(Napi::Env env, Napi::Object exports);
void register_submission(Napi::Env env, Napi::Object exports);

}  // namespace csp
