// The completion engine: how the library learns that queued work finished, without blocking any stream or thread.
//
// Note [completion engine]:
//  - Markers. To learn that a stream's work so far is done, the library enqueues a marker that does not block the
//    stream: a ticket, written by cuStreamWriteValue64 (default flags: the work before it is visible first) into a
//    per-stream word of mapped, not write-combined, pinned memory; or, where the device lacks 64-bit stream memory
//    operations (or CUDA_STREAM_POOL_COMPLETION=event), an event from a per-device pool. The legacy stream always
//    gets an event. Host functions (cuLaunchHostFunc) are never used: they block the stream until they return.
//  - Tickets. A stream's ticket values only grow: `issued` is taken and written under the stream's marker mutex, so
//    writes land in value order; the marker is done when the word reaches its value (a memory read, no driver call).
//    A slot outlives its stream until its last write landed, then serves another stream, continuing its values.
//  - Sharing. Repeated waits with no work queued between them share the stream's last ticket: every call that queues
//    work counts itself on the stream after queuing (StreamBox::submissions), and a wait that finds the count where
//    it was when the last ticket was written reuses that ticket; a query finds such a stream idle from the word
//    alone, without cuStreamQuery. Only owned streams whose handle JS code never read share: work queued through a
//    raw handle by other code is invisible to the count.
//  - The poller. One native thread per process takes new waits from a lock-free stack, checks them in the order
//    they came (words, or cuEventQuery for event markers), spins briefly, then yields, then sleeps growing to 250 us,
//    and parks on a condition variable once nothing has been pending for 100 us (an idle process uses no CPU; the
//    linger spares a thread that awaits in a loop a poller wake-up per wait). A new wait wakes it only when it
//    sleeps or parks.
//  - Lost tickets. A ticket still not landed after two fault probes, while its stream reports all its work done, was
//    dropped by the driver: its wait is done all the same (counted in completionStats().lostTickets).
//  - Faults. A faulted stream never writes its ticket. While waits are pending, the poller asks the driver every
//    10 ms whether each of their devices has a sticky fault (cuStreamQuery on the device's library stream, which
//    reports it), so every pending wait on a faulted device fails within that time; the waits hold their stream
//    or event box, so a wait whose stream, event or pool was destroyed after it began settles all the same.
//  - Delivery. Finished waits go to the mailbox of the environment (main thread or worker) that made them; the
//    first one of a batch posts once to that environment's thread-safe function, whose callback drains everything
//    ready and settles it in one call into JS. The JS side refs the thread-safe function exactly while it has
//    waits pending.
//  - Staged device-to-host copies (Note [staging] in staging.cc) are landings: the bytes are copied from staging
//    into the JS array on the thread that owns it, after checking that its buffer was not detached or transferred
//    (then the data is dropped). Every delivery, and every wait that settles at once, first lands what is ready,
//    so a copy lands before any later completion of its stream is reported on that thread.
//  - Teardown. An environment's cleanup hook closes its mailbox; the poller then drops its waits (a landing keeps
//    its staging block until its marker is done, then gives it back). The poller thread and slots live until exit.
//  - Locks: a mailbox mutex and the poller's park mutex are leaves (no driver call, no other lock inside); the
//    stream's marker mutex is held only across one cuStreamWriteValue64 or cuEventRecord.
#pragma once
#include <napi.h>
#include "internal/cuda-driver.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

namespace csp {

struct StreamBox;
struct TicketSlot;

// A marker enqueued in a stream: a ticket (`word` reaches `value`) or a pooled event.
struct Marker {
  const uint64_t* word = nullptr;
  uint64_t value = 0;
  CUevent event = nullptr;  // from the device's event pool; back to it once done
  int device = 0;
};

// How a marker relates to the work before it: a wait (its caller queued nothing) may share the stream's last ticket;
// a marker after work that the caller itself just queued, within the same use, must not, because that work is not
// counted until the use ends.
enum class MarkerUse { kWait, kAfterOwnWork };

// Enqueues a marker after the work queued on `stream` so far. The caller holds the stream's use (alive) and its
// device's context is current. Throws CudaFailure.
Marker enqueue_marker(StreamBox& stream, MarkerUse use);

// Whether the work queued on the stream so far is done: CUDA_SUCCESS, CUDA_ERROR_NOT_READY, or the failure (a sticky
// fault is recorded). For a stream that shares tickets, known without a driver call when no work was queued since a
// query found it idle or since its last ticket (whose word then answers); otherwise cuStreamQuery. Any thread; the
// caller holds a use. A stream whose capture flag is set counts as busy (NOT_READY), never asked: a query would
// invalidate its capture. Throws CudaFailure only when the device's context cannot be made current.
CUresult query_stream(StreamBox& stream);

// The marker's work is done (0), not yet (CUDA_ERROR_NOT_READY), or failed. Any thread; an event marker needs its
// device's context current.
CUresult marker_status(const Marker& marker);

// A slot goes back once its last write landed. Called by ~StreamBox.
void release_ticket(TicketSlot* slot);

// Gives an event marker back to its pool once it is done (a ticket needs nothing). Any thread.
void return_marker(const Marker& marker);

// Whether the device has 64-bit stream memory operations (tickets and gates). The context is current.
bool stream_memory_operations(int device);

// A gate: a word of mapped pinned memory that a stream waits on (cuStreamWaitValue64, GEQ) and the host opens by
// raising it. Piece k of a streamed copy waits for `base + k + 1`. The device's context is current.
struct Gate {
  TicketSlot* slot = nullptr;
  uint64_t* word = nullptr;
  CUdeviceptr address = 0;
  uint64_t base = 0;
};
Gate acquire_gate(int device);
// Raises the gate to `value` (release store; the GPU sees it without a driver call). Any thread.
void open_gate(const Gate& gate, uint64_t value);
// The gate's slot goes back once its last value is written. Any thread.
void release_gate(const Gate& gate, uint64_t last_value);

// One staged device-to-host copy into a JS array, finished on its JS thread (see Note [completion engine]).
struct Landing {
  // JS holds a landing as a type-tagged External (wrap_box / unwrap_box in box.h).
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
  // An event marker goes back to its pool only when both the poller and the landing's finisher are done with it: a
  // recycled event could be recorded again and make a finished copy look pending.
  std::atomic<int> marker_holders{2};
};

// Registers `landing`, a copy queued on `stream`, with the engine and this environment (the JS thread that owns the
// destination). Throws std::system_error when the poller thread cannot start; the landing is then not registered.
void track_landing(Napi::Env env, std::shared_ptr<Landing> landing, std::shared_ptr<StreamBox> stream);

// Finishes the landing now if its copy is done (JS thread of its environment); returns whether it is finished.
bool settle_landing(Napi::Env env, Landing& landing);

// Has the poller call `poll` until it reports anything but CUDA_ERROR_NOT_READY (work that needs the host's help to
// progress, such as a streamed copy). `poll` runs on the poller thread and may run on others meanwhile. Throws
// std::system_error when the poller thread cannot start.
void watch_job(int device, std::function<CUresult()> poll);

}  // namespace csp
