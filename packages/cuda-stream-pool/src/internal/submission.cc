// Deferred submission: each environment's submitter and its thread. See Note [deferred submission] in submission.h.
#include "internal/submission.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "binding/binding.h"
#include "device/device.h"
#include "internal/fences.h"
#include "stream/stream.h"

namespace csp {

namespace {

// Exit. process.exit() and the end of the main thread run exit() without tearing the environment down, so submission
// threads may still be issuing while static destructors and the driver's own exit handlers run. An exit handler,
// registered after the driver's (so it runs first), sets `exiting`, which stops every submission thread between two
// operations, and waits for the one in flight; what is still queued is left (the process is ending).
std::atomic<bool> exiting{false};

struct LiveSubmitters {
  std::mutex mutex;
  std::vector<const std::atomic<bool>*> in_operation;  // each live submitter's flag
};

LiveSubmitters& live_submitters() {
  static auto* live = new LiveSubmitters();  // never destroyed: the exit handler reads it
  return *live;
}

void stop_submitters_at_exit() {
  exiting.store(true, std::memory_order_relaxed);
  // Pairs with enter_operation()'s light fence. Had the membarrier failed, a thread's flag could still sit in its
  // core's store buffer: by a millisecond it has left it, so the flags read then are current.
  if (!heavy_fence()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  LiveSubmitters& live = live_submitters();
  std::lock_guard<std::mutex> lock(live.mutex);
  for (const std::atomic<bool>* busy : live.in_operation)
    while (busy->load(std::memory_order_seq_cst)) std::this_thread::yield();
}

// Failures of recorded work on one device that no wait has reported yet, oldest first.
class UnreportedFailures {
 public:
  void add(const FailurePointer& failure) {
    std::lock_guard<OrderedMutex> lock(mutex_);
    prune_locked();
    if (failures_.size() < kKept && std::find(failures_.begin(), failures_.end(), failure) == failures_.end())
      failures_.push_back(failure);
  }
  FailurePointer take() {
    std::lock_guard<OrderedMutex> lock(mutex_);
    prune_locked();
    if (failures_.empty()) return nullptr;
    FailurePointer oldest = failures_.front();
    oldest->reported.store(true, std::memory_order_release);
    failures_.erase(failures_.begin());
    return oldest;
  }

 private:
  void prune_locked() {
    failures_.erase(std::remove_if(failures_.begin(), failures_.end(),
                                   [](const FailurePointer& f) { return f->reported.load(std::memory_order_acquire); }),
                    failures_.end());
  }
  // Each errored stream keeps its first failure only, so the list stays short; the bound is for safety.
  static constexpr size_t kKept = 64;
  OrderedMutex mutex_{LockLevel::kLeaf, "unreported device failures"};
  std::vector<FailurePointer> failures_;
};

UnreportedFailures device_failures[kMaxDevices];

// How long the thread looks for more work after a batch before it parks: long enough to span the gap between two
// calls of a JS loop that records (a few microseconds), short enough that an idle process uses no CPU.
constexpr auto kSpin = std::chrono::microseconds(50);

// Note [gathering]: a submission thread that keeps up with its recording thread issues each operation as soon as it
// is published, and so reads every line the recording thread has just written (the ring's tail, the operation's slot)
// while that thread is still writing the next ones: every record then waits for lines the other core holds (null
// driver, 2 vCPUs, event.record in a loop: 320 ns a record). So when it finds fewer than kGatherBatch operations,
// none of them a wait's marker (the recording thread is then about to wait, and the marker must go out at once), it
// lets kGatherWindow pass without reading the ring, then takes all that was published meanwhile (the same loop:
// 200 ns a record). The window ends early when a marker is published (markers_: a launch then an await goes out as
// soon as the await's marker is recorded) or the recording thread flushes (hurry_: a call that needs what it
// recorded issued); both live on a line the recording thread writes only then. Nothing ends it for other threads and
// other submitters (an order wait, a stream wait on an event this thread records, a host wait in another worker):
// they may wait up to a window longer. So each batch the thread finds short is held back by at most about 1 us,
// beside the 4 us of a kernel launch; once work piles up (16 or more waiting), nothing is held back.
constexpr uint64_t kGatherBatch = 16;
constexpr auto kGatherWindow = std::chrono::microseconds(1);

}  // namespace

Operation::Operation(Held<NativeStream> stream) noexcept : stream(std::move(stream)) {}
Operation::~Operation() = default;

FailurePointer FailureSlot::peek() const {
  if (!set()) return nullptr;
  std::lock_guard<OrderedMutex> lock(mutex_);
  return failure_;
}

bool FailureSlot::record(FailurePointer failure) {
  std::lock_guard<OrderedMutex> lock(mutex_);
  if (failure_) return false;
  failure_ = std::move(failure);
  set_.store(true, std::memory_order_release);
  return true;
}

FailurePointer FailureSlot::report() {
  if (!set()) return nullptr;
  std::lock_guard<OrderedMutex> lock(mutex_);
  if (failure_) failure_->reported.store(true, std::memory_order_release);
  return failure_;
}

FailurePointer FailureSlot::reset_locked() {
  set_.store(false, std::memory_order_release);
  return std::move(failure_);
}

FailurePointer FailureSlot::admit() {
  if (!set()) return nullptr;
  std::lock_guard<OrderedMutex> lock(mutex_);
  if (failure_ && failure_->reported.load(std::memory_order_acquire)) {
    reset_locked();
    return nullptr;
  }
  return failure_;
}

bool FailureSlot::clear_if_reported() {
  if (!set()) return false;
  std::lock_guard<OrderedMutex> lock(mutex_);
  if (!failure_ || !failure_->reported.load(std::memory_order_acquire)) return false;
  reset_locked();
  return true;
}

FailurePointer FailureSlot::take() {
  if (!set()) return nullptr;
  std::lock_guard<OrderedMutex> lock(mutex_);
  return reset_locked();
}

namespace {

// The futex word of a count: its low 32 bits, which change with every count_one (the library is built for
// little-endian Linux: x64 and arm64).
uint32_t* futex_word(const IssuedCount& count) {
  static_assert(std::atomic<uint64_t>::is_always_lock_free && sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the futex word is the count's low half");
  return reinterpret_cast<uint32_t*>(const_cast<std::atomic<uint64_t>*>(&count.value));
}

}  // namespace

void count_one(IssuedCount& count) {
  count.value.fetch_add(1, std::memory_order_seq_cst);
  // Pairs with the sleeper's count and its load of the value (both seq_cst): either it sees the new value, or this
  // sees it and wakes it (a wake before its futex wait makes that wait return at once, the word having changed).
  if (count.sleepers.load(std::memory_order_seq_cst) != 0)
    syscall(SYS_futex, futex_word(count), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

void await_count(const IssuedCount& count, uint64_t target) {
  if (count.load(std::memory_order_acquire) >= target) return;
  // The other thread is usually in the middle of one driver call: a few microseconds of yielding see it finish
  // without a system call; past that, sleep on the count until count_one wakes this thread.
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::microseconds(10)) {
    if (count.load(std::memory_order_acquire) >= target) return;
    std::this_thread::yield();
  }
  count.sleepers.fetch_add(1, std::memory_order_seq_cst);
  for (;;) {
    const uint64_t seen = count.value.load(std::memory_order_seq_cst);
    // At exit the other submission threads have stopped: waiting for them would hold up the exit handler for good.
    if (seen >= target || exiting.load(std::memory_order_acquire)) break;
    timespec timeout{0, 1'000'000};  // 1 ms: `exiting` is set without a wake
    syscall(SYS_futex, futex_word(count), FUTEX_WAIT_PRIVATE, static_cast<uint32_t>(seen), &timeout, nullptr, 0);
  }
  count.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

bool deferred_mode() {
  static const bool deferred = [] {
    const char* value = std::getenv("CUDA_STREAM_POOL_SUBMISSION");
    return value && std::strcmp(value, "deferred") == 0;
  }();
  return deferred;
}

Submitter::Submitter() {
  membarrier_fences();  // registers now, not on the JS thread's first publish (older kernels take milliseconds)
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit(stop_submitters_at_exit); });
  {
    LiveSubmitters& live = live_submitters();
    std::lock_guard<std::mutex> lock(live.mutex);
    live.in_operation.push_back(&in_operation_);
  }
  try {
    thread_ = start_thread("csp-submit", [this] { run(); });
  } catch (...) {
    forget();
    throw;
  }
}

void Submitter::forget() {
  LiveSubmitters& live = live_submitters();
  std::lock_guard<std::mutex> lock(live.mutex);
  auto& flags = live.in_operation;
  flags.erase(std::remove(flags.begin(), flags.end(), &in_operation_), flags.end());
}

Submitter::~Submitter() {
  closing_.store(true, std::memory_order_seq_cst);
  light_fence();  // before wake_thread() reads parked_ (Note [asymmetric fences])
  wake_thread();
  pthread_join(thread_, nullptr);  // the thread issues everything recorded before it returns
  // Only now: until the thread has returned, an exit() in another thread must stop it between two operations.
  forget();
  // What it issued after its last reap; not at exit, where objects' releases would call a driver that is going away.
  if (!exiting.load(std::memory_order_seq_cst)) reap();
}

void Submitter::wake_thread() {
  // After the caller's store and light_fence(); pairs with the heavy_fence() of a thread about to park.
  if (!parked_.load(std::memory_order_relaxed)) return;
  std::lock_guard<OrderedMutex> lock(mutex_);
  work_.notify_one();
}

void Submitter::wake_recorder(uint64_t issued) {
  // After issued_'s store and light_fence(); pairs with wait_for_issued()'s heavy_fence().
  if (!waiting_.load(std::memory_order_relaxed) || issued < wake_at_.load(std::memory_order_relaxed)) return;
  std::lock_guard<OrderedMutex> lock(mutex_);
  done_.notify_all();
}

void* Submitter::reserve() {
  if (recorded_ - issued_seen_ >= kQueueLimit) issued_seen_ = issued_.load(std::memory_order_acquire);
  if (recorded_ - issued_seen_ >= kQueueLimit) {
    waits_for_room_++;
    wait_for_issued(recorded_ - kQueueLimit / 2);
    issued_seen_ = issued_.load(std::memory_order_acquire);
  }
  // The slot's last operation was issued (there is room) but may not be reaped yet: reaped in batches, as the ring
  // comes round.
  // Acquire: the submission thread may have reaped the slot, and its destructor's reads come before this thread's writes.
  if (recorded_ - reaped_.load(std::memory_order_acquire) >= kQueueLimit) reap();
  return storage_[recorded_ % kQueueLimit].bytes;
}

void Submitter::reap() {
  // One reaper at a time: the JS thread, or the submission thread before it parks; the JS thread needs its slot
  // reaped, so it waits for the other's (short) batch.
  while (reaping_.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
  const uint64_t issued = issued_.load(std::memory_order_acquire);
  for (uint64_t next = reaped_.load(std::memory_order_relaxed); next < issued; next++) {
    Operation* operation = ring_[next % kQueueLimit];
    if (static_cast<void*>(operation) == storage_[next % kQueueLimit].bytes)
      operation->~Operation();
    else
      delete operation;
    reaped_.store(next + 1, std::memory_order_release);
  }
  reaping_.store(false, std::memory_order_release);
}

void Submitter::publish(Operation* operation) {
  ring_[recorded_ % kQueueLimit] = operation;
  recorded_++;
  published_.store(recorded_, std::memory_order_release);
  light_fence();  // Note [asymmetric fences]: before wake_thread() reads parked_
  // A wait's marker ends a gathering window early (Note [gathering]); after published_, which the thread reads next.
  if (operation->reports) markers_.store(markers_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  wake_thread();
}

void Submitter::flush() {
  if (!drained()) {
    flush_waits_++;
    hurry_.store(true, std::memory_order_relaxed);
    // The thread is issuing: a short spin usually sees it finish.
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
    while (!drained() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    if (!drained()) wait_for_issued(recorded_);
    hurry_.store(false, std::memory_order_relaxed);
  }
  // What follows may wait on the entries that issued operations hold (a destroy(), a free()).
  if (reaped_.load(std::memory_order_relaxed) != recorded_) reap();
}

void Submitter::wait_for_issued(uint64_t target) {
  wake_at_.store(target, std::memory_order_relaxed);
  waiting_.store(true, std::memory_order_relaxed);
  // Outside the mutex, which the submission thread takes to wake this one (as in run()'s parking).
  // Note [asymmetric fences]: the submission thread stores issued_, then reads waiting_.
  const bool fenced = heavy_fence();
  {
    std::unique_lock<OrderedMutex> lock(mutex_);
    auto reached = [&] { return issued_.load(std::memory_order_acquire) >= target; };
    if (fenced)
      done_.wait(lock, reached);
    else
      while (!reached()) done_.wait_for(lock, std::chrono::milliseconds(1), reached);  // an issue may not have seen waiting_
  }
  waiting_.store(false, std::memory_order_relaxed);
}

SubmissionCounters Submitter::counters() const {
  SubmissionCounters out;
  out.recorded = static_cast<double>(recorded_);
  out.issued = static_cast<double>(issued_.load(std::memory_order_acquire));
  out.dropped = static_cast<double>(dropped_.load(std::memory_order_relaxed));
  out.failed = static_cast<double>(failed_.load(std::memory_order_relaxed));
  out.parks = parks_.load(std::memory_order_relaxed);
  out.gathers = gathers_.load(std::memory_order_relaxed);
  out.waits_for_room = waits_for_room_;
  out.flush_waits = flush_waits_;
  out.order_waits = order_waits_.load(std::memory_order_relaxed);
  out.order_wait_ms = order_wait_ns_.load(std::memory_order_relaxed) / 1e6;
  return out;
}

void Submitter::run() {
  uint64_t head = 0;
  uint64_t markers_taken = 0;  // markers_ as of the last batch taken
  for (;;) {
    // Read before the tail, so a marker counted here is in the batch (Note [gathering]).
    uint64_t markers = markers_.load(std::memory_order_acquire);
    uint64_t tail = published_.load(std::memory_order_acquire);
    if (head == tail) {
      if (closing_.load(std::memory_order_acquire)) {
        // What was published before the destructor's store is seen now (the load above may have come before both):
        // issued before the thread returns. The destructor reaps what is left.
        if (published_.load(std::memory_order_acquire) == head) return;
        continue;
      }
      // Spin a little, then park.
      const auto until = std::chrono::steady_clock::now() + kSpin;
      while ((tail = published_.load(std::memory_order_acquire)) == head && !closing_.load(std::memory_order_relaxed) &&
             std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
      if (head == tail) {
        // The JS thread has stopped recording: the entries of what was issued leave now, so that a destroy() waiting
        // on them (from any thread) goes on.
        if (!enter_operation()) return;
        reap();
        in_operation_.store(false, std::memory_order_release);
        // Outside the mutex, which a publish that saw `parked_` takes to wake this thread: a system call under it
        // would stall the JS thread. Checked again under it, so a publish between this check and the wait wakes it.
        parked_.store(true, std::memory_order_relaxed);
        // Note [asymmetric fences]: publish() stores published_, then reads parked_.
        const bool fenced = heavy_fence();
        if (published_.load(std::memory_order_acquire) == head && !closing_.load(std::memory_order_seq_cst)) {
          std::unique_lock<OrderedMutex> lock(mutex_);
          parks_.store(parks_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
          auto ready = [&] { return published_.load(std::memory_order_acquire) != head || closing_.load(std::memory_order_seq_cst); };
          if (fenced)
            work_.wait(lock, ready);
          else
            work_.wait_for(lock, std::chrono::milliseconds(1), ready);  // a publish may not have seen parked_
        }
        parked_.store(false, std::memory_order_relaxed);
        continue;
      }
    }
    if (tail - head < kGatherBatch && markers == markers_taken && !hurry_.load(std::memory_order_relaxed) &&
        !ring_[(tail - 1) % kQueueLimit]->reports)
      tail = gather(markers);
    markers_taken = markers;
    for (; head < tail; head++) {
      if (!enter_operation()) return;
      Operation* operation = ring_[head % kQueueLimit];
      // After the operations recorded on its stream before it, by other threads too.
      const IssuedCount& stream_issued = operation->stream->owner().operations_issued;
      if (stream_issued.load(std::memory_order_acquire) < operation->place) {
        const auto start = std::chrono::steady_clock::now();
        await_count(stream_issued, operation->place);
        const auto waited = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
        order_waits_.store(order_waits_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        order_wait_ns_.store(order_wait_ns_.load(std::memory_order_relaxed) + waited, std::memory_order_relaxed);
      }
      never_throws("issuing a recorded operation", [&] {
        NativeStream& owner = operation->stream->owner();
        try {
          // Work after a reported failure runs again; a wait's marker reports instead.
          FailurePointer failure = operation->reports ? owner.failure.peek() : owner.failure.admit();
          if (!operation->issue(failure)) dropped_.fetch_add(1, std::memory_order_relaxed);
        } catch (const CudaFailure& failure) {
          failed_.fetch_add(1, std::memory_order_relaxed);
          carry_failure(owner, std::make_shared<const RecordedFailure>(failure));
        }
      });
      // Counted before it counts as issued: a wait that finds the stream's operations issued finds their work counted
      // too, so it never shares a ticket written before that work (NativeStream::submissions).
      if (operation->stream.counts_work()) operation->stream->count_work();
      count_one(operation->stream->owner().operations_issued);
      in_operation_.store(false, std::memory_order_release);
      issued_.store(head + 1, std::memory_order_release);
      light_fence();  // Note [asymmetric fences]: before wake_recorder() reads waiting_
      wake_recorder(head + 1);
    }
  }
}

bool Submitter::enter_operation() {
  in_operation_.store(true, std::memory_order_relaxed);
  light_fence();  // pairs with the exit handler's heavy_fence(): it sees this flag, or this thread sees `exiting`
  if (!exiting.load(std::memory_order_relaxed)) return true;
  in_operation_.store(false, std::memory_order_release);
  return false;
}

uint64_t Submitter::gather(uint64_t& markers) {
  gathers_.store(gathers_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  const auto until = std::chrono::steady_clock::now() + kGatherWindow;
  while (!hurry_.load(std::memory_order_relaxed) && markers_.load(std::memory_order_relaxed) == markers &&
         !closing_.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < until)
    cpu_relax();
  markers = markers_.load(std::memory_order_acquire);
  return published_.load(std::memory_order_acquire);
}

int submission_threads() {
  static const int threads = [] {
    // One digit from 1 to 8, as the JS side's warning checks; anything else is the default.
    const char* value = std::getenv("CUDA_STREAM_POOL_SUBMISSION_THREADS");
    if (value && value[0] >= '1' && value[0] <= '8' && value[1] == '\0') return value[0] - '0';
    return 2;
  }();
  return threads;
}

void issue_recorded(Napi::Env env) {
  if (!deferred_mode()) return;
  for (auto& submitter : AddonData::of(env).submitters) submitter->flush();
}

namespace {

// The environment's submitter for the stream's shard; the threads start on the first record. Throws
// std::system_error when a thread cannot start (none is kept then).
Submitter& submitter_for(Napi::Env env, NativeStream& stream) {
  auto& submitters = AddonData::of(env).submitters;
  if (submitters.empty()) {
    std::vector<std::unique_ptr<Submitter>> made;
    try {
      for (int i = 0; i < submission_threads(); i++) made.push_back(std::make_unique<Submitter>());
    } catch (const std::system_error& e) {
      throw std::system_error(e.code(), "cuda-stream-pool could not start a submission thread, so this thread cannot "
                                        "record stream work (CUDA_STREAM_POOL_SUBMISSION=deferred)");
    }
    submitters = std::move(made);
  }
  NativeStream& owner = stream.owner();
  int shard = owner.shard.load(std::memory_order_relaxed);
  if (shard < 0) {
    static std::atomic<unsigned> next{0};
    int expected = -1;
    shard = static_cast<int>(next.fetch_add(1, std::memory_order_relaxed) % static_cast<unsigned>(submission_threads()));
    if (!owner.shard.compare_exchange_strong(expected, shard, std::memory_order_relaxed)) shard = expected;
  }
  return *submitters[static_cast<size_t>(shard)];
}

}  // namespace

Submitter* recording_for(Napi::Env env, NativeStream& stream) {
  if (!deferred_mode()) return nullptr;
  if (!records_operations(stream)) {
    issue_recorded(env);
    await_issued(stream);  // what other threads recorded on it
    return nullptr;
  }
  return &submitter_for(env, stream);
}

bool records_operations(const NativeStream& stream) {
  return deferred_mode() && stream.owned && !stream.lender && !stream.capturing.load(std::memory_order_acquire);
}

uint64_t count_recorded(NativeStream& stream) {
  return stream.owner().operations_recorded.fetch_add(1, std::memory_order_acq_rel);
}

void await_issued(NativeStream& stream) {
  NativeStream& owner = stream.owner();
  await_count(owner.operations_issued, owner.operations_recorded.load(std::memory_order_acquire));
}

thread_local bool in_ordered_call = false;

void NativeStream::entered_for_use(bool queues_work) {
  if (!in_ordered_call) return;
  if (unissued()) await_issued(*this);
  if (queues_work) owner().failure.clear_if_reported();  // returns at once when no failure is set
}

void throw_stream_failure(NativeStream& stream) {
  FailureSlot& slot = stream.owner().failure;
  if (!slot.set()) return;
  // Called directly, a stream drops no work after a failure (a streamed copy's, here): the report ends it.
  FailurePointer failure = deferred_mode() ? slot.report() : slot.take();
  if (!failure) return;
  failure->reported.store(true, std::memory_order_release);
  throw CudaFailure(*failure);
}

void carry_failure(NativeStream& stream, const FailurePointer& failure) {
  NativeStream& owner = stream.owner();
  if (owner.failure.record(failure) && owner.device >= 0 && owner.device < kMaxDevices)
    device_failures[owner.device].add(failure);
}

namespace {

// submissionFlush(): issues everything this environment recorded (js_entry's ordering does the work).
Napi::Value submission_flush(const Napi::CallbackInfo& info) { return info.Env().Undefined(); }

// submissionStats() -> { mode, threads, recorded, issued, dropped, failed, parks, gathers, waitsForRoom, flushWaits,
// orderWaits, orderWaitMs } of this environment's submission threads, summed (zeros before its first record, and in
// direct mode).
Napi::Value submission_stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  SubmissionCounters c;
  if (deferred_mode())
    for (auto& submitter : AddonData::of(env).submitters) {
      const SubmissionCounters one = submitter->counters();
      c.recorded += one.recorded;
      c.issued += one.issued;
      c.dropped += one.dropped;
      c.failed += one.failed;
      c.parks += one.parks;
      c.gathers += one.gathers;
      c.waits_for_room += one.waits_for_room;
      c.flush_waits += one.flush_waits;
      c.order_waits += one.order_waits;
      c.order_wait_ms += one.order_wait_ms;
    }
  Napi::Object out = Napi::Object::New(env);
  out.Set("mode", deferred_mode() ? "deferred" : "direct");
  out.Set("threads", deferred_mode() ? submission_threads() : 0);
  out.Set("recorded", c.recorded);
  out.Set("issued", c.issued);
  out.Set("dropped", c.dropped);
  out.Set("failed", c.failed);
  out.Set("parks", c.parks);
  out.Set("gathers", c.gathers);
  out.Set("waitsForRoom", c.waits_for_room);
  out.Set("flushWaits", c.flush_waits);
  out.Set("orderWaits", c.order_waits);
  out.Set("orderWaitMs", c.order_wait_ms);
  return out;
}

const Export kSubmissionExports[] = {
    {"submissionFlush", "", entry<submission_flush>},
    {"submissionStats", "", unordered<submission_stats>},
};

}  // namespace

void register_submission(Napi::Env env, Napi::Object exports) { export_all(env, exports, kSubmissionExports); }

FailurePointer take_device_failure(int device) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  return device_failures[device].take();
}

}  // namespace csp
