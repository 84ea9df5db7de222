// The addon's entry: per-environment data and the exports of every concept file. Context-aware: each worker
// thread loads the addon again and gets its own AddonData.
#include <atomic>

#include "binding/binding.h"

namespace csp {

Napi::Object init(Napi::Env env, Napi::Object exports) {
  static std::atomic<int> next_environment{1};
  auto* data = new AddonData();
  data->environment_id = next_environment++;
  env.SetInstanceData<AddonData>(data);
  exports.Set("environmentId", Napi::Number::New(env, data->environment_id));
  register_device(env, exports);
  register_stream(env, exports);
  register_event(env, exports);
  register_completion(env, exports);
  register_module(env, exports);
  register_pool(env, exports);
  register_device_buffer(env, exports);
  register_pinned(env, exports);
  register_copy(env, exports);
  register_staging(env, exports);
  register_memory_pool(env, exports);
  register_nvrtc(env, exports);
  register_synchronizer(env, exports);
  register_managed(env, exports);
  register_graph(env, exports);
  return exports;
}

}  // namespace csp

static Napi::Object init_addon(Napi::Env env, Napi::Object exports) { return csp::init(env, exports); }
NODE_API_MODULE(cuda_stream_pool, init_addon)
