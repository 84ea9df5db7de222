// The completion path: host function -> thread-safe function -> promise settled on the JS thread.
//
// Note [completion path]: cuLaunchHostFunc runs `on_host` on a driver thread once the stream reaches it. The host
// function makes no CUDA call and takes only the channel mutex, which a JS thread holds just long enough to close the
// channel at environment teardown (never across a CUDA call). It first copies staging into JS destination arrays
// (so a device-to-host copy lands before the completion is reported), then posts a token to the JS thread. The JS
// side keeps the thread-safe function ref'd exactly while completions are pending (completionRef/Unref), and a poll
// backs every wait because the driver stops running host functions once a context has faulted.
#pragma once
#include <napi.h>

#include <mutex>
#include <vector>

namespace csp {

struct Channel {
  std::mutex mutex;
  bool open = true;  // false once the environment is torn down: completions are dropped
  Napi::ThreadSafeFunction tsfn;
};

struct HostCopy {
  void* destination;
  const void* source;
  size_t bytes;
};

}  // namespace csp
