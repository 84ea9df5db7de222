// Stream objects: a CUstream shared by every wrapper and thread that uses it. See Note [handle guard] in native-object.h.
#pragma once
#include "internal/native-object.h"
#include "internal/device-faults.h"
#include "internal/lock-order.h"
#include "internal/submission.h"

#include <atomic>
#include <thread>

namespace csp {

struct TicketSlot;  // internal/tickets.h

struct NativeStream : NativeObject {
  static const napi_type_tag kTag;
  static constexpr const char* kName = "Stream";
  CUstream handle = nullptr;
  bool owned = false;  // owned: cuStreamDestroy on destroy; borrowed: only the object retires
  // Note [stream retirement]: a device buffer may have to be freed after its stream is gone, ordered after that
  // stream's last work. device-buffer.cc sets `retired` (an event, once, under `retired_once`) when a buffer first uses the
  // stream; destroy() records it, and records it again just before the handle dies if calls were still in flight
  // (Note [handle guard] in native-object.h). The destructor does not: nobody can wait on it then, and a borrowed handle may
  // already be dead.
  std::once_flag retired_once;
  CUevent retired = nullptr;
  // Note [capture flag]: set when a capture begins on this stream or the stream joins one (graph.cc), in any thread;
  // a hint read without a driver call by the guards of operations that are illegal while capturing. When it is set,
  // cuStreamIsCapturing decides, and the flag is cleared once the driver reports no capture.
  std::atomic<bool> capturing{false};
  // Set while a capture that began on this stream is open (counted by capture_opening, capture.h), any thread.
  std::atomic<bool> capture_origin{false};
  // The wrapper object and the thread through which that capture began (Note [abandoned captures] in graph.cc).
  std::atomic<const NativeStream*> capture_wrapper{nullptr};
  std::atomic<std::thread::id> capture_thread{};
  // Completion tickets (Note [completion engine] in completion.h): a slot assigned on the first wait, and the mutex
  // that keeps ticket values in the order of their writes.
  OrderedMutex marker_mutex{LockLevel::kStreamMarker, "stream marker"};
  TicketSlot* ticket = nullptr;
  // Ticket sharing: every call that may queue work on the stream counts itself as it leaves, after its work is
  // queued (Use without QueuesNoWork). A wait that finds the count unchanged since the count read before the stream's
  // last ticket was written waits on that ticket instead of writing a new one, and a query finds the stream idle from
  // the ticket's word alone. Only for streams whose work all comes through the library: owned streams whose handle
  // JS code never read (`handle_shared`), never borrowed ones. A recorded operation counts when a submission thread
  // has issued it, so the count itself, `submissions`, sits beside operations_issued below.
  uint64_t submissions_at_ticket = ~0ull;  // under marker_mutex
  // The count when a query or a synchronize last found the stream idle (~0: never). Shared with the staging chunks'
  // markers, which ask it after the stream is gone (StreamedCopy::first_wait_lost in staging.cc).
  std::shared_ptr<std::atomic<uint64_t>> idle_at_submissions = std::make_shared<std::atomic<uint64_t>>(~0ull);
  std::atomic<bool> handle_shared{false};
  // Names this object for good, unlike its address, which a later stream may reuse; and the copies into JS arrays
  // queued on it so far, counted after each is queued. An event record keeps both, so that a wait that finds the
  // event done knows which of those copies are in staging (Note [landings behind an event] in stream/event.h).
  const uint64_t serial = next_serial();
  std::atomic<uint64_t> landings_queued{0};
  // Note [borrowed library streams]: Stream.fromHandle() of a handle that a live stream of the library owns (made by
  // any thread) gives a native object that holds that owner, its lender. Every call through the borrowed object enters the lender
  // too, so once the lender is destroyed the borrowed object refuses calls (DestroyedError) instead of passing a dead
  // handle to the driver, and buffers note their uses on the lender (owner_of), whose destroy records its last work.
  // A foreign handle (made outside the library) has no lender: keeping it alive is the caller's business.
  std::shared_ptr<NativeStream> lender;
  bool enter() {
    if (!NativeObject::enter()) return false;
    if (lender && !lender->enter()) {
      NativeObject::leave();
      return false;
    }
    return true;
  }
  void leave() {
    if (lender) lender->leave();
    NativeObject::leave();
  }
  void count_work() {
    if (lender) lender->submissions.fetch_add(1, std::memory_order_release);
    submissions.fetch_add(1, std::memory_order_release);
  }
  void leave_after_work() {
    count_work();
    leave();
  }
  // The object that owns the driver stream: the lender of a borrowed library stream, else this one. Its capture flags
  // describe the driver stream, so that a capture begun through either wrapper guards both.
  NativeStream& owner() { return lender ? *lender : *this; }
  const NativeStream& owner() const { return lender ? *lender : *this; }
  // The same, as the shared_ptr that buffers keep in their uses.
  static const std::shared_ptr<NativeStream>& owner_of(const std::shared_ptr<NativeStream>& object) {
    return object->lender ? object->lender : object;
  }
  bool shares_tickets() const { return owned && !handle_shared.load(std::memory_order_relaxed); }
  // The other devices whose work the stream's queued work waited on (Note [cross-device dependencies] in
  // internal/device-faults.h); kept on owner(), which names the driver stream, whichever wrapper queued the work.
  DeviceDependencies dependencies;
  // What the driver reported when the library created the stream (cuStreamGetId, cuStreamGetPriority, flags), so
  // that a wrapper made later, in any thread, needs no driver call: those calls fail while the stream captures.
  // The first failure of work recorded on the stream that no wait has reported (Note [deferred submission] in
  // internal/submission.h); kept on owner().
  FailureSlot failure;
  // Operations recorded on the stream by any thread, and those of them issued; kept on owner(). Each operation is
  // issued once every operation recorded on the stream before it, by any thread, was (Note [deferred submission]);
  // while any is not, the stream is busy.
  // On cache lines of their own (kCacheLineBytes): recording threads add to the first, submission threads to the
  // second (and to `submissions`; in direct mode the calling thread does).
  alignas(kCacheLineBytes) std::atomic<uint64_t> operations_recorded{0};
  // Its submission shard (Note [deferred submission]), given on its first record; -1 until then.
  std::atomic<int> shard{-1};
  alignas(kCacheLineBytes) IssuedCount operations_issued;
  std::atomic<uint64_t> submissions{0};
  // Whether operations recorded on the driver stream (on owner(), whichever wrapper this is) wait to be issued.
  bool unissued() const {
    return owner().operations_issued.load(std::memory_order_acquire) !=
           owner().operations_recorded.load(std::memory_order_acquire);
  }
  // A call that goes to the driver directly (Use, in an ordered call) first waits until the operations other threads
  // recorded on the stream were issued: "record in one thread, then use the stream in another" keeps its order.
  // Work that an ordered call is about to queue directly after a failure that a wait has reported runs, as a recorded
  // operation does when it is issued: the failure is cleared then, before the work is queued (`queues_work`).
  void entered_for_use(bool queues_work);
  // Set (release) once id, priority and flags hold the driver's answers: at creation, or when a wrapper first asked
  // the driver (a borrowed foreign stream, a creation whose cuStreamGetId failed), so that a refusal read in another
  // call or thread can name the stream. Written before the object is shared (creation, borrow) or under stream_info's
  // lock, never changed after.
  alignas(kCacheLineBytes) std::atomic<bool> info_known{false};
  unsigned long long id = 0;
  int priority = 0;
  unsigned flags = 0;
  int partition = -1;  // the device partition its kernels run on, or -1 for the whole device
  // Set once an owned stream's driver stream was destroyed, after its last `retired` record (Note [stream
  // retirement]): a buffer may then forget its use of the stream once that record completed (Note [buffer uses]).
  std::atomic<bool> handle_destroyed{false};
  ~NativeStream() override;
  // Retires the object at once; an owned stream is destroyed (queued work still completes) when no call is in flight
  // any more. Never waits; idempotent.
  void destroy();

 protected:
  void release() override;

 private:
  std::atomic<bool> record_on_release_{false};
  static uint64_t next_serial() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }
};

// The stream's capture state: 0 none, 1 active, 2 invalidated (CUstreamCaptureStatus). No driver call unless the
// capture flag is set (Note [capture flag]). The caller holds a use. Throws CudaFailure. Defined in graph.cc.
int capture_status(NativeStream& stream);

// The capture that began on `stream` is over (ended, abandoned, or its stream released): uncounted from the open
// captures of Note [capture guard] (capture.h). Idempotent.
void capture_closed(NativeStream& stream);

// Wraps a stream object for JS: a handle whose forgetting abandons a capture begun through it (Note [abandoned
// captures] in graph.cc). `destroy_when_forgotten` (Stream.create()'s own handle): forgetting it also destroys the
// stream, as destroy() does; buffers the stream used hold its object, and would keep the driver stream alive with it.
Napi::Value wrap_stream(Napi::Env env, std::shared_ptr<NativeStream> object, bool destroy_when_forgotten = false);

// Creates an owned stream on `device`; counted in live().streams. Throws CudaFailure.
// `partition`: the index of a partition of the device (Note [partitions] in device/partition.cc), or -1.
std::shared_ptr<NativeStream> create_stream(int device, unsigned flags, int priority, int partition = -1);

}  // namespace csp
