// Event objects: a CUevent shared by the wrappers that use it. See Note [handle guard] in native-object.h.
#pragma once
#include "internal/native-object.h"
#include "internal/device-faults.h"
#include "internal/submission.h"

namespace csp {

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
  alignas(kCacheLineBytes) IssuedCount records_issued;
  IssuedCount waits_issued;
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
