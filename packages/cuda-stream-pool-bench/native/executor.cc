// The `native` mode of `cuda-stream-pool bench`: the executor benchmark's tasks run by C++ threads, the baseline every
// other mode is compared with in the same run. The tasks are the same as the library's (src/task.ts): the same
// pinned partitions, slots (device memory and pinned outputs, prepared by JS), kernel, verification sample,
// references and tolerance. Only the streams and the completion differ: one thread per slot, each on a non-blocking
// stream of its own, waits for each task with cuStreamSynchronize.
//
// Runs on: runTasks() on the JS thread; the run on a thread of its own, which starts the task threads, releases them
// together, joins them and hands the outcome to the JS thread through a thread-safe function, where the promise
// settles. The JS thread is not blocked.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "internal/native-thread.h"
#include "internal/loader.h"
#include "driver.h"

namespace csp::bench {
namespace {

using Clock = std::chrono::steady_clock;

// A task slot, prepared by JS: the device memory a task computes in and the pinned output it copies back into.
struct Slot {
  CUdeviceptr memory;
  void* output;
};

// What a run does: read from JS on the JS thread, then owned by the worker (no JS memory is read after that, except
// the pinned partitions and outputs, which the library keeps alive while the benchmark holds their PinnedBuffers).
struct Plan {
  int device = 0;
  std::string ptx;
  unsigned elements = 0, intensity = 0, grid = 0, block = 0;
  float a = 0, b = 0;
  std::vector<const void*> partitions;  // pinned inputs, elements floats each
  std::vector<Slot> slots;
  std::vector<uint32_t> sample;   // output elements every task verifies
  std::vector<float> references;  // references[p * sample.size() + k]
  double ulp_tolerance = 0;
  int64_t first = 0, count = 0;
  int64_t corrupt_task = -1;  // the test hook: this task's element corrupt_element reads one higher
  uint32_t corrupt_element = 0;
  bool marks = false;  // record four timing events per task and read their times after it completed
};

// The first output element that failed verification.
struct Mismatch {
  int64_t task = -1;
  uint32_t element = 0;
  float value = 0, expected = 0;
};

// A run's facts, per task in task order (index = task - first).
struct Outcome {
  double start_epoch_ms = 0, end_epoch_ms = 0, origin_epoch_ms = 0;
  std::vector<uint32_t> slot_of;     // the slot (and so the thread and stream) that ran the task
  std::vector<double> latency_ms;    // enqueue start to completion seen, host time
  std::vector<double> marks;         // 4 per task: ms from the origin event; empty without marks
  std::vector<uint64_t> stream_ids;  // per slot, cuStreamGetId
  std::vector<int64_t> done;         // tasks each slot's thread completed
  Mismatch mismatch;
};

// float32 ulps between a and b, as src/fmaf.ts ulpDistance counts them; NaN is infinitely far.
double ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return INFINITY;
  auto ordered = [](float v) {
    int32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return bits < 0 ? -static_cast<int64_t>(bits & 0x7fffffff) : static_cast<int64_t>(bits);
  };
  return std::fabs(static_cast<double>(ordered(a) - ordered(b)));
}

// The driver objects of a run, destroyed in order when it ends, also after a failure.
struct Resources {
  int device;
  std::vector<CUstream> streams;
  std::vector<CUevent> events;  // 4 per slot with marks
  CUevent origin = nullptr;

  explicit Resources(int device) : device(device) {}
  Resources(const Resources&) = delete;  // owns driver objects
  Resources& operator=(const Resources&) = delete;
  ~Resources() {
    for (CUstream stream : streams) drv().cuStreamSynchronize(stream);
    for (CUevent event : events) drv().cuEventDestroy(event);
    if (origin) drv().cuEventDestroy(origin);
    for (CUstream stream : streams) drv().cuStreamDestroy(stream);
  }
};

double epoch_ms(std::chrono::system_clock::time_point epoch_zero, Clock::time_point steady_zero, Clock::time_point at) {
  return std::chrono::duration<double, std::milli>(epoch_zero.time_since_epoch()).count() +
         std::chrono::duration<double, std::milli>(at - steady_zero).count();
}

Outcome run(const Plan& plan) {
  const int device = plan.device;
  make_current(device);  // a thread of its own, which exits after the run
  CUfunction kernel = bench_kernel(device, plan.ptx, "fma_steps");
  const size_t slots = plan.slots.size();
  const size_t sample = plan.sample.size();
  const size_t bytes = static_cast<size_t>(plan.elements) * sizeof(float);
  Resources resources(device);
  Outcome outcome;
  outcome.slot_of.assign(plan.count, 0);
  outcome.latency_ms.assign(plan.count, 0);
  if (plan.marks) outcome.marks.assign(plan.count * 4, 0);
  outcome.done.assign(slots, 0);
  for (size_t s = 0; s < slots; s++) {
    CUstream stream = nullptr;
    check(drv().cuStreamCreateWithPriority(&stream, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreateWithPriority", device);
    resources.streams.push_back(stream);
    unsigned long long id = 0;
    check(drv().cuStreamGetId(stream, &id), "cuStreamGetId", device);
    outcome.stream_ids.push_back(id);
    for (int k = 0; plan.marks && k < 4; k++) {
      CUevent event = nullptr;
      check(drv().cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate", device);
      resources.events.push_back(event);
    }
  }
  const auto epoch_zero = std::chrono::system_clock::now();
  const auto steady_zero = Clock::now();
  if (plan.marks && slots > 0) {
    // As the library's batch does: the origin is complete before the first task, so every phase time is positive.
    check(drv().cuEventCreate(&resources.origin, CU_EVENT_DEFAULT), "cuEventCreate", device);
    check(drv().cuEventRecord(resources.origin, resources.streams[0]), "cuEventRecord", device);
    check(drv().cuEventSynchronize(resources.origin), "cuEventSynchronize", device);
  }
  outcome.origin_epoch_ms = epoch_ms(epoch_zero, steady_zero, Clock::now());

  std::atomic<int64_t> next{0};
  std::atomic<bool> stop{false};
  std::atomic<size_t> ready{0};
  std::atomic<bool> go{false};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  std::vector<Clock::time_point> finished(slots);

  auto task_thread = [&](size_t s) {
    const Slot slot = plan.slots[s];
    CUstream stream = resources.streams[s];
    CUevent* events = plan.marks ? &resources.events[s * 4] : nullptr;
    unsigned n = plan.elements, steps = plan.intensity;
    float a = plan.a, b = plan.b;
    CUdeviceptr memory = slot.memory;
    void* args[] = {&memory, &n, &steps, &a, &b};
    const float* output = static_cast<const float*>(slot.output);
    auto mark = [&](int k) {
      if (events) check(drv().cuEventRecord(events[k], stream), "cuEventRecord", device);
    };
    bool started = false;
    try {
      make_current(device);
      ready++;
      started = true;
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      finished[s] = Clock::now();
      while (!stop.load(std::memory_order_relaxed)) {
        const int64_t index = next.fetch_add(1, std::memory_order_relaxed);
        if (index >= plan.count) break;
        const int64_t task = plan.first + index;
        const size_t partition = static_cast<size_t>(task % static_cast<int64_t>(plan.partitions.size()));
        const auto begin = Clock::now();
        mark(0);
        check(drv().cuMemcpyHtoDAsync(memory, plan.partitions[partition], bytes, stream), "cuMemcpyHtoDAsync", device);
        mark(1);
        check(drv().cuLaunchKernel(kernel, plan.grid, 1, 1, plan.block, 1, 1, 0, stream, args, nullptr),
              "cuLaunchKernel", device);
        mark(2);
        check(drv().cuMemcpyDtoHAsync(slot.output, memory, bytes, stream), "cuMemcpyDtoHAsync", device);
        mark(3);
        check(drv().cuStreamSynchronize(stream), "cuStreamSynchronize", device);
        outcome.latency_ms[index] = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
        outcome.slot_of[index] = static_cast<uint32_t>(s);
        const float* expected = &plan.references[partition * sample];
        for (size_t k = 0; k < sample; k++) {
          const uint32_t element = plan.sample[k];
          float value = output[element];
          if (task == plan.corrupt_task && element == plan.corrupt_element) value = value + 1.0f;
          // Equal is the rule; the ulp distance is only worked out for the rare other case (as task.ts verifies).
          if (value != expected[k] && !(ulp_distance(value, expected[k]) <= plan.ulp_tolerance)) {
            std::lock_guard<std::mutex> lock(failure_mutex);
            if (outcome.mismatch.task < 0 || task < outcome.mismatch.task)
              outcome.mismatch = Mismatch{task, element, value, expected[k]};
            stop = true;
            break;
          }
        }
        for (int k = 0; events && k < 4; k++) {
          float ms = 0;
          check(drv().cuEventElapsedTime(&ms, resources.origin, events[k]), "cuEventElapsedTime", device);
          outcome.marks[index * 4 + k] = ms;
        }
        finished[s] = Clock::now();
        outcome.done[s]++;
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      stop = true;
      if (!started) ready++;
    }
  };

  std::vector<pthread_t> threads;
  threads.reserve(slots);
  try {
    for (size_t s = 0; s < slots; s++) threads.push_back(start_thread("bench-task", [&task_thread, s] { task_thread(s); }));
  } catch (...) {
    stop = true;
    go = true;
    for (pthread_t thread : threads) pthread_join(thread, nullptr);
    throw;
  }
  // Every thread has its context current and waits: the clock starts when they are released together.
  while (ready.load() < slots) std::this_thread::yield();
  const auto start = Clock::now();
  go.store(true, std::memory_order_release);
  for (pthread_t thread : threads) pthread_join(thread, nullptr);
  if (failure) std::rethrow_exception(failure);
  auto end = start;
  for (size_t s = 0; s < slots; s++)
    if (finished[s] > end) end = finished[s];
  outcome.start_epoch_ms = epoch_ms(epoch_zero, steady_zero, start);
  outcome.end_epoch_ms = epoch_ms(epoch_zero, steady_zero, end);
  return outcome;
}

// The run's JS side: a JS object of the outcome. JS thread.
Napi::Object result_of(Napi::Env env, const Outcome& o) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("startEpochMs", o.start_epoch_ms);
  out.Set("endEpochMs", o.end_epoch_ms);
  out.Set("originEpochMs", o.origin_epoch_ms);
  auto slot_of = Napi::Uint32Array::New(env, o.slot_of.size());
  std::memcpy(slot_of.Data(), o.slot_of.data(), o.slot_of.size() * sizeof(uint32_t));
  out.Set("slotOf", slot_of);
  auto latency = Napi::Float64Array::New(env, o.latency_ms.size());
  std::memcpy(latency.Data(), o.latency_ms.data(), o.latency_ms.size() * sizeof(double));
  out.Set("latencyMs", latency);
  auto marks = Napi::Float64Array::New(env, o.marks.size());
  std::memcpy(marks.Data(), o.marks.data(), o.marks.size() * sizeof(double));
  out.Set("marks", marks);
  Napi::Array ids = Napi::Array::New(env, o.stream_ids.size());
  for (uint32_t s = 0; s < o.stream_ids.size(); s++) ids.Set(s, Napi::BigInt::New(env, o.stream_ids[s]));
  out.Set("streamIds", ids);
  int64_t completed = 0;
  for (int64_t done : o.done) completed += done;
  out.Set("completed", Napi::Number::New(env, static_cast<double>(completed)));
  if (o.mismatch.task >= 0) {
    Napi::Object mismatch = Napi::Object::New(env);
    mismatch.Set("task", Napi::Number::New(env, static_cast<double>(o.mismatch.task)));
    mismatch.Set("element", o.mismatch.element);
    mismatch.Set("value", o.mismatch.value);
    mismatch.Set("expected", o.mismatch.expected);
    out.Set("mismatch", mismatch);
  }
  return out;
}

// One runTasks call in flight: what it runs, what came of it, and the promise to settle.
struct Job {
  Plan plan;
  Outcome outcome;
  std::exception_ptr error;
  Napi::Promise::Deferred deferred;
};

// Settles the job's promise. Runs on: the JS thread that called runTasks, through the thread-safe function; with a
// null env when that environment is being torn down (a worker terminated mid-run), when nobody waits any more.
void settle(Napi::Env env, Napi::Function, void*, Job* job) {
  std::unique_ptr<Job> owned(job);
  if (static_cast<napi_env>(env) == nullptr) return;
  try {
    if (job->error)
      job->deferred.Reject(to_js_error(env, job->error).Value());
    else
      job->deferred.Resolve(result_of(env, job->outcome));
  } catch (const Napi::Error& e) {
    never_throws("bench runTasks settle", [&] { job->deferred.Reject(e.Value()); });
  } catch (...) {
    // Nothing to settle the promise with (out of memory): it stays pending, which beats aborting the process.
  }
}

using Delivery = Napi::TypedThreadSafeFunction<void, Job, settle>;

template <class T>
std::vector<T> copy_of(const Napi::TypedArrayOf<T>& array) {
  return std::vector<T>(array.Data(), array.Data() + array.ElementLength());
}

// runTasks(plan) -> Promise<{ startEpochMs, endEpochMs, originEpochMs, slotOf: Uint32Array, latencyMs: Float64Array,
// marks: Float64Array, streamIds: bigint[], completed, mismatch?: { task, element, value, expected } }>.
// plan: { device, ptx, elements, intensity, grid, block, a, b, partitions: Uint8Array[], slots: { memory: bigint,
// output: Uint8Array }[], sample: Uint32Array, references: Float32Array, ulpTolerance, first, count, corruptTask,
// corruptElement, marks }. Runs tasks first .. first + count - 1 (task t reads partition t % partitions.length), one
// thread per slot; each thread takes the next task as soon as its previous one is verified. A mismatch stops every
// thread from taking new tasks and is reported, not thrown (the caller throws its VerificationError); a driver
// failure rejects with the library's CudaError.
Napi::Value run_tasks(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = info[0].As<Napi::Object>();
  auto number = [&](const char* key) { return o.Get(key).As<Napi::Number>(); };
  Plan plan;
  plan.device = number("device").Int32Value();
  plan.ptx = o.Get("ptx").As<Napi::String>().Utf8Value();
  plan.elements = number("elements").Uint32Value();
  plan.intensity = number("intensity").Uint32Value();
  plan.grid = number("grid").Uint32Value();
  plan.block = number("block").Uint32Value();
  plan.a = number("a").FloatValue();
  plan.b = number("b").FloatValue();
  Napi::Array partitions = o.Get("partitions").As<Napi::Array>();
  for (uint32_t p = 0; p < partitions.Length(); p++)
    plan.partitions.push_back(partitions.Get(p).As<Napi::Uint8Array>().Data());
  Napi::Array slots = o.Get("slots").As<Napi::Array>();
  for (uint32_t s = 0; s < slots.Length(); s++) {
    Napi::Object slot = slots.Get(s).As<Napi::Object>();
    bool lossless = true;
    plan.slots.push_back(Slot{static_cast<CUdeviceptr>(slot.Get("memory").As<Napi::BigInt>().Uint64Value(&lossless)),
                              slot.Get("output").As<Napi::Uint8Array>().Data()});
  }
  plan.sample = copy_of(o.Get("sample").As<Napi::Uint32Array>());
  plan.references = copy_of(o.Get("references").As<Napi::Float32Array>());
  plan.ulp_tolerance = number("ulpTolerance").DoubleValue();
  plan.first = number("first").Int64Value();
  plan.count = number("count").Int64Value();
  plan.corrupt_task = number("corruptTask").Int64Value();
  plan.corrupt_element = number("corruptElement").Uint32Value();
  plan.marks = o.Get("marks").As<Napi::Boolean>().Value();
  // The TS caller builds the plan; these only keep a caller's bug from reading out of bounds on the task threads.
  if (plan.partitions.empty() || plan.slots.empty() ||
      plan.references.size() != plan.partitions.size() * plan.sample.size())
    throw Napi::TypeError::New(env, "cuda-stream-pool bench internal: runTasks needs partitions, slots and a "
                                    "reference per sample element of each partition");
  for (uint32_t element : plan.sample)
    if (element >= plan.elements)
      throw Napi::RangeError::New(env, "cuda-stream-pool bench internal: a runTasks sample element is beyond elements");
  auto job = std::make_unique<Job>(Job{std::move(plan), Outcome{}, nullptr, Napi::Promise::Deferred::New(env)});
  Napi::Promise promise = job->deferred.Promise();
  // A thread of its own rather than Napi::AsyncWorker: libuv's pool has 4 threads for the whole process, so with
  // more workers than that their runs would wait for each other. The thread-safe function keeps this event loop
  // alive until the promise settles.
  Delivery delivery = Delivery::New(env, "cuda_stream_pool_bench.native", 0, 1);
  Job* raw = job.release();
  try {
    start_detached_thread("bench-executor", [delivery, raw]() mutable {
      try {
        raw->outcome = run(raw->plan);
      } catch (...) {
        raw->error = std::current_exception();
      }
      if (delivery.BlockingCall(raw) != napi_ok) delete raw;  // the environment is gone: nobody waits
      delivery.Release();
    });
  } catch (...) {
    delivery.Release();
    delete raw;
    throw;
  }
  return promise;
}

}  // namespace

void register_executor(Napi::Env env, Napi::Object exports) {
  exports.Set("runTasks", Napi::Function::New<entry<run_tasks>>(env, "runTasks"));
}

}  // namespace csp::bench
