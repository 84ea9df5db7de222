// Event markers: a pool of timing-free events per device, for devices without 64-bit stream memory operations, for
// CUDA_STREAM_POOL_COMPLETION=event, for the legacy stream and for the markers a streamed copy's gates follow (Note
// [completion engine] in stream/completion.h, Note [staging] in internal/staging.cc).
#pragma once
#include "internal/cuda-driver.h"

namespace csp {

// A spare event of the device's pool, else a new one. The device's context is current. Throws CudaFailure.
CUevent take_event_marker(int device);

// Back to the device's pool, for reuse: only an event whose marker is done (after a fault it is never reused).
void put_event_marker(int device, CUevent event);

}  // namespace csp
