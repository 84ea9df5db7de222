// Markers: what the library enqueues in a stream to learn that the work before it is done, a ticket (tickets.h) or
// a pooled event (event-markers.h). See Note [completion engine] in stream/completion.h.
#pragma once
#include "internal/cuda-driver.h"

#include <atomic>
#include <cstdint>

#include "device/device.h"

namespace csp {

struct NativeStream;

// A marker enqueued in a stream: a ticket (`word` reaches `value`) or a pooled event.
struct Marker {
  const uint64_t* word = nullptr;
  uint64_t value = 0;
  CUevent event = nullptr;  // from the device's event pool; back to it once done
  int device = 0;
};

// How a marker relates to the work before it: a wait (its caller queued nothing) may share the stream's last ticket;
// a marker after work that the caller itself just queued, within the same use, must not, because that work is not
// counted until the use ends. A marker that a gate queued after it waits for (a streamed copy's) is always an event:
// the stream, held at that gate, never goes idle, so a ticket that never landed could not be told from a late one.
enum class MarkerUse { kWait, kAfterOwnWork, kBeforeGate };

// Enqueues a marker after the work queued on `stream` so far. The caller holds the stream's use (alive) and its
// device's context is current. Throws CudaFailure.
Marker enqueue_marker(NativeStream& stream, MarkerUse use);

// Whether the work queued on the stream so far is done: CUDA_SUCCESS, CUDA_ERROR_NOT_READY, or the failure (a sticky
// fault is recorded). For a stream that shares tickets, known without a driver call when no work was queued since a
// query found it idle or since its last ticket (whose word then answers); otherwise cuStreamQuery. Any thread; the
// caller holds a use. A stream whose capture flag is set counts as busy (NOT_READY), never asked: a query would
// invalidate its capture. Throws CudaFailure only when the device's context cannot be made current.
CUresult query_stream(NativeStream& stream);

// The marker's work is done (0), not yet (CUDA_ERROR_NOT_READY), or failed. Any thread; an event marker needs its
// device's context current.
CUresult marker_status(const Marker& marker);

// Gives an event marker back to its pool once it is done (a ticket needs nothing). Any thread.
void return_marker(const Marker& marker);

// Whether the device has 64-bit stream memory operations (tickets and gates). The context is current.
bool stream_memory_operations(int device);

// Markers enqueued in streams since the process started (tickets written and events recorded), every thread.
extern std::atomic<uint64_t> g_markers_enqueued;

enum class MarkerKind { kUnknown, kTicket, kEvent };
// Each device's marker kind once decided, kUnknown until then.
extern std::atomic<MarkerKind> g_marker_kind[kMaxDevices];

// The device's marker kind, decided once: tickets where the device has 64-bit stream memory operations, unless
// CUDA_STREAM_POOL_COMPLETION=event asks for events.
MarkerKind marker_kind(int device);

}  // namespace csp
