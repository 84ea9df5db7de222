// Completion plumbing. See Note [completion path] in completion.h.
#include "completion.h"

#include <cstring>
#include <memory>

#include "addon.h"
#include "context.h"
#include "event.h"
#include "loader.h"
#include "stream.h"

namespace csp {
namespace {

struct Completion {
  std::shared_ptr<Channel> channel;
  double token = 0;                 // 0: nothing to dispatch (staged copies only)
  std::vector<HostCopy> copies;
  std::vector<napi_ref> keep_alive;  // deleted only on the JS thread (in deliver); leaked with a dead environment
};

// Runs on: the JS thread of the environment that enqueued the completion.
void deliver(Napi::Env env, Napi::Function dispatch, Completion* raw) {
  std::unique_ptr<Completion> completion(raw);
  if (env == nullptr) return;
  for (napi_ref ref : completion->keep_alive) napi_delete_reference(env, ref);
  if (dispatch.IsEmpty() || completion->token == 0) return;
  dispatch.Call({Napi::Number::New(env, completion->token)});
}

// Runs on: a driver thread. No CUDA call; see Note [completion path].
void CUDA_CB on_host(void* data) {
  std::unique_ptr<Completion> completion(static_cast<Completion*>(data));
  Channel& channel = *completion->channel;
  {
    std::lock_guard<std::mutex> lock(channel.mutex);
    if (channel.open) {
      for (const HostCopy& copy : completion->copies) std::memcpy(copy.destination, copy.source, copy.bytes);
    }
    // else: the destination arrays died with their environment; the copies are dropped.
    for (const HostCopy& copy : completion->copies)
      if (copy.done) copy.done(copy.context);
    completion->copies.clear();
    if (channel.open && channel.tsfn.NonBlockingCall(completion.get(), deliver) == napi_ok) completion.release();
  }
}

Channel& channel_of(Napi::Env env) {
  AddonData& addon = AddonData::of(env);
  if (!addon.channel) throw Napi::Error::New(env, "cuda-stream-pool internal: completionInit was not called");
  return *addon.channel;
}

// completionInit(dispatch: (token) => void): creates this environment's thread-safe function, unref'd.
Napi::Value completion_init(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  AddonData& addon = AddonData::of(env);
  auto channel = std::make_shared<Channel>();
  channel->tsfn = Napi::ThreadSafeFunction::New(env, info[0].As<Napi::Function>(),
                                                "cuda_stream_pool.completion", 0, 1);
  channel->tsfn.Unref(env);
  addon.channel = channel;
  // Cleanup hook: runs at environment teardown (main thread exit or worker exit/terminate), before the thread-safe
  // function's own cleanup (hooks run in reverse order). Completions still queued in the driver find the channel
  // closed and only free themselves; harmless at any stage, including when nothing is pending.
  env.AddCleanupHook([channel]() {
    std::lock_guard<std::mutex> lock(channel->mutex);
    if (!channel->open) return;
    channel->open = false;
    channel->tsfn.Release();
  });
  return env.Undefined();
}

Napi::Value completion_ref(const Napi::CallbackInfo& info) {
  channel_of(info.Env()).tsfn.Ref(info.Env());
  return info.Env().Undefined();
}

Napi::Value completion_unref(const Napi::CallbackInfo& info) {
  channel_of(info.Env()).tsfn.Unref(info.Env());
  return info.Env().Undefined();
}

void launch(Napi::Env env, CUstream stream, int device, std::unique_ptr<Completion> completion) {
  check(drv().cuLaunchHostFunc(stream, on_host, completion.get()), "cuLaunchHostFunc", device,
        "device " + std::to_string(device));
  completion.release();
}

}  // namespace

void enqueue_host_copies(Napi::Env env, CUstream stream, int device, std::vector<HostCopy> copies,
                         std::vector<napi_ref> keep_alive) {
  auto completion = std::make_unique<Completion>();
  completion->channel = AddonData::of(env).channel;
  completion->copies = std::move(copies);
  completion->keep_alive = std::move(keep_alive);
  CUresult r = CUDA_ERROR_NOT_INITIALIZED;  // completionInit never ran: nothing could deliver
  if (completion->channel) r = drv().cuLaunchHostFunc(stream, on_host, completion.get());
  if (r == CUDA_SUCCESS) {
    completion.release();
    return;
  }
  for (napi_ref ref : completion->keep_alive) napi_delete_reference(env, ref);
  check(r, "cuLaunchHostFunc", device, "device " + std::to_string(device));
}

namespace {

// Host functions never go to the legacy stream (DESIGN.md rules): wait on an event on a private stream instead.
void notify_after_event(Napi::Env env, CUevent event, int device, std::unique_ptr<Completion> completion) {
  CUstream waiter = nullptr;
  check(drv().cuStreamCreate(&waiter, CU_STREAM_NON_BLOCKING), "cuStreamCreate", device);
  CUresult r = drv().cuStreamWaitEvent(waiter, event, 0);
  if (r == CUDA_SUCCESS) r = drv().cuLaunchHostFunc(waiter, on_host, completion.get());
  if (r == CUDA_SUCCESS) completion.release();
  check_quiet(drv().cuStreamDestroy(waiter), device);  // released by the driver once the host function ran
  check(r, "cuLaunchHostFunc", device, "device " + std::to_string(device));
}

std::unique_ptr<Completion> make_completion(const Napi::CallbackInfo& info) {
  auto completion = std::make_unique<Completion>();
  completion->channel = AddonData::of(info.Env()).channel;
  completion->token = info[1].As<Napi::Number>().DoubleValue();
  return completion;
}

// streamNotify(streamBox, token): dispatch(token) runs on this JS thread once the stream's queued work is done.
Napi::Value stream_notify(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  channel_of(env);
  auto stream = unwrap_box<StreamBox>(info[0]);
  Use<StreamBox> use(*stream, "Stream", "synchronize");
  make_current(stream->device);
  auto completion = make_completion(info);
  if (stream->handle == CU_STREAM_LEGACY) {
    auto marker = create_event(stream->device, CU_EVENT_DISABLE_TIMING, false);
    check(drv().cuEventRecord(marker->handle, stream->handle), "cuEventRecord", stream->device);
    notify_after_event(env, marker->handle, stream->device, std::move(completion));
  } else {
    launch(env, stream->handle, stream->device, std::move(completion));
  }
  return env.Undefined();
}

// eventNotify(eventBox, token): dispatch(token) runs once the event's recorded work is done.
Napi::Value event_notify(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  channel_of(env);
  auto event = unwrap_box<EventBox>(info[0]);
  Use<EventBox> use(*event, "Event", "synchronize");
  make_current(event->device);
  notify_after_event(env, event->handle, event->device, make_completion(info));
  return env.Undefined();
}

}  // namespace

void register_completion(Napi::Env env, Napi::Object exports) {
  exports.Set("completionInit", Napi::Function::New<js_entry<completion_init>>(env, "completionInit"));
  exports.Set("completionRef", Napi::Function::New<js_entry<completion_ref>>(env, "completionRef"));
  exports.Set("completionUnref", Napi::Function::New<js_entry<completion_unref>>(env, "completionUnref"));
  exports.Set("streamNotify", Napi::Function::New<js_entry<stream_notify>>(env, "streamNotify"));
  exports.Set("eventNotify", Napi::Function::New<js_entry<event_notify>>(env, "eventNotify"));
}

}  // namespace csp
