// Device-wide synchronize without blocking the event loop or a libuv pool thread. See Note [device synchronizer].
//
// Note [device synchronizer]: deviceSynchronize(ordinal) returns a promise and queues a request with the device's
// synchronizer, a native thread of this environment started on the device's first request. The thread takes every
// queued request, makes the device's primary context current, runs one cuCtxSynchronize for all of them (each
// request's work was queued before that call began), and posts the outcome to the JS thread through the
// environment's thread-safe function, which is ref'd exactly while requests are pending (so the event loop stays
// alive for them and no longer). Managed memory whose buffer was freed is queued the same way and released with
// cuMemFree after that cuCtxSynchronize: nothing the GPU may still use is freed. The thread never calls JS and takes
// the mutex only between driver calls. At environment teardown the cleanup hook (registered after the thread-safe
// function, so it runs before that function's own cleanup) closes the gate under the mutex, releases the
// thread-safe function and wakes the threads: each finishes its current cuCtxSynchronize, frees what is queued,
// drops pending requests without touching JS, and exits. The threads are detached; they hold the state through a
// shared_ptr, so it outlives the environment as long as they run.
#include "internal/native-thread.h"
#include "internal/synchronizer.h"
#include "stream/completion.h"

#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "binding/binding.h"
#include "internal/submission.h"
#include "stream/capture.h"
#include "binding/errors.h"
#include "internal/context.h"
#include "internal/device-faults.h"
#include "internal/live-counters.h"
#include "internal/loader.h"
#include "internal/lock-order.h"

namespace csp {

namespace {

struct Request {
  Napi::Promise::Deferred deferred;
  int device;
  CUresult result = CUDA_SUCCESS;
  int dependency = -1;  // the device whose fault `result` is, when not `device`'s own
};

struct ManagedFree {
  CUdeviceptr ptr;
  size_t bytes;
};

struct DeviceQueue {
  std::vector<Request*> requests;
  std::vector<ManagedFree> frees;
  bool running = false;  // the device's thread was started
};

}  // namespace

struct Synchronizers {
  OrderedMutex mutex{LockLevel::kLeaf, "device synchronizer queue"};
  Condition wake;
  bool open = true;                   // false once the environment is torn down
  std::map<int, DeviceQueue> devices;  // by ordinal
  Napi::ThreadSafeFunction tsfn;
  size_t pending = 0;  // requests not yet settled; JS thread only
};

namespace {

struct Delivery {
  Synchronizers* owner;
  std::vector<Request*> requests;
};

// Runs on: the JS thread of the environment that made the requests.
void deliver_now(Napi::Env env, Delivery* raw) {
  std::unique_ptr<Delivery> delivery(raw);
  std::vector<std::unique_ptr<Request>> requests;
  for (Request* r : delivery->requests) requests.emplace_back(r);
  if (env == nullptr) return;  // torn down: the promises die with their environment
  Synchronizers& owner = *delivery->owner;
  owner.pending -= requests.size();
  if (owner.pending == 0) owner.tsfn.Unref(env);
  for (auto& request : requests) {
    try {
      // Recorded work that failed is reported once the device's other work is done, as a driver error would be.
      FailurePointer recorded;
      if (request->result == CUDA_SUCCESS && request->dependency < 0) recorded = take_device_failure(request->device);
      if (!recorded && (request->result == CUDA_SUCCESS || request->dependency >= 0)) {
        // 0, or a wait_result that device.ts turns into the error naming the other device.
        request->deferred.Resolve(Napi::Number::New(env, wait_result(request->result, request->dependency)));
        continue;
      }
      try {
        if (recorded) throw CudaFailure(*recorded);
        throw CudaFailure{request->result, "cuCtxSynchronize", "device " + std::to_string(request->device)};
      } catch (...) {
        try {
          rethrow_as_js(env);
        } catch (const Napi::Error& error) {
          request->deferred.Reject(error.Value());
        }
      }
    } catch (...) {
      // napi_cannot_run_js (a worker being terminated): nothing is left to settle.
    }
  }
}

// Runs on: the JS thread of the environment, for each batch of requests a synchronizer thread finished.
void deliver(Napi::Env env, Napi::Function, Delivery* raw) {
  never_throws("device.synchronize() delivery", [&] { deliver_now(env, raw); });
}

CUresult synchronize_device(int device) {
  try {
    make_current(device);
  } catch (const CudaFailure& failure) {
    return failure.code;
  } catch (...) {
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  return check_quiet(drv().cuCtxSynchronize(), device);
}

// After a clean cuCtxSynchronize of `device`: a fault of a device that its streams' work waited on (`devices`, read
// before the synchronize), which the synchronize may not have seen (Note [cross-device dependencies]). Leaves the
// device's context current.
DependencyFault synchronized_dependencies(int device, uint64_t devices) {
  if (!devices) return {};
  const DependencyFault fault = dependency_fault(devices, true);
  make_current_quiet(device);
  return fault;
}

void free_now(int device, const ManagedFree& memory) {
  if (make_current_quiet(device)) check_quiet(drv().cuMemFree(memory.ptr), device);
  live().managed_bytes -= static_cast<int64_t>(memory.bytes);
}

// Frees `frees` once the device's queued work is done, where no synchronizer thread does it: on the calling thread,
// or, while a capture is open on the device, on the capture guard's thread once none is (Note [capture guard]).
// Never throws.
void free_after_device_work(int device, std::vector<ManagedFree> frees) {
  never_throws("managed memory free after device work", [&] {  // making the std::function may allocate
    outside_captures(device, [device, frees = std::move(frees)] {
      // After a fault the context is unusable and the driver reclaims everything with it; freeing is harmless.
      if (make_current_quiet(device)) check_quiet(drv().cuCtxSynchronize(), device);
      for (const ManagedFree& memory : frees) free_now(device, memory);
    });
  });
}

// Runs on: the device's synchronizer thread. See Note [device synchronizer].
void serve(std::shared_ptr<Synchronizers> owner, int device) {
  Synchronizers& s = *owner;
  std::unique_lock<OrderedMutex> lock(s.mutex);
  DeviceQueue& queue = s.devices[device];
  for (;;) {
    s.wake.wait(lock, [&] { return !s.open || !queue.requests.empty() || !queue.frees.empty(); });
    if (queue.requests.empty() && queue.frees.empty()) break;  // closed and nothing left to do
    auto delivery = std::make_unique<Delivery>();
    delivery->owner = &s;
    delivery->requests.swap(queue.requests);
    std::vector<ManagedFree> frees;
    frees.swap(queue.frees);
    lock.unlock();
    // A capture open on the device: cuCtxSynchronize would fail and invalidate it, and cuMemFree would synchronize.
    // Requests are refused with the driver's own code, without calling it; frees go to the capture guard, which
    // makes them once the captures end (Note [capture guard]).
    CUresult result = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    int dependency = -1;
    {
      DeviceWideCall call(device);
      if (call.allowed()) {
        const uint64_t dependencies = device_dependencies(device);
        result = synchronize_device(device);
        if (result == CUDA_SUCCESS) {
          const DependencyFault fault = synchronized_dependencies(device, dependencies);
          result = fault.code;
          dependency = fault.device;
        }
        // After a fault the context is unusable and the driver reclaims everything with it; freeing is harmless.
        for (const ManagedFree& memory : frees) free_now(device, memory);
      } else if (!frees.empty()) {
        free_after_device_work(device, std::move(frees));
      }
    }
    for (Request* request : delivery->requests) {
      request->result = result;
      request->dependency = dependency;
    }
    lock.lock();
    if (delivery->requests.empty()) continue;
    if (s.open && s.tsfn.NonBlockingCall(delivery.get(), deliver) == napi_ok) {
      delivery.release();
    } else {
      for (Request* request : delivery->requests) delete request;
    }
  }
  queue.running = false;
}

// Queues work for `device`'s thread, starting it when needed. Call with the mutex held and the gate open. Throws
// std::system_error when the thread cannot start; a later call tries again (what is queued stays for it).
void start_if_needed(const std::shared_ptr<Synchronizers>& owner, int device) {
  DeviceQueue& queue = owner->devices[device];
  if (!queue.running) {
    try {
      start_detached_thread("csp-synchronize", [owner, device] { serve(owner, device); });
    } catch (const std::system_error& e) {
      throw std::system_error(e.code(), "cuda-stream-pool could not start the synchronizer thread of device " +
                                            std::to_string(device) + ", which serves device.synchronize()");
    }
    queue.running = true;
  }
  owner->wake.notify_all();
}

// deviceSynchronize(ordinal) -> Promise<number>: settles once all work queued on the device so far is done; resolves
// 0, or a wait_result for a fault of a device that its work waited on.
Napi::Value device_synchronize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int device = info[0].As<Napi::Number>().Int32Value();
  make_current(device);  // an unusable device fails here, synchronously
  auto owner = synchronizers_of(env);
  auto request = std::make_unique<Request>(Request{Napi::Promise::Deferred::New(env), device});
  Napi::Promise promise = request->deferred.Promise();
  {
    std::lock_guard<OrderedMutex> lock(owner->mutex);
    auto& requests = owner->devices[device].requests;
    requests.push_back(request.get());
    try {
      start_if_needed(owner, device);
    } catch (...) {
      requests.pop_back();  // nobody would settle it
      throw;
    }
    request.release();
  }
  if (owner->pending++ == 0) owner->tsfn.Ref(env);
  return promise;
}

// deviceSynchronizeSync(ordinal) -> 0, or a wait_result for a fault of a device that its work waited on:
// cuCtxSynchronize on the calling thread (blocks it).
Napi::Value device_synchronize_sync(const Napi::CallbackInfo& info) {
  int device = info[0].As<Napi::Number>().Int32Value();
  make_current(device);
  DeviceWideCall call(device);  // see serve()
  if (!call.allowed())
    throw CudaFailure{CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuCtxSynchronize",
                      "device " + std::to_string(device) + ": a stream of the device is capturing a graph (in some thread)"};
  const uint64_t dependencies = device_dependencies(device);
  check(drv().cuCtxSynchronize(), "cuCtxSynchronize", device, "device " + std::to_string(device));
  note_device_idle(info.Env(), device);
  const DependencyFault fault = synchronized_dependencies(device, dependencies);
  if (fault.device < 0)  // recorded work that failed, once the device's other work is done
    if (FailurePointer failure = take_device_failure(device)) throw CudaFailure(*failure);
  return Napi::Number::New(info.Env(), wait_result(fault));
}

// deviceMemoryInfo(ordinal) -> { freeBytes, totalBytes } (cuMemGetInfo in the device's primary context).
Napi::Value device_memory_info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int device = info[0].As<Napi::Number>().Int32Value();
  make_current(device);
  size_t free_bytes = 0, total_bytes = 0;
  check(drv().cuMemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo", device, "device " + std::to_string(device));
  Napi::Object out = Napi::Object::New(env);
  out.Set("freeBytes", static_cast<double>(free_bytes));
  out.Set("totalBytes", static_cast<double>(total_bytes));
  return out;
}

}  // namespace

std::shared_ptr<Synchronizers> synchronizers_of(Napi::Env env) {
  AddonData& addon = AddonData::of(env);
  if (addon.synchronizers) return addon.synchronizers;
  auto owner = std::make_shared<Synchronizers>();
  owner->tsfn = Napi::ThreadSafeFunction::New(env, Napi::Function(), "cuda_stream_pool.device.synchronize", 0, 1);
  owner->tsfn.Unref(env);
  addon.synchronizers = owner;
  // Cleanup hook: runs at environment teardown (main thread exit or worker exit/terminate), before the thread-safe
  // function's own cleanup (hooks run in reverse order). Threads may be mid cuCtxSynchronize, idle, or not started;
  // at every stage they find the gate closed, free what is queued, and exit without touching JS.
  env.AddCleanupHook([owner]() {
    never_throws("device.synchronize() cleanup hook", [&] {
      std::lock_guard<OrderedMutex> lock(owner->mutex);
      if (!owner->open) return;
      owner->open = false;
      owner->tsfn.Release();
      owner->wake.notify_all();
    });
  });
  return owner;
}

void free_managed_after_work(const std::weak_ptr<Synchronizers>& weak, int device, CUdeviceptr ptr, size_t bytes) {
  if (auto owner = weak.lock()) {
    std::lock_guard<OrderedMutex> lock(owner->mutex);
    if (owner->open) {
      owner->devices[device].frees.push_back(ManagedFree{ptr, bytes});
      // Without a thread the free stays queued for the next one that starts (a later device.synchronize() or free).
      try {
        start_if_needed(owner, device);
      } catch (const std::system_error&) {
      }
      return;
    }
  }
  // No synchronizer thread will run again (only at teardown, or for memory freed without one).
  free_after_device_work(device, {ManagedFree{ptr, bytes}});
}

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kSynchronizerExports[] = {
    {"deviceSynchronize", "number", entry<device_synchronize>},
    {"deviceSynchronizeSync", "number", entry<device_synchronize_sync>},
    {"deviceMemoryInfo", "number", entry<device_memory_info>},
};

void register_synchronizer(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kSynchronizerExports);
}

}  // namespace csp
