// The completion engine. See Note [completion engine] in completion.h.
#include "stream/completion.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "binding/binding.h"
#include "internal/context.h"
#include "stream/event.h"
#include "internal/loader.h"
#include "internal/native-thread.h"
#include "stream/stream.h"
#include "internal/lock-order.h"

namespace csp {

const napi_type_tag Landing::kTag = {0x6373702d6c616e64ULL, 0x6564000000000007ULL};

// ------------------------------------------------------------------------------------------------------------------
// Ticket slots: 8-byte words of mapped pinned memory, one per stream that was waited on.

struct TicketSlot {
  uint64_t* word = nullptr;
  CUdeviceptr address = 0;  // the word in the context of `address_device`
  int address_device = -1;
  uint64_t issued = 0;      // the last value enqueued; under the stream's marker mutex, or the slots' mutex while free
};

namespace {

constexpr size_t kSlotsPerSlab = 4096;

uint64_t load_word(const uint64_t* word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

// A hint to the core that this thread spins.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

class TicketSlots {
 public:
  // A slot whose device address is valid for `device`. The device's context is current. Throws CudaFailure.
  TicketSlot* acquire(int device) {
    std::lock_guard<OrderedMutex> lock(mutex_);
    collect_locked();
    if (free_.empty()) add_slab_locked(device);
    TicketSlot* slot = free_.back();
    if (slot->address_device != device) {
      check(drv().cuMemHostGetDevicePointer(&slot->address, slot->word, 0), "cuMemHostGetDevicePointer", device);
      slot->address_device = device;
    }
    free_.pop_back();
    return slot;
  }

  // Reusable once its last write landed (a stream destroyed with work queued still writes later).
  void release(TicketSlot* slot) {
    std::lock_guard<OrderedMutex> lock(mutex_);
    retiring_.push_back(slot);
  }

 private:
  void collect_locked() {
    size_t kept = 0;
    for (TicketSlot* slot : retiring_) {
      if (load_word(slot->word) == slot->issued)
        free_.push_back(slot);
      else
        retiring_[kept++] = slot;
    }
    retiring_.resize(kept);
  }

  void add_slab_locked(int device) {
    void* memory = nullptr;
    // Mapped (DEVICEMAP) so a stream can write it, PORTABLE for every context, and cached on the host (not
    // write-combined) because the poller reads it.
    check(drv().cuMemHostAlloc(&memory, kSlotsPerSlab * sizeof(uint64_t),
                               CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
          "cuMemHostAlloc", device, [&] { return std::string("device " + std::to_string(device) + ", ticket slots"); });
    auto* words = static_cast<uint64_t*>(memory);
    std::memset(words, 0, kSlotsPerSlab * sizeof(uint64_t));
    for (size_t i = 0; i < kSlotsPerSlab; i++) {
      auto* slot = new TicketSlot();
      slot->word = words + i;
      free_.push_back(slot);
    }
  }

  OrderedMutex mutex_{LockLevel::kMarkerPool, "completion ticket slots"};
  std::vector<TicketSlot*> free_;
  std::vector<TicketSlot*> retiring_;
};

TicketSlots& ticket_slots() {
  static TicketSlots* slots = new TicketSlots();  // never destroyed: streams may die during exit
  return *slots;
}

// ------------------------------------------------------------------------------------------------------------------
// Event markers: a pool of timing-free events per device, for devices without 64-bit stream memory operations, for
// CUDA_STREAM_POOL_COMPLETION=event and for the legacy stream.

class EventPool {
 public:
  CUevent take(int device) {
    {
      std::lock_guard<OrderedMutex> lock(mutex_);
      auto& spare = spare_[device];
      if (!spare.empty()) {
        CUevent event = spare.back();
        spare.pop_back();
        return event;
      }
    }
    CUevent event = nullptr;
    check(drv().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate", device,
          [&] { return std::string("device " + std::to_string(device) + ", a completion marker"); });
    return event;
  }
  void put(int device, CUevent event) {
    std::lock_guard<OrderedMutex> lock(mutex_);
    spare_[device].push_back(event);
  }

 private:
  OrderedMutex mutex_{LockLevel::kMarkerPool, "completion event-marker pool"};
  std::vector<CUevent> spare_[kMaxDevices];
};

EventPool& event_pool() {
  static EventPool* pool = new EventPool();
  return *pool;
}

// Markers enqueued in streams since the process started (tickets written and events recorded), every thread.
std::atomic<uint64_t> g_markers_enqueued{0};

enum class MarkerKind { kUnknown, kTicket, kEvent };
std::atomic<MarkerKind> g_marker_kind[kMaxDevices];

// The device's marker kind, decided once: tickets where the device has 64-bit stream memory operations, unless
// CUDA_STREAM_POOL_COMPLETION=event asks for events.
MarkerKind marker_kind(int device) {
  MarkerKind kind = g_marker_kind[device].load(std::memory_order_relaxed);
  if (kind != MarkerKind::kUnknown) return kind;
  const char* forced = std::getenv("CUDA_STREAM_POOL_COMPLETION");
  kind = MarkerKind::kEvent;
  if (!(forced && std::strcmp(forced, "event") == 0) && stream_memory_operations(device)) kind = MarkerKind::kTicket;
  g_marker_kind[device].store(kind, std::memory_order_relaxed);
  return kind;
}

}  // namespace

Marker enqueue_marker(StreamBox& stream, MarkerUse use) {
  const int device = stream.device;
  Marker marker;
  marker.device = device;
  if (stream.handle == CU_STREAM_LEGACY || marker_kind(device) == MarkerKind::kEvent) {
    marker.event = event_pool().take(device);
    CUresult r = drv().cuEventRecord(marker.event, stream.handle);
    if (r != CUDA_SUCCESS) {
      event_pool().put(device, marker.event);
      check(r, "cuEventRecord", device, [&] { return std::string("device " + std::to_string(device) + ", a completion marker"); });
    }
    g_markers_enqueued.fetch_add(1, std::memory_order_relaxed);
    return marker;
  }
  std::lock_guard<OrderedMutex> lock(stream.marker_mutex);
  if (!stream.ticket) stream.ticket = ticket_slots().acquire(device);
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

CUresult query_stream(StreamBox& stream) {
  // cuStreamQuery on a capturing stream fails and invalidates the capture: such a stream counts as busy.
  if (stream.owner().capturing.load(std::memory_order_acquire)) return CUDA_ERROR_NOT_READY;
  const bool shares = stream.shares_tickets() && device_fault(stream.device) == CUDA_SUCCESS;
  // Read before asking: work counted later may not be covered by the answer.
  const uint64_t submissions = stream.submissions.load(std::memory_order_acquire);
  if (shares) {
    if (stream.idle_at_submissions.load(std::memory_order_acquire) == submissions) return CUDA_SUCCESS;
    std::lock_guard<OrderedMutex> lock(stream.marker_mutex);
    if (stream.ticket && submissions == stream.submissions_at_ticket) {
      if (load_word(stream.ticket->word) < stream.ticket->issued) return CUDA_ERROR_NOT_READY;
      stream.idle_at_submissions.store(submissions, std::memory_order_release);
      return CUDA_SUCCESS;
    }
  }
  make_current(stream.device);
  const CUresult r = check_quiet(drv().cuStreamQuery(stream.handle), stream.device);
  if (r == CUDA_SUCCESS && shares) stream.idle_at_submissions.store(submissions, std::memory_order_release);
  return r;
}

CUresult marker_status(const Marker& marker) {
  if (marker.word) return load_word(marker.word) >= marker.value ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  return check_quiet(drv().cuEventQuery(marker.event), marker.device);
}

void release_ticket(TicketSlot* slot) {
  if (slot) ticket_slots().release(slot);
}

// ------------------------------------------------------------------------------------------------------------------
// Per-environment delivery.

namespace {

// The question whether a thread's per-thread default stream is idle, which only that thread can ask the driver
// (CU_STREAM_PER_THREAD names the calling thread's own stream): the poller posts it for a late ticket on such a stream,
// the thread answers in its next drain, and the poller reads the answer at a later probe.
struct LateProbe {
  enum State { kAsked, kIdle, kBusy };
  int device = 0;
  std::atomic<int> state{kAsked};
};

struct Ready {
  double token;  // 0 for a landing or a probe
  CUresult result;
  std::shared_ptr<Landing> landing;
  std::shared_ptr<LateProbe> probe;  // a question for this thread, instead of a result
};

}  // namespace

struct Channel {
  OrderedMutex mutex{LockLevel::kLeaf, "completion channel"};  // guards ready, posted and the thread-safe function's use by the poller
  std::atomic<bool> open{true};     // false once the environment is torn down
  bool posted = false;              // a drain is queued on the JS thread
  std::vector<Ready> ready;
  Napi::ThreadSafeFunction tsfn;
  // JS thread only:
  std::vector<std::shared_ptr<Landing>> landings;
  double wakeups = 0, delivered = 0, largest_batch = 0;
};

namespace {

Channel& channel_of(Napi::Env env) {
  AddonData& addon = AddonData::of(env);
  if (!addon.channel) throw Napi::Error::New(env, "cuda-stream-pool internal: completionInit was not called");
  return *addon.channel;
}

void release_staging(Landing& landing) {
  if (landing.release) landing.release();
}

// One holder of the landing's marker is done with it (see Landing::marker_holders).
void drop_marker(Landing& landing) {
  if (landing.marker_holders.fetch_sub(1, std::memory_order_acq_rel) == 1) return_marker(landing.marker);
}

// Copies staging into the destination array, unless its buffer was detached or transferred. JS thread.
void finish_landing(Napi::Env env, Landing& landing, bool copy) {
  if (landing.finished.exchange(true)) return;
  napi_value value = nullptr;
  if (copy && napi_get_reference_value(env, landing.destination, &value) == napi_ok && value) {
    napi_typedarray_type type;
    size_t length = 0;
    void* data = nullptr;
    napi_value buffer = nullptr;
    size_t offset = 0;
    bool detached = true;
    if (napi_get_typedarray_info(env, value, &type, &length, &data, &buffer, &offset) == napi_ok &&
        napi_is_detached_arraybuffer(env, buffer, &detached) == napi_ok && !detached && data &&
        length == landing.bytes && landing.copy_out)
      landing.copy_out(data);
  }
  napi_delete_reference(env, landing.destination);
  landing.destination = nullptr;
  release_staging(landing);
  drop_marker(landing);
}

// Lands every landing of this environment whose marker is done; returns how many are still pending.
size_t flush_landings(Napi::Env env, Channel& channel) {
  size_t kept = 0;
  for (auto& landing : channel.landings) {
    if (!settle_landing(env, *landing)) channel.landings[kept++] = std::move(landing);
  }
  channel.landings.resize(kept);
  return kept;
}

// Runs on: the JS thread of the channel's environment, once per batch posted by the poller.
void drain(Napi::Env env, Napi::Function dispatch, Channel& channel) {
  std::vector<Ready> batch;
  {
    std::lock_guard<OrderedMutex> lock(channel.mutex);
    batch.swap(channel.ready);
    channel.posted = false;
  }
  if (env == nullptr) return;
  try {
    Napi::HandleScope scope(env);
    flush_landings(env, channel);  // a copy lands before any later completion is reported
    Napi::Array tokens = Napi::Array::New(env);
    Napi::Array results = Napi::Array::New(env);
    uint32_t count = 0;
    for (Ready& item : batch) {
      if (item.probe) {
        const bool idle = make_current_quiet(item.probe->device) && drv().cuStreamQuery(CU_STREAM_PER_THREAD) == CUDA_SUCCESS;
        item.probe->state.store(idle ? LateProbe::kIdle : LateProbe::kBusy, std::memory_order_release);
        continue;
      }
      if (item.landing) {
        finish_landing(env, *item.landing, item.result == CUDA_SUCCESS);
        continue;
      }
      tokens.Set(count, Napi::Number::New(env, item.token));
      results.Set(count, Napi::Number::New(env, item.result));
      count++;
    }
    channel.wakeups++;
    channel.delivered += count;
    if (count > channel.largest_batch) channel.largest_batch = count;
    if (count) dispatch.Call({tokens, results});
  } catch (const Napi::Error& error) {
    // The dispatcher never throws; if it did, report it as an uncaught exception rather than abort the process. In a
    // terminating worker every N-API call fails, Value() included: then there is nobody to report to.
    never_throws("completion delivery", [&] {
      napi_value value = error.Value();
      if (value) napi_fatal_exception(env, value);
    });
  } catch (...) {
  }
}

// ------------------------------------------------------------------------------------------------------------------
// The poller.

struct Wait {
  Wait* next = nullptr;
  std::shared_ptr<Channel> channel;
  double token = 0;
  int device = 0;
  Marker marker;                      // the library's own marker, when not watching a user event
  std::shared_ptr<EventBox> event;    // a user event watched directly (event.synchronize())
  std::shared_ptr<StreamBox> stream;  // the ticket's stream: keeps its slot alive, and is asked if the ticket is late
  std::shared_ptr<Landing> landing;   // a staged copy to land; its marker is `marker` unless it has a poll
  std::function<CUresult()> poll;     // a job's own progress (watch_job), or the landing's poll
  unsigned probes = 0;                // fault probes it has been pending through
  bool ticket_lost = false;           // its stream went idle but the ticket never landed: done all the same
  std::shared_ptr<LateProbe> late_probe;  // the question to its thread about its per-thread stream, once asked
  std::chrono::steady_clock::time_point unsure_since{};  // since when its marker event's query fails (not sticky)
};

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
    if (wait.ticket_lost) return CUDA_SUCCESS;
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
    if (wait->landing) {
      wait->landing->marker_result.store(result, std::memory_order_relaxed);
      wait->landing->marker_done.store(true, std::memory_order_release);
      if (result == CUDA_SUCCESS) drop_marker(*wait->landing);
    } else if (wait->marker.event && result == CUDA_SUCCESS) {
      event_pool().put(wait->device, wait->marker.event);
    }
    // After a fault an event is never reused (its context is lost).
    if (wait->event) wait->event->leave();  // entered by eventNotify; the event may be released now
    pending_.fetch_sub(1, std::memory_order_relaxed);
    if (!wait->channel) {  // a job: nobody to tell
      delete wait;
      return;
    }
    const bool delivered = post(*wait->channel, Ready{wait->token, result, wait->landing, nullptr});
    // A closed environment: its landing is dropped, and its staging goes back now that the GPU is done with it.
    if (!delivered && wait->landing && !wait->landing->finished.exchange(true)) {
      release_staging(*wait->landing);
      drop_marker(*wait->landing);
    }
    delete wait;
  }

  // Hands `item` to the channel's JS thread; false when its environment is closed.
  static bool post(Channel& channel, Ready item) {
    std::lock_guard<OrderedMutex> lock(channel.mutex);
    if (!channel.open.load(std::memory_order_relaxed)) return false;
    channel.ready.push_back(std::move(item));
    if (!channel.posted) {
      Channel* target = &channel;
      if (channel.tsfn.NonBlockingCall([target](Napi::Env env, Napi::Function dispatch) { drain(env, dispatch, *target); }) ==
          napi_ok)
        channel.posted = true;
    }
    return true;
  }

  // A late ticket on a per-thread default stream: its thread is asked whether that stream is idle (LateProbe), and
  // an idle answer, given after the ticket was queued, makes the ticket lost as below.
  void ask_owner(Wait& wait) {
    if (!wait.channel) return;
    if (wait.late_probe) {
      const int state = wait.late_probe->state.load(std::memory_order_acquire);
      if (state == LateProbe::kAsked) return;  // not answered yet
      if (state == LateProbe::kIdle && marker_status(wait.marker) == CUDA_ERROR_NOT_READY) {
        wait.ticket_lost = true;
        lost_tickets_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
    }
    // Asked first, or again after a busy answer.
    wait.late_probe = std::make_shared<LateProbe>();
    wait.late_probe->device = wait.device;
    post(*wait.channel, Ready{0, CUDA_SUCCESS, nullptr, wait.late_probe});
  }

  // A ticket still not landed after two probes (10 to 20 ms) while its stream reports all its work done was lost (a
  // driver that dropped the write): the wait is done, since the ticket's work came before the stream went idle. The
  // stream is asked directly, not through query_stream, whose answer for a sharing stream is that same word.
  void check_late_ticket(Wait& wait) {
    if (!wait.stream || !wait.marker.word || wait.poll || wait.event || ++wait.probes < 2) return;
    StreamBox& stream = *wait.stream;
    // CU_STREAM_PER_THREAD names the calling thread's own stream: asked from here, it would be the poller's, idle.
    if (stream.handle == CU_STREAM_PER_THREAD) return ask_owner(wait);
    if (stream.owner().capturing.load(std::memory_order_acquire)) return;  // a query would invalidate the capture
    if (!stream.enter()) return;  // destroyed: its handle may not be passed to the driver
    const bool idle = make_current_quiet(wait.device) && drv().cuStreamQuery(stream.handle) == CUDA_SUCCESS;
    stream.leave();
    if (idle && marker_status(wait.marker) == CUDA_ERROR_NOT_READY) {
      wait.ticket_lost = true;
      lost_tickets_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // A wait that never reached the poller gives back what it holds, as complete() does.
  static void abandon(Wait* wait) {
    if (wait->event) wait->event->leave();  // entered by eventNotify
    if (wait->landing) drop_marker(*wait->landing);
    else if (wait->marker.event) event_pool().put(wait->device, wait->marker.event);
    delete wait;
  }

  // Asks the driver whether any device with pending waits has a sticky fault (then check_quiet records it), and
  // about the streams of late tickets.
  void probe(const std::vector<Wait*>& pending) {
    bool seen[kMaxDevices] = {};
    for (Wait* wait : pending) {
      const int device = wait->device;
      if (seen[device] || device_fault(device) != CUDA_SUCCESS) continue;
      seen[device] = true;
      try {
        make_current(device);
        check_quiet(drv().cuStreamQuery(library_stream(device)), device);
      } catch (...) {
        // no context or no stream: nothing to ask; the waits' own markers still report
      }
    }
    for (Wait* wait : pending)
      if (device_fault(wait->device) == CUDA_SUCCESS) check_late_ticket(*wait);
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
  std::atomic<int64_t> pending_{0};
  OrderedMutex mutex_{LockLevel::kLeaf, "completion poller park"};
  Condition wake_;
};

Engine& engine() {
  static Engine* instance = new Engine();  // never destroyed: its thread runs until the process exits
  return *instance;
}

Wait* new_wait(Napi::Env env, double token, int device) {
  auto* wait = new Wait();
  wait->channel = AddonData::of(env).channel;
  wait->token = token;
  wait->device = device;
  return wait;
}

// completionInit(dispatch: (tokens: number[], results: number[]) => void): this environment's channel, unref'd.
Napi::Value completion_init(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  AddonData& addon = AddonData::of(env);
  auto channel = std::make_shared<Channel>();
  channel->tsfn = Napi::ThreadSafeFunction::New(env, info[0].As<Napi::Function>(), "cuda_stream_pool.completion",
                                                0, 1);
  channel->tsfn.Unref(env);
  addon.channel = channel;
  // Cleanup hook: runs at environment teardown (main thread exit, worker exit or termination), before the
  // thread-safe function's own cleanup. Waits still pending find the channel closed and are dropped by the poller;
  // landings already delivered but not drained give their staging back here. Harmless at any stage, including when
  // nothing is pending; never throws.
  env.AddCleanupHook([channel]() { never_throws("completion channel cleanup hook", [&] {
    std::vector<Ready> dropped;
    {
      std::lock_guard<OrderedMutex> lock(channel->mutex);
      if (!channel->open.exchange(false)) return;
      channel->tsfn.Release();
      dropped.swap(channel->ready);
    }
    for (Ready& item : dropped)
      if (item.landing && !item.landing->finished.exchange(true)) {
        release_staging(*item.landing);
        drop_marker(*item.landing);
      }
  }); });
  return env.Undefined();
}

Napi::Value completion_ref(const Napi::CallbackInfo& info) {
  channel_of(info.Env()).tsfn.Ref(info.Env());
  return info.Env().Undefined();
}

Napi::Value completion_unref(const Napi::CallbackInfo& info) {
  channel_of(info.Env()).tsfn.Unref(info.Env());
  return info.Env().Undefined();
}

// Queues a wait marker on `stream` and has the poller report `token` to this environment once the work queued so far
// is done. The caller holds the stream's use and made its context current.
void watch_stream(Napi::Env env, std::shared_ptr<StreamBox> stream, double token) {
  channel_of(env);  // throws unless completionInit ran: a wait without a channel would never be reported
  Marker marker = enqueue_marker(*stream, MarkerUse::kWait);
  Wait* wait = new_wait(env, token, stream->device);
  wait->marker = marker;
  wait->stream = std::move(stream);
  engine().submit(wait);
}

// streamNotify(streamBox, token): dispatch reports `token` once the work queued on the stream so far is done.
Napi::Value stream_notify(const Napi::CallbackInfo& info) {
  auto stream = unwrap_box<StreamBox>(info[0]);
  Use<StreamBox> use(*stream, "Stream", "synchronize", QueuesNoWork{});
  make_current(stream->device);
  watch_stream(info.Env(), std::move(stream), info[1].As<Napi::Number>().DoubleValue());
  return info.Env().Undefined();
}

// streamWait(streamBox, token) -> 0: the stream's work is done, nothing registered; CUDA_ERROR_NOT_READY: a marker is
// queued and dispatch reports `token` once the work is done; -1 or -2: the stream is capturing (active, invalidated),
// nothing queued; another CUresult: the work failed. One call for the whole start of `await stream.synchronize()`.
Napi::Value stream_wait(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_box<StreamBox>(info[0]);
  const double token = info[1].As<Napi::Number>().DoubleValue();
  Use<StreamBox> use(*stream, "Stream", "synchronize", QueuesNoWork{});
  if (const int capturing = capture_status(*stream)) return Napi::Number::New(env, -capturing);
  const CUresult status = query_stream(*stream);
  if (status != CUDA_ERROR_NOT_READY) return Napi::Number::New(env, status);
  // The query may have answered from the ticket without touching the driver; a new marker needs the context.
  make_current(stream->device);
  watch_stream(env, std::move(stream), token);
  return Napi::Number::New(env, CUDA_ERROR_NOT_READY);
}

// streamLastTicket(streamBox) -> { address: bigint, value } | null: the host address of the stream's ticket word and
// the value its last marker writes there; null without a ticket. For the benchmark's observer of wake latency, which
// spins on the same word as the poller.
Napi::Value stream_last_ticket(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_box<StreamBox>(info[0]);
  std::lock_guard<OrderedMutex> lock(stream->marker_mutex);
  if (!stream->ticket) return env.Null();
  Napi::Object out = Napi::Object::New(env);
  out.Set("address", Napi::BigInt::New(env, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(stream->ticket->word))));
  out.Set("value", static_cast<double>(stream->ticket->issued));
  return out;
}

// eventNotify(eventBox, token): dispatch reports `token` once the event's recorded work is done.
Napi::Value event_notify(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  channel_of(env);
  auto event = unwrap_box<EventBox>(info[0]);
  const double token = info[1].As<Napi::Number>().DoubleValue();
  if (!event->enter()) throw Destroyed{"Event", "synchronize"};  // left by the poller when the wait ends
  Wait* wait = new_wait(env, token, event->device);
  wait->event = std::move(event);
  engine().submit(wait);
  return env.Undefined();
}

// completionFlush() -> landings of this environment still pending, after landing every one that is ready.
Napi::Value completion_flush(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Napi::Number::New(env, static_cast<double>(flush_landings(env, channel_of(env))));
}

// completionStats() -> the engine's diagnostic counters (see CompletionStats in stream/completion.ts).
Napi::Value completion_stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Channel& channel = channel_of(env);
  Napi::Object out = Napi::Object::New(env);
  out.Set("wakeups", channel.wakeups);
  out.Set("delivered", channel.delivered);
  out.Set("largestBatch", channel.largest_batch);
  out.Set("landingsPending", static_cast<double>(channel.landings.size()));
  out.Set("processPending", engine().pending());
  out.Set("pollerParks", engine().parks());
  out.Set("lostTickets", engine().lost_tickets());
  out.Set("pollerParked", engine().parked());
  out.Set("markersEnqueued", static_cast<double>(g_markers_enqueued.load(std::memory_order_relaxed)));
  return out;
}

// completionMarker(device) -> 'ticket' | 'event': the marker kind the device's waits use.
Napi::Value completion_marker(const Napi::CallbackInfo& info) {
  const int device = info[0].As<Napi::Number>().Int32Value();
  make_current(device);
  return Napi::String::New(info.Env(), marker_kind(device) == MarkerKind::kTicket ? "ticket" : "event");
}

// completionSetMarker(device, 'ticket' | 'event'): the marker kind for later waits on the device (the micro-benchmark
// measures both in one process). Tickets only where the device supports them; returns the kind now in force.
Napi::Value completion_set_marker(const Napi::CallbackInfo& info) {
  const int device = info[0].As<Napi::Number>().Int32Value();
  make_current(device);
  g_marker_kind[device].store(MarkerKind::kUnknown, std::memory_order_relaxed);
  const bool event = info[1].As<Napi::String>().Utf8Value() == "event";
  MarkerKind kind = event ? MarkerKind::kEvent : marker_kind(device);
  if (event) g_marker_kind[device].store(kind, std::memory_order_relaxed);
  return Napi::String::New(info.Env(), kind == MarkerKind::kTicket ? "ticket" : "event");
}

}  // namespace

void track_landing(Napi::Env env, std::shared_ptr<Landing> landing, std::shared_ptr<StreamBox> stream) {
  Channel& channel = channel_of(env);
  Wait* wait = new_wait(env, 0, landing->marker.device);
  wait->marker = landing->marker;
  wait->stream = std::move(stream);
  wait->poll = landing->poll;
  wait->landing = landing;
  // Submitted first: a landing the poller never watches is not kept (no drain can run before the push, on this
  // thread).
  engine().submit(wait);
  channel.landings.push_back(std::move(landing));
}

bool settle_landing(Napi::Env env, Landing& landing) {
  if (landing.finished.load(std::memory_order_acquire)) return true;
  // A failed copy never lands: its staging may hold another copy's bytes.
  CUresult result = CUDA_SUCCESS;
  if (landing.marker_done.load(std::memory_order_acquire)) {
    result = landing.marker_result.load(std::memory_order_relaxed);
  } else {
    if (CUresult fault = device_fault(landing.marker.device)) {
      result = fault;
    } else if (landing.poll) {
      result = landing.poll();
      if (result == CUDA_ERROR_NOT_READY) return false;
    } else {
      if (landing.marker.event && !make_current_quiet(landing.marker.device)) return false;
      result = marker_status(landing.marker);
      // Only done or a sticky fault settles it here; a query that failed otherwise is the poller's to judge.
      if (result != CUDA_SUCCESS && device_fault(landing.marker.device) == CUDA_SUCCESS) return false;
    }
  }
  finish_landing(env, landing, result == CUDA_SUCCESS);
  return true;
}

void watch_job(int device, std::function<CUresult()> poll) {
  auto* wait = new Wait();
  wait->device = device;
  wait->poll = std::move(poll);
  engine().submit(wait);
}

void return_marker(const Marker& marker) {
  if (marker.event) event_pool().put(marker.device, marker.event);
}

bool stream_memory_operations(int device) {
  CUdevice dev = 0;
  int supported = 0;
  return drv().cuDeviceGet(&dev, device) == CUDA_SUCCESS &&
         drv().cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev) ==
             CUDA_SUCCESS &&
         supported;
}

Gate acquire_gate(int device) {
  Gate gate;
  gate.slot = ticket_slots().acquire(device);
  gate.word = gate.slot->word;
  gate.address = gate.slot->address;
  gate.base = gate.slot->issued;
  return gate;
}

void open_gate(const Gate& gate, uint64_t value) { __atomic_store_n(gate.word, value, __ATOMIC_RELEASE); }

void release_gate(const Gate& gate, uint64_t last_value) {
  gate.slot->issued = last_value;
  ticket_slots().release(gate.slot);
}

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kCompletionExports[] = {
    {"completionInit", "function", entry<completion_init>},
    {"completionRef", "", entry<completion_ref>},
    {"completionUnref", "", entry<completion_unref>},
    {"completionFlush", "", entry<completion_flush>},
    {"completionStats", "", entry<completion_stats>},
    {"completionMarker", "number", entry<completion_marker>},
    {"completionSetMarker", "number, string", entry<completion_set_marker>},
    {"streamLastTicket", "box", entry<stream_last_ticket>},
    {"streamWait", "box, number", entry<stream_wait>},
    {"streamNotify", "box, number", entry<stream_notify>},
    {"eventNotify", "box, number", entry<event_notify>},
};

void register_completion(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kCompletionExports);
}

}  // namespace csp
