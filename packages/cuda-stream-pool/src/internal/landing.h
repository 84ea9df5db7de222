// Landings: the last step of a staged device-to-host copy, the bytes copied from staging into the JS array on the
// thread that owns it (Note [completion engine] in stream/completion.h, Note [staging] in internal/staging.cc).
#pragma once
#include <napi.h>
#include "internal/cuda-driver.h"

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "internal/markers.h"

namespace csp {

struct NativeStream;

// One staged device-to-host copy into a JS array, finished on its JS thread (see Note [completion engine]).
struct Landing {
  // JS holds a landing as a handle (wrap_native / unwrap_native in native-object.h) until copyLanded() finds it landed.
  static const napi_type_tag kTag;
  static constexpr const char* kName = "copy landing";
  Marker marker;                       // done when the bytes are in staging, unless `poll` is set
  std::function<CUresult()> poll;      // instead of the marker: SUCCESS, NOT_READY or the failure (any thread)
  // Staging -> the destination's memory, bytes [from, to) of the copy (the destination's data pointer is the copy's
  // byte 0), on its JS thread.
  std::function<void(void* destination, size_t from, size_t to)> copy_out;
  std::function<void()> release;        // gives the staging back; runs once, on any thread
  // The copy's stream: a copy that failed short of a fault errors it, so that its next wait reports the failure.
  std::weak_ptr<NativeStream> stream;
  // The stream was found idle after the copy was queued (note_stream_idle): its bytes are in staging, whatever its
  // markers say. Not for a streamed copy, whose pieces the poller moves out of staging (`streamed`).
  std::atomic<bool> stream_idle{false};
  // Its stream's NativeStream::serial (of the owner) and the copy's count in its landings_queued: an event recorded
  // after it on that stream tells it too (Note [landings behind an event] in stream/event.h).
  uint64_t stream_serial = 0;
  uint64_t position = 0;
  bool streamed = false;
  size_t bytes = 0;
  napi_ref destination = nullptr;  // the Uint8Array; deleted on its thread
  std::atomic<bool> marker_done{false};  // set by the poller once it saw the marker done or failed
  std::atomic<CUresult> marker_result{CUDA_SUCCESS};  // what the poller saw; stored before marker_done
  std::atomic<bool> finished{false};     // copied or dropped
  std::atomic<bool> failure_reported{false};  // report_failed_copy ran its report
  // A copy in parts (Note [staging]) lands each part once its bytes are in staging: `poll` advances ready_bytes, the
  // poller posts a part landing to the JS thread (one at a time: part_posted), which lands up to ready_bytes.
  std::atomic<size_t> ready_bytes{0};
  std::atomic<size_t> landed_bytes{0};  // written by the JS thread only
  std::atomic<bool> part_posted{false};
  // The devices whose work its stream waited on (Note [cross-device dependencies] in internal/device-faults.h): the
  // copy is done only once they are asked and none faulted, so it lands whole, never in parts. Set before the poller
  // sees the landing.
  uint64_t dependency_devices = 0;
  // Where the destination's bytes were at the call, and the earlier landings of its thread, not finished then, into
  // bytes that overlap them: those land first (a copy ordered after another into the same bytes wins, whichever
  // marker is seen done first). JS thread only.
  const char* destination_start = nullptr;
  std::vector<std::shared_ptr<Landing>> before;
  // An event marker goes back to its pool only when both the poller and the landing's finisher are done with it: a
  // recycled event could be recorded again and make a finished copy look pending.
  std::atomic<int> marker_holders{2};
};

// Whether two landings' destinations share bytes.
inline bool overlaps(const Landing& a, const Landing& b) {
  return a.destination_start && b.destination_start && a.destination_start < b.destination_start + b.bytes &&
         b.destination_start < a.destination_start + a.bytes;
}

// Finishes the landing now if its copy is done (JS thread of its environment); returns whether it is finished.
bool settle_landing(Napi::Env env, Landing& landing);

// Ends a landing that nobody will land (its environment closed) with its copy's `result`: its staging goes back when
// the copy is done or its device faulted, and stays out of use otherwise (as finish_landing). Any thread.
void drop_landing(Landing& landing, CUresult result);

// One holder of the landing's marker is done with it (see Landing::marker_holders).
void drop_marker(Landing& landing);

// Ends the landing with its copy's `result`: on success copies staging into the destination array, unless its buffer
// was detached or transferred, and gives the staging back. A failure lands nothing; short of a sticky fault of the
// copy's device (whose context runs nothing more) the staging stays out of use, since the device may still be
// writing it, and the failure errors the copy's stream. JS thread.
void finish_landing(Napi::Env env, Landing& landing, CUresult result);

// A copy that ended with `result`, a failure short of a sticky fault, errors its stream once, so that the stream's
// next wait reports it. Called where the failure is first known: by the poller before any later wait on the stream
// completes (a wait completed before the report would resolve as if the copy had landed), and by finish_landing for
// a failure its JS thread found. Any thread; never throws.
void report_failed_copy(Landing& landing, CUresult result);

// Whether the landing has bytes in staging that its JS thread has not landed yet, and no part landing is posted
// for them; if so, marks one posted. The poller, before posting a part landing (Ready::part).
bool claim_part(Landing& landing);

// The longest time one landing (a whole copy or a part) took on the calling thread, in nanoseconds: how long the
// event loop paused for it.
double longest_landing_ns();

// Lands the bytes in staging so far (a part landing), unless the destination was detached or transferred. JS thread.
void land_part(Napi::Env env, Landing& landing);

}  // namespace csp
