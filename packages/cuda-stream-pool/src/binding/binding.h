// Per-environment state (one per main thread or worker): every JS reference the addon holds lives here.
// Process-wide state is only the driver table, contexts, pools, guards and counters (src/internal/DESIGN.md).
#pragma once
#include <napi.h>

#include <memory>

namespace csp {

struct Channel;        // completion.h
struct Synchronizers;  // synchronizer.h

struct AddonData {
  Napi::FunctionReference error_factory;  // (kind, ...) => Error, set by JS at load
  std::shared_ptr<Channel> channel;       // poller -> JS thread hand-off, created by completionInit
  int environment_id = 0;                 // process-unique, names this thread as a lease holder
  std::shared_ptr<Synchronizers> synchronizers;  // device-wide waits (synchronizer.cc), created on first use

  static AddonData& of(Napi::Env env) { return *env.GetInstanceData<AddonData>(); }
};

// Each concept file adds its functions to the exports object.
void register_device(Napi::Env env, Napi::Object exports);
void register_stream(Napi::Env env, Napi::Object exports);
void register_event(Napi::Env env, Napi::Object exports);
void register_completion(Napi::Env env, Napi::Object exports);
void register_module(Napi::Env env, Napi::Object exports);
void register_pool(Napi::Env env, Napi::Object exports);
void register_device_buffer(Napi::Env env, Napi::Object exports);
void register_pinned(Napi::Env env, Napi::Object exports);
void register_copy(Napi::Env env, Napi::Object exports);
void register_staging(Napi::Env env, Napi::Object exports);
void register_memory_pool(Napi::Env env, Napi::Object exports);
void register_nvrtc(Napi::Env env, Napi::Object exports);
void register_synchronizer(Napi::Env env, Napi::Object exports);
void register_managed(Napi::Env env, Napi::Object exports);
void register_graph(Napi::Env env, Napi::Object exports);

}  // namespace csp
