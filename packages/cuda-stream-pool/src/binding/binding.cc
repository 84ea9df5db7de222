// The addon's entry: per-environment data and the exports of every concept file. Context-aware: each worker
// thread loads the addon again and gets its own AddonData.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "binding/binding.h"

#include "internal/submission.h"

namespace csp {

AddonData::AddonData() = default;
AddonData::~AddonData() = default;

HandleTable& handle_table(napi_env env) {
  void* data = nullptr;
  napi_get_instance_data(env, &data);
  return static_cast<AddonData*>(data)->handles;
}

namespace {

// handleRelease(ref, collected) -> whether the handle named a live object: its owner was collected (the
// FinalizationRegistry's callback, collected = true), or a native object JS held for a moment (a marker, a landing) is done.
Napi::Value handle_release(const Napi::CallbackInfo& info) {
  const double handle = info[0].As<Napi::Number>().DoubleValue();
  const bool collected = info[1].As<Napi::Boolean>().Value();
  // A collected owner's object is freed now (its forget action): after the work recorded with it was issued, since a
  // kernel argument's buffer is not held by the recorded launch (Note [deferred submission]).
  if (collected) issue_recorded(info.Env());
  return Napi::Boolean::New(info.Env(), AddonData::of(info.Env()).handles.release(handle, collected));
}

// handleTrackAll(handles: Float64Array, count): for each of the first `count` handles, marks its slot as registered
// with the FinalizationRegistry (Note [handle table]), or overwrites it with 0 when its object was released already.
// One call for a whole nursery flush: a call per handle cost more than the registration it saves.
Napi::Value handle_track_all(const Napi::CallbackInfo& info) {
  auto handles = info[0].As<Napi::TypedArray>().As<Napi::Float64Array>();
  const size_t count = std::min<size_t>(info[1].As<Napi::Number>().Uint32Value(), handles.ElementLength());
  HandleTable& table = AddonData::of(info.Env()).handles;
  double* data = handles.Data();
  for (size_t i = 0; i < count; i++)
    if (!table.track(data[i])) data[i] = 0;
  return info.Env().Undefined();
}

// handleCount() -> this thread's live handles, for cuda.liveObjects().
Napi::Value handle_count(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(AddonData::of(info.Env()).handles.live()));
}

// The environment's scratch array `kept` of `slots` elements (Note [fact scratch], Note [launch scratch]), made on
// the first call and kept by the environment, so that every evaluation of the binding module in a thread (a bundler's
// or a test runner's second copy) shares it; `bytes` is where its elements are.
template <class Element>
Napi::Value scratch(Napi::Env env, Napi::Reference<Napi::TypedArrayOf<Element>>& kept, Element*& bytes, size_t slots,
                    napi_typedarray_type type) {
  if (kept.IsEmpty()) {
    auto array = Napi::TypedArrayOf<Element>::New(env, slots, type);
    bytes = array.Data();
    kept = Napi::Persistent(array);
  }
  return kept.Value();
}

// factScratch() -> BigUint64Array
Napi::Value fact_scratch(const Napi::CallbackInfo& info) {
  AddonData& data = AddonData::of(info.Env());
  return scratch(info.Env(), data.fact_array, data.facts, kFactSlots, napi_biguint64_array);
}

// launchScratch() -> Uint32Array
Napi::Value launch_scratch_get(const Napi::CallbackInfo& info) {
  AddonData& data = AddonData::of(info.Env());
  return scratch(info.Env(), data.launch_array, data.launch_shape, kLaunchSlots, napi_uint32_array);
}

// argumentScratch() -> Uint8Array of kArgumentScratchBytes (Note [launch scratch])
Napi::Value argument_scratch_get(const Napi::CallbackInfo& info) {
  AddonData& data = AddonData::of(info.Env());
  return scratch(info.Env(), data.argument_array, data.arguments, kArgumentScratchBytes, napi_uint8_array);
}

// operandScratch() -> Float64Array
Napi::Value operand_scratch_get(const Napi::CallbackInfo& info) {
  AddonData& data = AddonData::of(info.Env());
  return scratch(info.Env(), data.operand_array, data.operands, kOperandSlots, napi_float64_array);
}

// threadShared() -> the environment's one plain object for the JS state that every evaluation of the library's
// modules in this thread must share (the completion engine's waits: the channel is one per environment).
Napi::Value thread_shared(const Napi::CallbackInfo& info) {
  AddonData& data = AddonData::of(info.Env());
  if (data.shared.IsEmpty()) data.shared = Napi::Persistent(Napi::Object::New(info.Env()));
  return data.shared.Value();
}

// The bytes of a scratch array that JS made at load (binding.ts asks for both), or a logic_error naming it.
template <class Element>
Element* scratch_bytes(Element* bytes, const char* name) {
  if (bytes == nullptr) throw std::logic_error(std::string("the ") + name + " scratch was not set");
  return bytes;
}

const Export kHandleExports[] = {
    {"handleRelease", "number, boolean", unordered<handle_release>},
    {"handleTrackAll", "object, number", unordered<handle_track_all>},
    {"handleCount", "", unordered<handle_count>},
    {"factScratch", "", unordered<fact_scratch>},
    {"launchScratch", "", unordered<launch_scratch_get>},
    {"argumentScratch", "", unordered<argument_scratch_get>},
    {"operandScratch", "", unordered<operand_scratch_get>},
    {"threadShared", "", unordered<thread_shared>},
};

}  // namespace

const uint32_t* launch_scratch(Napi::Env env) { return scratch_bytes(AddonData::of(env).launch_shape, "launch"); }

const uint8_t* launch_arguments(Napi::Env env, size_t bytes) {
  const uint8_t* arguments = scratch_bytes(AddonData::of(env).arguments, "argument");
  if (bytes > kArgumentScratchBytes) throw std::logic_error("a launch named more argument bytes than the scratch holds");
  return arguments;
}

uint64_t* fact_scratch(Napi::Env env) { return scratch_bytes(AddonData::of(env).facts, "fact"); }

Operands::Operands(Napi::Env env)
    : env_(env), data_(AddonData::of(env)), values_(scratch_bytes(data_.operands, "operand")) {}

size_t Operands::size(size_t slot) const {
  const double value = values_[slot];
  if (!(value >= 0 && value <= 9007199254740992.0) || value != std::floor(value))
    throw Napi::RangeError::New(env_, "cuda-stream-pool internal: operand " + std::to_string(slot) +
                                          " is no byte count or offset: " + std::to_string(value));
  return static_cast<size_t>(value);
}

Napi::Object init(Napi::Env env, Napi::Object exports) {
  static std::atomic<int> next_environment{1};
  auto* data = new AddonData();
  data->environment_id = next_environment++;
  env.SetInstanceData<AddonData>(data);
  exports.Set("environmentId", Napi::Number::New(env, data->environment_id));
  export_all(env, exports, kHandleExports);
  register_device(env, exports);
  register_partition(env, exports);
  register_stream(env, exports);
  register_event(env, exports);
  register_completion(env, exports);
  register_module(env, exports);
  register_pool(env, exports);
  register_device_buffer(env, exports);
  register_ipc(env, exports);
  register_pinned(env, exports);
  register_host_registration(env, exports);
  register_copy(env, exports);
  register_staging(env, exports);
  register_memory_pool(env, exports);
  register_nvrtc(env, exports);
  register_synchronizer(env, exports);
  register_managed(env, exports);
  register_graph(env, exports);
  register_submission(env, exports);
  return exports;
}

}  // namespace csp

static Napi::Object init_addon(Napi::Env env, Napi::Object exports) { return csp::init(env, exports); }
NODE_API_MODULE(cuda_stream_pool, init_addon)
