// Event boxes: a CUevent shared by the wrappers that use it. See Note [handle guard] in box.h.
#pragma once
#include "internal/box.h"
#include "internal/device-faults.h"

namespace csp {

struct EventBox : Box {
  static const napi_type_tag kTag;
  static constexpr const char* kName = "Event";
  CUevent handle = nullptr;
  bool counted = true;  // user-visible events count in live().events; internal ones do not
  // Its stream's dependencies at its last record (Note [cross-device dependencies] in internal/device-faults.h).
  DeviceDependencies dependencies;
  ~EventBox() override;
  // Retires the box at once; the driver event is destroyed when no call is in flight, the completion engine's
  // waits included (each holds an entry while it watches the event). Never waits; idempotent.
  void destroy();

 protected:
  void release() override;
};

// Creates an event on `device` with CU_EVENT_* flags. Throws CudaFailure.
std::shared_ptr<EventBox> create_event(int device, unsigned flags, bool counted);

}  // namespace csp
