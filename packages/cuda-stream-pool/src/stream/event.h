// Event objects: a CUevent shared by the wrappers that use it. See Note [handle guard] in native-object.h.
#pragma once
#include "internal/native-object.h"
#include "internal/device-faults.h"
#include "internal/lock-order.h"
#include "internal/submission.h"

namespace csp {

// Note [landings behind an event]: a copy into a JS array lands once its marker reports done, and a wait of its
// thread reports the copy's work done only after it landed. When the marker never reports (a lost completion ticket,
// a query that keeps failing), a wait that finds the work done by itself tells the landing instead: a stream or
// device found idle (note_stream_idle), or an event found done whose last record came after the copy on the copy's
// stream. A record keeps a RecordCover: its stream (NativeStream::serial of the driver stream's owner) and how many
// copies into JS arrays had been queued on that stream when the record was made (read before the record is queued,
// so every copy counted is ahead of it in stream order), beside the event's two record counts after it. A wait uses
// a cover only if the driver's answer is about that record: it reads the cover before its wait (in deferred mode,
// before waiting for the records made so far to be issued, which are issued in the order of records_recorded), and
// after the wait finds both counts unchanged (no record was made since). Every record moves a count, so a record
// whose stream never had such a copy (most) covers nothing by counting itself, with no lock; one that covers copies
// writes its cover under `cover_mutex` with its count. A direct record counts itself in `direct_records`, issues its
// driver call and writes its cover, all under the lock: the count moves before the driver can answer about the new
// record (the poller reads the counts without the lock), and two threads recording one event leave the cover of the
// record the driver holds. Covers nothing: a record during a capture (and every record of an event once one was
// captured: graph launches record it unseen), a record on a stream the library does not own or whose handle left it
// (a capture begun through another wrapper or library goes unseen), a direct record in deferred mode (it may pass
// records recorded before it), and any record of an interprocess event.
struct RecordCover {
  uint64_t recorded = 0;  // NativeEvent::records_recorded after the record
  uint64_t direct = 0;    // NativeEvent::direct_records after it
  uint64_t stream = 0;    // NativeStream::serial
  uint64_t landings = 0;  // the copies into JS arrays with Landing::position up to this one are ahead of the record
};

struct NativeEvent : NativeObject {
  static const napi_type_tag kTag;
  static constexpr const char* kName = "Event";
  CUevent handle = nullptr;
  bool counted = true;  // user-visible events count in live().events; internal ones do not
  // Its stream's dependencies at its last record (Note [cross-device dependencies] in internal/device-faults.h).
  DeviceDependencies dependencies;
  // Deferred submission (Note [deferred submission] in internal/submission.h): the failure its last record carries
  // (the record was dropped because its stream had failed), and its records counted when recorded and when issued,
  // so that a wait on it from any thread waits for the records made before it.
  // Stream waits on it recorded and issued: a later record is issued only after the waits recorded before it, so a
  // wait issued by another submission thread never sees the event's next record instead of its own. What recording
  // threads count and what submission threads count sit on separate cache lines (kCacheLineBytes).
  FailureSlot failure;
  alignas(kCacheLineBytes) std::atomic<uint64_t> records_recorded{0};
  std::atomic<uint64_t> waits_recorded{0};
  std::atomic<uint64_t> direct_records{0};  // records issued by the calling thread (Note [landings behind an event])
  alignas(kCacheLineBytes) IssuedCount records_issued;
  IssuedCount waits_issued;
  // Note [landings behind an event]. A leaf lock, with at most one cuEventRecord inside.
  OrderedMutex cover_mutex{LockLevel::kLeaf, "event record cover"};
  RecordCover cover;  // the last cover written, under cover_mutex; current while both counts match it
  // Set once a record was made during a capture (a graph's launches record the event from then on, unseen) or for an
  // event another process may record (interprocess, or opened from another process): no cover holds for it.
  std::atomic<bool> uncovered{false};
  RecordCover read_cover() {
    std::lock_guard<OrderedMutex> lock(cover_mutex);
    return cover;
  }
  // Whether the cover that counted `recorded` and `direct` is still the last record's. Any thread, no lock.
  bool cover_current(uint64_t recorded, uint64_t direct) const {
    return records_recorded.load(std::memory_order_acquire) == recorded &&
           direct_records.load(std::memory_order_acquire) == direct && !uncovered.load(std::memory_order_acquire);
  }
  ~NativeEvent() override;
  // Retires the object at once; the driver event is destroyed when no call is in flight, the completion engine's
  // waits included (each holds an entry while it watches the event). Never waits; idempotent.
  void destroy();

 protected:
  void release() override;
};

// In deferred mode, waits for the records recorded so far to be issued, then throws the failure the event carries
// (its last record was dropped after a failure of its stream's recorded work). The caller holds a use.
void throw_event_failure(NativeEvent& event);

// Creates an event on `device` with CU_EVENT_* flags. Throws CudaFailure.
std::shared_ptr<NativeEvent> create_event(int device, unsigned flags, bool counted);
// The object of an event the driver made elsewhere (cuIpcOpenEventHandle); it owns `handle` from now on.
std::shared_ptr<NativeEvent> adopt_event(int device, CUevent handle, bool counted = true);

}  // namespace csp
