// Event boxes: a CUevent shared by the wrappers that use it. See Note [handle guard] in box.h.
#pragma once
#include "box.h"

namespace csp {

struct EventBox : Box {
  static const napi_type_tag kTag;
  static constexpr const char* kName = "Event";
  CUevent handle = nullptr;
  bool counted = true;  // user-visible events count in live().events; internal ones do not
  // Waits of the completion engine on this event (under `mutex`). destroy() retires the box at once; the driver
  // event is destroyed when the last of them leaves (Note [completion engine] in completion.h).
  int engine_waits = 0;
  ~EventBox() override;
  void destroy();
  // The engine starts / stops watching this event. begin_engine_wait throws Destroyed once retired.
  void begin_engine_wait();
  void end_engine_wait();

 private:
  void destroy_handle();  // under `mutex`
};

// Creates an event on `device` with CU_EVENT_* flags. Throws CudaFailure.
std::shared_ptr<EventBox> create_event(int device, unsigned flags, bool counted);

}  // namespace csp
