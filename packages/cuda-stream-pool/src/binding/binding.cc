// The addon's entry: per-environment data and the exports of every concept file. Context-aware: each worker
// thread loads the addon again and gets its own AddonData.
#include <atomic>

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

// handleTrack(ref) -> false when the object was released already, else true: its owner is now registered with the
// FinalizationRegistry (Note [handle table]).
Napi::Value handle_track(const Napi::CallbackInfo& info) {
  const double handle = info[0].As<Napi::Number>().DoubleValue();
  return Napi::Boolean::New(info.Env(), AddonData::of(info.Env()).handles.track(handle));
}

// handleCount() -> this thread's live handles, for cuda.liveObjects().
Napi::Value handle_count(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(AddonData::of(info.Env()).handles.live()));
}

// factScratch(scratch): Note [fact scratch]. The array is the binding module's for the thread's lifetime.
Napi::Value fact_scratch(const Napi::CallbackInfo& info) {
  Napi::TypedArray array = info[0].As<Napi::TypedArray>();
  if (array.TypedArrayType() != napi_biguint64_array || array.ElementLength() < kFactSlots)
    throw Napi::TypeError::New(info.Env(), "cuda-stream-pool internal: the fact scratch is a BigUint64Array of 4");
  AddonData::of(info.Env()).facts = reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(array.ArrayBuffer().Data()) + array.ByteOffset());
  return info.Env().Undefined();
}

// launchScratch(scratch): Note [launch scratch]. The array is the binding module's for the thread's lifetime.
Napi::Value launch_scratch_set(const Napi::CallbackInfo& info) {
  Napi::TypedArray array = info[0].As<Napi::TypedArray>();
  if (array.TypedArrayType() != napi_uint32_array || array.ElementLength() < kLaunchSlots)
    throw Napi::TypeError::New(info.Env(), "cuda-stream-pool internal: the launch scratch is a Uint32Array of " +
                                               std::to_string(kLaunchSlots));
  AddonData::of(info.Env()).launch_shape =
      reinterpret_cast<const uint32_t*>(static_cast<uint8_t*>(array.ArrayBuffer().Data()) + array.ByteOffset());
  return info.Env().Undefined();
}

const Export kHandleExports[] = {
    {"handleRelease", "number, boolean", unordered<handle_release>},
    {"handleTrack", "number", unordered<handle_track>},
    {"handleCount", "", unordered<handle_count>},
    {"factScratch", "object", unordered<fact_scratch>},
    {"launchScratch", "object", unordered<launch_scratch_set>},
};

}  // namespace

const uint32_t* launch_scratch(Napi::Env env) {
  const uint32_t* shape = AddonData::of(env).launch_shape;
  if (shape == nullptr) throw std::logic_error("the launch scratch was not set");
  return shape;
}

uint64_t* fact_scratch(Napi::Env env) {
  uint64_t* facts = AddonData::of(env).facts;
  if (facts == nullptr) throw std::logic_error("the fact scratch was not set");
  return facts;
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
