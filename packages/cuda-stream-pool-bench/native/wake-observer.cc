// The wake-latency row of `cuda-stream-pool bench micro`: a C++ observer thread that sees each wait's work finish, so
// the benchmark can time how long the library then takes to resolve the wait's promise on the JS thread.
//
// The observer spins on the very words the library's poller reads: each wait's completion ticket (the stream's ticket
// word in mapped pinned memory, and the value its marker writes), given by the library. It stamps each with the
// steady clock (CLOCK_MONOTONIC on Linux, the clock of Node's process.hrtime), so the JS side subtracts its own
// stamps directly. The streams are held behind a gate (cuStreamWaitValue64 on a word of this observer) until every
// wait is issued and watched, so the observer and the poller both start while every wait is still in flight.
//
// Runs on: wakeObserver* on one JS thread; the observer on a thread of its own, from Release to Finish.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "internal/loader.h"
#include "internal/native-thread.h"
#include "driver.h"

namespace csp::bench {
namespace {

struct Target {
  const uint64_t* word = nullptr;
  uint64_t value = 0;
};

struct Observer {
  int device = 0;
  std::vector<Target> targets;
  std::vector<double> seen_ns;  // steady-clock ns when each target was first seen reached, 0 if never
  std::vector<CUstream> held;   // the streams waiting on the gate
  uint64_t* gate = nullptr;     // mapped pinned word the held streams wait on
  CUdeviceptr gate_address = 0;
  std::atomic<bool> stop{false};
  pthread_t thread{};
  bool running = false;

  // Runs as a finalizer, on the JS thread, at any later time: it must not wait for the GPU (a cuCtxSynchronize here
  // blocked the JS thread through the whole next run, whose promises then all resolved at its end). Finish frees the
  // gate; an observer dropped without it (an error mid-row) leaks its 8 bytes rather than free them under streams
  // that may still read them.
  ~Observer() {
    open_gate();  // a stream must never be left waiting forever
    finish();
  }

  void open_gate() {
    if (gate) __atomic_store_n(gate, uint64_t{1}, __ATOMIC_RELEASE);
  }

  void finish() {
    if (!running) return;
    stop.store(true, std::memory_order_release);
    pthread_join(thread, nullptr);
    running = false;
  }

  // Once the held streams have passed the gate, frees it. Called by Finish, after every wait resolved: the streams are
  // past it already, and the synchronizes return at once.
  void free_gate() {
    if (!gate) return;
    ContextScope context(device);
    for (CUstream stream : held) check(drv().cuStreamSynchronize(stream), "cuStreamSynchronize", device);
    check(drv().cuMemFreeHost(gate), "cuMemFreeHost", device);
    gate = nullptr;
    held.clear();
  }

  void watch() {
    std::vector<size_t> unseen;
    for (size_t i = 0; i < targets.size(); i++)
      if (targets[i].word) unseen.push_back(i);
    while (!unseen.empty() && !stop.load(std::memory_order_acquire)) {
      size_t kept = 0;
      for (size_t index : unseen) {
        if (__atomic_load_n(targets[index].word, __ATOMIC_ACQUIRE) >= targets[index].value)
          seen_ns[index] = static_cast<double>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
                  .count());
        else
          unseen[kept++] = index;
      }
      unseen.resize(kept);
    }
  }
};

Observer& observer_of(const Napi::Value& value) { return *value.As<Napi::External<Observer>>().Data(); }

uint64_t to_u64(const Napi::Value& value) {
  bool lossless = false;
  return value.As<Napi::BigInt>().Uint64Value(&lossless);
}

// wakeObserverStart(device, count) -> observer for `count` waits, with its gate closed.
Napi::Value wake_observer_start(const Napi::CallbackInfo& info) {
  const int device = info[0].As<Napi::Number>().Int32Value();
  const size_t count = static_cast<size_t>(info[1].As<Napi::Number>().Int64Value());
  ContextScope context(device);
  auto* observer = new Observer();
  auto external = Napi::External<Observer>::New(info.Env(), observer, [](Napi::BasicEnv, Observer* o) { delete o; });
  observer->device = device;
  observer->targets.resize(count);
  observer->seen_ns.assign(count, 0);
  void* memory = nullptr;
  check(drv().cuMemHostAlloc(&memory, sizeof(uint64_t), CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
        "cuMemHostAlloc", device);
  observer->gate = static_cast<uint64_t*>(memory);
  *observer->gate = 0;
  check(drv().cuMemHostGetDevicePointer(&observer->gate_address, memory, 0), "cuMemHostGetDevicePointer", device);
  return external;
}

// wakeObserverHold(observer, stream: bigint): the stream's later work waits until Release opens the gate.
Napi::Value wake_observer_hold(const Napi::CallbackInfo& info) {
  Observer& observer = observer_of(info[0]);
  auto stream = reinterpret_cast<CUstream>(to_u64(info[1]));
  ContextScope context(observer.device);
  check(drv().cuStreamWaitValue64(stream, observer.gate_address, 1, CU_STREAM_WAIT_VALUE_GEQ), "cuStreamWaitValue64",
        observer.device);
  observer.held.push_back(stream);
  return info.Env().Undefined();
}

// wakeObserverWatch(observer, index, address: bigint, value): wait `index` is done once the 8-byte word at host
// address `address` reaches `value`.
Napi::Value wake_observer_watch(const Napi::CallbackInfo& info) {
  Observer& observer = observer_of(info[0]);
  const size_t index = static_cast<size_t>(info[1].As<Napi::Number>().Int64Value());
  if (index >= observer.targets.size() || observer.running)
    throw Napi::RangeError::New(info.Env(), "wakeObserverWatch: index out of range, or the observer already runs");
  observer.targets[index].word = reinterpret_cast<const uint64_t*>(static_cast<uintptr_t>(to_u64(info[2])));
  observer.targets[index].value = static_cast<uint64_t>(info[3].As<Napi::Number>().Int64Value());
  return info.Env().Undefined();
}

// wakeObserverRelease(observer): starts the observer thread, then opens the gate.
Napi::Value wake_observer_release(const Napi::CallbackInfo& info) {
  Observer& observer = observer_of(info[0]);
  if (!observer.running) {
    observer.thread = start_thread("bench-observer", [&observer] { observer.watch(); });
    observer.running = true;
  }
  observer.open_gate();
  return info.Env().Undefined();
}

// wakeObserverFinish(observer) -> Float64Array: per wait, the steady-clock ns when the observer saw its word reach
// its value (0: never). Stops and joins the observer thread, then frees the gate. Call it once every wait resolved.
Napi::Value wake_observer_finish(const Napi::CallbackInfo& info) {
  Observer& observer = observer_of(info[0]);
  observer.open_gate();
  observer.finish();
  observer.free_gate();
  auto out = Napi::Float64Array::New(info.Env(), observer.seen_ns.size());
  std::memcpy(out.Data(), observer.seen_ns.data(), observer.seen_ns.size() * sizeof(double));
  return out;
}

}  // namespace

void register_wake_observer(Napi::Env env, Napi::Object exports) {
  exports.Set("wakeObserverStart", Napi::Function::New<entry<wake_observer_start>>(env, "wakeObserverStart"));
  exports.Set("wakeObserverHold", Napi::Function::New<entry<wake_observer_hold>>(env, "wakeObserverHold"));
  exports.Set("wakeObserverWatch", Napi::Function::New<entry<wake_observer_watch>>(env, "wakeObserverWatch"));
  exports.Set("wakeObserverRelease", Napi::Function::New<entry<wake_observer_release>>(env, "wakeObserverRelease"));
  exports.Set("wakeObserverFinish", Napi::Function::New<entry<wake_observer_finish>>(env, "wakeObserverFinish"));
}

}  // namespace csp::bench
