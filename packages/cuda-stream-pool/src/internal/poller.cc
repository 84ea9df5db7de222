// The poller. See Note [completion engine] in stream/completion.h.
#include "internal/poller.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

#include "binding/binding.h"
#include "binding/errors.h"
#include "device/device.h"
#include "internal/context.h"
#include "internal/device-faults.h"
#include "internal/event-markers.h"
#include "internal/landing.h"
#include "internal/loader.h"
#include "internal/lock-order.h"
#include "internal/native-thread.h"
#include "internal/submission.h"
#include "stream/completion.h"
#include "stream/event.h"
#include "stream/stream.h"

namespace csp {

namespace {

class Engine {
 public:
  // Hands `wait` to the poller, starting it on first use. Throws std::system_error when the poller thread cannot
  // start (a later submit tries again); `wait` has then given back what it held and is deleted.
  void submit(Wait* wait) {
    try {
      std::call_once(started_, [this] { start_detached_thread("csp-poller", [this] { run(); }); });
    } catch (const std::system_error& e) {
      abandon(wait);
      throw std::system_error(e.code(), "cuda-stream-pool could not start its completion poller thread, so nothing "
                                        "can wait for GPU work without blocking");
    }
    pending_.fetch_add(1, std::memory_order_relaxed);
    Wait* head = incoming_.load(std::memory_order_relaxed);
    do {
      wait->next = head;
    } while (!incoming_.compare_exchange_weak(head, wait, std::memory_order_seq_cst, std::memory_order_relaxed));
    if (state_.load(std::memory_order_seq_cst) != kRunning) {
      std::lock_guard<OrderedMutex> lock(mutex_);
      wake_.notify_one();
    }
  }

  double parks() const { return static_cast<double>(parks_.load(std::memory_order_relaxed)); }
  double lost_tickets() const { return static_cast<double>(lost_tickets_.load(std::memory_order_relaxed)); }
  // Counts a lost ticket once, however many waits shared it. A ticket word's values only grow, also across the streams
  // that use its slot in turn, so a ticket no higher than the last one counted for its word was counted already.
  void count_lost_ticket(const Marker& marker) {
    if (!marker.word) {
      lost_tickets_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    std::lock_guard<OrderedMutex> lock(lost_mutex_);
    uint64_t& last = lost_counted_[marker.word];
    if (marker.value <= last) return;
    last = marker.value;
    lost_tickets_.fetch_add(1, std::memory_order_relaxed);
  }
  double pending() const { return static_cast<double>(pending_.load(std::memory_order_relaxed)); }
  bool parked() const { return state_.load(std::memory_order_relaxed) == kParked; }

 private:
  enum State { kRunning, kSleeping, kParked };

  // Oldest first.
  void take_incoming(std::vector<Wait*>& pending) {
    Wait* list = incoming_.exchange(nullptr, std::memory_order_seq_cst);
    size_t first = pending.size();
    for (; list; list = list->next) pending.push_back(list);
    std::reverse(pending.begin() + static_cast<std::ptrdiff_t>(first), pending.end());
  }

  // Waits on the condition variable for at most `duration` (forever when parking), unless a wait came in.
  void rest(State state, std::chrono::microseconds duration) {
    std::unique_lock<OrderedMutex> lock(mutex_);
    state_.store(state, std::memory_order_seq_cst);
    auto ready = [this] { return incoming_.load(std::memory_order_seq_cst) != nullptr; };
    if (state == kParked) {
      parks_.fetch_add(1, std::memory_order_relaxed);
      wake_.wait(lock, ready);
    } else {
      wake_.wait_for(lock, duration, ready);
    }
    state_.store(kRunning, std::memory_order_seq_cst);
  }

  CUresult status(Wait& wait) {
    if (CUresult fault = device_fault(wait.device)) return fault;
    if (!wait.dependencies.devices) return own_status(wait);
    // Note [cross-device dependencies]: a fault of a device its work waited on fails it, found while it is pending or
    // asked for once its own work is done.
    if (const DependencyFault known = dependency_fault(wait.dependencies.devices, false); known.code)
      return fail_by_dependency(wait, known);
    const CUresult result = own_status(wait);
    if (result != CUDA_SUCCESS) return result;
    wait.marker_done = true;
    if (const DependencyFault found = dependency_fault(wait.dependencies.devices, true); found.code)
      return fail_by_dependency(wait, found);
    // A landing's snapshot was taken after its marker was queued, so it proves nothing about later records.
    if (!wait.landing) dependencies_of(wait).clear(wait.dependencies, wait.event ? -1 : wait.stream->device);
    return CUDA_SUCCESS;
  }

  static CUresult fail_by_dependency(Wait& wait, const DependencyFault& fault) {
    wait.dependency_fault = fault.device;
    return fault.code;
  }

  // The set the wait's snapshot came from: its event's, or its stream's (kept on the stream's owner).
  static DeviceDependencies& dependencies_of(Wait& wait) {
    return wait.event ? wait.event->dependencies : wait.stream->owner().dependencies;
  }

  // Whether the wait's own marker (or job) is done, on its own device.
  CUresult own_status(Wait& wait) {
    if (wait.ticket_lost) return CUDA_SUCCESS;
    if (wait.stream_failure != CUDA_SUCCESS && marker_status(wait.marker) != CUDA_SUCCESS) return wait.stream_failure;
    if (wait.poll) return wait.poll();
    if (wait.event) {
      if (!make_current_quiet(wait.device)) return CUDA_ERROR_INVALID_CONTEXT;
      return check_quiet(drv().cuEventQuery(wait.event->handle), wait.device);
    }
    if (wait.marker.event && !make_current_quiet(wait.device)) return settled_or_pending(wait, CUDA_ERROR_INVALID_CONTEXT);
    return settled_or_pending(wait, marker_status(wait.marker));
  }

  // A failed query of the library's own marker event says nothing of the work before it, unless it is a sticky fault
  // (check_quiet recorded it): it is asked again for up to kUnsureLimit before the failure becomes the wait's result.
  // Taken at once, a copy's landing would be dropped while a later wait on its stream resolved: wrong bytes, no error.
  static CUresult settled_or_pending(Wait& wait, CUresult result) {
    using Clock = std::chrono::steady_clock;
    if (result == CUDA_SUCCESS || result == CUDA_ERROR_NOT_READY || device_fault(wait.device) != CUDA_SUCCESS) return result;
    const auto now = Clock::now();
    if (wait.unsure_since == Clock::time_point{}) wait.unsure_since = now;
    return now - wait.unsure_since < kUnsureLimit ? CUDA_ERROR_NOT_READY : result;
  }

  // The wait's marker is done (or failed): give back what it held and hand the result to its environment.
  void complete(Wait* wait, CUresult result) {
    if (wait->claimed && wait->claimed->exchange(kClaimedByPoller, std::memory_order_acq_rel) == kClaimedByThread) {
      // Its JS thread read the ticket and settled it, and left the stream's entry (TicketWatch in completion.h).
      wait->holds_stream = false;
      pending_.fetch_sub(1, std::memory_order_relaxed);
      delete wait;
      return;
    }
    // A marker seen done goes back even when another device's fault fails the wait: its own device is healthy.
    const bool marker_done = result == CUDA_SUCCESS || wait->marker_done;
    // A streamed copy to the device that failed after its call returned (Note [staging]) errored the stream: the wait
    // pending on it reports that (called directly, the report ends it). Failures of recorded work keep the rules of
    // Note [deferred submission]: only waits issued while the stream is errored report them.
    std::exception_ptr failure;
    if (result == CUDA_SUCCESS && wait->stream && !wait->landing && !wait->event && wait->channel &&
        wait->stream->owner().failure.set()) {
      FailureSlot& slot = wait->stream->owner().failure;
      const FailurePointer seen = slot.peek();
      FailurePointer failed;
      if (seen && seen->after_call) failed = deferred_mode() ? slot.report() : slot.take();
      if (failed) {
        failed->reported.store(true, std::memory_order_release);
        result = failed->code;
        failure = std::make_exception_ptr(CudaFailure(*failed));
      }
    }
    // The stream is let go before its environment hears of the wait: a destroyed stream is then released (and counted
    // gone) by the time the awaiting code runs.
    wait->let_go_of_stream();
    if (wait->landing) {
      report_failed_copy(*wait->landing, result);  // before this thread completes a later wait on the stream
      wait->landing->marker_result.store(result, std::memory_order_relaxed);
      wait->landing->marker_done.store(true, std::memory_order_release);
      if (marker_done) drop_marker(*wait->landing);
    } else if (wait->marker.event && marker_done) {
      put_event_marker(wait->device, wait->marker.event);
    }
    if (result == CUDA_SUCCESS && !wait->covered.empty() && wait->event->cover_current(wait->cover_recorded, wait->cover_direct)) {
      for (const auto& covered : wait->covered)  // delivered with the wait: landed before it settles
        if (auto landing = covered.lock()) landing->stream_idle.store(true, std::memory_order_release);
    }
    // After a fault an event is never reused (its context is lost).
    if (wait->event) wait->event->leave();  // entered by eventNotify; the event may be released now
    pending_.fetch_sub(1, std::memory_order_relaxed);
    if (!wait->channel) {  // a job: nobody to tell
      delete wait;
      return;
    }
    const bool delivered = post(*wait->channel, Ready{wait->token, result, wait->landing, nullptr, wait->dependency_fault, failure});
    // A closed environment: its landing is dropped, and its staging goes back if the GPU is done with it.
    if (!delivered && wait->landing) drop_landing(*wait->landing, result);
    delete wait;
  }

  // What one probe round asked, so that a stream, or a thread about its per-thread stream, is asked once a round
  // however many waits are pending on it (tens of thousands behind one long kernel would otherwise each cost a query,
  // about 0.3 us on an H200, or a question posted to the thread, every round, and keep the poller from every other
  // wait). Every pending wait's ticket was queued before the round began, so one answer serves them all.
  struct ProbeRound {
    std::unordered_map<const NativeStream*, CUresult> streams;  // the driver's answers, by the stream's owner
    std::vector<std::pair<std::pair<const Channel*, int>, std::shared_ptr<LateProbe>>> threads;  // (thread, device)
  };

  // A late ticket on a per-thread default stream: its thread is asked whether that stream is idle (LateProbe), and
  // an idle answer, given after the ticket was queued, makes the ticket lost as below. Each question wakes the thread,
  // so after a busy answer (long work, most likely) the next comes later and later: at the 2nd, 4th, 8th, ... 64th
  // round, then every 64th (about 0.64 s).
  void ask_owner(Wait& wait, ProbeRound& round) {
    if (!wait.channel) return;
    if (wait.late_probe) {
      const int state = wait.late_probe->state.load(std::memory_order_acquire);
      if (state == LateProbe::kAsked) return;  // not answered yet
      if (state == LateProbe::kIdle && marker_status(wait.marker) == CUDA_ERROR_NOT_READY) {
        wait.ticket_lost = true;
        count_lost_ticket(wait.marker);
        return;
      }
      const unsigned probes = wait.probes;
      if (probes % 64 != 0 && (probes & (probes - 1)) != 0) return;
    }
    // Asked first, or again after a busy answer.
    const std::pair<const Channel*, int> key{wait.channel.get(), wait.device};
    for (const auto& [asked, probe] : round.threads)
      if (asked == key) {
        wait.late_probe = probe;
        return;
      }
    wait.late_probe = std::make_shared<LateProbe>();
    wait.late_probe->device = wait.device;
    round.threads.emplace_back(key, wait.late_probe);
    post(*wait.channel, Ready{0, CUDA_SUCCESS, nullptr, wait.late_probe, -1, nullptr});
  }

  // A ticket still not landed after two probes (10 to 20 ms) while its stream reports all its work done was lost (a
  // driver that dropped the write): the wait is done, since the ticket's work came before the stream went idle. The
  // stream is asked directly, not through query_stream, whose answer for a sharing stream is that same word. A
  // stream whose queries keep failing for kUnsureLimit with a code that is not sticky (one the library does not know
  // as a fault: CUDA_ERROR_UNKNOWN, a code of a newer driver) will never write the ticket: that failure ends the wait,
  // which would otherwise stay pending for good.
  void check_late_ticket(Wait& wait, ProbeRound& round) {
    if (!wait.stream || !wait.marker.word || wait.poll || wait.event || ++wait.probes < 2) return;
    NativeStream& stream = *wait.stream;
    // CU_STREAM_PER_THREAD names the calling thread's own stream: asked from here, it would be the poller's, idle.
    if (stream.handle == CU_STREAM_PER_THREAD) return ask_owner(wait, round);
    if (stream.owner().capturing.load(std::memory_order_acquire)) return;  // a query would invalidate the capture
    CUresult query;
    if (auto known = round.streams.find(&stream.owner()); known != round.streams.end()) {
      query = known->second;
    } else {
      if (!wait.holds_stream) return;  // its handle may be released: it cannot be asked
      // A JS thread that settled the wait from its ticket left the wait's entry; while the driver is asked, none can.
      int unclaimed = kUnclaimed;
      if (wait.claimed && !wait.claimed->compare_exchange_strong(unclaimed, kNotClaimable, std::memory_order_acq_rel)) return;
      const bool current = make_current_quiet(wait.device);
      query = current ? check_quiet(drv().cuStreamQuery(stream.handle), wait.device) : CUDA_SUCCESS;
      if (wait.claimed) wait.claimed->store(kUnclaimed, std::memory_order_release);
      if (!current) return;
      round.streams.emplace(&stream.owner(), query);
    }
    if (query == CUDA_SUCCESS && marker_status(wait.marker) == CUDA_ERROR_NOT_READY) {
      wait.ticket_lost = true;
      count_lost_ticket(wait.marker);
    }
    if (query == CUDA_SUCCESS || query == CUDA_ERROR_NOT_READY) {
      wait.unsure_since = {};
    } else if (settled_or_pending(wait, query) == query) {
      wait.stream_failure = query;
    }
  }

  // A wait that never reached the poller gives back what it holds, as complete() does.
  static void abandon(Wait* wait) {
    if (wait->event) wait->event->leave();  // entered by eventNotify
    if (wait->landing) drop_marker(*wait->landing);
    else if (wait->marker.event) put_event_marker(wait->device, wait->marker.event);
    delete wait;
  }

  // Asks the driver whether any device with pending waits, or whose work they waited on, has a sticky fault (then
  // check_quiet records it), and about the streams of late tickets.
  void probe(const std::vector<Wait*>& pending) {
    uint64_t devices = 0;
    for (Wait* wait : pending) devices |= device_bit(wait->device) | wait->dependencies.devices;
    for (; devices; devices &= devices - 1) ask_fault(__builtin_ctzll(devices));
    ProbeRound round;
    for (Wait* wait : pending)
      if (device_fault(wait->device) == CUDA_SUCCESS) check_late_ticket(*wait, round);
  }

  void run() {
    using Clock = std::chrono::steady_clock;
    std::vector<Wait*> pending;
    auto last_probe = Clock::now();
    unsigned idle = 0;
    for (;;) {
      const size_t before = pending.size();
      take_incoming(pending);
      if (pending.empty()) {
        // Lingers before parking: a thread that awaits in a loop submits its next wait within microseconds of the
        // last completion, and finding the poller awake saves that wait a thread wake-up (a futex round trip).
        const auto until = Clock::now() + kLinger;
        while (incoming_.load(std::memory_order_relaxed) == nullptr && Clock::now() < until) cpu_relax();
        if (incoming_.load(std::memory_order_seq_cst) == nullptr) rest(kParked, std::chrono::microseconds(0));
        continue;
      }
      bool progress = pending.size() != before;
      size_t kept = 0;
      for (Wait* wait : pending) {
        CUresult result = status(*wait);
        if (result == CUDA_ERROR_NOT_READY) {
          pending[kept++] = wait;
          // A copy in parts: what is in staging lands now, on its thread, while the rest is copying.
          if (wait->landing && wait->channel && claim_part(*wait->landing))
            post(*wait->channel, Ready{0, CUDA_SUCCESS, wait->landing, nullptr, -1, nullptr, true});
        } else {
          complete(wait, result);
          progress = true;
        }
      }
      pending.resize(kept);
      const auto now = Clock::now();
      if (now - last_probe >= std::chrono::milliseconds(10)) {
        probe(pending);
        last_probe = now;
      }
      // Spin briefly, then yield, then sleep from 20 us doubling to kLongestSleep.
      idle = progress ? 0 : idle + 1;
      if (idle < 2000) {
        cpu_relax();
      } else if (idle < 2100) {
        std::this_thread::yield();
      } else {
        unsigned step = std::min(idle - 2100, 4u);
        rest(kSleeping, std::min(std::chrono::microseconds(20 << step), kLongestSleep));
      }
    }
  }

  // How long the poller spins for new waits once none is pending, before it parks.
  static constexpr std::chrono::microseconds kLinger{100};
  // The longest sleep between checks while waits are pending: what a long wait may learn of its end late. 1 ms cost a
  // 64 MiB copy (about 1.2 ms on an H200) a tenth of its throughput; 250 us costs at most 4,000 wake-ups a second, and
  // only while something is pending.
  static constexpr std::chrono::microseconds kLongestSleep{250};
  // How long a marker event's query may fail (not sticky) before the failure is taken as the wait's result.
  static constexpr std::chrono::milliseconds kUnsureLimit{100};

  std::once_flag started_;
  std::atomic<Wait*> incoming_{nullptr};
  std::atomic<int> state_{kRunning};
  std::atomic<uint64_t> parks_{0};
  std::atomic<uint64_t> lost_tickets_{0};
  OrderedMutex lost_mutex_{LockLevel::kLeaf, "lost tickets counted"};
  std::unordered_map<const uint64_t*, uint64_t> lost_counted_;  // under lost_mutex_: the highest counted, by word
  std::atomic<int64_t> pending_{0};
  OrderedMutex mutex_{LockLevel::kLeaf, "completion poller park"};
  Condition wake_;
};

Engine& engine() {
  static Engine* instance = new Engine();  // never destroyed: its thread runs until the process exits
  return *instance;
}

}  // namespace

void submit_wait(Wait* wait) { engine().submit(wait); }

void Wait::let_go_of_stream() {
  if (!holds_stream) return;
  holds_stream = false;
  stream->leave();
}

void hold_stream(Wait& wait, std::shared_ptr<NativeStream> stream) {
  wait.holds_stream = stream && stream->enter();
  wait.stream = std::move(stream);
}

double poller_pending() { return engine().pending(); }
double poller_parks() { return engine().parks(); }
double poller_lost_tickets() { return engine().lost_tickets(); }
void count_lost_ticket(const Marker& marker) { engine().count_lost_ticket(marker); }
bool poller_parked() { return engine().parked(); }

void watch_job(int device, std::function<CUresult()> poll) {
  auto* wait = new Wait();
  wait->device = device;
  wait->poll = std::move(poll);
  engine().submit(wait);
}

}  // namespace csp
