// Streams: create, borrow, query, synchronize, wait, destroy. Runs on: any JS thread (main or worker).
#include "stream/stream.h"
#include "device/partition.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "binding/binding.h"
#include "internal/context.h"
#include "stream/completion.h"
#include "internal/live-counters.h"
#include "internal/markers.h"
#include "internal/tickets.h"
#include "stream/event.h"
#include "internal/loader.h"

namespace csp {

const napi_type_tag NativeStream::kTag = {0x6373702d73747265ULL, 0x616d000000000001ULL};

namespace {

// The streams the library owns, by driver handle, for Note [borrowed library streams]. An entry lives from the
// stream's creation until just before its cuStreamDestroy, so a handle the driver hands out again later finds the
// new owner, never the old one.
struct OwnedStreams {
  OrderedMutex mutex{LockLevel::kLeaf, "owned stream registry"};
  std::unordered_map<CUstream, std::weak_ptr<NativeStream>> objects;
};
OwnedStreams& owned_streams() {
  static OwnedStreams* registry = new OwnedStreams();  // never destroyed: streams may be released during exit
  return *registry;
}

// The device's stream priority range as (least, greatest), read once per device: a property of the device, so that
// a created stream's effective priority (the driver clamps the one asked for into this range) is known without a
// cuStreamGetPriority per stream. The device's context is current. Throws CudaFailure.
std::pair<int, int> priority_range(int device) {
  struct Range {
    std::atomic<bool> known{false};
    std::atomic<int> least{0}, greatest{0};  // two threads reading it first both store the same values
  };
  static Range ranges[kMaxDevices];
  Range& range = ranges[device];
  if (!range.known.load(std::memory_order_acquire)) {
    int least = 0, greatest = 0;
    check(drv().cuCtxGetStreamPriorityRange(&least, &greatest), "cuCtxGetStreamPriorityRange", device);
    range.least.store(least, std::memory_order_relaxed);
    range.greatest.store(greatest, std::memory_order_relaxed);
    range.known.store(true, std::memory_order_release);
  }
  return {range.least.load(std::memory_order_relaxed), range.greatest.load(std::memory_order_relaxed)};
}

}  // namespace

NativeStream::~NativeStream() {
  retire();
  dependencies.forget(device);
  never_throws("releasing a stream's ticket slot", [&] { release_ticket(ticket); });
  if (retired && make_current_quiet(device)) check_quiet(drv().cuEventDestroy(retired), device);
}

void NativeStream::destroy() {
  // See Note [stream retirement].
  if (enter()) {
    if (retired && make_current_quiet(device)) check_quiet(drv().cuEventRecord(retired, handle), device);
    record_on_release_.store(true, std::memory_order_relaxed);
    leave();
  }
  retire();
}

// Never throws: finalizers and destroy after a device fault must not.
void NativeStream::release() {
  if (!lender) capture_closed(*this);  // a borrowed wrapper's end leaves its lender's capture open
  if (record_on_release_.load(std::memory_order_relaxed) && retired && make_current_quiet(device))
    check_quiet(drv().cuEventRecord(retired, handle), device);
  if (!owned) return;
  {
    std::lock_guard<OrderedMutex> lock(owned_streams().mutex);
    owned_streams().objects.erase(handle);
  }
  if (make_current_quiet(device)) check_quiet(drv().cuStreamDestroy(handle), device);
  handle_destroyed.store(true, std::memory_order_release);
  live().streams--;
}

std::shared_ptr<NativeStream> create_stream(int device, unsigned flags, int priority, int partition) {
  make_current(device);
  const auto [least, greatest] = priority_range(device);
  auto object = make_native<NativeStream>();
  object->device = device;
  if (partition >= 0) {
    CUgreenCtx context = partition_context(device, partition);
    if (!context) check(CUDA_ERROR_INVALID_VALUE, "cuGreenCtxStreamCreate", device, "no such partition");
    check(drv().cuGreenCtxStreamCreate(&object->handle, context, flags, priority), "cuGreenCtxStreamCreate", device,
          [&] { return std::string("device " + std::to_string(device) + ", partition " + std::to_string(partition)); });
    object->partition = partition;
  } else {
    check(drv().cuStreamCreateWithPriority(&object->handle, flags, priority), "cuStreamCreateWithPriority", device,
          [&] { return std::string("device " + std::to_string(device)); });
  }
  object->owned = true;
  live().streams++;
  {
    std::lock_guard<OrderedMutex> lock(owned_streams().mutex);
    owned_streams().objects[object->handle] = object;
  }
  // The flags are what was asked for, and the priority is clamped into the device's range as the driver clamps it:
  // only the id needs asking.
  object->priority = std::min(std::max(priority, greatest), least);
  object->flags = flags;
  if (drv().cuStreamGetId(object->handle, &object->id) == CUDA_SUCCESS) object->info_known.store(true, std::memory_order_release);
  return object;
}

namespace {

std::string describe(const NativeStream& object) { return "device " + std::to_string(object.device); }

// Work queued on `object` waited on `devices` (and on what they waited on): Note [cross-device dependencies]. Called
// after the work is queued.
void depends_on(NativeStream& object, uint64_t devices) {
  if (devices) object.owner().dependencies.add(devices, object.device);
}

// streamCreate(device, nonBlocking, priority, partition) -> object; partition -1 for the whole device.
Napi::Value stream_create(const Napi::CallbackInfo& info) {
  int device = info[0].As<Napi::Number>().Int32Value();
  unsigned flags = info[1].As<Napi::Boolean>().Value() ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT;
  int priority = info[2].As<Napi::Number>().Int32Value();
  int partition = info[3].As<Napi::Number>().Int32Value();
  return wrap_stream(info.Env(), create_stream(device, flags, priority, partition), true);
}

// streamShareHandle(ref): JS code read the stream's handle, so work may reach the stream from outside the library;
// its waits stop sharing tickets (NativeStream::submissions).
Napi::Value stream_share_handle(const Napi::CallbackInfo& info) {
  unwrap_native<NativeStream>(info[0])->handle_shared.store(true, std::memory_order_relaxed);
  return info.Env().Undefined();
}

// streamOwnerDevice(handle: bigint) -> the device of the live library stream with this handle, or -1 for a handle the
// library does not own (Note [borrowed library streams]).
Napi::Value stream_owner_device(const Napi::CallbackInfo& info) {
  const auto handle = reinterpret_cast<CUstream>(static_cast<uintptr_t>(to_uint64(info[0])));
  std::shared_ptr<NativeStream> owner;
  {
    std::lock_guard<OrderedMutex> lock(owned_streams().mutex);
    auto it = owned_streams().objects.find(handle);
    if (it != owned_streams().objects.end()) owner = it->second.lock();
  }
  return Napi::Number::New(info.Env(), owner && !owner->NativeObject::retired() ? owner->device : -1);
}

// streamBorrow(device, handle: bigint) -> object that never destroys the driver stream
Napi::Value stream_borrow(const Napi::CallbackInfo& info) {
  int device = info[0].As<Napi::Number>().Int32Value();
  make_current(device);
  auto object = make_native<NativeStream>();
  object->device = device;
  object->handle = reinterpret_cast<CUstream>(static_cast<uintptr_t>(to_uint64(info[1])));
  {
    std::lock_guard<OrderedMutex> lock(owned_streams().mutex);
    auto it = owned_streams().objects.find(object->handle);
    if (it != owned_streams().objects.end()) object->lender = it->second.lock();
  }
  if (object->lender && object->lender->device != device) object->lender.reset();  // the caller named another device: foreign
  if (object->lender && object->lender->info_known.load(std::memory_order_acquire)) {
    object->id = object->lender->id;
    object->priority = object->lender->priority;
    object->flags = object->lender->flags;
    object->info_known.store(true, std::memory_order_release);
  }
  return wrap_stream(info.Env(), object);
}

// streamInfo(ref) -> [handle, id, priority, nonBlocking, partition] as the driver reports them (partition -1 for
// the whole device or a borrowed stream) (a tuple: indexed elements cost
// far less than named properties, and every Stream construction makes one)
Napi::Value stream_info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto object = unwrap_native<NativeStream>(info[0]);
  unsigned long long id = object->id;
  int priority = object->priority;
  unsigned flags = object->flags;
  // Known facts are read without entering the object, so that a created stream's wrapper, which reads them on first
  // use, can still give them after destroy.
  if (!object->info_known.load(std::memory_order_acquire)) {
    Use<NativeStream> use(*object, "Stream", "info", QueuesNoWork{});
    make_current(object->device);
    check(drv().cuStreamGetId(object->handle, &id), "cuStreamGetId", object->device, [&] { return std::string(describe(*object)); });
    check(drv().cuStreamGetPriority(object->handle, &priority), "cuStreamGetPriority", object->device, [&] { return std::string(describe(*object)); });
    check(drv().cuStreamGetFlags(object->handle, &flags), "cuStreamGetFlags", object->device, [&] { return std::string(describe(*object)); });
    static OrderedMutex learn_info{LockLevel::kLeaf, "stream info"};  // rare: threads asking at once get the same answers
    std::lock_guard<OrderedMutex> lock(learn_info);
    if (!object->info_known.load(std::memory_order_acquire)) {
      object->id = id;
      object->priority = priority;
      object->flags = flags;
      object->info_known.store(true, std::memory_order_release);
    }
  }
  Napi::Array out = Napi::Array::New(env, 5);
  out.Set(0u, Napi::BigInt::New(env, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(object->handle))));
  out.Set(1u, Napi::BigInt::New(env, static_cast<uint64_t>(id)));
  out.Set(2u, Napi::Number::New(env, priority));
  out.Set(3u, Napi::Boolean::New(env, (flags & CU_STREAM_NON_BLOCKING) != 0));
  out.Set(4u, Napi::Number::New(env, object->partition));
  return out;
}

// streamStatus(ref) -> 0 idle, 600 (NOT_READY) busy, another CUresult on failure, a wait_result for a fault of a
// device its work waited on; never throws a CUDA error, so the poll behind every wait can use it. Throws
// DestroyedError for a destroyed object.
Napi::Value stream_status(const Napi::CallbackInfo& info) {
  auto object = unwrap_native<NativeStream>(info[0]);
  Use<NativeStream> use(*object, "Stream", "query", QueuesNoWork{});
  if (FailurePointer failure = object->owner().failure.peek()) return Napi::Number::New(info.Env(), failure->code);
  // Work recorded on it and not issued yet (deferred submission) keeps it busy; no need to wait for the issue.
  if (object->unissued()) return Napi::Number::New(info.Env(), CUDA_ERROR_NOT_READY);
  const DependencySnapshot seen = object->owner().dependencies.snapshot();
  const CUresult status = query_stream(*object);
  if (status == CUDA_SUCCESS) note_stream_idle(info.Env(), *object);
  if (status != CUDA_SUCCESS || !seen.devices) return Napi::Number::New(info.Env(), status);
  const DependencyFault fault = settle_dependencies(object->owner().dependencies, seen, object->device);
  make_current_quiet(object->device);
  return Napi::Number::New(info.Env(), wait_result(fault));
}

// streamLenderAlive(ref) -> false once the library stream that a borrowed wrapper is tied to (its lender, Note
// [borrowed library streams]) was destroyed, by any thread; true otherwise.
Napi::Value stream_lender_alive(const Napi::CallbackInfo& info) {
  auto object = unwrap_native<NativeStream>(info[0]);
  return Napi::Boolean::New(info.Env(), !object->lender || !object->lender->NativeObject::retired());
}

// streamSynchronize(ref) -> 0, or a wait_result for a fault of a device its work waited on: blocks the calling
// thread until the stream's work is done. Throws CudaFailure when the work failed on its own device.
Napi::Value stream_synchronize(const Napi::CallbackInfo& info) {
  auto object = unwrap_native<NativeStream>(info[0]);
  Use<NativeStream> use(*object, "Stream", "synchronizeSync", QueuesNoWork{});
  throw_stream_failure(*object);
  make_current(object->device);
  const uint64_t submissions = object->submissions.load(std::memory_order_acquire);  // covered by the synchronize
  bool waited = false;  // the driver's wait returned: not when another device's fault ended the poll before it
  const DependencyFault fault = synchronize_with_dependencies(
      object->owner().dependencies, object->device, object->device,
      [&] { return make_current_quiet(object->device) ? drv().cuStreamQuery(object->handle) : CUDA_ERROR_INVALID_CONTEXT; },
      [&] {
        check(drv().cuStreamSynchronize(object->handle), "cuStreamSynchronize", object->device, [&] { return std::string(describe(*object)); });
        waited = true;
      });
  if (waited) {  // its own work is done, even where another device's fault, found afterwards, fails the wait
    object->idle_at_submissions->store(submissions, std::memory_order_release);
    note_stream_idle(info.Env(), *object);
  }
  return Napi::Number::New(info.Env(), wait_result(fault));
}

// The driver call of streamWaitEvent, by the calling thread or the submission thread.
void issue_stream_wait_event(NativeStream& stream, NativeEvent& event) {
  make_current(stream.device);
  check(drv().cuStreamWaitEvent(stream.handle, event.handle, 0), "cuStreamWaitEvent", stream.device,
        [&] { return std::string(describe(stream)); });
}

// streamThrowFailure(ref): throws the CudaError of recorded work on the stream that failed, marking it reported (Note
// [deferred submission] in internal/submission.h); nothing when none did. After streamStatus reported a failure.
Napi::Value stream_throw_failure(const Napi::CallbackInfo& info) {
  auto object = unwrap_native<NativeStream>(info[0]);
  throw_stream_failure(*object);
  return info.Env().Undefined();
}

// streamWaitEvent(ref, eventRef): later work on the stream waits for the event's recorded work; the event may belong
// to another device (the wait runs in the stream's context).
Napi::Value stream_wait_event(const Napi::CallbackInfo& info) {
  auto object = unwrap_native<NativeStream>(info[0]);
  auto event = unwrap_native<NativeEvent>(info[1]);
  Use<NativeStream> use(*object, "Stream", "waitEvent");
  Use<NativeEvent> use_event(*event, "Event", "waitEvent");
  if (Submitter* submitter = recording_for(info.Env(), *object)) {
    make_current(object->device);  // as a direct call leaves it
    // Waits for the records of the event made before this call, by any thread, to be issued first.
    const uint64_t recorded = event->records_recorded.load(std::memory_order_acquire);
    event->waits_recorded.fetch_add(1, std::memory_order_acq_rel);
    record_operation(*submitter, Held<NativeStream>(object, use),
                     [e = Held<NativeEvent>(event, use_event), recorded](const FailurePointer& failure, const Held<NativeStream>& s) {
                       CountWhenDone issued{e->waits_issued};  // the event's next record waits for it
                       if (failure) return false;
                       await_count(e->records_issued, recorded);
                       // Work after a wait on failed work fails too: it must not read what was never written.
                       if (FailurePointer carried = e->failure.peek()) {
                         carry_failure(*s, carried);
                         return false;
                       }
                       issue_stream_wait_event(*s, *e);
                       return true;
                     });
  } else {
    throw_event_failure(*event);
    issue_stream_wait_event(*object, *event);
  }
  depends_on(*object, (event->device != object->device ? device_bit(event->device) : 0) | event->dependencies.devices());
  return info.Env().Undefined();
}

// waitStream's events in one environment (thread), one per device, created on first use and recorded again by
// every call: cuStreamWaitEvent waits for the record that precedes it, so a later record does not move an earlier
// wait. Confined to the environment's JS thread, so no lock; destroyed with the environment (cleanup hook).
struct WaitMarkers {
  std::map<int, std::shared_ptr<NativeEvent>> by_device;
};

// streamWaitStream(ref, otherRef): later work on the stream waits for the work queued on `other` so far. The two
// streams are used one after the other, never both at once (no lock order between them). The event belongs to
// `other`'s device and is recorded in its context; the wait runs in the stream's context, which may be another
// device's (cuStreamWaitEvent takes an event of any device).
Napi::Value stream_wait_stream(const Napi::CallbackInfo& info) {
  auto object = unwrap_native<NativeStream>(info[0]);
  auto other = unwrap_native<NativeStream>(info[1]);
  auto& markers = static_cast<WaitMarkers*>(info.Data())->by_device;
  const int other_device = other->device;
  auto& marker = markers[other_device];
  if (!marker) marker = create_event(other_device, CU_EVENT_DISABLE_TIMING, false);
  {
    Use<NativeStream> use(*other, "Stream", "waitStream");
    make_current(other_device);
    check(drv().cuEventRecord(marker->handle, other->handle), "cuEventRecord", other_device, describe(*other));
  }
  Use<NativeStream> use(*object, "Stream", "waitStream");
  // Recorded work of `other` that failed (deferred submission) errors this stream too, as a wait on a failed event
  // does: work after the wait must not read what was never written. The record above was `other`'s next operation,
  // so a failure a wait has already reported is cleared instead of carried.
  const bool records = records_operations(*object);
  if (records) object->owner().failure.clear_if_reported();  // this wait is the stream's next operation
  if (other->owner().failure.set() && !other->owner().failure.clear_if_reported()) {
    if (FailurePointer carried = other->owner().failure.peek()) {
      if (!records) {
        // A stream called directly is not errored by it: the call reports it, as a direct call's failure is. In direct
        // mode (a streamed copy's failure) that report ends it, as a wait's does.
        if (!deferred_mode()) other->owner().failure.take();
        carried->reported.store(true, std::memory_order_release);
        throw CudaFailure(*carried);
      }
      carry_failure(*object, carried);
      return info.Env().Undefined();
    }
  }
  make_current(object->device);
  check(drv().cuStreamWaitEvent(object->handle, marker->handle, 0), "cuStreamWaitEvent", object->device, describe(*object));
  depends_on(*object, (other_device != object->device ? device_bit(other_device) : 0) | other->owner().dependencies.devices());
  return info.Env().Undefined();
}

// streamWaitEventCount() -> how many waitStream events this environment holds (one per device used), for tests.
Napi::Value stream_wait_event_count(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(static_cast<WaitMarkers*>(info.Data())->by_device.size()));
}

// streamDestroy(ref): destroys an owned stream (cuStreamDestroy; a borrowed wrapper's object is only retired) and
// releases the handle; never throws after a fault. The stream's handle, id, priority and flags (with the partition
// index plus one above bit 32) are left in the fact scratch (Note [fact scratch]) when the native layer knows them,
// for a wrapper that never read them.
Napi::Value stream_destroy(const Napi::CallbackInfo& info) {
  auto object = unwrap_native<NativeStream>(info[0]);
  uint64_t* facts = fact_scratch(info.Env());
  facts[0] = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(object->handle));
  facts[1] = object->id;
  facts[2] = static_cast<uint64_t>(static_cast<int64_t>(object->priority));
  facts[3] = object->flags | (static_cast<uint64_t>(object->partition + 1) << 32);
  object->destroy();
  release_native(info[0]);
  return info.Env().Undefined();
}

}  // namespace

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kStreamExports[] = {
    {"streamCreate", "number, boolean, number, number", entry<stream_create>},
    {"streamBorrow", "number, bigint", entry<stream_borrow>},
    {"streamOwnerDevice", "bigint", entry<stream_owner_device>},
    {"streamShareHandle", "ref", entry<stream_share_handle>},
    {"streamInfo", "ref", entry<stream_info>},
    {"streamStatus", "ref", unordered<stream_status>},
    {"streamLenderAlive", "ref", unordered<stream_lender_alive>},
    {"streamSynchronize", "ref", entry<stream_synchronize>},
    {"streamThrowFailure", "ref", entry<stream_throw_failure>},
    {"streamWaitEvent", "ref, ref", unordered<stream_wait_event>},
    {"streamDestroy", "ref", entry<stream_destroy>},
};
// These two share the environment's waitStream events (their info.Data()).
const Export kWaitExports[] = {
    {"streamWaitStream", "ref, ref", entry<stream_wait_stream>},
    {"streamWaitEventCount", "", entry<stream_wait_event_count>},
};

void register_stream(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kStreamExports);
  auto* markers = new WaitMarkers();
  export_all(env, exports, kWaitExports, markers);
  // Runs when the environment tears down, on its thread: destroys its waitStream events.
  env.AddCleanupHook([markers]() { never_throws("waitStream events cleanup hook", [&] { delete markers; }); });
}

}  // namespace csp
