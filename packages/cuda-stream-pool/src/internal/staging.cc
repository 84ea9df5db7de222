// Copies between pageable JS memory and device buffers, through bounded pinned staging. See Note [staging].
//
// Note [staging]: pageable JS memory is never handed to the driver (a pageable cuMemcpy*Async blocks the thread).
// Copies go through reusable pinned chunks of 256 KiB, at most CUDA_STREAM_POOL_STAGING_BYTES per device (default
// 64 MiB), allocated in 8 MiB slabs when first needed and kept until the process exits. A chunk is reused once the
// completion marker (Note [completion engine] in completion.h) queued after its last copy is done.
//  - Chunks taken together are in address order, and neighbours in one slab make one device copy, of at most 2 MiB
//    (never across two slabs: the driver refuses a copy from one pinned allocation into the next, and places slabs
//    side by side). The memcpy between the JS memory and the chunks of a copy of 1 MiB or more is shared with the
//    copy threads (Note [copy threads] in copy-threads.h) while the calling thread waits.
//  - Host to device: the source is read at call time. Each piece goes into a free chunk; each device copy
//    (cuMemcpyHtoDAsync) is queued as soon as its chunks are filled, so the device copies overlap the snapshot. One
//    marker after the last piece frees the chunks.
//  - Device to host: each piece lands in a chunk; a landing then copies the chunks into the JS array on the thread
//    that owns it (never another thread), after checking that the array's buffer was not detached or transferred.
//    A copy of several device copies has a marker after each (StagedParts): the poller posts a part landing when
//    new parts are in staging (one posted at a time, so each lands everything that arrived since the last), and the
//    JS thread lands them while the rest is still copying. A part that landed stays, whatever happens to the rest.
//  - Not enough free chunks (the cap is reached, or the copy is larger than the cap): the copy is streamed. It holds
//    the chunks it could get (at least one, waiting for a busy one if need be) and queues every piece behind a gate
//    that the stream waits on (cuStreamWaitValue64), followed by a marker. The poller opens each gate once the
//    piece's chunk is free again: host to device, after filling it from a snapshot of the source taken at call time
//    in ordinary memory; device to host, after moving the chunk's previous piece into ordinary memory, from which
//    the array gets the whole copy. So later work on the stream stays behind the copy, and no thread waits. A busy
//    chunk's previous copy ran on the same stream: a new marker queued before the first gate stands for it. On
//    another stream: its marker, and when that is 10 ms late and the stream, asked directly, is idle, the marker was
//    lost (a driver that dropped the write) and the chunk is free all the same, as a late ticket of a wait is.
//    Markers that a gate follows are events, never tickets: the stream, held at the gate, never goes idle, so a
//    ticket that never landed could not be told from a late one, and the copy would wait forever.
//  - Without stream memory operations (no gates), or with every chunk held by copies not landed yet, a copy that
//    does not fit uses one temporary block of the pinned cache instead.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "binding/binding.h"
#include "stream/completion.h"
#include "internal/context.h"
#include "internal/copy-threads.h"
#include "internal/device-faults.h"
#include "internal/gates.h"
#include "internal/landing.h"
#include "internal/markers.h"
#include "internal/poller.h"
#include "internal/submission.h"
#include "internal/loader.h"
#include "internal/memory.h"
#include "internal/lock-order.h"
#include "internal/never-throws.h"

namespace csp {
namespace {

// memcpy into pinned staging that the GPU reads next, with non-temporal stores where the CPU has them (x86-64), so
// that the bytes go to memory rather than stay dirty in this core's cache. The copy engine's reads of cache-dirty
// lines are slow: measured on an H200 host, a 4 MiB pageable-to-device copy took 246 us of device time with memcpy
// and 133-150 us with these stores (0.39 against 0.63-0.69 of a pinned copy's throughput); 64 KiB and 64 MiB copies
// were unchanged. Copies out of staging keep memcpy: the caller reads its array next, and there streaming stores
// gained nothing.
void copy_into_staging(void* to, const void* from, size_t bytes) {
#if defined(__x86_64__)
  char* out = static_cast<char*>(to);
  const char* in = static_cast<const char*>(from);
  const size_t head = std::min(bytes, (16 - (reinterpret_cast<uintptr_t>(out) & 15)) & 15);  // to a 16-byte boundary
  std::memcpy(out, in, head);
  out += head, in += head, bytes -= head;
  for (; bytes >= 64; bytes -= 64, out += 64, in += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(out), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + 48), d);
  }
  std::memcpy(out, in, bytes);
  _mm_sfence();  // the stores are weakly ordered: complete them before the copy is queued or its gate opens
#else
  std::memcpy(to, from, bytes);
#endif
}


constexpr size_t kChunkBytes = 256 * 1024;
constexpr size_t kSlabBytes = 8 * kMiB;
constexpr size_t kDefaultCapBytes = 64 * kMiB;

// A copy of `bytes` moves through staging in pieces of one chunk each; the last one may be shorter.
size_t piece_count(size_t bytes) { return (bytes + kChunkBytes - 1) / kChunkBytes; }
size_t piece_bytes(size_t piece, size_t bytes) { return std::min(kChunkBytes, bytes - piece * kChunkBytes); }

// A marker that several chunks share, with the stream it was queued on. The stream is not held (a destroyed stream's
// handle must not outlive it for a chunk that may never be reused); when the marker is late
// (StreamedCopy::first_wait_lost), the stream's count when it was last found idle tells whether the chunk's copy is
// done, else the stream is asked. The marker's event goes back to the pool with the last chunk (once done).
struct ChunkMarker {
  Marker marker;
  std::weak_ptr<NativeStream> stream;
  std::shared_ptr<const std::atomic<uint64_t>> idle_at_submissions;  // the stream's (NativeStream::idle_at_submissions)
  uint64_t after_submissions = 0;  // a count the stream reaches only once the chunk's copy was queued
};
using SharedMarker = std::shared_ptr<const ChunkMarker>;
// `stream` has the chunk's copy queued already (not counted yet: its use counts it when it leaves).
SharedMarker share_marker(const Marker& marker, const std::shared_ptr<NativeStream>& stream) {
  const uint64_t after = stream->submissions.load(std::memory_order_acquire) + 1;
  return SharedMarker(new ChunkMarker{marker, stream, stream->idle_at_submissions, after}, [](const ChunkMarker* done) {
    return_marker(done->marker);
    delete done;
  });
}

struct Chunk {
  char* data = nullptr;
  const char* slab = nullptr;  // the pinned allocation it is part of: one device copy never spans two
  SharedMarker last;  // queued after the chunk's last copy (busy chunks only)
};

// The cap per device: CUDA_STREAM_POOL_STAGING_BYTES when it is a whole number of bytes (digits only) from one chunk
// to 2**53, else 64 MiB; rounded down to whole chunks.
size_t staging_cap() {
  static const size_t cap = [] {
    const char* text = std::getenv("CUDA_STREAM_POOL_STAGING_BYTES");
    if (!text || !*text || *text < '0' || *text > '9') return kDefaultCapBytes;  // strtoull would take "-5"
    char* end = nullptr;
    errno = 0;
    unsigned long long value = std::strtoull(text, &end, 10);
    if (*end != '\0' || errno == ERANGE || value < kChunkBytes || value > (1ull << 53)) return kDefaultCapBytes;
    return static_cast<size_t>(value) / kChunkBytes * kChunkBytes;
  }();
  return cap;
}

class Arena {
 public:
  // Up to `count` chunks free now, growing within the cap. The device's context is current. Throws CudaFailure
  // when a slab cannot be allocated.
  std::vector<Chunk*> take(size_t count, int device) {
    std::lock_guard<OrderedMutex> lock(mutex_);
    collect_locked();
    while (free_.size() < count && allocated_ < staging_cap()) grow_locked(device);
    std::vector<Chunk*> out;
    while (out.size() < count && !free_.empty()) {
      out.push_back(free_.back());
      free_.pop_back();
    }
    note_use_locked();
    // In address order, so that neighbours in one slab make one device copy (run_end).
    std::sort(out.begin(), out.end(), [](const Chunk* a, const Chunk* b) { return a->data < b->data; });
    return out;
  }

  // The busy chunk queued longest ago, with the marker its holder must wait for; null when none is busy.
  Chunk* take_busy() {
    std::lock_guard<OrderedMutex> lock(mutex_);
    if (busy_.empty()) return nullptr;
    Chunk* chunk = busy_.front();
    busy_.erase(busy_.begin());
    return chunk;
  }

  // Chunks back: free at once without a marker, else once `marker` is done.
  void put(const std::vector<Chunk*>& chunks, const SharedMarker& marker) {
    std::lock_guard<OrderedMutex> lock(mutex_);
    for (Chunk* chunk : chunks) {
      chunk->last = marker;
      (marker ? busy_ : free_).push_back(chunk);
    }
  }

  size_t allocated() {
    std::lock_guard<OrderedMutex> lock(mutex_);
    return allocated_;
  }
  size_t high_water() {
    std::lock_guard<OrderedMutex> lock(mutex_);
    return high_water_;
  }

 private:
  // Busy chunks whose marker is done become free.
  void collect_locked() {
    size_t kept = 0;
    for (Chunk* chunk : busy_) {
      CUresult r = marker_status(chunk->last->marker);
      if (r == CUDA_ERROR_NOT_READY) {
        busy_[kept++] = chunk;
      } else if (r == CUDA_SUCCESS) {
        chunk->last.reset();
        free_.push_back(chunk);
      }
      // else: a fault; the chunk is not reused
    }
    busy_.resize(kept);
  }

  // One slab: 8 MiB, or what is left under the cap.
  void grow_locked(int device) {
    const size_t slab = std::min(kSlabBytes, staging_cap() - allocated_);
    void* memory = nullptr;
    check(drv().cuMemHostAlloc(&memory, slab, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc", device,
          [&] { return device_text(device) + ", " + std::to_string(slab) + " bytes of pinned staging"; });
    for (size_t offset = 0; offset < slab; offset += kChunkBytes) {
      auto* chunk = new Chunk();
      chunk->data = static_cast<char*>(memory) + offset;
      chunk->slab = static_cast<const char*>(memory);
      free_.push_back(chunk);
      allocated_ += kChunkBytes;
    }
  }

  void note_use_locked() { high_water_ = std::max(high_water_, allocated_ - free_.size() * kChunkBytes); }

  OrderedMutex mutex_{LockLevel::kCache, "staging arena"};
  std::vector<Chunk*> free_;
  std::vector<Chunk*> busy_;  // in the order they were queued
  size_t allocated_ = 0;
  size_t high_water_ = 0;
};

Arena& arena(int device) {
  static Arena* arenas = new Arena[kMaxDevices];  // never destroyed: copies may finish during exit
  return arenas[device];
}

// A failed query of a marker says nothing of the work before it unless it is a sticky fault (check_quiet recorded it):
// it counts as not done for up to kLimit, then the failure is the copy's (as a wait's is in the poller).
class UnsureQueries {
 public:
  CUresult settled(CUresult result, int device) {
    using Clock = std::chrono::steady_clock;
    if (result == CUDA_SUCCESS || result == CUDA_ERROR_NOT_READY || device_fault(device) != CUDA_SUCCESS) {
      since_ = Clock::time_point{};
      return result;
    }
    const auto now = Clock::now();
    if (since_ == Clock::time_point{}) since_ = now;
    return now - since_ < kLimit ? CUDA_ERROR_NOT_READY : result;
  }

 private:
  static constexpr std::chrono::milliseconds kLimit{100};
  std::chrono::steady_clock::time_point since_;  // since when a query fails (not a fault)
};

// A copy that did not fit the free chunks, fed by the poller. See Note [staging].
struct StreamedCopy {
  bool to_device = false;
  int device = 0;
  size_t bytes = 0;
  std::unique_ptr<char[]> host;  // the source's snapshot, or where the pieces gather
  std::vector<Chunk*> chunks;    // piece k uses chunks[k % chunks.size()]
  std::weak_ptr<NativeStream> stream;  // the copy's stream: a failure of a copy to the device is carried to it
  SharedMarker first_wait;       // a chunk taken busy: its previous copy must be done before piece 0
  std::chrono::steady_clock::time_point first_wait_since;  // when first_wait was first seen not done, or last asked
  UnsureQueries unsure;
  Gate gate;
  std::vector<Marker> done;  // after each piece
  size_t opened = 0;         // pieces whose gate is open
  size_t finished = 0;       // pieces done (device to host: and moved into `host`)
  bool complete = false;
  bool abandoned = false;  // see abandon()
  CUresult failure = CUDA_SUCCESS;
  OrderedMutex mutex{LockLevel::kStreamMarker, "streamed copy"};

  size_t pieces() const { return piece_count(bytes); }
  size_t offset(size_t piece) const { return piece * kChunkBytes; }
  size_t length(size_t piece) const { return piece_bytes(piece, bytes); }
  Chunk* chunk(size_t piece) const { return chunks[piece % chunks.size()]; }

  // Moves the copy on as far as the GPU allows: SUCCESS once every piece is done, NOT_READY before, else the
  // failure. Any thread (the poller, or the JS thread landing it).
  CUresult advance() {
    std::shared_ptr<NativeStream> asked;  // left after the lock: the last one out releases the handle, taking its locks
    CUresult result;
    {
      std::lock_guard<OrderedMutex> lock(mutex);
      result = advance_locked(asked);
    }
    if (asked) asked->leave();
    return result;
  }
  // Nothing will feed the copy (its pieces could not all be queued, or nothing can watch it): every gate opens, so
  // that the stream is not left waiting forever. The copy's data is then undefined; its chunks and gate are not
  // reused. Piece 0 goes through the busy chunk (first_wait) as soon as its gate opens, so while that chunk's previous
  // copy may still be using it the gates stay shut, unless `now`: abandon() then returns false, and advance() opens
  // them once that copy is done (the caller has the poller call it). Else they open now, and it returns true.
  bool abandon(bool now) {
    std::lock_guard<OrderedMutex> lock(mutex);
    failure = CUDA_ERROR_UNKNOWN;
    abandoned = true;
    if (first_wait && !now) return false;
    open_abandoned_locked();
    return true;
  }

 private:
  void open_abandoned_locked() {
    open_gate(gate, gate.base + pieces());
    complete = true;
    drop_unfinished_markers();
  }

  // advance() with the copy's mutex held; a stream entered to be asked about is handed back in `asked`.
  CUresult advance_locked(std::shared_ptr<NativeStream>& asked) {
    if (complete) return failure;
    if (abandoned) {
      // Its failure was the call's, thrown there: only the gates are left to open.
      if (first_wait && device_fault(device) == CUDA_SUCCESS) {
        if (!make_current_quiet(device)) return CUDA_ERROR_NOT_READY;
        const CUresult r = unsure.settled(marker_status(first_wait->marker), device);
        if (r == CUDA_ERROR_NOT_READY && !first_wait_lost(asked)) return r;
      }
      first_wait.reset();
      open_abandoned_locked();
      return failure;
    }
    if (CUresult fault = device_fault(device)) return finish(fault);
    if (!make_current_quiet(device)) return CUDA_ERROR_NOT_READY;  // event markers need the context
    if (first_wait) {
      CUresult r = unsure.settled(marker_status(first_wait->marker), device);
      if (r == CUDA_ERROR_NOT_READY && !first_wait_lost(asked)) return r;
      if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) return finish(r);
      first_wait.reset();
    }
    const size_t n = pieces();
    while (finished < n && finished < opened) {
      CUresult r = unsure.settled(marker_status(done[finished]), device);
      if (r == CUDA_ERROR_NOT_READY) break;
      if (r != CUDA_SUCCESS) return finish(r);
      return_marker(done[finished]);
      if (!to_device) std::memcpy(host.get() + offset(finished), chunk(finished)->data, length(finished));
      finished++;
    }
    const size_t held = chunks.size();
    while (opened < n && (opened < held || opened - held < finished)) {
      if (to_device) copy_into_staging(chunk(opened)->data, host.get() + offset(opened), length(opened));
      open_gate(gate, gate.base + opened + 1);
      opened++;
    }
    return finished == n ? finish(CUDA_SUCCESS) : CUDA_ERROR_NOT_READY;
  }

  // How long the busy chunk's marker may be late before its stream is asked whether it is idle, and again after that.
  static constexpr std::chrono::milliseconds kLateMarker{10};

  // Whether the busy chunk's marker was lost (a driver that dropped the ticket write): it is late, and its stream,
  // asked directly, has run all its work, so the chunk's previous copy is done. The stream is entered for the
  // question and handed back in `asked` to leave once the lock is released. A destroyed stream, the per-thread
  // default stream (asked from here it would be this thread's own) and a capturing one cannot be asked; on the copy's
  // own stream, held at the copy's first gate, the marker is an event that take_chunks queued, never lost.
  bool first_wait_lost(std::shared_ptr<NativeStream>& asked) {
    // Found idle since the chunk's copy was queued (a synchronize, a query): the copy is done. Known without the
    // stream, which may be gone.
    const uint64_t idle_at = first_wait->idle_at_submissions->load(std::memory_order_acquire);
    if (idle_at != ~0ull && idle_at >= first_wait->after_submissions &&
        marker_status(first_wait->marker) == CUDA_ERROR_NOT_READY) {
      count_lost_ticket(first_wait->marker);
      return true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (first_wait_since == std::chrono::steady_clock::time_point{}) first_wait_since = now;
    if (now - first_wait_since < kLateMarker) return false;
    first_wait_since = now;
    std::shared_ptr<NativeStream> stream = first_wait->stream.lock();
    if (!stream || stream->handle == CU_STREAM_PER_THREAD || stream->owner().capturing.load(std::memory_order_acquire) ||
        !stream->enter())
      return false;
    asked = stream;
    const bool idle = drv().cuStreamQuery(stream->handle) == CUDA_SUCCESS;
    if (!idle || marker_status(first_wait->marker) != CUDA_ERROR_NOT_READY) return false;
    count_lost_ticket(first_wait->marker);
    return true;
  }

  // The event markers of pieces not seen done: never pooled again (a pooled event must be done), destroyed unless the
  // device faulted (its context is lost; nothing is reused after a fault).
  void drop_unfinished_markers() {
    if (device_fault(device) == CUDA_SUCCESS && make_current_quiet(device))
      for (size_t k = finished; k < done.size(); k++)
        if (done[k].event) drv().cuEventDestroy(done[k].event);
    done.resize(finished);
  }

  CUresult finish(CUresult result) {
    complete = true;
    failure = result;
    if (result == CUDA_SUCCESS) {
      arena(device).put(chunks, SharedMarker());
      release_gate(gate, gate.base + pieces());
      return result;
    }
    // The stream must not wait at a gate for good: every gate opens, and the copy's data is undefined. A copy to the
    // host reports the failure through its landing; one to the device errors its stream, whose next wait reports it
    // (errored before the gates open, so that no wait behind the copy completes first; the stream's handle may be
    // released already, so the message names the device only). The chunks and the gate are not reused (the device
    // may still be copying through them).
    never_throws("reporting a failed streamed copy", [&] {
      if (!to_device || device_fault(device) != CUDA_SUCCESS) return;
      if (std::shared_ptr<NativeStream> owner = stream.lock())
        carry_failure(*owner, std::make_shared<const RecordedFailure>(
                                  CudaFailure{result, "cuEventQuery",
                                              device_text(device) + ", a copy of " + std::to_string(bytes) +
                                                  " bytes through pinned staging"},
                                  true));
    });
    open_gate(gate, gate.base + pieces());
    drop_unfinished_markers();
    return result;
  }
};

// Copies of at least this many bytes share their memcpy with the copy threads (Note [copy threads]).
constexpr size_t kParallelBytes = 1 * kMiB;
// Note [staging eviction]: the copy engine writes a device-to-host copy into staging slowly where the lines are still
// in a core's private caches: it waits for each core to give its lines up. A landing's memcpy leaves them there (the
// copy threads read them), and the next copy reuses the same chunks. So once a landing has read its chunks, the copy
// threads evict them from the caches (clflushopt) when they have no copy to help, off the landing's critical path.
// Measured on an H200 host (Xeon, 2 MiB of L2 per core), each device-to-host copy awaited before the next: the
// device time of a 2 MiB copy fell from 100 to 60 us and of a 4 MiB copy from 190 to 120 us (0.43 to 0.54 and 0.40 to
// 0.48 of a pinned copy's throughput); at 8 MiB it gained 60 us of device time and nothing overall, at 16 and 64 MiB
// nothing (what the copy threads read no longer fits in their caches), and there the evictions delayed the next
// landing. So only copies from kParallelBytes to kEvictMostBytes are evicted; host-to-device copies need none, as
// they write staging with non-temporal stores (copy_into_staging).
constexpr size_t kEvictMostBytes = 8 * kMiB;
// The most chunks one device copy spans: a large copy's device copies then start while the rest of it is still being
// snapshotted (host to device), and its first parts land while the rest is still copying (device to host).
constexpr size_t kRunChunks = 8;

// Runs copy_piece(k) for the `pieces` pieces of a copy of `bytes`, in parallel when it is large, with prefix_done as
// copy_in_parallel has it.
void copy_pieces(size_t pieces, size_t bytes, const std::function<void(size_t)>& copy_piece,
                 const std::function<void(size_t)>& prefix_done = {}) {
  if (bytes >= kParallelBytes) return copy_in_parallel(pieces, copy_piece, prefix_done);
  for (size_t k = 0; k < pieces; k++) {
    copy_piece(k);
    if (prefix_done) prefix_done(k + 1);
  }
}

// memcpy of `bytes` between contiguous ranges, in parallel when large.
void copy_bytes(char* to, const char* from, size_t bytes) {
  const size_t pieces = piece_count(bytes);
  copy_pieces(pieces, bytes, [&](size_t k) { std::memcpy(to + k * kChunkBytes, from + k * kChunkBytes, piece_bytes(k, bytes)); });
}

// The end of the device copy that starts at piece `first`: up to kRunChunks neighbouring chunks of one slab (two slabs
// may be neighbours in memory, but a copy may not span two allocations), among the `ready` pieces whose bytes are in
// place. `first` when the run may still grow: its last chunk is the last ready one and the next piece's chunk
// follows it.
size_t run_end(const std::vector<Chunk*>& chunks, size_t first, size_t ready) {
  auto follows = [&](size_t k) {
    return chunks[k]->slab == chunks[k - 1]->slab && chunks[k]->data == chunks[k - 1]->data + kChunkBytes;
  };
  size_t end = first + 1;
  while (end < ready && end - first < kRunChunks && follows(end)) end++;
  if (end < ready || end - first == kRunChunks || end == chunks.size() || !follows(end)) return end;
  return first;
}

// The bytes of pieces [first, end) of a copy of `bytes`.
size_t span_bytes(size_t first, size_t end, size_t bytes) { return std::min(end * kChunkBytes, bytes) - first * kChunkBytes; }

// The device-to-host parts of a staged copy that fit the free chunks: a marker after each device copy, so that each
// part lands once its bytes are in staging (Landing::ready_bytes). Polled by the poller and the landing's JS thread.
struct StagedParts {
  OrderedMutex mutex{LockLevel::kStreamMarker, "staged copy parts"};
  int device = 0;
  std::vector<Marker> markers;  // after each device copy
  std::vector<size_t> ends;     // the bytes in staging once the marker of the same index is done
  size_t done = 0;              // markers seen done (and given back)
  UnsureQueries unsure;

  // SUCCESS once every part is in staging, NOT_READY before (`ready` then says how far), else the failure.
  CUresult advance(std::atomic<size_t>& ready) {
    std::lock_guard<OrderedMutex> lock(mutex);
    if (CUresult fault = device_fault(device)) return fault;
    if (done < markers.size() && markers[done].event && !make_current_quiet(device)) return CUDA_ERROR_NOT_READY;
    while (done < markers.size()) {
      CUresult r = unsure.settled(marker_status(markers[done]), device);
      if (r != CUDA_SUCCESS) return r;
      return_marker(markers[done]);
      ready.store(ends[done], std::memory_order_release);
      done++;
    }
    return CUDA_SUCCESS;
  }

  ~StagedParts() {
    for (size_t k = done; k < markers.size(); k++) return_marker(markers[k]);
  }
};

// Takes chunks for `pieces` pieces of a copy on `stream`: all of them when free (the copy is not streamed), else what is
// free, else one busy chunk, whose previous copy the streamed copy must wait for first (`first_wait` is then set: such
// a chunk is never written at once, even when one chunk is all the copy needs). Empty: nothing available; use a pinned
// block. The device's context is current. Throws CudaFailure.
std::vector<Chunk*> take_chunks(size_t pieces, const std::shared_ptr<NativeStream>& stream, bool can_stream,
                                SharedMarker* first_wait) {
  const int device = stream->device;
  std::vector<Chunk*> chunks = arena(device).take(pieces, device);
  if (chunks.size() == pieces) return chunks;
  if (!can_stream) {
    arena(device).put(chunks, SharedMarker());
    return {};
  }
  if (chunks.empty()) {
    if (Chunk* busy = arena(device).take_busy()) {
      SharedMarker previous = std::move(busy->last);
      if (previous->stream.lock() != stream) {
        *first_wait = std::move(previous);
      } else {
        // The previous copy ran on this stream, which will be held at this copy's first gate: were its marker lost,
        // the stream would never go idle to say so. A new event marker queued now comes after that copy all the same.
        try {
          *first_wait = share_marker(enqueue_marker(*stream, MarkerUse::kBeforeGate), stream);
        } catch (...) {
          arena(device).put({busy}, previous);
          throw;
        }
      }
      chunks.push_back(busy);
    }
  }
  return chunks;
}

// The chunks of a staged copy of `bytes`: see take_chunks. The device's context is current.
struct Staging {
  size_t pieces = 0;
  SharedMarker first_wait;
  std::vector<Chunk*> chunks;
};
Staging stage(size_t bytes, const std::shared_ptr<NativeStream>& stream) {
  Staging staging;
  staging.pieces = piece_count(bytes);
  staging.chunks = take_chunks(staging.pieces, stream, stream_memory_operations(stream->device), &staging.first_wait);
  return staging;
}

// Queues a streamed copy on `stream` (held, context current): every piece behind its gate, then a marker. The
// caller fills `copy` except gate/done. Throws CudaFailure; then nothing will open the gates, so the stream would
// wait forever on a partly queued copy: the gates are opened at once (the copy's data is then undefined).
// Abandons `copy` (StreamedCopy::abandon): its gates open once the busy chunk it took is free, watched by the poller;
// at once when the poller cannot take it.
void abandon_streamed(const std::shared_ptr<StreamedCopy>& copy) {
  if (copy->abandon(false)) return;
  try {
    watch_job(copy->device, [copy] { return copy->advance(); });
  } catch (...) {
    copy->abandon(true);
  }
}

void queue_streamed(const std::shared_ptr<StreamedCopy>& shared, NativeStream& stream, CUdeviceptr device_ptr) {
  StreamedCopy& copy = *shared;
  copy.gate = acquire_gate(copy.device);
  const size_t n = copy.pieces();
  copy.done.reserve(n);
  try {
    for (size_t k = 0; k < n; k++) {
      check(drv().cuStreamWaitValue64(stream.handle, copy.gate.address, copy.gate.base + k + 1,
                                      CU_STREAM_WAIT_VALUE_GEQ),
            "cuStreamWaitValue64", stream.device, [&] { return copy_text(stream, copy.bytes) + " through pinned staging"; });
      CUresult r = copy.to_device
                       ? drv().cuMemcpyHtoDAsync(device_ptr + copy.offset(k), copy.chunk(k)->data, copy.length(k),
                                                 stream.handle)
                       : drv().cuMemcpyDtoHAsync(copy.chunk(k)->data, device_ptr + copy.offset(k), copy.length(k),
                                                 stream.handle);
      check(r, copy.to_device ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync", stream.device,
            [&] { return copy_text(stream, copy.bytes) + " through pinned staging"; });
      copy.done.push_back(enqueue_marker(stream, MarkerUse::kBeforeGate));
    }
  } catch (...) {
    abandon_streamed(shared);  // opens the gates of what was queued
    throw;
  }
}

// copyPageableToDevice(stream, dst, dstOffset, source: Uint8Array of exactly the bytes to copy)
Napi::Value copy_pageable_to_device(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_native<NativeStream>(info[0]);
  auto dst = unwrap_native<NativeDeviceBuffer>(info[1]);
  size_t dst_offset = to_size(info[2]);
  auto source = info[3].As<Napi::Uint8Array>();
  const size_t bytes = source.ByteLength();
  const auto* data = static_cast<const char*>(static_cast<const void*>(source.Data()));
  Use<NativeDeviceBuffer> use_dst(*dst, "DeviceBuffer", "copy");
  Use<NativeStream> use_stream(*stream, "Stream", "copy");
  check_span("destination", dst_offset, bytes, dst->bytes, env);
  const int device = stream->device;
  make_current(device);
  const int environment = environment_of(env);
  note_use_before_work(*dst, stream, environment);
  const CUdeviceptr target = dst->ptr + dst_offset;
  Staging staging = stage(bytes, stream);
  const size_t pieces = staging.pieces;
  SharedMarker& first_wait = staging.first_wait;
  std::vector<Chunk*>& chunks = staging.chunks;
  if (chunks.size() == pieces && !first_wait) {  // every piece has a free chunk: no streaming
    // The snapshot and the device copies overlap: each run of chunks is queued once its bytes are in.
    size_t queued = 0;
    auto queue_ready = [&](size_t ready) {
      while (queued < ready) {
        const size_t end = run_end(chunks, queued, ready);
        if (end == queued) return;  // the run grows with the next pieces
        check(drv().cuMemcpyHtoDAsync(target + queued * kChunkBytes, chunks[queued]->data, span_bytes(queued, end, bytes),
                                      stream->handle),
              "cuMemcpyHtoDAsync", device, [&] { return copy_text(*stream, bytes) + " through pinned staging"; });
        queued = end;
      }
    };
    try {
      copy_pieces(
          pieces, bytes,
          [&](size_t k) { copy_into_staging(chunks[k]->data, data + k * kChunkBytes, piece_bytes(k, bytes)); }, queue_ready);
      arena(device).put(chunks, share_marker(enqueue_marker(*stream, MarkerUse::kAfterOwnWork), stream));
    } catch (...) {
      // Chunks whose copy may be queued are not reused; the others go back.
      arena(device).put(std::vector<Chunk*>(chunks.begin() + static_cast<std::ptrdiff_t>(queued), chunks.end()),
                        SharedMarker());
      throw;
    }
  } else if (!chunks.empty()) {
    auto copy = std::make_shared<StreamedCopy>();
    copy->to_device = true;
    copy->device = device;
    copy->bytes = bytes;
    copy->host.reset(new char[bytes]);
    copy_bytes(copy->host.get(), data, bytes);  // the source as it is now
    copy->chunks = std::move(chunks);
    copy->first_wait = first_wait;
    copy->stream = stream;
    queue_streamed(copy, *stream, target);
    copy->advance();
    try {
      watch_job(device, [copy] { return copy->advance(); });
    } catch (...) {
      copy->abandon(true);  // the poller cannot start
      throw;
    }
  } else {
    PinnedBlock block(bytes, device);
    copy_into_staging(block.data(), data, bytes);
    check(drv().cuMemcpyHtoDAsync(target, block.data(), bytes, stream->handle), "cuMemcpyHtoDAsync", device,
          [&] { return copy_text(*stream, bytes) + " through pinned staging"; });
    block.fence(stream);
  }
  note_use_after_work(*dst, stream, environment);
  return env.Undefined();
}

// copyDeviceToPageable(stream, destination: Uint8Array of exactly the bytes to fill, src, srcOffset) -> landing
Napi::Value copy_device_to_pageable(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_native<NativeStream>(info[0]);
  auto destination = info[1].As<Napi::Uint8Array>();
  auto src = unwrap_native<NativeDeviceBuffer>(info[2]);
  size_t src_offset = to_size(info[3]);
  const size_t bytes = destination.ByteLength();
  Use<NativeDeviceBuffer> use_src(*src, "DeviceBuffer", "copy");
  Use<NativeStream> use_stream(*stream, "Stream", "copy");
  check_span("source", src_offset, bytes, src->bytes, env);
  const int device = stream->device;
  make_current(device);
  const int environment = environment_of(env);
  note_use_before_work(*src, stream, environment);
  const CUdeviceptr from = src->ptr + src_offset;
  auto landing = std::make_shared<Landing>();
  landing->bytes = bytes;
  landing->destination_start = reinterpret_cast<const char*>(destination.Data());
  std::shared_ptr<StreamedCopy> streamed;  // when the copy does not fit the free chunks
  Staging staging = stage(bytes, stream);
  const size_t pieces = staging.pieces;
  SharedMarker& first_wait = staging.first_wait;
  std::vector<Chunk*>& chunks = staging.chunks;
  if (chunks.size() == pieces && !first_wait) {  // every piece has a free chunk: no streaming
    // One device copy per run of neighbouring chunks, each followed by a marker when there are several, so that
    // the first parts land while the rest is still copying.
    auto parts = std::make_shared<StagedParts>();
    parts->device = device;
    size_t queued = 0;
    try {
      while (queued < pieces) {
        const size_t end = run_end(chunks, queued, pieces);
        check(drv().cuMemcpyDtoHAsync(chunks[queued]->data, from + queued * kChunkBytes, span_bytes(queued, end, bytes),
                                      stream->handle),
              "cuMemcpyDtoHAsync", device, [&] { return copy_text(*stream, bytes) + " through pinned staging"; });
        queued = end;
        if (queued == pieces && parts->markers.empty()) break;  // one part: the landing's own marker
        parts->markers.push_back(enqueue_marker(*stream, MarkerUse::kAfterOwnWork));
        parts->ends.push_back(std::min(queued * kChunkBytes, bytes));
      }
      if (parts->markers.empty()) landing->marker = enqueue_marker(*stream, MarkerUse::kAfterOwnWork);
    } catch (...) {
      arena(device).put(std::vector<Chunk*>(chunks.begin() + static_cast<std::ptrdiff_t>(queued), chunks.end()),
                        SharedMarker());
      throw;
    }
    if (!parts->markers.empty()) {
      landing->marker.device = device;
      Landing* self = landing.get();  // the poll is the landing's own: it never outlives it
      landing->poll = [parts, self] { return parts->advance(self->ready_bytes); };
    }
    const bool evict = bytes >= kParallelBytes && bytes <= kEvictMostBytes;  // Note [staging eviction]
    landing->copy_out = [chunks, evict](void* out, size_t from_byte, size_t to_byte) {
      const size_t first = from_byte / kChunkBytes, end = piece_count(to_byte);
      copy_pieces(end - first, to_byte - from_byte, [&](size_t i) {
        const size_t k = first + i;
        const size_t begin = std::max(from_byte, k * kChunkBytes), finish = std::min(to_byte, (k + 1) * kChunkBytes);
        const char* staged = chunks[k]->data + (begin - k * kChunkBytes);
        std::memcpy(static_cast<char*>(out) + begin, staged, finish - begin);
        if (evict) evict_in_background(staged, finish - begin);  // runs once no copy needs the threads
      });
    };
    landing->release = [chunks, device] { arena(device).put(chunks, SharedMarker()); };  // landed: the GPU is done
  } else if (!chunks.empty()) {
    streamed = std::make_shared<StreamedCopy>();
    StreamedCopy* copy = streamed.get();
    copy->device = device;
    copy->bytes = bytes;
    copy->host.reset(new char[bytes]);
    copy->chunks = std::move(chunks);
    copy->first_wait = first_wait;
    copy->stream = stream;
    queue_streamed(streamed, *stream, from);
    copy->advance();
    landing->marker.device = device;
    landing->streamed = true;
    landing->poll = [streamed] { return streamed->advance(); };
    landing->copy_out = [streamed](void* out, size_t from_byte, size_t to_byte) {
      copy_bytes(static_cast<char*>(out) + from_byte, streamed->host.get() + from_byte, to_byte - from_byte);
    };
  } else {
    auto block = std::make_shared<PinnedBlock>(bytes, device);
    check(drv().cuMemcpyDtoHAsync(block->data(), from, bytes, stream->handle), "cuMemcpyDtoHAsync", device,
          [&] { return copy_text(*stream, bytes) + " through pinned staging"; });
    try {
      landing->marker = enqueue_marker(*stream, MarkerUse::kAfterOwnWork);
    } catch (...) {
      block->fence(stream);  // reused only after the copy; a failed fence leaks the block instead
      throw;
    }
    void* memory = block->data();
    landing->copy_out = [memory](void* out, size_t from_byte, size_t to_byte) {
      copy_bytes(static_cast<char*>(out) + from_byte, static_cast<const char*>(memory) + from_byte, to_byte - from_byte);
    };
    landing->release = [block]() mutable { block.reset(); };  // landed: back to the cache with no fence
  }
  if (napi_create_reference(env, destination, 1, &landing->destination) != napi_ok) {
    landing->destination = nullptr;  // the landing then only gives its staging back
  }
  try {
    track_landing(env, landing, stream);
  } catch (...) {
    // Never landed: its staging stays out of use (the copy may still write it), a streamed copy's gates open.
    if (landing->destination) napi_delete_reference(env, landing->destination);
    if (streamed) abandon_streamed(streamed);
    throw;
  }
  note_use_after_work(*src, stream, environment);
  return wrap_native(env, std::move(landing));
}

// copyLanded(landing) -> whether the staged bytes reached the JS array (landing them now if the copy is done); once
// they have, the handle is released (JS asks no more).
Napi::Value copy_landed(const Napi::CallbackInfo& info) {
  auto landing = unwrap_native<Landing>(info[0]);
  const bool landed = settle_landing(info.Env(), *landing);
  if (landed) release_native(info[0]);
  return Napi::Boolean::New(info.Env(), landed);
}

// stagingInfo() -> { capBytes, allocatedBytes, highWaterBytes, copyThreads, evictedBytes }: the cap per device, the
// staging allocated on every device, the most staging in use at once on any one device, the copy threads running, and
// the staging they evicted from the caches (Note [staging eviction]).
Napi::Value staging_info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t allocated = 0, high_water = 0;
  for (int device = 0; device < kMaxDevices; device++) {
    allocated += arena(device).allocated();
    high_water = std::max(high_water, arena(device).high_water());
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("capBytes", static_cast<double>(staging_cap()));
  out.Set("allocatedBytes", static_cast<double>(allocated));
  out.Set("highWaterBytes", static_cast<double>(high_water));
  out.Set("copyThreads", copy_threads_running());
  out.Set("evictedBytes", static_cast<double>(evicted_bytes()));
  return out;
}

}  // namespace

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kStagingExports[] = {
    {"copyPageableToDevice", "ref, ref, number, Uint8Array", entry<copy_pageable_to_device>},
    {"copyDeviceToPageable", "ref, Uint8Array, ref, number", entry<copy_device_to_pageable>},
    {"copyLanded", "ref", entry<copy_landed>},
    {"stagingInfo", "", entry<staging_info>},
};

void register_staging(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kStagingExports);
}

}  // namespace csp
