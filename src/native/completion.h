// The completion path: host function -> thread-safe function -> promise settled on the JS thread.
//
// Note [completion path]: cuLaunchHostFunc runs `on_host` on a driver thread once the stream reaches it. The host
// function makes no CUDA call and takes only the channel mutex, which a JS thread holds just long enough to close the
// channel at environment teardown (never across a CUDA call). It first copies staging into JS destination arrays
// (so a device-to-host copy lands before the completion is reported) and runs each copy's lock-free `done` (staging
// goes back to the pinned cache, see Note [staging] in memory.cc), then posts a token to the JS thread. The JS
// side keeps the thread-safe function ref'd exactly while completions are pending (completionRef/Unref), and a poll
// backs every wait because the driver stops running host functions once a context has faulted.
#pragma once
#include <napi.h>
#include "cuda-driver.h"

#include <mutex>
#include <vector>

namespace csp {

struct Channel {
  std::mutex mutex;
  bool open = true;  // false once the environment is torn down: completions are dropped
  Napi::ThreadSafeFunction tsfn;
};

// One staged device-to-host copy finished by the host function: `bytes` from `source` (pinned staging) into
// `destination` (a JS array kept alive until the completion is delivered). Then `done(context)` runs on the same
// driver thread, also when the environment is gone and the memcpy is skipped; it may not call CUDA or take a lock
// (it marks the copy landed and hands the staging back, see Note [staging] in memory.cc).
struct HostCopy {
  void* destination;
  const void* source;
  size_t bytes;
  void (*done)(void* context) = nullptr;
  void* context = nullptr;
};

// Enqueues on `stream` a host function that performs `copies` in order (see Note [completion path]); `keep_alive`
// holds strong references to the destination arrays, deleted on this JS thread once the host function ran.
// Throws CudaFailure when nothing could be enqueued (the driver refused, or completionInit never ran); then no copy
// and no `done` runs (the caller still owns what the copies point at) and the keep_alive references are deleted.
void enqueue_host_copies(Napi::Env env, CUstream stream, int device, std::vector<HostCopy> copies,
                         std::vector<napi_ref> keep_alive);

}  // namespace csp
