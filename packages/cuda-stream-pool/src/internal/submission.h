// Deferred submission: the JS thread records stream-ordered operations, native submission threads issue their
// driver calls. See Note [deferred submission].
//
// Note [deferred submission]:
//  - Mode. CUDA_STREAM_POOL_SUBMISSION=deferred turns it on for the process; `direct` (the default) keeps every
//    driver call on the calling JS thread. Each environment (main thread or worker) then has one Submitter, a queue
//    of operations and a native thread named "csp-submit" that issues them in the order they were recorded, for
//    each of CUDA_STREAM_POOL_SUBMISSION_THREADS shards (default 2: one thread issuing about 10 us of driver
//    calls per small task tops out near 100,000 tasks/s). A stream belongs to one shard, given on its first record
//    (round-robin, process-wide), so its operations keep their order; what orders work across streams (events)
//    is kept across shards as across threads, below.
//  - Which calls record. Copies between device and pinned memory, fills, kernel launches, graph launches, prefetches
//    of managed memory, event records, stream waits on events, and the completion marker of an awaited
//    synchronize(), when their stream is owned by the
//    library (created by it, or a pool's) and not capturing. The legacy and per-thread default streams and borrowed
//    streams keep the direct path: their meaning depends on the thread that makes the call. A stream that captures
//    keeps it too, so that its capture records what the calling thread asked for, in order.
//  - Program order. Every other native call of the environment first waits until everything the environment
//    recorded was issued (js_entry calls issue_recorded; exports made with `unordered<F>`, the recording calls and
//    bookkeeping that no recorded work depends on, skip it): a
//    query, a blocking wait, an allocation or free, a handle export, a destroy, a capture's begin and end, a direct
//    copy. So whatever reads or changes driver state sees the recorded work issued before it, and `cuda.flush()`
//    is that wait on its own.
//  - Across threads. Operations on one stream are issued in the order they were recorded, whichever threads recorded
//    them (a pool's streams are shared): each has its place among the stream's operations, and waits until those
//    before it were issued (an order wait, counted with its time: everything behind it in the queue waits too); a
//    call that goes to the driver directly with the stream first waits until everything recorded on it was issued
//    (NativeStream::entered_for_use). So "record on a pool stream in one worker, post a message, use the stream in
//    another" keeps its order, as direct calls do.
//    An event record counts itself on the event when it is recorded and again when it was issued;
//    a stream wait on the event, issued by any submission thread of any environment, and a host wait on the event
//    first wait until the records recorded before them were issued. Records of one event are issued in the order
//    they were made, each after the stream waits recorded before it, so a wait never sees a later record than its
//    own: "record, then wait on another stream or in another thread" orders work as direct calls do.
//  - Validation stays synchronous: types, ranges, destroyed objects and capture rules are checked when the call is
//    made, with the errors of direct mode. What only the driver can refuse makes the stream errored (its
//    FailureSlot): later recorded operations on it are dropped, and every wait on it rejects with the CudaError of
//    the call that failed (naming the kernel, the stream), until an operation recorded after such a wait clears it
//    and runs (so does work an ordered call queues directly on the stream, a staged copy say: NativeStream::
//    entered_for_use clears it before the work is queued); an event recorded after the failure carries it to every
//    stream and host wait on that event, and a
//    waitStream() on an errored stream errors the waiting stream too (a stream called directly is told by the
//    waitStream() call). One RecordedFailure object travels to every slot, so a report by any wait counts for all.
//    A sticky fault also stays device-wide, as in direct mode; device.synchronize() reports, once the device's work
//    is done, the oldest failure of recorded work on its device that no wait has reported.
//  - Lifetime. A recorded operation holds an entry of every object it names (Note [handle guard] in native-object.h), so a
//    destroy() from any thread releases the handle only after the operation was issued; a buffer's free waits for
//    it (retire_and_wait). A kernel's arguments are only addresses: a buffer used as one is freed by free() (an
//    ordered call) or, when its owner was collected, by handleRelease, which issues what was recorded first.
//    An issued operation is destroyed (its entries leave) by the recording thread, when the ring comes round to its
//    slot or an ordered call has waited for the issue, or by the submission thread before it parks (after ~50 us
//    without work), so an entry outlives its operation's issue by a bounded time (see "Recording cost").
//    Environment teardown issues what is left, then joins the threads.
//  - Room. At most kQueueLimit operations wait to be issued; recording more waits for room (counted).
//  - Recording cost. Whatever the recording thread and the submission thread both write for an operation moves a
//    cache line between their cores, which costs more than the rest of recording: most operations are built in
//    their ring slot (no malloc on one thread and free on the other); the recording call hands its own entries and
//    references to the operation (Held from a Use, moved shared_ptrs) instead of taking second ones; and each side's
//    counters sit on cache lines of their own (the ring's, a stream's recorded and issued counts). The submission
//    thread reads an operation and writes only the ring's and the stream's issued counts: the recording thread,
//    which took the operation's entries and references, also gives them back (reap), so the objects' entry counts
//    and shared_ptr counts stay on its core (null driver, 500 launches in a row: 850 -> 410 ns each).
//  - Gathering. A thread that keeps up with its recording thread waits about a microsecond before it issues a short
//    burst, so that the two do not take each operation's cache lines from each other (Note [gathering] in
//    submission.cc).
//  - Idle. The thread spins briefly for new work after a batch, then parks on a condition variable.
//  - Exit. exit() (process.exit(), the main thread's end) tears no environment down: an exit handler stops the
//    submission threads between two operations before the driver's exit handlers and static destructors run. What
//    they had not issued by then is dropped (the user docs say so, and that cuda.flush() before process.exit() issues
//    it): issuing it there could wait for other threads' work, with static objects going away around it.
//  - Locks: the queue's mutex and a FailureSlot's mutex are leaves; no driver call is made under either.
#pragma once
#include <napi.h>
#include "internal/cuda-driver.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <new>
#include <pthread.h>
#include <type_traits>
#include <vector>

#include "binding/errors.h"
#include "internal/lock-order.h"
#include "internal/native-object.h"
#include "internal/native-thread.h"

namespace csp {

struct NativeStream;

// A failure of recorded work, one object shared by every slot it reached (the stream that failed, the streams and
// events after it, its device's list): once any wait has reported it, it counts as reported for all of them.
struct RecordedFailure : CudaFailure {
  explicit RecordedFailure(const CudaFailure& failure, bool after_call = false)
      : CudaFailure(failure), after_call(after_call) {}
  mutable std::atomic<bool> reported{false};
  // A streamed copy's failure, found after its call returned (Note [staging]): the wait pending on its stream, which
  // the copy came before, reports it too.
  const bool after_call;
};

using FailurePointer = std::shared_ptr<const RecordedFailure>;

// The first failure of a stream's (or an event's) recorded work. Every wait issued while it is set reports it (each
// covers the dropped work); the first operation after it was reported, by any wait, clears it and runs. Any
// thread.
class FailureSlot {
 public:
  bool set() const { return set_.load(std::memory_order_acquire); }
  FailurePointer peek() const;
  // Keeps the first failure until it is cleared; false when one was kept already.
  bool record(FailurePointer failure);
  // The failure, marked reported (null when none).
  FailurePointer report();
  // Clears a failure that a wait has reported; true when it did (the caller's operation then runs).
  bool clear_if_reported();
  // For an operation about to be issued: the failure it must be dropped for (unreported), or null, having cleared a
  // reported one, in one step (a clear by another thread between a look and a clear would drop it for nothing).
  FailurePointer admit();
  // The failure, now cleared (null when none).
  FailurePointer take();
  void clear() { take(); }

 private:
  FailurePointer reset_locked();  // under mutex_
  std::atomic<bool> set_{false};
  mutable OrderedMutex mutex_{LockLevel::kLeaf, "deferred failure"};
  FailurePointer failure_;
};

// An entry of a native object, held by a recorded operation until it was issued or dropped (Note [handle guard] in native-object.h).
// `counts_work`: the operation queues work on the object's stream (a completion marker does not;
// NativeStream::submissions), which the submission thread counts after issuing it, before it counts it issued.
template <class B>
class Held {
 public:
  Held(std::shared_ptr<B> object, const char* resource, const char* method, bool counts_work = true)
      : object_(std::move(object)), counts_work_(counts_work) {
    if (!object_->enter()) {
      object_.reset();
      throw Destroyed{resource, method};
    }
  }
  // Takes over the entry of `use`, a Use of the same object in the recording call.
  Held(std::shared_ptr<B> object, Use<B>& use, bool counts_work = true) : object_(std::move(object)), counts_work_(counts_work) {
    use.hand_over();
  }
  Held(Held&& other) noexcept : object_(std::move(other.object_)), counts_work_(other.counts_work_) {}
  Held& operator=(Held&&) = delete;
  Held(const Held&) = delete;
  ~Held() {
    if (object_) object_->leave();
  }
  bool counts_work() const { return counts_work_; }
  B* operator->() const { return object_.get(); }
  B& operator*() const { return *object_; }
  const std::shared_ptr<B>& pointer() const { return object_; }

 private:
  std::shared_ptr<B> object_;
  bool counts_work_;
};

// One recorded operation: its driver calls, made later by the submission thread.
struct Operation {
  explicit Operation(Held<NativeStream> stream) noexcept;  // both in submission.cc, where NativeStream is complete
  virtual ~Operation();
  // Makes the driver calls. `failure` is the stream's unreported failure, when it has one: most operations are then
  // dropped (return false). Throws CudaFailure, which errors the stream.
  virtual bool issue(const FailurePointer& failure) = 0;
  Held<NativeStream> stream;  // the stream it is queued on, whose FailureSlot it reads and writes
  uint64_t place = 0;         // among the operations recorded on the stream by every thread
  bool reports = false;       // a wait's marker: it reports a failure instead of clearing it
};

// `body` is bool(const FailurePointer& failure, const Held<NativeStream>& stream).
template <class F>
struct OperationOf final : Operation {
  OperationOf(Held<NativeStream> stream, F&& body) noexcept(std::is_nothrow_move_constructible_v<F>)
      : Operation(std::move(stream)), body(std::move(body)) {}
  bool issue(const FailurePointer& failure) override { return body(failure, stream); }
  F body;
};

// Counters of an environment's submitter, for submissionStats().
struct SubmissionCounters {
  double recorded = 0, issued = 0, dropped = 0, failed = 0, parks = 0, gathers = 0, waits_for_room = 0, flush_waits = 0;
  double order_waits = 0, order_wait_ms = 0;
};

class Submitter {
 public:
  static constexpr size_t kQueueLimit = 2048;  // a power of two: ring slots
  Submitter();
  // Issues what is still queued, then joins the thread.
  ~Submitter();
  Submitter(const Submitter&) = delete;
  Submitter& operator=(const Submitter&) = delete;

  // Bytes of the storage each ring slot has for its operation: most operations are built there, not on the heap
  // (Note [deferred submission], "Recording cost").
  static constexpr size_t kSlotBytes = 256;
  // Waits for room when kQueueLimit operations are queued; then returns the next slot's storage (kSlotBytes, aligned
  // for any operation). JS thread.
  void* reserve();
  // Queues `operation` (built in the storage reserve() returned, or on the heap) after everything recorded before.
  // JS thread.
  void publish(Operation* operation);
  // Returns once everything recorded so far was issued (or dropped). JS thread.
  void flush();
  // Whether everything recorded was issued. JS thread.
  bool drained() const { return issued_.load(std::memory_order_acquire) == recorded_; }
  SubmissionCounters counters() const;

 private:
  void run();
  // Wakes the thread if it parked (after a publish); wakes the JS thread if it waits and `issued` reached what it
  // waits for (wake_at_).
  void wake_thread();
  void wake_recorder(uint64_t issued);
  // Blocks the JS thread until issued_ reaches `target` (wake_at_), woken by wake_recorder.
  void wait_for_issued(uint64_t target);
  void forget();  // leaves the exit handler's list
  // Marks the thread as issuing; false (and not marked) once the process exits. The thread.
  bool enter_operation();
  // Lets a short window pass for more operations to be published, then returns the ring's tail and sets `markers` to
  // the markers published by then, read before it (Note [gathering] in submission.cc). The thread.
  uint64_t gather(uint64_t& markers);

  // Destroys the operations issued since the last reap (their entries leave, their references go). JS thread, or
  // the submission thread before it parks; one at a time (reaping_).
  void reap();

  // The ring: one producer (the JS thread) and one consumer (the thread), no lock on the way. `recorded_` counts
  // what the JS thread published (its tail), `issued_` what the thread finished (its head), `reaped_` the issued
  // operations destroyed; slot i % kQueueLimit holds operation i until it is reaped. Reaping on the recording thread
  // keeps an operation's entry counts and shared_ptr counts on the core that took them (Note [deferred submission],
  // "Recording cost").
  Operation* ring_[kQueueLimit] = {};
  struct alignas(kCacheLineBytes) SlotStorage {
    unsigned char bytes[kSlotBytes];
  };
  std::unique_ptr<SlotStorage[]> storage_{new SlotStorage[kQueueLimit]};
  // The counters each side writes are kept on cache lines of their own, so that recording on the JS thread and
  // issuing on the submission thread do not take a line from each other for every operation.
  alignas(kCacheLineBytes) uint64_t recorded_ = 0;  // JS thread only
  std::atomic<uint64_t> reaped_{0};  // written by the reaper, mostly the JS thread
  std::atomic<bool> reaping_{false};
  uint64_t issued_seen_ = 0;  // JS thread only: issued_ when it last looked (room is checked on it first)
  std::atomic<uint64_t> published_{0};  // recorded_, as the thread sees it
  double waits_for_room_ = 0, flush_waits_ = 0;  // JS thread
  alignas(kCacheLineBytes) std::atomic<uint64_t> issued_{0};
  std::atomic<uint64_t> dropped_{0}, failed_{0};
  std::atomic<bool> in_operation_{false};  // the thread is issuing one (the exit handler waits for it)
  std::atomic<double> parks_{0}, gathers_{0};
  // Operations that waited for another thread to issue an earlier operation of their stream, and the time waited.
  std::atomic<double> order_waits_{0}, order_wait_ns_{0};
  // Parking, both ways: a side sets its flag, then checks the other's counter again (Note [asymmetric fences]),
  // so a publish or an issue never goes unseen by a side about to sleep.
  alignas(kCacheLineBytes) std::atomic<bool> parked_{false};
  std::atomic<bool> waiting_{false};
  std::atomic<bool> hurry_{false};  // the JS thread waits for the issue of what it recorded: no gathering
  std::atomic<uint64_t> markers_{0};  // wait markers published (JS thread), which end a gathering window
  // What issued_ must reach before the waiting JS thread is woken: all it recorded (a flush), or half the ring free
  // (room), so that a full ring costs one wake-up per half ring, not a notify for every operation issued meanwhile.
  std::atomic<uint64_t> wake_at_{0};
  std::atomic<bool> closing_{false};
  OrderedMutex mutex_{LockLevel::kLeaf, "submission queue"};
  Condition work_;  // the thread parks here
  Condition done_;  // the JS thread waits here for issue progress (flush, room)
  pthread_t thread_{};
};

// How many submission threads each environment has in deferred mode (CUDA_STREAM_POOL_SUBMISSION_THREADS, 1 to 8,
// default 2). Read once.
int submission_threads();

// Waits until everything this environment recorded was issued; nothing to do in direct mode. JS thread.
void issue_recorded(Napi::Env env);

// The submitter that records an operation on `stream`, or null when the operation goes directly to the driver (direct
// mode, a borrowed or capturing stream). A null return has first issued everything recorded (program order). The
// caller holds a use of the stream.
Submitter* recording_for(Napi::Env env, NativeStream& stream);

// Counts an operation recorded on `stream` (NativeStream::operations_recorded, on its owner); returns its place among
// the stream's operations, which it is issued in.
uint64_t count_recorded(NativeStream& stream);

// Waits until every operation recorded on `stream` so far, by any thread, was issued (deferred mode). Any thread.
void await_issued(NativeStream& stream);

// A count of issued operations that threads wait for (await_count), advanced only by count_one. The threads asleep on
// it are counted beside it, so that advancing a count that nobody sleeps on makes no system call.
struct IssuedCount {
  std::atomic<uint64_t> value{0};
  mutable std::atomic<uint32_t> sleepers{0};
  uint64_t load(std::memory_order order) const { return value.load(order); }
};

// Waits until `count` reaches `target` (another submission thread's progress). Any thread; yields for a few
// microseconds, then sleeps on the count (a futex) until count_one wakes it.
void await_count(const IssuedCount& count, uint64_t target);

// Adds one to `count` and wakes the threads waiting for it in await_count (a system call only while some sleep).
void count_one(IssuedCount& count);

// Adds one to `counter` when it goes out of scope: a recorded operation counts itself issued (an event's records and
// waits) however it ends, dropped or failed, so that nothing waiting for the count waits for good.
struct CountWhenDone {
  IssuedCount& counter;
  ~CountWhenDone() { count_one(counter); }
};

// Records `body` (bool(const FailurePointer& failure, const Held<NativeStream>& stream)) on `submitter` for `stream`,
// an entry of the stream that the operation keeps; `reports`: a wait's marker. The body captures Held entries of the
// other objects it names. The recording call hands its own entries over (Held from a Use) and moves its references
// in, so that the JS thread and the submission thread share as few counters per operation as they can.
template <class F>
void record_operation(Submitter& submitter, Held<NativeStream> stream, F&& body, bool reports = false) {
  using Recorded = OperationOf<std::decay_t<F>>;
  void* storage = submitter.reserve();
  NativeStream& queued_on = *stream;
  Operation* operation;
  if constexpr (sizeof(Recorded) <= Submitter::kSlotBytes && alignof(Recorded) <= kCacheLineBytes) {
    // Counted before the slot is written: on x86 the count's locked add would otherwise wait for those stores, whose
    // cache lines the submission thread last read (null driver, 2 vCPUs, event.record in a loop: 440 -> 340 ns). A place
    // counted is a place issued, so nothing may throw between here and publish().
    static_assert(std::is_nothrow_move_constructible_v<std::decay_t<F>>,
                  "a recorded body built in its slot must move without throwing: its place is already counted");
    const uint64_t place = count_recorded(queued_on);
    operation = new (storage) Recorded(std::move(stream), std::forward<F>(body));
    operation->place = place;
  } else {
    operation = new Recorded(std::move(stream), std::forward<F>(body));  // may throw: counted once it exists
    operation->place = count_recorded(queued_on);
  }
  operation->reports = reports;
  submitter.publish(operation);
}

// Reports a failure of `stream` (of its owner) to a synchronous caller: throws the CudaFailure, now marked reported,
// when the stream has one. In direct mode the stream is then clear of it. Any thread.
void throw_stream_failure(NativeStream& stream);

// Whether operations on `stream` are recorded: deferred mode, a stream the library owns, not capturing.
bool records_operations(const NativeStream& stream);

// Errors `stream` (its owner) with `failure`, when it has none yet, and lists it for the stream's device. Any thread.
void carry_failure(NativeStream& stream, const FailurePointer& failure);

// The oldest failure of recorded work on `device` that no wait has reported, now marked reported (null when none).
// Any thread.
FailurePointer take_device_failure(int device);

}  // namespace csp
