// Markers in streams: enqueued, queried, given back. See Note [completion engine] in stream/completion.h.
#include "internal/markers.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "binding/errors.h"
#include "internal/context.h"
#include "internal/device-faults.h"
#include "internal/event-markers.h"
#include "internal/loader.h"
#include "internal/lock-order.h"
#include "internal/tickets.h"
#include "stream/stream.h"

namespace csp {

std::atomic<uint64_t> g_markers_enqueued{0};
std::atomic<MarkerKind> g_marker_kind[kMaxDevices];

MarkerKind marker_kind(int device) {
  MarkerKind kind = g_marker_kind[device].load(std::memory_order_relaxed);
  if (kind != MarkerKind::kUnknown) return kind;
  const char* forced = std::getenv("CUDA_STREAM_POOL_COMPLETION");
  kind = MarkerKind::kEvent;
  if (!(forced && std::strcmp(forced, "event") == 0) && stream_memory_operations(device)) kind = MarkerKind::kTicket;
  g_marker_kind[device].store(kind, std::memory_order_relaxed);
  return kind;
}

Marker enqueue_marker(NativeStream& stream, MarkerUse use) {
  const int device = stream.device;
  Marker marker;
  marker.device = device;
  if (use == MarkerUse::kBeforeGate || stream.handle == CU_STREAM_LEGACY || marker_kind(device) == MarkerKind::kEvent) {
    marker.event = take_event_marker(device);
    CUresult r = drv().cuEventRecord(marker.event, stream.handle);
    if (r != CUDA_SUCCESS) {
      put_event_marker(device, marker.event);
      check(r, "cuEventRecord", device, [&] { return std::string("device " + std::to_string(device) + ", a completion marker"); });
    }
    g_markers_enqueued.fetch_add(1, std::memory_order_relaxed);
    return marker;
  }
  std::lock_guard<OrderedMutex> lock(stream.marker_mutex);
  if (!stream.ticket) stream.ticket = acquire_ticket(device);
  TicketSlot& slot = *stream.ticket;
  marker.word = slot.word;
  // Read before the write: every call counted so far queued its work before this ticket; one counted later may not
  // have, so a later count never shares it.
  const uint64_t submissions = stream.submissions.load(std::memory_order_acquire);
  if (use == MarkerUse::kWait && stream.shares_tickets() && submissions == stream.submissions_at_ticket) {
    marker.value = slot.issued;
    return marker;
  }
  const uint64_t value = slot.issued + 1;
  check(drv().cuStreamWriteValue64(stream.handle, slot.address, value, CU_STREAM_WRITE_VALUE_DEFAULT),
        "cuStreamWriteValue64", device, [&] { return std::string("device " + std::to_string(device) + ", a completion ticket"); });
  slot.issued = value;
  stream.submissions_at_ticket = submissions;
  g_markers_enqueued.fetch_add(1, std::memory_order_relaxed);
  marker.value = value;
  return marker;
}

CUresult query_stream(NativeStream& stream) {
  // cuStreamQuery on a capturing stream fails and invalidates the capture: such a stream counts as busy.
  if (stream.owner().capturing.load(std::memory_order_acquire)) return CUDA_ERROR_NOT_READY;
  const bool shares = stream.shares_tickets() && device_fault(stream.device) == CUDA_SUCCESS;
  // Read before asking: work counted later may not be covered by the answer.
  const uint64_t submissions = stream.submissions.load(std::memory_order_acquire);
  if (shares) {
    if (stream.idle_at_submissions->load(std::memory_order_acquire) == submissions) return CUDA_SUCCESS;
    std::lock_guard<OrderedMutex> lock(stream.marker_mutex);
    if (stream.ticket && submissions == stream.submissions_at_ticket) {
      if (load_word(stream.ticket->word) < stream.ticket->issued) return CUDA_ERROR_NOT_READY;
      stream.idle_at_submissions->store(submissions, std::memory_order_release);
      return CUDA_SUCCESS;
    }
  }
  make_current(stream.device);
  const CUresult r = check_quiet(drv().cuStreamQuery(stream.handle), stream.device);
  // Stored for any stream (read back above only while it shares tickets, which it never starts doing again).
  if (r == CUDA_SUCCESS) stream.idle_at_submissions->store(submissions, std::memory_order_release);
  return r;
}

CUresult marker_status(const Marker& marker) {
  if (marker.word) return load_word(marker.word) >= marker.value ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  return check_quiet(drv().cuEventQuery(marker.event), marker.device);
}

void return_marker(const Marker& marker) {
  if (marker.event) put_event_marker(marker.device, marker.event);
}

bool stream_memory_operations(int device) {
  CUdevice dev = 0;
  int supported = 0;
  return drv().cuDeviceGet(&dev, device) == CUDA_SUCCESS &&
         drv().cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev) ==
             CUDA_SUCCESS &&
         supported;
}

}  // namespace csp
