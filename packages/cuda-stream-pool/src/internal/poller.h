// The poller: the one native thread per process that watches markers and jobs, and hands each finished wait to the
// environment that made it (Note [completion engine] in stream/completion.h).
#pragma once
#include "internal/cuda-driver.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "internal/device-faults.h"
#include "internal/markers.h"

namespace csp {

struct Channel;
struct NativeEvent;
struct Landing;
struct LateProbe;
struct NativeStream;

// Who reports a wait that its JS thread may settle from its ticket word (Wait::claimed): nobody yet; the JS thread,
// which then leaves the stream's entry that the wait holds; the poller; or nobody yet, and the JS thread may not take
// it now: the poller does not have the wait yet (one it could not take gives the entry back itself), or is asking the
// driver about the stream through that entry.
enum TicketClaim : int { kUnclaimed = 0, kClaimedByThread = 1, kClaimedByPoller = 2, kNotClaimable = 3 };

// One thing the poller watches, and whom to tell when it is done (no channel: a job, nobody).
struct Wait {
  Wait* next = nullptr;
  std::shared_ptr<Channel> channel;
  double token = 0;
  int device = 0;
  Marker marker;                      // the library's own marker, when not watching a user event
  std::shared_ptr<NativeEvent> event;    // a user event watched directly (event.synchronize())
  std::shared_ptr<NativeStream> stream;  // the ticket's stream: keeps its slot alive, and is asked if the ticket is late
  bool holds_stream = false;          // an entry of `stream`'s object is held until the wait ends (hold_stream)
  // Where its environment's JS thread may settle it from the ticket word (TicketWatch in stream/completion.h): who
  // reports it (a TicketClaim).
  std::shared_ptr<std::atomic<int>> claimed;
  std::shared_ptr<Landing> landing;   // a staged copy to land; its marker is `marker` unless it has a poll
  std::function<CUresult()> poll;     // a job's own progress (watch_job), or the landing's poll
  unsigned probes = 0;                // fault probes it has been pending through
  bool ticket_lost = false;           // its stream went idle but the ticket never landed: done all the same
  std::shared_ptr<LateProbe> late_probe;  // the question to its thread about its per-thread stream, once asked
  std::chrono::steady_clock::time_point unsure_since{};  // since when its marker event's query fails (not sticky)
  CUresult stream_failure = CUDA_SUCCESS;  // its late ticket's stream kept failing queries: the wait's result
  // The other devices its work waited on (Note [cross-device dependencies] in internal/device-faults.h), the device
  // whose fault failed it, and whether its marker was done all the same (its event can go back to the pool).
  DependencySnapshot dependencies;
  int dependency_fault = -1;
  bool marker_done = false;
  // An event's wait: the copies into JS arrays ahead of the event's record that was last when the wait began, and
  // the event's record counts then, told once the event is found done if no record was made since (Note [landings
  // behind an event] in stream/event.h).
  std::vector<std::weak_ptr<Landing>> covered;
  uint64_t cover_recorded = 0, cover_direct = 0;

  void let_go_of_stream();  // leaves the stream's object if the wait holds it; the last one out releases the handle
  ~Wait() { let_go_of_stream(); }
};

// Makes `stream` the wait's stream and holds an entry of its object until the wait ends, so that the driver handle
// outlives a destroy() of the stream while the wait is pending (Note [handle guard] in internal/native-object.h): a late ticket
// is asked about through that handle, and a stream whose handle was released could never be asked, leaving the wait,
// and the process that awaits it, pending for good. The caller holds a use of the stream, so the entry is granted.
void hold_stream(Wait& wait, std::shared_ptr<NativeStream> stream);

// Hands `wait` to the poller, starting it on first use. Throws std::system_error when the poller thread cannot
// start; `wait` has then given back what it held and is deleted.
void submit_wait(Wait* wait);

// Has the poller call `poll` until it reports anything but CUDA_ERROR_NOT_READY (work that needs the host's help to
// progress, such as a streamed copy). `poll` runs on the poller thread and may run on others meanwhile. Throws
// std::system_error when the poller thread cannot start.
void watch_job(int device, std::function<CUresult()> poll);

// The poller's counters, for completionStats(). Any thread.
double poller_pending();
double poller_parks();
double poller_lost_tickets();
bool poller_parked();
// Counts a lost ticket found outside the poller's waits (a staging chunk's marker), in poller_lost_tickets(), unless
// a wait that shared it was counted.
void count_lost_ticket(const Marker& marker);

}  // namespace csp
