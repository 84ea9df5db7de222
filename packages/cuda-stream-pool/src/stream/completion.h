// The completion engine: how the library learns that queued work finished, without blocking any stream or thread.
// This header holds its JS-facing part, each environment's channel (completion.cc); the rest is in internal/:
// markers.h (tickets.h, event-markers.h), poller.h, landing.h and gates.h.
//
// Note [completion engine]:
//  - Markers. To learn that a stream's work so far is done, the library enqueues a marker that does not block the
//    stream: a ticket, written by cuStreamWriteValue64 (default flags: the work before it is visible first) into a
//    per-stream word of mapped, not write-combined, pinned memory; or, where the device lacks 64-bit stream memory
//    operations (or CUDA_STREAM_POOL_COMPLETION=event), an event from a per-device pool. The legacy stream always
//    gets an event, and so does a marker that a streamed copy's gate follows (Note [staging] in staging.cc). Host functions (cuLaunchHostFunc) are never used: they block the stream until they return.
//  - Tickets. A stream's ticket values only grow: `issued` is taken and written under the stream's marker mutex, so
//    writes land in value order; the marker is done when the word reaches its value (a memory read, no driver call).
//    A slot outlives its stream until its last write landed, then serves another stream, continuing its values.
//  - Sharing. Repeated waits with no work queued between them share the stream's last ticket: every call that queues
//    work counts itself on the stream after queuing (NativeStream::submissions), and a wait that finds the count where
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
//    or event object, so a wait whose stream, event or pool was destroyed after it began settles all the same. The
//    devices a wait's work waited on are asked too, and once more before it is reported done (Note [cross-device
//    dependencies] in internal/device-faults.h).
//  - Delivery. Finished waits go to the mailbox of the environment (main thread or worker) that made them; the
//    first one of a batch posts once to that environment's thread-safe function, whose callback drains everything
//    ready and settles it in one call into JS. The JS side refs the thread-safe function exactly while it has
//    waits pending. A thread that is busy is not woken: it takes its batch at its next loop turn (Note [deliveries
//    at loop turns] in completion.cc), and reads the tickets of its own waits there too, settling those it finds
//    written before the poller does (Note [tickets read at loop turns] in completion.cc).
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
#include <memory>
#include <vector>

#include "binding/errors.h"
#include "internal/lock-order.h"
#include "internal/markers.h"

namespace csp {

struct Landing;
struct NativeEvent;
struct NativeStream;
struct RecordCover;

// The question whether a thread's per-thread default stream is idle, which only that thread can ask the driver
// (CU_STREAM_PER_THREAD names the calling thread's own stream): the poller posts it for a late ticket on such a stream,
// the thread answers in its next drain, and the poller reads the answer at a later probe.
struct LateProbe {
  enum State { kAsked, kIdle, kBusy };
  int device = 0;
  std::atomic<int> state{kAsked};
};

// One item for a channel's JS thread: a finished wait's result, a landing to finish, or a probe to answer.
struct Ready {
  double token;  // 0 for a landing or a probe
  CUresult result;
  std::shared_ptr<Landing> landing{};
  std::shared_ptr<LateProbe> probe{};  // a question for this thread, instead of a result
  int dependency = -1;  // the device whose fault `result` is, when not the wait's own (wait_result, device-faults.h)
  std::exception_ptr failure{};  // recorded work that failed, or a marker that could not be queued for it (Note
                               // [deferred submission]): the error the wait rejects with
  bool part = false;  // `landing` has parts in staging to land now; it is not finished (Note [staging])
};

struct LoopTurns;  // completion.cc: Note [deliveries at loop turns]

// A wait on a stream's ticket that its environment's JS thread may settle itself, from the ticket word, when it
// finds the word there before the poller does (Note [tickets read at loop turns] in completion.cc). `claimed` (a
// TicketClaim, internal/poller.h) is shared with the poller's Wait: whoever claims it first reports the wait; the
// other lets the wait go without a word.
struct TicketWatch {
  double token = 0;
  Marker marker;  // a ticket: its word and value
  std::shared_ptr<NativeStream> stream;
  std::shared_ptr<std::atomic<int>> claimed;
};

struct Channel {
  OrderedMutex mutex{LockLevel::kLeaf, "completion channel"};  // guards ready, tickets, posted, turning and the thread-safe function's use by the poller
  std::atomic<bool> open{true};     // false once the environment is torn down
  bool posted = false;              // a drain is queued on the JS thread
  bool turning = false;             // the JS thread takes what is ready at its next loop turn, unwoken
  std::vector<Ready> ready;
  std::vector<TicketWatch> tickets;  // waits the JS thread may settle from their ticket word
  std::atomic<uint64_t> posts{0};   // items posted so far: a JS thread spinning before it blocks watches it
  std::atomic<int64_t> first_post_since_block{0};  // steady_clock ticks of the first post while the thread blocked
  Napi::ThreadSafeFunction tsfn;
  // JS thread only:
  LoopTurns* turns = nullptr;  // null where the environment's loop could not be watched: every batch wakes the thread
  std::vector<std::shared_ptr<Landing>> landings;
  double wakeups = 0, delivered = 0, largest_batch = 0, part_landings = 0, turn_batches = 0, spins = 0, spins_completed = 0,
         tickets_read = 0;
};

// Hands `item` to the channel's JS thread; false when its environment is closed. Any thread.
bool post(Channel& channel, Ready item);

// Registers `landing`, a copy queued on `stream`, with the engine and this environment (the JS thread that owns the
// destination). Throws std::system_error when the poller thread cannot start; the landing is then not registered.
void track_landing(Napi::Env env, std::shared_ptr<Landing> landing, std::shared_ptr<NativeStream> stream);

// `stream` was found idle (a synchronize or a query answered so): the copies into JS arrays that this environment
// queued on it before are in staging, whatever their markers say (a lost ticket, a failed query). JS thread.
void note_stream_idle(Napi::Env env, NativeStream& stream);

// Every stream of `device` was found idle (a device-wide synchronize): as note_stream_idle for each. JS thread.
void note_device_idle(Napi::Env env, int device);

// `event` was found done, and `cover` was its last record's cover before the wait (Note [landings behind an event] in
// stream/event.h): if it still is, the copies into JS arrays that this environment queued on that record's stream
// before it are in staging. JS thread.
void note_event_done(Napi::Env env, const NativeEvent& event, const RecordCover& cover);

}  // namespace csp
