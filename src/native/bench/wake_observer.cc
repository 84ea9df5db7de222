// The wake-latency row of `cuda-stream-pool bench micro`: a C++ observer thread that sees each wait's work finish, so
// the benchmark can time how long the library then takes to resolve the wait's promise on the JS thread.
//
// Each wait gets a word of mapped pinned memory that its stream writes (cuStreamWriteValue64) right before the
// library's own completion marker, so the observer sees the same moment the library's poller can first see. The
// observer spins over the words not yet written and stamps each with the steady clock (CLOCK_MONOTONIC on Linux, the
// clock of Node's process.hrtime), so the JS side subtracts its own stamps directly.
//
// Runs on: wakeObserverStart/Mark/Finish on one JS thread; the observer on a thread of its own, joined by Finish.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../loader.h"
#include "../native_thread.h"
#include "driver.h"

namespace csp::bench {
namespace {

struct Observer {
  int device = 0;
  size_t count = 0;
  uint64_t* words = nullptr;  // mapped pinned memory, count words
  CUdeviceptr addresses = 0;  // the same words as the device sees them
  std::vector<double> seen_ns;  // steady-clock ns when each word was first seen written, 0 if never
  std::atomic<bool> stop{false};
  pthread_t thread{};
  bool running = false;

  ~Observer() {
    finish();
    if (words) {
      ContextScope context(device);
      drv().cuMemFreeHost(words);
    }
  }

  void finish() {
    if (!running) return;
    stop.store(true, std::memory_order_release);
    pthread_join(thread, nullptr);
    running = false;
  }

  void watch() {
    std::vector<size_t> unseen(count);
    for (size_t i = 0; i < count; i++) unseen[i] = i;
    while (!unseen.empty() && !stop.load(std::memory_order_acquire)) {
      size_t kept = 0;
      for (size_t index : unseen) {
        if (__atomic_load_n(&words[index], __ATOMIC_ACQUIRE) != 0)
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

Observer& observer_of(const Napi::Value& value) {
  return *value.As<Napi::External<Observer>>().Data();
}

// wakeObserverStart(device, count) -> observer: `count` zeroed words and a thread that watches them until Finish.
Napi::Value wake_observer_start(const Napi::CallbackInfo& info) {
  const int device = info[0].As<Napi::Number>().Int32Value();
  const size_t count = static_cast<size_t>(info[1].As<Napi::Number>().Int64Value());
  ContextScope context(device);
  auto* observer = new Observer();
  auto external = Napi::External<Observer>::New(info.Env(), observer, [](Napi::BasicEnv, Observer* o) { delete o; });
  observer->device = device;
  observer->count = count;
  observer->seen_ns.assign(count, 0);
  void* memory = nullptr;
  check(drv().cuMemHostAlloc(&memory, count * sizeof(uint64_t), CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
        "cuMemHostAlloc", device);
  observer->words = static_cast<uint64_t*>(memory);
  std::memset(observer->words, 0, count * sizeof(uint64_t));
  check(drv().cuMemHostGetDevicePointer(&observer->addresses, memory, 0), "cuMemHostGetDevicePointer", device);
  observer->thread = start_thread([observer] { observer->watch(); });
  observer->running = true;
  return external;
}

// wakeObserverMark(observer, stream: bigint, index): the stream writes word `index` once its work so far is done.
Napi::Value wake_observer_mark(const Napi::CallbackInfo& info) {
  Observer& observer = observer_of(info[0]);
  bool lossless = false;
  auto stream = reinterpret_cast<CUstream>(info[1].As<Napi::BigInt>().Uint64Value(&lossless));
  const size_t index = static_cast<size_t>(info[2].As<Napi::Number>().Int64Value());
  if (index >= observer.count) throw Napi::RangeError::New(info.Env(), "wakeObserverMark: index out of range");
  ContextScope context(observer.device);
  check(drv().cuStreamWriteValue64(stream, observer.addresses + index * sizeof(uint64_t), 1,
                                   CU_STREAM_WRITE_VALUE_DEFAULT),
        "cuStreamWriteValue64", observer.device);
  return info.Env().Undefined();
}

// wakeObserverFinish(observer) -> Float64Array: per word, the steady-clock ns when the observer saw it written (0:
// never). Stops and joins the observer thread.
Napi::Value wake_observer_finish(const Napi::CallbackInfo& info) {
  Observer& observer = observer_of(info[0]);
  observer.finish();
  auto out = Napi::Float64Array::New(info.Env(), observer.count);
  std::memcpy(out.Data(), observer.seen_ns.data(), observer.count * sizeof(double));
  return out;
}

}  // namespace

void register_wake_observer(Napi::Env env, Napi::Object exports) {
  exports.Set("wakeObserverStart", Napi::Function::New<entry<wake_observer_start>>(env, "wakeObserverStart"));
  exports.Set("wakeObserverMark", Napi::Function::New<entry<wake_observer_mark>>(env, "wakeObserverMark"));
  exports.Set("wakeObserverFinish", Napi::Function::New<entry<wake_observer_finish>>(env, "wakeObserverFinish"));
}

}  // namespace csp::bench
