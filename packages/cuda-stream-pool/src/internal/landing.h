// Landings: the last step of a staged device-to-host copy, the bytes copied from staging into the JS array on the
// thread that owns it (Note [completion engine] in stream/completion.h, Note [staging] in internal/staging.cc).
#pragma once
#include <napi.h>
#include "internal/cuda-driver.h"

#include <atomic>
#include <cstddef>
#include <functional>

#include "internal/markers.h"

namespace csp {

// One staged device-to-host copy into a JS array, finished on its JS thread (see Note [completion engine]).
struct Landing {
  // JS holds a landing as a handle (wrap_box / unwrap_box in box.h) until copyLanded() finds it landed.
  static const napi_type_tag kTag;
  static constexpr const char* kName = "copy landing";
  Marker marker;                       // done when the bytes are in staging, unless `poll` is set
  std::function<CUresult()> poll;      // instead of the marker: SUCCESS, NOT_READY or the failure (any thread)
  std::function<void(void*)> copy_out;  // staging -> the destination's memory (`bytes` bytes), on its JS thread
  std::function<void()> release;        // gives the staging back; runs once, on any thread
  size_t bytes = 0;
  napi_ref destination = nullptr;  // the Uint8Array; deleted on its thread
  std::atomic<bool> marker_done{false};  // set by the poller once it saw the marker done or failed
  std::atomic<CUresult> marker_result{CUDA_SUCCESS};  // what the poller saw; stored before marker_done
  std::atomic<bool> finished{false};     // copied or dropped
  // Its stream waited on other devices' work: only the poller, which asks those devices, may find the copy done
  // (Note [cross-device dependencies] in internal/device-faults.h). Set before the poller sees the landing.
  bool poller_decides = false;
  // An event marker goes back to its pool only when both the poller and the landing's finisher are done with it: a
  // recycled event could be recorded again and make a finished copy look pending.
  std::atomic<int> marker_holders{2};
};

// Finishes the landing now if its copy is done (JS thread of its environment); returns whether it is finished.
bool settle_landing(Napi::Env env, Landing& landing);

// Gives the landing's staging back (Landing::release). Any thread.
void release_staging(Landing& landing);

// One holder of the landing's marker is done with it (see Landing::marker_holders).
void drop_marker(Landing& landing);

// Copies staging into the destination array, unless its buffer was detached or transferred. JS thread.
void finish_landing(Napi::Env env, Landing& landing, bool copy);

}  // namespace csp
