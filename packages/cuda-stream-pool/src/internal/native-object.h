// Native objects: the C++ owner (or, for a borrowed stream, the non-owning view) of one driver handle, shared by every
// JS wrapper and thread that uses it, guarded so that a handle destroyed by one thread is never passed to the driver
// by another. JS reaches one through a NativeRef, a number naming a slot of its thread's handle table. See
// Note [handle guard].
//
// Note [handle guard]: each call that passes a native object's handle to the driver enters the object for the duration of the
// call (an atomic count of calls in flight; no lock). destroy() retires the object: from then on no call can enter,
// and it returns at once, without waiting; the driver handle is released by whoever leaves last: the retiring
// thread when nothing is in flight, else the last call in flight as it leaves. So a blocking call in one thread
// (synchronizeSync on a long kernel) never stalls another thread's destroy(), and a handle is never used after its
// release. Buffers, whose calls are short and never block, instead wait for the calls in flight when they are freed
// (retire_and_wait), so that the free happens on the freeing thread, in the order it asked for. A JS flag alone is
// not enough: another worker may hold the same object. Nothing is keyed by the raw handle value (the driver reuses
// them, Note [handle reuse]); objects are keyed by identity (their address inside a shared_ptr).
//
// Note [lock order]: the locks of the native layer, outermost first. A thread that holds one only takes locks
// further down the list, and no lock is held across a call that can block on another thread's progress (a driver
// synchronize, a module load, a JS call that may run finalizers, a thread-safe function call that may wait):
//   1. the pool registry's mutex (pool.cc)
//   2. a device buffer's uses_mutex (device-buffer.cc)
//   3. a stream's marker_mutex (markers.cc: one cuStreamWriteValue64 or cuEventRecord inside), or a streamed
//      copy's mutex (staging.cc)
//   4. a staging arena, the pinned cache
//   5. the ticket slots (tickets.cc), the event-marker pool (event-markers.cc; a staging chunk found free under its
//      arena's mutex gives its marker's event back to the pool)
//   6. leaves, taken with nothing further inside: the retain of a primary context, the library streams, the share
//      registry, a device synchronizer's queue, a completion channel (it posts with a non-blocking call), the
//      poller's park mutex, the owned stream registry (Stream.fromHandle), the calls deferred by captures, the copy
//      threads' queue (a landing queues its evictions there), a pinned block's list of fences, the staging kept out
//      of use after failed copies into JS arrays (landing.cc), an event's record cover (one cuEventRecord inside:
//      Note [landings behind an event] in stream/event.h).
// Entering a native object is not a lock: it never waits. Nor are the cross-device dependency sets (atomics only); asking a
// device about its fault for them is a driver call, made with no lock held (Note [cross-device dependencies] in
// internal/device-faults.h). Each mutex is an OrderedMutex with its level (lock-order.h), and
// CUDA_STREAM_POOL_CHECK_LOCK_ORDER=1 makes every lock check this order (Note [lock order checker]).
#pragma once
#include <napi.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "binding/errors.h"
#include "internal/native-allocation.h"
#include "internal/handle-table.h"
#include "internal/never-throws.h"

namespace csp {

struct NativeObject {
  int device = 0;
  virtual ~NativeObject() = default;

  bool retired() const { return (entries_.state.load(std::memory_order_acquire) & kRetired) != 0; }

  // Counts a call in flight; false (and nothing counted) once the object is retired.
  bool enter() {
    if (entries_.state.fetch_add(1, std::memory_order_acq_rel) & kRetired) {
      leave();
      return false;
    }
    return true;
  }

  void leave() {
    if (entries_.state.fetch_sub(1, std::memory_order_acq_rel) - 1 == kRetired) release_once();
  }

  // As leave(), for a call that may have queued work (NativeStream counts it).
  void leave_after_work() { leave(); }
  // Counts work queued without leaving (a recorded operation, once issued); NativeStream counts it, as
  // leave_after_work() would.
  void count_work() {}
  void entered_for_use(bool /*queues_work*/) {}  // what a Use does after entering; a native object kind may hide it with its own

  // Retires the object; the handle is released now if nothing is in flight, else by the last call to leave. True for
  // the call that retired it. Never blocks.
  bool retire() {
    const uint32_t before = entries_.state.fetch_or(kRetired, std::memory_order_acq_rel);
    if (before & kRetired) return false;
    if ((before & ~kRetired) == 0) release_once();
    return true;
  }

  // Retires the object and waits until no call is in flight (for objects whose calls are short and never block); the
  // caller then releases what the object holds. True for the call that retired it.
  bool retire_and_wait() {
    const uint32_t before = entries_.state.fetch_or(kRetired, std::memory_order_acq_rel);
    if (before & kRetired) return false;
    entries_.released.store(true, std::memory_order_relaxed);  // the caller releases; release() does not run
    while ((entries_.state.load(std::memory_order_acquire) & ~kRetired) != 0) std::this_thread::yield();
    return true;
  }

 protected:
  // Releases the driver handle. Runs once, on the thread that retires the object or leaves it last; never throws.
  virtual void release() {}

 private:
  static constexpr uint32_t kRetired = 0x80000000u;
  // Runs from destructors and finalizers too, where an exception would abort the process.
  void release_once() {
    if (!entries_.released.exchange(true, std::memory_order_acq_rel)) never_throws("releasing a handle", [&] { release(); });
  }
  // Every call enters and leaves here, from any thread: a cache line of its own, apart from the handle and the
  // fields that a submission thread reads for each operation (and from the shared_ptr counts before the object).
  struct alignas(kCacheLineBytes) Entries {
    std::atomic<uint32_t> state{0};
    std::atomic<bool> released{false};
  } entries_;
};

// Tags a Use for a call that queues no work on the object's stream (a query, a wait): such a call does not count as a
// submission, so a later wait can share the stream's last completion ticket (NativeStream::submissions).
struct QueuesNoWork {};

// Holds one entry of the object for the duration of one driver call; throws Destroyed once the object is retired.
template <class B>
class Use {
 public:
  Use(B& object, const char* resource, const char* method) : object_(object) {
    if (!object.enter()) throw Destroyed{resource, method};
    entered();
  }
  Use(B& object, const char* resource, const char* method, QueuesNoWork) : object_(object), queues_work_(false) {
    if (!object.enter()) throw Destroyed{resource, method};
    entered();
  }
  ~Use() {
    if (handed_over_) return;
    if (queues_work_)
      object_.leave_after_work();
    else
      object_.leave();
  }
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;
  B* operator->() const { return &object_; }
  // Gives this call's entry to a recorded operation (Held), which leaves it once issued: one entry per operation,
  // not a second one taken beside this. The work is counted when the submission thread has issued it.
  void hand_over() { handed_over_ = true; }

 private:
  // A native object kind's step after entering (NativeStream::entered_for_use); most have none. Leaves the entry if it throws.
  void entered() {
    try {
      object_.entered_for_use(queues_work_);
    } catch (...) {
      object_.leave();
      throw;
    }
  }
  B& object_;
  bool queues_work_ = true;
  bool handed_over_ = false;
};

// A new slot of the calling environment's handle table holding `object`; returns its handle for JS (Note [handle
// table]). `forget` runs if the slot is released while the object is live (its JS owner was collected, or the thread
// exits).
template <class B>
Napi::Value wrap_native(Napi::Env env, std::shared_ptr<B> object, ForgetAction forget = nullptr) {
  return Napi::Number::New(env, handle_table(env).insert(std::move(object), &B::kTag, forget));
}

// The slot of `handle`, a handle of kind B in `table` (errors as find_native, thrown in `env`).
template <class B>
const std::shared_ptr<void>& find_native(Napi::Env env, HandleTable& table, double handle) {
  HandleTable::Miss miss = HandleTable::Miss::kNotAHandle;
  if (const std::shared_ptr<void>* found = table.find(handle, &B::kTag, miss)) return *found;
  if (miss == HandleTable::Miss::kReleased) throw Destroyed{B::kName, "use"};
  throw Napi::TypeError::New(env, std::string("cuda-stream-pool internal: expected a ") + B::kName +
                                      (miss == HandleTable::Miss::kWrongKind ? " handle, got a handle of another kind"
                                                                             : " handle made in this thread"));
}

// The handle number that `value` holds; NaN for a value that is no number, which the table refuses like any other
// non-handle, and the error names the kind.
inline double handle_number(const Napi::Value& value) {
  return value.IsNumber() ? value.As<Napi::Number>().DoubleValue() : std::nan("");
}

// The slot of the handle `value`, of kind B. A value that is no handle of this kind is a TypeError (nothing of the
// library's passes one); a handle whose slot was released is a DestroyedError naming the kind.
template <class B>
const std::shared_ptr<void>& find_native(const Napi::Value& value) {
  return find_native<B>(value.Env(), handle_table(value.Env()), handle_number(value));
}

// The object a handle from wrap_native names (errors as find_native).
template <class B>
std::shared_ptr<B> unwrap_native(const Napi::Value& value) {
  return std::static_pointer_cast<B>(find_native<B>(value));
}

// A handle's object borrowed for the rest of one synchronous call of the environment's own thread: only that thread
// releases its table's slots, so the object outlives the call unless the call itself releases the slot. No reference
// count is taken (two atomic operations fewer per handle on the hottest calls); what keeps the object past the call
// (a recorded operation) takes shared(), which finds the slot again (the table may have grown since).
template <class B>
class Borrowed {
 public:
  Borrowed(B& object, Napi::Env env, HandleTable& table, double handle)
      : object_(object), env_(env), table_(table), handle_(handle) {}
  B& operator*() const { return object_; }
  B* operator->() const { return &object_; }
  std::shared_ptr<B> shared() const { return std::static_pointer_cast<B>(find_native<B>(env_, table_, handle_)); }

 private:
  B& object_;
  Napi::Env env_;
  HandleTable& table_;
  double handle_;
};

// The object a handle from wrap_native names, borrowed (errors as find_native).
template <class B>
Borrowed<B> borrow_native(const Napi::Value& value) {
  HandleTable& table = handle_table(value.Env());
  const double handle = handle_number(value);
  return Borrowed<B>(*static_cast<B*>(find_native<B>(value.Env(), table, handle).get()), value.Env(), table, handle);
}

// The object `handle` names in `table`, borrowed (errors as find_native).
template <class B>
Borrowed<B> borrow_native(Napi::Env env, HandleTable& table, double handle) {
  return Borrowed<B>(*static_cast<B*>(find_native<B>(env, table, handle).get()), env, table, handle);
}

// Whether `value` is a live handle of kind B, without throwing.
template <class B>
bool is_native(const Napi::Value& value) {
  HandleTable::Miss miss = HandleTable::Miss::kNotAHandle;
  return value.IsNumber() && handle_table(value.Env()).find(value.As<Napi::Number>().DoubleValue(), &B::kTag, miss) != nullptr;
}

// Releases the slot `value` names, if any (the object was destroyed); the object lives on while native code holds it.
inline void release_native(const Napi::Value& value) {
  if (value.IsNumber()) handle_table(value.Env()).release(value.As<Napi::Number>().DoubleValue(), false);
}

// A bigint outside the 64-bit range is an error, never wrapped onto another value (which could name a real object).
// The TS layer checks ranges first, so this is a backstop: its message names no argument.
inline int64_t to_int64(const Napi::Value& v) {
  if (v.IsBigInt()) {
    bool lossless = false;
    int64_t value = v.As<Napi::BigInt>().Int64Value(&lossless);
    if (!lossless) throw Napi::RangeError::New(v.Env(), "cuda-stream-pool internal: a bigint outside the int64 range");
    return value;
  }
  return v.As<Napi::Number>().Int64Value();
}

inline uint64_t to_uint64(const Napi::Value& v) {
  if (v.IsBigInt()) {
    bool lossless = false;
    uint64_t value = v.As<Napi::BigInt>().Uint64Value(&lossless);
    if (!lossless) throw Napi::RangeError::New(v.Env(), "cuda-stream-pool internal: a bigint outside the uint64 range");
    return value;
  }
  return static_cast<uint64_t>(v.As<Napi::Number>().Int64Value());
}

}  // namespace csp
