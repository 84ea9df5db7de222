// Copy threads: see Note [copy threads] in copy-threads.h.
#include "internal/copy-threads.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "internal/lock-order.h"
#include "internal/native-thread.h"

namespace csp {
namespace {

// CUDA_STREAM_POOL_COPY_THREADS when it is a whole number from 0 to 15 in digits, else one less than the hardware
// threads, at most 7.
int wanted_threads() {
  const char* text = std::getenv("CUDA_STREAM_POOL_COPY_THREADS");
  if (text && *text) {
    const size_t length = std::strlen(text);
    const bool digits = length <= 2 && std::all_of(text, text + length, [](char c) { return c >= '0' && c <= '9'; });
    if (digits && std::atoi(text) <= 15) return std::atoi(text);
  }
  const long hardware = sysconf(_SC_NPROCESSORS_ONLN);
  return static_cast<int>(std::clamp(hardware - 1, 0L, 7L));
}

// Evicts the lines of [from, from + bytes) from every cache level: clflushopt where the CPU has it, else clflush.
#if defined(__x86_64__)
__attribute__((target("clflushopt"))) void evict_lines_opt(const char* from, size_t bytes) {
  for (size_t i = 0; i < bytes; i += 64) _mm_clflushopt(const_cast<char*>(from + i));
  _mm_sfence();
}
#endif
void evict_lines(const char* from, size_t bytes) {
#if defined(__x86_64__)
  static const bool opt = __builtin_cpu_supports("clflushopt");
  if (opt) return evict_lines_opt(from, bytes);
  for (size_t i = 0; i < bytes; i += 64) _mm_clflush(from + i);
#else
  (void)from, (void)bytes;
#endif
}

// One caller's copy. Lives on the caller's stack: the caller returns only once no copy thread is inside it.
struct Job {
  size_t pieces = 0;
  const std::function<void(size_t)>* copy_piece = nullptr;
  std::unique_ptr<std::atomic<bool>[]> done;
  std::atomic<size_t> next{0};  // the next piece to claim
  int helpers = 0;              // copy threads inside; under the pool's mutex

  // Claims and copies pieces until none is left to claim.
  void work() {
    for (size_t k = next.fetch_add(1, std::memory_order_relaxed); k < pieces;
         k = next.fetch_add(1, std::memory_order_relaxed)) {
      (*copy_piece)(k);
      done[k].store(true, std::memory_order_release);
    }
  }
};

class CopyThreads {
 public:
  // Hands `job` to the copy threads (starting them on first use).
  void offer(Job& job) {
    start_once();
    {
      std::lock_guard<OrderedMutex> lock(mutex_);
      jobs_.push_back(&job);
      offers_.fetch_add(1, std::memory_order_relaxed);
    }
    work_.notify_all();
  }

  // Takes `job` back: no copy thread enters it after this returns, and none is inside.
  void withdraw(Job& job) {
    std::unique_lock<OrderedMutex> lock(mutex_);
    auto found = std::find(jobs_.begin(), jobs_.end(), &job);
    if (found != jobs_.end()) jobs_.erase(found);
    left_.wait(lock, [&] { return job.helpers == 0; });
  }

  int running() const { return running_.load(std::memory_order_relaxed); }
  size_t evicted() const { return evicted_.load(std::memory_order_relaxed); }

  // Queues an eviction in pieces that several threads share; dropped when no thread runs.
  void evict(const char* from, size_t bytes) {
#if !defined(__x86_64__)
    return;  // evict_lines does nothing here
#endif
    if (running() == 0) return;
    {
      std::lock_guard<OrderedMutex> lock(mutex_);
      for (size_t at = 0; at < bytes; at += kEvictPieceBytes)
        evictions_.emplace_back(from + at, std::min(kEvictPieceBytes, bytes - at));
      offers_.fetch_add(1, std::memory_order_relaxed);
    }
    work_.notify_all();
  }

 private:
  void start_once() {
    std::call_once(started_, [this] {
      const int count = wanted_threads();
      for (int i = 0; i < count; i++) {
        try {
          start_detached_thread("csp-copy", [this] { run(); });
          running_.fetch_add(1, std::memory_order_relaxed);
        } catch (...) {
          break;  // the callers copy what these threads would have
        }
      }
    });
  }

  void run() {
    std::unique_lock<OrderedMutex> lock(mutex_);
    for (;;) {
      if (jobs_.empty()) {
        // Lingers before parking: copies made one after another (a loop of awaited copies) find the threads awake;
        // waking a parked thread costs tens of microseconds, a good part of a 4 MiB copy.
        const uint64_t seen = offers_.load(std::memory_order_relaxed);
        lock.unlock();
        const auto until = std::chrono::steady_clock::now() + kLinger;
        while (offers_.load(std::memory_order_relaxed) == seen && std::chrono::steady_clock::now() < until) cpu_relax();
        lock.lock();
      }
      work_.wait(lock, [&] { return !jobs_.empty() || !evictions_.empty(); });
      if (jobs_.empty()) {  // copies come first: an eviction only saves the next device copy some time
        const auto [from, bytes] = evictions_.front();
        evictions_.pop_front();
        lock.unlock();
        evict_lines(from, bytes);
        evicted_.fetch_add(bytes, std::memory_order_relaxed);
        lock.lock();
        continue;
      }
      Job* job = jobs_.front();
      job->helpers++;
      lock.unlock();
      job->work();
      lock.lock();
      // Nothing left to claim: later threads go to the next job.
      if (!jobs_.empty() && jobs_.front() == job) jobs_.pop_front();
      if (--job->helpers == 0) left_.notify_all();
    }
  }

  static constexpr std::chrono::microseconds kLinger{500};
  static constexpr size_t kEvictPieceBytes = 256 * 1024;

  OrderedMutex mutex_{LockLevel::kLeaf, "copy threads"};
  Condition work_;  // a job was offered
  Condition left_;  // a copy thread left a job
  std::deque<Job*> jobs_;
  std::deque<std::pair<const char*, size_t>> evictions_;  // staging to evict when no copy needs help
  std::once_flag started_;
  std::atomic<int> running_{0};
  std::atomic<uint64_t> offers_{0};  // jobs offered so far: what a lingering thread watches
  std::atomic<size_t> evicted_{0};   // bytes evicted so far
};

CopyThreads& copy_threads() {
  static CopyThreads* threads = new CopyThreads();  // never destroyed: its threads outlive static destruction
  return *threads;
}

}  // namespace

void copy_in_parallel(size_t pieces, const std::function<void(size_t)>& copy_piece,
                      const std::function<void(size_t)>& prefix_done) {
  if (pieces == 0) return;
  if (pieces == 1) {
    copy_piece(0);
    if (prefix_done) prefix_done(1);
    return;
  }
  Job job;
  job.pieces = pieces;
  job.copy_piece = &copy_piece;
  job.done.reset(new std::atomic<bool>[pieces]);
  for (size_t k = 0; k < pieces; k++) job.done[k].store(false, std::memory_order_relaxed);
  CopyThreads& threads = copy_threads();
  threads.offer(job);
  try {
    size_t prefix = 0;
    while (prefix < pieces) {
      const size_t k = job.next.fetch_add(1, std::memory_order_relaxed);
      if (k < pieces) {
        copy_piece(k);
        job.done[k].store(true, std::memory_order_release);
      } else {
        sched_yield();  // the last pieces are with copy threads
      }
      const size_t before = prefix;
      while (prefix < pieces && job.done[prefix].load(std::memory_order_acquire)) prefix++;
      if (prefix != before && prefix_done) prefix_done(prefix);
    }
  } catch (...) {
    job.next.store(pieces, std::memory_order_relaxed);
    threads.withdraw(job);
    throw;
  }
  threads.withdraw(job);
}

void evict_in_background(const char* from, size_t bytes) { copy_threads().evict(from, bytes); }

size_t evicted_bytes() { return copy_threads().evicted(); }

int copy_threads_running() { return copy_threads().running(); }

}  // namespace csp
