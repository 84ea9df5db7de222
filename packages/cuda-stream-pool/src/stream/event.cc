// Events: create, record, query, synchronize, elapsed time, destroy. Runs on: any JS thread.
#include "stream/event.h"

#include "binding/binding.h"
#include "internal/context.h"
#include "internal/live-counters.h"
#include "internal/loader.h"
#include "stream/completion.h"
#include "stream/stream.h"

namespace csp {

const napi_type_tag NativeEvent::kTag = {0x6373702d6576656eULL, 0x7400000000000002ULL};

NativeEvent::~NativeEvent() { destroy(); }

void NativeEvent::destroy() {
  if (retire() && counted) live().events--;
}

void NativeEvent::release() {
  if (make_current_quiet(device)) check_quiet(drv().cuEventDestroy(handle), device);
}

std::shared_ptr<NativeEvent> create_event(int device, unsigned flags, bool counted) {
  make_current(device);
  // The object exists only once the driver made the event: a native object without one would count, and destroy, nothing.
  CUevent handle = nullptr;
  check(drv().cuEventCreate(&handle, flags), "cuEventCreate", device, [&] { return std::string("device " + std::to_string(device)); });
  auto object = adopt_event(device, handle, counted);
  // Only this process records it, unless it is interprocess.
  object->uncovered.store((flags & CU_EVENT_INTERPROCESS) != 0, std::memory_order_relaxed);
  return object;
}

std::shared_ptr<NativeEvent> adopt_event(int device, CUevent handle, bool counted) {
  auto object = make_native<NativeEvent>();
  object->device = device;
  object->handle = handle;
  object->counted = counted;
  object->uncovered.store(true, std::memory_order_relaxed);  // made elsewhere: others may record it
  if (counted) live().events++;
  return object;
}

void throw_event_failure(NativeEvent& event) {
  if (!deferred_mode()) return;
  await_count(event.records_issued, event.records_recorded.load(std::memory_order_acquire));
  if (FailurePointer failure = event.failure.report()) throw CudaFailure(*failure);
}

namespace {

// The driver call of eventRecord, by the calling thread or the submission thread.
void issue_event_record(NativeEvent& event, NativeStream& stream) {
  make_current(event.device);
  check(drv().cuEventRecord(event.handle, stream.handle), "cuEventRecord", event.device,
        [&] { return std::string("device " + std::to_string(event.device)); });
}

// eventCreate(device, timing, blockingSync, interprocess) -> object; interprocess events have no timing.
Napi::Value event_create(const Napi::CallbackInfo& info) {
  int device = info[0].As<Napi::Number>().Int32Value();
  unsigned flags = info[1].As<Napi::Boolean>().Value() ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING;
  if (info[2].As<Napi::Boolean>().Value()) flags |= CU_EVENT_BLOCKING_SYNC;
  if (info[3].As<Napi::Boolean>().Value()) flags |= CU_EVENT_INTERPROCESS;
  return wrap_native(info.Env(), create_event(device, flags, true));
}

// eventRecord(), operands (Note [operand scratch] in binding/binding.h) event, stream -> the stream's capture status
// after the record (0 none, 1 active, 2 invalidated)
Napi::Value event_record(const Napi::CallbackInfo& info) {
  const Operands operands(info.Env());
  auto event = operands.borrow<NativeEvent>(0);
  auto stream = operands.borrow<NativeStream>(1);
  Use<NativeEvent> use(*event, "Event", "record");
  Use<NativeStream> use_stream(*stream, "Stream", "event.record");
  Submitter* submitter = recording_for(info.Env(), *stream);
  if (submitter) {
    make_current(event->device);  // as a direct call leaves it
    // Read before the record is queued: every copy counted is ahead of it (Note [landings behind an event]). A stream
    // whose handle left the library may capture through another library: its records cover nothing.
    NativeStream& owner = stream->owner();
    const uint64_t landings = owner.handle_shared.load(std::memory_order_acquire) ? 0 : owner.landings_queued.load(std::memory_order_acquire);
    uint64_t earlier;
    if (landings == 0) {
      earlier = event->records_recorded.fetch_add(1, std::memory_order_acq_rel);  // the last cover ends with the count
    } else {
      std::lock_guard<OrderedMutex> lock(event->cover_mutex);  // the cover goes with the count
      earlier = event->records_recorded.fetch_add(1, std::memory_order_acq_rel);
      event->cover = RecordCover{earlier + 1, event->direct_records.load(std::memory_order_acquire), owner.serial, landings};
    }
    const uint64_t waits = event->waits_recorded.load(std::memory_order_acquire);
    record_operation(*submitter, Held<NativeStream>(stream.shared(), use_stream),
                     [e = Held<NativeEvent>(event.shared(), use), earlier,
                      waits](const FailurePointer& failure, const Held<NativeStream>& s) {
                       // Records are issued in the order they were made, each after the waits on the one before.
                       await_count(e->records_issued, earlier);
                       await_count(e->waits_issued, waits);
                       CountWhenDone issued{e->records_issued};
                       if (failure) {
                         e->failure.clear();
                         e->failure.record(failure);  // the event now stands for failed work
                         return false;
                       }
                       issue_event_record(*e, *s);
                       e->failure.clear();
                       return true;
                     });
  } else {
    if (deferred_mode()) await_count(event->waits_issued, event->waits_recorded.load(std::memory_order_acquire));
    NativeStream& owner = stream->owner();
    // Covers nothing (Note [landings behind an event]): in deferred mode (a direct record, of a stream that is not
    // recorded, may pass records recorded before it), or during a capture, or where the library cannot tell a capture
    // (a stream it does not own, or whose handle left it, may capture through another wrapper or library).
    const bool covers = !deferred_mode() && owner.owned && !owner.handle_shared.load(std::memory_order_acquire) &&
                        !owner.capturing.load(std::memory_order_acquire);
    const uint64_t landings = covers ? owner.landings_queued.load(std::memory_order_acquire) : 0;
    {
      std::lock_guard<OrderedMutex> lock(event->cover_mutex);
      // Counted before the driver holds the new record: the poller, which reads the counts without this lock, may find
      // it done before the call returns.
      const uint64_t direct = event->direct_records.fetch_add(1, std::memory_order_acq_rel) + 1;
      issue_event_record(*event, *stream);
      event->cover = RecordCover{event->records_recorded.load(std::memory_order_acquire), direct, owner.serial, landings};
    }
    if (deferred_mode()) event->failure.clear();
  }
  // The event stands for its stream's work so far, and so for what that work waited on.
  const uint64_t dependencies = stream->owner().dependencies.devices();
  if (dependencies || event->dependencies.devices()) event->dependencies.replace(dependencies);
  // The stream's capture state, which the caller needs next: one call instead of two on the hot path. A recorded
  // record's stream was not capturing, and the entries of this call went to the operation.
  const int status = submitter ? 0 : capture_status(*stream);
  if (status != 0) event->uncovered.store(true, std::memory_order_release);  // graph launches record it from now on
  return Napi::Number::New(info.Env(), status);
}

// eventStatus(ref) -> 0 complete, 600 pending, another CUresult on failure, a wait_result for a fault of a device
// the recorded work waited on; never throws a CUDA error.
Napi::Value event_status(const Napi::CallbackInfo& info) {
  auto event = unwrap_native<NativeEvent>(info[0]);
  Use<NativeEvent> use(*event, "Event", "query");
  const RecordCover cover = event->read_cover();  // before the records made so far are issued
  throw_event_failure(*event);
  make_current(event->device);
  const DependencySnapshot seen = event->dependencies.snapshot();
  CUresult r = drv().cuEventQuery(event->handle);
  check_quiet(r, event->device);
  if (r == CUDA_SUCCESS) note_event_done(info.Env(), *event, cover);
  if (r != CUDA_SUCCESS || !seen.devices) return Napi::Number::New(info.Env(), r);
  const DependencyFault fault = settle_dependencies(event->dependencies, seen, -1);
  make_current_quiet(event->device);
  return Napi::Number::New(info.Env(), wait_result(fault));
}

// eventSynchronize(ref) -> 0, or a wait_result for a fault of a device the recorded work waited on: blocks the
// calling thread until the recorded work is done. Throws CudaFailure when it failed on its own device.
Napi::Value event_synchronize(const Napi::CallbackInfo& info) {
  auto event = unwrap_native<NativeEvent>(info[0]);
  Use<NativeEvent> use(*event, "Event", "synchronizeSync");
  const RecordCover cover = event->read_cover();  // before the records made so far are issued
  throw_event_failure(*event);
  make_current(event->device);
  bool waited = false;  // the driver's wait returned: not when another device's fault ended the poll before it
  const DependencyFault fault = synchronize_with_dependencies(
      event->dependencies, event->device, -1,
      [&] { return make_current_quiet(event->device) ? drv().cuEventQuery(event->handle) : CUDA_ERROR_INVALID_CONTEXT; },
      [&] {
        check(drv().cuEventSynchronize(event->handle), "cuEventSynchronize", event->device,
              [&] { return std::string("device " + std::to_string(event->device)); });
        waited = true;
      });
  if (waited) note_event_done(info.Env(), *event, cover);
  return Napi::Number::New(info.Env(), wait_result(fault));
}

// eventElapsed(start, end) -> milliseconds; NOT_READY is thrown here as a CudaError (the one place).
Napi::Value event_elapsed(const Napi::CallbackInfo& info) {
  auto start = unwrap_native<NativeEvent>(info[0]);
  auto end = unwrap_native<NativeEvent>(info[1]);
  Use<NativeEvent> use_start(*start, "Event", "elapsedMs");
  Use<NativeEvent> use_end(*end, "Event", "elapsedMs");
  throw_event_failure(*start);
  throw_event_failure(*end);
  make_current(start->device);
  float ms = 0;
  check(drv().cuEventElapsedTime(&ms, start->handle, end->handle), "cuEventElapsedTime", start->device,
        [&] { return std::string("device " + std::to_string(start->device)); });
  return Napi::Number::New(info.Env(), ms);
}

// eventDestroy(ref): destroys the event once no call is in flight, and releases the handle.
Napi::Value event_destroy(const Napi::CallbackInfo& info) {
  unwrap_native<NativeEvent>(info[0])->destroy();
  release_native(info[0]);
  return info.Env().Undefined();
}

}  // namespace

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kEventExports[] = {
    {"eventCreate", "number, boolean, boolean, boolean", entry<event_create>},
    {"eventRecord", "", unordered<event_record>},
    {"eventStatus", "ref", entry<event_status>},
    {"eventSynchronize", "ref", entry<event_synchronize>},
    {"eventElapsed", "ref, ref", entry<event_elapsed>},
    {"eventDestroy", "ref", entry<event_destroy>},
};

void register_event(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kEventExports);
}

}  // namespace csp
