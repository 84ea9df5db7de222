// Stream-ordered memory: device buffers (cuMemAllocFromPoolAsync on the device's default pool), the process-wide
// pinned-block cache, copies through it, fills and the memory pool's counters. Runs on: any JS thread (main or
// worker); the staging of a device-to-host copy goes back from whichever thread lands it. Governed by DESIGN.md
// "Rules": memory the GPU may still use is not freed or reused until that work is done.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "addon.h"
#include "completion.h"
#include "context.h"
#include "event.h"
#include "loader.h"
#include "stream.h"

namespace csp {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

std::string device_text(int device) { return "device " + std::to_string(device); }

// "device 0, stream 12": the stream id where the driver can tell it, for error messages only.
std::string where(const StreamBox& stream) {
  unsigned long long id = 0;
  std::string out = device_text(stream.device);
  if (drv().cuStreamGetId(stream.handle, &id) == CUDA_SUCCESS) out += ", stream " + std::to_string(id);
  return out;
}

size_t to_size(const Napi::Value& value) { return static_cast<size_t>(to_uint64(value)); }

// Enters a stream's box without throwing; `alive()` says whether its handle may be passed to the driver.
// See Note [handle guard] in box.h.
class TryUse {
 public:
  explicit TryUse(StreamBox& box) : box_(box), alive_(box.enter()) {}
  ~TryUse() {
    if (alive_) box_.leave();
  }
  TryUse(const TryUse&) = delete;
  TryUse& operator=(const TryUse&) = delete;
  bool alive() const { return alive_; }

 private:
  StreamBox& box_;
  bool alive_;
};

// The device's default memory pool (cuDeviceGetDefaultMemPool), looked up once. Allocations name it explicitly, so
// another library changing the device's current pool (cuDeviceSetMemPool) does not move ours.
CUmemoryPool default_pool(int device) {
  static std::mutex mutex;
  static CUmemoryPool pools[kMaxDevices] = {};
  std::lock_guard<std::mutex> lock(mutex);
  if (!pools[device]) {
    CUdevice dev = 0;
    check(drv().cuDeviceGet(&dev, device), "cuDeviceGet", device);
    check(drv().cuDeviceGetDefaultMemPool(&pools[device], dev), "cuDeviceGetDefaultMemPool", device,
          [&] { return std::string(device_text(device)); });
  }
  return pools[device];
}

// Makes `stream` record its last work when it is destroyed (Note [stream retirement] in stream.h). The caller holds
// an entry of the stream's box (alive). Throws CudaFailure; a failed creation is retried next time.
void watch_retirement(StreamBox& stream) {
  std::call_once(stream.retired_once, [&stream] {
    CUevent event = nullptr;
    check(drv().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate", stream.device,
          [&] { return std::string(device_text(stream.device)); });
    stream.retired = event;
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Note [pinned cache]: pinned (page-locked) host memory is recycled, never freed while the GPU works: on the H200
// cuMemFreeHost waited 463 ms for a kernel on an unrelated stream and stalled other threads as long, and
// cuMemHostAlloc of 64 MiB took 47 ms (DESIGN.md "Rules"). So PinnedBuffers and staging take blocks from one
// process-wide cache, and give them back instead of freeing them:
//  - a block's holder (a PinnedBuffer's ArrayBuffer, or one staged copy) records a fence (an event) on each stream
//    that queued a copy using it, right after that copy; one fence per stream, re-recorded, so they stay few.
//  - release() hands a block back with its fences; it becomes reusable once they have all completed (checked with
//    cuEventQuery, never waited for, whenever the cache is asked for a block).
//  - give_back() is for a block the GPU is known to be done with, from a host function: a lock-free push, since a
//    host function may not take a lock that a JS thread can hold while it calls CUDA (Note [completion path]).
//  - cuMemFreeHost runs only in trim() (PinnedBuffer.trimCache()); what is cached at exit goes with the process.
// Blocks come in size classes (powers of two up to 1 MiB, then whole MiB) and a request takes the smallest idle block
// of at least its class and at most twice that, so a block is reused across slightly different sizes. Blocks are
// allocated CU_MEMHOSTALLOC_PORTABLE: usable with the context of every device.

struct Fence {
  std::weak_ptr<StreamBox> stream;  // identity only (Note [handle reuse]); never passed to the driver from here
  int device = 0;
  CUevent event = nullptr;
};

struct Block {
  void* ptr = nullptr;
  size_t size = 0;
  std::vector<Fence> fences;  // touched by the block's one holder, or by the cache after release()
  Block* next_returned = nullptr;
};

bool same_stream(const std::weak_ptr<StreamBox>& a, const std::weak_ptr<StreamBox>& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

size_t size_class(size_t bytes) {
  if (bytes <= kMiB) {
    size_t size = 4096;
    while (size < bytes) size <<= 1;
    return size;
  }
  return (bytes + kMiB - 1) / kMiB * kMiB;
}

class PinnedCache {
 public:
  // A block of at least `bytes`, from the cache when one is idle, else new (cuMemHostAlloc, slow). The device's
  // context must be current. Throws CudaFailure (CUDA_ERROR_OUT_OF_MEMORY naming the bytes).
  Block* acquire(size_t bytes, int device) {
    const size_t want = size_class(bytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      collect_locked();
      auto it = idle_.lower_bound(want);
      if (it != idle_.end() && it->first <= 2 * want) {
        Block* block = it->second;
        idle_.erase(it);
        idle_bytes_ -= block->size;
        return block;
      }
    }
    void* ptr = nullptr;
    check(drv().cuMemHostAlloc(&ptr, want, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc", device,
          [&] { return std::string(device_text(device) + ", " + std::to_string(want) + " bytes of pinned host memory (asked for " +
              std::to_string(bytes) + ")"); });
    auto* block = new Block();
    block->ptr = ptr;
    block->size = want;
    total_bytes_ += want;
    return block;
  }

  // Records that a copy using `block` was just queued on `stream` (the caller holds an entry of its box, and its
  // context is current). Throws CudaFailure; then the block must not be reused (the caller leaks it).
  void fence(Block& block, const std::shared_ptr<StreamBox>& stream) {
    std::weak_ptr<StreamBox> key = stream;
    for (Fence& f : block.fences) {
      if (!same_stream(f.stream, key)) continue;
      check(drv().cuEventRecord(f.event, stream->handle), "cuEventRecord", stream->device, [&] { return std::string(where(*stream)); });
      return;
    }
    Fence f;
    f.stream = key;
    f.device = stream->device;
    f.event = take_event(stream->device);
    CUresult r = drv().cuEventRecord(f.event, stream->handle);
    if (r != CUDA_SUCCESS) {
      put_event(f.device, f.event);
      check(r, "cuEventRecord", stream->device, [&] { return std::string(where(*stream)); });
    }
    block.fences.push_back(std::move(f));
  }

  // The holder is done with `block`; it is reused once its fences completed. Any JS thread.
  void release(Block* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    retiring_.push_back(block);
  }

  // The GPU is done with `block` and it has no fences. Lock-free: safe in a host function.
  void give_back(Block* block) {
    Block* head = returned_.load(std::memory_order_relaxed);
    do {
      block->next_returned = head;
    } while (!returned_.compare_exchange_weak(head, block, std::memory_order_release, std::memory_order_relaxed));
  }

  // cuMemFreeHost for every idle block; returns the bytes freed. May stall while the GPU works (that is why it is
  // explicit). Blocks still in use or waiting for queued copies stay.
  size_t trim() {
    std::vector<Block*> victims;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      collect_locked();
      for (auto& entry : idle_) victims.push_back(entry.second);
      idle_.clear();
      idle_bytes_ = 0;
    }
    size_t freed = 0;
    for (Block* block : victims) {
      check_quiet(drv().cuMemFreeHost(block->ptr), 0);
      freed += block->size;
      total_bytes_ -= block->size;
      delete block;
    }
    return freed;
  }

  size_t idle_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    collect_locked();
    return idle_bytes_;
  }
  size_t total_bytes() const { return total_bytes_.load(); }

 private:
  CUevent take_event(int device) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& spare = spare_events_[device];
      if (!spare.empty()) {
        CUevent event = spare.back();
        spare.pop_back();
        return event;
      }
    }
    CUevent event = nullptr;
    check(drv().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate", device, [&] { return std::string(device_text(device)); });
    return event;
  }

  void put_event(int device, CUevent event) {
    std::lock_guard<std::mutex> lock(mutex_);
    spare_events_[device].push_back(event);
  }

  // Moves returned blocks and retiring blocks whose fences all completed to idle. Holds mutex_; makes only
  // non-blocking driver calls (cuEventQuery).
  void collect_locked() {
    for (Block* block = returned_.exchange(nullptr, std::memory_order_acquire); block;) {
      Block* next = block->next_returned;
      block->next_returned = nullptr;
      add_idle_locked(block);
      block = next;
    }
    size_t kept = 0;
    for (Block* block : retiring_) {
      auto& fences = block->fences;
      fences.erase(std::remove_if(fences.begin(), fences.end(),
                                  [this](const Fence& f) {
                                    if (!make_current_quiet(f.device)) return true;  // no context: no GPU work
                                    CUresult r = check_quiet(drv().cuEventQuery(f.event), f.device);
                                    if (r == CUDA_ERROR_NOT_READY) return false;
                                    // Done, or failed: after a fault the context runs nothing more.
                                    if (r == CUDA_SUCCESS) spare_events_[f.device].push_back(f.event);
                                    return true;
                                  }),
                   fences.end());
      if (fences.empty())
        add_idle_locked(block);
      else
        retiring_[kept++] = block;
    }
    retiring_.resize(kept);
  }

  void add_idle_locked(Block* block) {
    idle_.emplace(block->size, block);
    idle_bytes_ += block->size;
  }

  std::mutex mutex_;
  std::multimap<size_t, Block*> idle_;
  std::vector<Block*> retiring_;
  std::vector<CUevent> spare_events_[kMaxDevices];
  size_t idle_bytes_ = 0;
  std::atomic<size_t> total_bytes_{0};
  std::atomic<Block*> returned_{nullptr};
};

PinnedCache& pinned_cache() {
  static PinnedCache* cache = new PinnedCache();  // never destroyed: blocks may come back during exit
  return *cache;
}

// The pinned memory of one PinnedBuffer. Its ArrayBuffer's finalizer owns the block (views outlive the wrapper);
// free() only retires the box and detaches the ArrayBuffer, which runs that finalizer. See Note [handle guard].
struct PinnedBox : Box {
  static const napi_type_tag kTag;
  static constexpr const char* kName = "PinnedBuffer";
  Block* block = nullptr;  // null once the ArrayBuffer's finalizer gave it back
  size_t bytes = 0;
  std::atomic<bool> counted{true};  // in live().pinned_bytes until free() or the ArrayBuffer's finalizer

  void uncount() {
    if (counted.exchange(false)) live().pinned_bytes -= static_cast<int64_t>(bytes);
  }
  // free(): copies are refused from now on; waits for copies being queued on other threads.
  void free() {
    retire_and_wait();
    uncount();
  }
  // The ArrayBuffer's finalizer (once): the block goes back to the cache once queued copies are done.
  void give_back() {
    free();
    if (block) pinned_cache().release(block);
    block = nullptr;
  }
};
const napi_type_tag PinnedBox::kTag = {0x6373702d70696e6eULL, 0x6564000000000005ULL};

// ---------------------------------------------------------------------------------------------------------------
// Note [buffer uses]: a device buffer remembers each stream it was used on (by box identity, never the raw handle,
// Note [handle reuse]), starting with its allocation stream; each entry has an event. The free makes its stream
// wait on every other entry before cuMemFreeAsync, so the memory is reused only after the work those streams had
// queued before the free:
//  - an entry's event is normally recorded at the free, on the entry's stream: that captures everything the stream
//    had queued by then, including work queued after the call that reported the use (a kernel launch follows
//    asKernelPointer; recordStream precedes the work it announces).
//  - a destroyed stream cannot be recorded on; its `retired` event, recorded by its destroy, stands for its last work
//    (Note [stream retirement]); watch_retirement() arms it when the entry is made.
//  - CU_STREAM_PER_THREAD names the calling thread's stream, so another thread's per-thread stream cannot be recorded
//    on from the freeing thread. For those the using thread records the entry's event itself: right after a copy or
//    fill, and for kernel arguments and recordStream in a microtask of that thread (src/device-buffer.ts). A free
//    racing with that thread's still-running JS may miss its newest work; uses from other threads need the same
//    care as any cross-thread ordering.
// Guards: a free retires the buffer's box and waits for the calls in flight (retire_and_wait), which keeps every
// other user out; `uses_mutex` follows Note [lock order] in box.h.

struct BufferUse {
  std::shared_ptr<StreamBox> stream;
  int environment = 0;      // the thread that reported the use (it alone can record on a per-thread stream)
  CUevent event = nullptr;  // created on first need; destroyed with the buffer
};

struct DeviceBufferBox : Box {
  static const napi_type_tag kTag;
  static constexpr const char* kName = "DeviceBuffer";
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  int owner_environment = 0;
  uint64_t share_id = 0;  // set once by share(), under the share registry's mutex
  std::mutex uses_mutex;
  std::vector<BufferUse> uses;  // uses[0]: the allocation stream
  ~DeviceBufferBox() override;
};
const napi_type_tag DeviceBufferBox::kTag = {0x6373702d64657662ULL, 0x7566000000000006ULL};

// Note [shared buffers]: share() gives a buffer a process-unique id; attach(id) in any thread finds the same box
// (a borrowed view: never frees, its uses delay the owner's free). Keyed by that id, never by an address; weak, so a
// forgotten owner still frees.
struct ShareRegistry {
  std::mutex mutex;
  std::unordered_map<uint64_t, std::weak_ptr<DeviceBufferBox>> boxes;
  uint64_t next_id = 1;
};
ShareRegistry& shares() {
  static ShareRegistry* registry = new ShareRegistry();  // never destroyed: boxes may die during exit
  return *registry;
}

// Reports a use of `buffer` on `stream` (Note [buffer uses]); `after_work`: the work is already queued, so a
// per-thread stream of a borrowing thread is recorded now. The caller holds an entry of both boxes,
// and the device's context is current. Throws CudaFailure.
void note_use(DeviceBufferBox& buffer, const std::shared_ptr<StreamBox>& stream, int environment, bool after_work) {
  std::lock_guard<std::mutex> lock(buffer.uses_mutex);
  BufferUse* use = nullptr;
  for (BufferUse& u : buffer.uses)
    if (u.stream == stream) use = &u;
  if (!use) {
    watch_retirement(*stream);
    buffer.uses.push_back(BufferUse{stream, environment, nullptr});
    use = &buffer.uses.back();
  }
  if (!after_work || stream->handle != CU_STREAM_PER_THREAD || environment == buffer.owner_environment) return;
  if (!use->event)
    check(drv().cuEventCreate(&use->event, CU_EVENT_DISABLE_TIMING), "cuEventCreate", stream->device,
          [&] { return std::string(where(*stream)); });
  check(drv().cuEventRecord(use->event, stream->handle), "cuEventRecord", stream->device, [&] { return std::string(where(*stream)); });
}

// What a free did: whether it was the first, and its first failure (the driver call and its result).
struct FreeOutcome {
  bool freed = false;  // false: freed before
  CUresult failure = CUDA_SUCCESS;
  const char* call = "";
};

// Frees `buffer` once, in stream order: on `target` when given and alive, else on the allocation stream when alive,
// else on the library stream; after every other entry of Note [buffer uses]. `environment` is the calling thread.
// Waits for calls in flight on other threads (retire_and_wait). When `marker` is given, records it on the free's
// stream right after the free. Never throws: failures come back in the outcome (finalizers use it too).
FreeOutcome free_memory(DeviceBufferBox& buffer, const std::shared_ptr<StreamBox>& target, int environment,
                        CUevent marker) {
  FreeOutcome out;
  if (!buffer.retire_and_wait()) return out;  // keeps every other user out from here on
  out.freed = true;
  live().device_bytes -= static_cast<int64_t>(buffer.bytes);
  const int device = buffer.device;
  auto fail = [&out, device](CUresult r, const char* call) {
    if (r != CUDA_SUCCESS && out.failure == CUDA_SUCCESS) {
      out.failure = check_quiet(r, device);
      out.call = call;
    }
    return r != CUDA_SUCCESS;
  };
  if (!make_current_quiet(device)) {
    out.failure = CUDA_ERROR_INVALID_CONTEXT;
    out.call = "cuCtxSetCurrent";
    return out;
  }
  // Retired with nothing in flight: note_use is kept out, so `uses` needs no uses_mutex here.
  // The free's stream, entered (alive) until the free is queued.
  std::optional<TryUse> free_use;
  StreamBox* free_box = nullptr;
  for (StreamBox* candidate : {target.get(), buffer.uses.empty() ? nullptr : buffer.uses[0].stream.get()}) {
    if (!candidate) continue;
    free_use.emplace(*candidate);
    if (free_use->alive()) {
      free_box = candidate;
      break;
    }
    free_use.reset();
  }
  CUstream free_stream = nullptr;
  if (free_box) {
    free_stream = free_box->handle;
  } else {
    try {
      free_stream = library_stream(device);
    } catch (const CudaFailure& f) {
      fail(f.code, "cuStreamCreate");
      return out;  // nowhere to order the free: the memory stays allocated rather than be freed too early
    }
  }
  bool ordered = true;
  for (BufferUse& use : buffer.uses) {
    if (use.stream.get() == free_box) continue;
    TryUse use_lock(*use.stream);
    const bool foreign_per_thread =
        use.stream->handle == CU_STREAM_PER_THREAD && use.environment != environment;
    if (use_lock.alive() && !foreign_per_thread) {
      if (!use.event && fail(drv().cuEventCreate(&use.event, CU_EVENT_DISABLE_TIMING), "cuEventCreate")) {
        ordered = false;
        continue;
      }
      if (fail(drv().cuEventRecord(use.event, use.stream->handle), "cuEventRecord")) ordered = false;
    }
    if (!use_lock.alive() && use.stream->retired &&
        fail(drv().cuStreamWaitEvent(free_stream, use.stream->retired, 0), "cuStreamWaitEvent"))
      ordered = false;
    if (use.event && fail(drv().cuStreamWaitEvent(free_stream, use.event, 0), "cuStreamWaitEvent")) ordered = false;
  }
  // A missing wait could free memory that another stream still uses: leak it instead.
  if (ordered) fail(drv().cuMemFreeAsync(buffer.ptr, free_stream), "cuMemFreeAsync");
  if (marker) fail(drv().cuEventRecord(marker, free_stream), "cuEventRecord");
  for (BufferUse& use : buffer.uses)
    if (use.event) check_quiet(drv().cuEventDestroy(use.event), device);
  buffer.uses.clear();  // drops the stream boxes: nothing can use the buffer any more
  return out;
}

DeviceBufferBox::~DeviceBufferBox() {
  // The owner's finalizer frees; this only catches a box that somehow was not, and only from a thread that cannot
  // record on anyone's per-thread stream (environment 0 is no thread).
  free_memory(*this, nullptr, 0, nullptr);
  if (share_id) {
    std::lock_guard<std::mutex> lock(shares().mutex);
    shares().boxes.erase(share_id);
  }
}

// The owner's External: like wrap_box, but its finalizer frees a forgotten buffer in stream order.
Napi::Value wrap_owner(Napi::Env env, std::shared_ptr<DeviceBufferBox> box) {
  auto holder = new std::shared_ptr<DeviceBufferBox>(std::move(box));
  auto external = Napi::External<std::shared_ptr<DeviceBufferBox>>::New(
      env, holder, [](Napi::BasicEnv, std::shared_ptr<DeviceBufferBox>* h) {
        // Runs on: the owner's JS thread, during GC or environment teardown. No JS; never throws.
        free_memory(**h, nullptr, (*h)->owner_environment, nullptr);
        delete h;
      });
  external.TypeTag(&DeviceBufferBox::kTag);
  return external;
}

int environment_of(Napi::Env env) { return AddonData::of(env).environment_id; }

void check_span(const char* what, size_t offset, size_t bytes, size_t size, Napi::Env env) {
  // The TS layer checked every range; this only keeps a bug there from reaching the driver.
  if (offset > size || bytes > size - offset)
    throw Napi::RangeError::New(env, std::string("cuda-stream-pool internal: ") + what + " range [" +
                                         std::to_string(offset) + ", +" + std::to_string(bytes) +
                                         ") exceeds its " + std::to_string(size) + " bytes");
}

std::string copy_text(const StreamBox& stream, size_t bytes) { return where(stream) + ", " + std::to_string(bytes) + " bytes"; }

// deviceBufferAlloc(stream, bytes) -> { box, ptr }: stream-ordered on the stream, from the device's default pool.
Napi::Value device_buffer_alloc(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_box<StreamBox>(info[0]);
  size_t bytes = to_size(info[1]);
  Use<StreamBox> use(*stream, "Stream", "alloc");
  const int device = stream->device;
  make_current(device);
  CUmemoryPool pool = default_pool(device);
  watch_retirement(*stream);
  auto box = std::make_shared<DeviceBufferBox>();
  box->device = device;
  box->bytes = bytes;
  box->owner_environment = environment_of(env);
  box->uses.push_back(BufferUse{stream, box->owner_environment, nullptr});
  CUresult r = drv().cuMemAllocFromPoolAsync(&box->ptr, bytes, pool, stream->handle);
  if (r != CUDA_SUCCESS) {
    box->retire_and_wait();  // nothing to free
    box->uses.clear();
    check(r, "cuMemAllocFromPoolAsync", device, [&] { return std::string(where(*stream) + ", " + std::to_string(bytes) + " bytes requested"); });
  }
  live().device_bytes += static_cast<int64_t>(bytes);
  Napi::Object out = Napi::Object::New(env);
  out.Set("ptr", Napi::BigInt::New(env, static_cast<uint64_t>(box->ptr)));
  out.Set("box", wrap_owner(env, std::move(box)));
  return out;
}

// deviceBufferFree(box, stream | undefined, wantMarker) -> internal event box recorded after the free, or undefined.
// Never throws after a sticky fault of the device (DESIGN.md: frees stop throwing).
Napi::Value device_buffer_free(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto buffer = unwrap_box<DeviceBufferBox>(info[0]);
  std::shared_ptr<StreamBox> target = info[1].IsUndefined() ? nullptr : unwrap_box<StreamBox>(info[1]);
  std::shared_ptr<EventBox> marker;
  if (info[2].As<Napi::Boolean>().Value() && device_fault(buffer->device) == CUDA_SUCCESS)
    marker = create_event(buffer->device, CU_EVENT_DISABLE_TIMING, false);
  FreeOutcome out = free_memory(*buffer, target, environment_of(env), marker ? marker->handle : nullptr);
  if (out.failure != CUDA_SUCCESS && device_fault(buffer->device) == CUDA_SUCCESS)
    check(out.failure, out.call, buffer->device,
          [&] { return std::string(device_text(buffer->device) + ", freeing " + std::to_string(buffer->bytes) + " bytes"); });
  if (!marker || !out.freed) return env.Undefined();
  return wrap_box(env, marker);
}

// deviceBufferUse(box, stream, afterWork, method): the buffer is (or is about to be) used on the stream; Note [buffer
// uses]. `method` names the caller in a DestroyedError.
Napi::Value device_buffer_use(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto buffer = unwrap_box<DeviceBufferBox>(info[0]);
  auto stream = unwrap_box<StreamBox>(info[1]);
  const bool after_work = info[2].As<Napi::Boolean>().Value();
  const std::string method = info[3].As<Napi::String>().Utf8Value();
  Use<DeviceBufferBox> use_buffer(*buffer, "DeviceBuffer", method.c_str());
  Use<StreamBox> use_stream(*stream, "Stream", method.c_str());
  make_current(stream->device);
  note_use(*buffer, stream, environment_of(env), after_work);
  return env.Undefined();
}

// deviceBufferShare(box) -> id (bigint) that deviceBufferAttach finds in any thread; Note [shared buffers].
Napi::Value device_buffer_share(const Napi::CallbackInfo& info) {
  auto buffer = unwrap_box<DeviceBufferBox>(info[0]);
  Use<DeviceBufferBox> use(*buffer, "DeviceBuffer", "share");
  std::lock_guard<std::mutex> lock(shares().mutex);
  if (!buffer->share_id) {
    buffer->share_id = shares().next_id++;
    shares().boxes.emplace(buffer->share_id, buffer);
  }
  return Napi::BigInt::New(info.Env(), buffer->share_id);
}

// deviceBufferAttach(id) -> { box, ptr, bytes, device }: a borrowed box of the same buffer. DestroyedError once the
// owner freed it (or forgot it and its finalizer ran).
Napi::Value device_buffer_attach(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint64_t id = to_uint64(info[0]);
  std::shared_ptr<DeviceBufferBox> buffer;
  {
    std::lock_guard<std::mutex> lock(shares().mutex);
    auto it = shares().boxes.find(id);
    if (it != shares().boxes.end()) buffer = it->second.lock();
  }
  if (!buffer) throw Destroyed{"DeviceBuffer", "attach"};
  Use<DeviceBufferBox> use(*buffer, "DeviceBuffer", "attach");
  Napi::Object out = Napi::Object::New(env);
  out.Set("ptr", Napi::BigInt::New(env, static_cast<uint64_t>(buffer->ptr)));
  out.Set("bytes", static_cast<double>(buffer->bytes));
  out.Set("device", buffer->device);
  out.Set("box", wrap_box(env, buffer));
  return out;
}

// pinnedAlloc(bytes) -> { box, buffer: ArrayBuffer over the block }: a block from the cache (Note [pinned cache]).
Napi::Value pinned_alloc(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t bytes = to_size(info[0]);
  make_current(0);  // cuMemHostAlloc needs a context; PORTABLE blocks serve every device
  auto box = std::make_shared<PinnedBox>();
  box->bytes = bytes;
  box->block = pinned_cache().acquire(bytes, 0);
  live().pinned_bytes += static_cast<int64_t>(bytes);
  auto owner = new std::shared_ptr<PinnedBox>(box);
  Napi::ArrayBuffer buffer;
  try {
    buffer = Napi::ArrayBuffer::New(
        env, box->block->ptr, bytes,
        [](Napi::BasicEnv, void*, std::shared_ptr<PinnedBox>* hint) {
          // Runs on: the JS thread that made the ArrayBuffer, once it and every view are gone (or at teardown).
          (*hint)->give_back();
          delete hint;
        },
        owner);
  } catch (...) {
    delete owner;
    box->give_back();
    throw;
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("box", wrap_box(env, box));
  out.Set("buffer", buffer);
  return out;
}

// pinnedFree(box, arrayBuffer): copies are refused from now on and the views detach; the ArrayBuffer's finalizer then
// gives the block back. Returns at once; waits only for a copy being queued on this box by another call.
Napi::Value pinned_free(const Napi::CallbackInfo& info) {
  auto box = unwrap_box<PinnedBox>(info[0]);
  box->free();
  Napi::ArrayBuffer buffer = info[1].As<Napi::ArrayBuffer>();
  if (!buffer.IsDetached()) buffer.Detach();
  return info.Env().Undefined();
}

// pinnedTrimCache() -> bytes freed (cuMemFreeHost of every idle block).
Napi::Value pinned_trim_cache(const Napi::CallbackInfo& info) {
  require_driver();
  make_current(0);
  return Napi::Number::New(info.Env(), static_cast<double>(pinned_cache().trim()));
}

// pinnedCacheInfo() -> { idleBytes, totalBytes }: the cache's blocks (idle, and all that exist).
Napi::Value pinned_cache_info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object out = Napi::Object::New(env);
  out.Set("idleBytes", static_cast<double>(load_driver().available ? pinned_cache().idle_bytes() : 0));
  out.Set("totalBytes", static_cast<double>(pinned_cache().total_bytes()));
  return out;
}

// copyDeviceToDevice(stream, dst, dstOffset, src, srcOffset, bytes)
Napi::Value copy_device_to_device(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_box<StreamBox>(info[0]);
  auto dst = unwrap_box<DeviceBufferBox>(info[1]);
  size_t dst_offset = to_size(info[2]);
  auto src = unwrap_box<DeviceBufferBox>(info[3]);
  size_t src_offset = to_size(info[4]);
  size_t bytes = to_size(info[5]);
  Use<DeviceBufferBox> use_dst(*dst, "DeviceBuffer", "copy");
  std::optional<Use<DeviceBufferBox>> use_src;
  if (src != dst) use_src.emplace(*src, "DeviceBuffer", "copy");
  Use<StreamBox> use_stream(*stream, "Stream", "copy");
  check_span("destination", dst_offset, bytes, dst->bytes, env);
  check_span("source", src_offset, bytes, src->bytes, env);
  make_current(stream->device);
  check(drv().cuMemcpyDtoDAsync(dst->ptr + dst_offset, src->ptr + src_offset, bytes, stream->handle),
        "cuMemcpyDtoDAsync", stream->device, [&] { return std::string(copy_text(*stream, bytes)); });
  const int environment = environment_of(env);
  note_use(*dst, stream, environment, true);
  if (src != dst) note_use(*src, stream, environment, true);
  return env.Undefined();
}

// copyPinnedToDevice(stream, dst, dstOffset, pinned, pinnedOffset, bytes) when ToDevice;
// copyDeviceToPinned(stream, pinned, pinnedOffset, src, srcOffset, bytes) otherwise. One body for both directions.
template <bool ToDevice>
Napi::Value copy_pinned(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_box<StreamBox>(info[0]);
  auto device = unwrap_box<DeviceBufferBox>(info[ToDevice ? 1 : 3]);
  size_t device_offset = to_size(info[ToDevice ? 2 : 4]);
  auto pinned = unwrap_box<PinnedBox>(info[ToDevice ? 3 : 1]);
  size_t pinned_offset = to_size(info[ToDevice ? 4 : 2]);
  size_t bytes = to_size(info[5]);
  Use<PinnedBox> use_pinned(*pinned, "PinnedBuffer", "copy");
  Use<DeviceBufferBox> use_device(*device, "DeviceBuffer", "copy");
  Use<StreamBox> use_stream(*stream, "Stream", "copy");
  if (ToDevice) {
    check_span("destination", device_offset, bytes, device->bytes, env);
    check_span("source", pinned_offset, bytes, pinned->bytes, env);
  } else {
    check_span("destination", pinned_offset, bytes, pinned->bytes, env);
    check_span("source", device_offset, bytes, device->bytes, env);
  }
  make_current(stream->device);
  CUdeviceptr device_ptr = device->ptr + device_offset;
  char* host = static_cast<char*>(pinned->block->ptr) + pinned_offset;
  if (ToDevice)
    check(drv().cuMemcpyHtoDAsync(device_ptr, host, bytes, stream->handle), "cuMemcpyHtoDAsync", stream->device,
          [&] { return std::string(copy_text(*stream, bytes)); });
  else
    check(drv().cuMemcpyDtoHAsync(host, device_ptr, bytes, stream->handle), "cuMemcpyDtoHAsync", stream->device,
          [&] { return std::string(copy_text(*stream, bytes)); });
  pinned_cache().fence(*pinned->block, stream);
  note_use(*device, stream, environment_of(env), true);
  return env.Undefined();
}

// Note [staging]: pageable JS memory is never handed to the driver (a pageable cuMemcpy*Async blocks the thread).
// Host to device: the source bytes are copied into a pinned block at call time (so the array may change or die
// afterwards), the block is fenced on the stream and released. Device to host: the copy lands in a pinned block
// followed by a completion marker; the JS thread that owns the array copies the block into it once the marker is
// done (a landing, Note [completion engine] in completion.h), after checking that the array's buffer was not
// detached or transferred, then gives the block back lock-free.

// Runs on: any thread, once per landing. No CUDA call, no lock.
void give_back_staging(void* block) { pinned_cache().give_back(static_cast<Block*>(block)); }

// A landing as JS holds it: an External, type-tagged.
struct LandingHolder {
  static const napi_type_tag kTag;
};
const napi_type_tag LandingHolder::kTag = {0x6373702d6c616e64ULL, 0x6564000000000007ULL};

// copyPageableToDevice(stream, dst, dstOffset, source: Uint8Array of exactly the bytes to copy)
Napi::Value copy_pageable_to_device(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_box<StreamBox>(info[0]);
  auto dst = unwrap_box<DeviceBufferBox>(info[1]);
  size_t dst_offset = to_size(info[2]);
  auto source = info[3].As<Napi::Uint8Array>();
  const size_t bytes = source.ByteLength();
  Use<DeviceBufferBox> use_dst(*dst, "DeviceBuffer", "copy");
  Use<StreamBox> use_stream(*stream, "Stream", "copy");
  check_span("destination", dst_offset, bytes, dst->bytes, env);
  make_current(stream->device);
  Block* block = pinned_cache().acquire(bytes, stream->device);
  std::memcpy(block->ptr, source.Data(), bytes);
  CUresult r = drv().cuMemcpyHtoDAsync(dst->ptr + dst_offset, block->ptr, bytes, stream->handle);
  if (r != CUDA_SUCCESS) {
    pinned_cache().release(block);  // nothing was queued on it
    check(r, "cuMemcpyHtoDAsync", stream->device, [&] { return std::string(copy_text(*stream, bytes) + " through pinned staging"); });
  }
  pinned_cache().fence(*block, stream);  // on failure the block leaks: the copy may still read it
  pinned_cache().release(block);
  note_use(*dst, stream, environment_of(env), true);
  return env.Undefined();
}

// copyDeviceToPageable(stream, destination: Uint8Array of exactly the bytes to fill, src, srcOffset) -> landing (for copyLanded)
Napi::Value copy_device_to_pageable(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_box<StreamBox>(info[0]);
  auto destination = info[1].As<Napi::Uint8Array>();
  auto src = unwrap_box<DeviceBufferBox>(info[2]);
  size_t src_offset = to_size(info[3]);
  const size_t bytes = destination.ByteLength();
  Use<DeviceBufferBox> use_src(*src, "DeviceBuffer", "copy");
  Use<StreamBox> use_stream(*stream, "Stream", "copy");
  check_span("source", src_offset, bytes, src->bytes, env);
  make_current(stream->device);
  Block* block = pinned_cache().acquire(bytes, stream->device);
  CUresult r = drv().cuMemcpyDtoHAsync(block->ptr, src->ptr + src_offset, bytes, stream->handle);
  if (r != CUDA_SUCCESS) {
    pinned_cache().release(block);
    check(r, "cuMemcpyDtoHAsync", stream->device, [&] { return std::string(copy_text(*stream, bytes) + " through pinned staging"); });
  }
  auto landing = std::make_shared<Landing>();
  landing->staging = block->ptr;
  landing->bytes = bytes;
  landing->release_staging = give_back_staging;
  landing->staging_context = block;
  try {
    landing->marker = enqueue_marker(*stream);
    if (napi_create_reference(env, destination, 1, &landing->destination) != napi_ok)
      throw CudaFailure{CUDA_ERROR_UNKNOWN, "napi_create_reference", copy_text(*stream, bytes)};
  } catch (...) {
    // The device-to-host copy is queued but nothing will land it: fence the block so it is reused only after.
    try {
      pinned_cache().fence(*block, stream);
      pinned_cache().release(block);
    } catch (...) {
      // the block leaks rather than be reused under a running copy
    }
    throw;
  }
  track_landing(env, landing);
  note_use(*src, stream, environment_of(env), true);
  auto holder = new std::shared_ptr<Landing>(std::move(landing));
  auto external = Napi::External<std::shared_ptr<Landing>>::New(
      env, holder, [](Napi::BasicEnv, std::shared_ptr<Landing>* h) { delete h; });
  external.TypeTag(&LandingHolder::kTag);
  return external;
}

// copyLanded(landing) -> whether the staged bytes reached the JS array (landing them now if the copy is done).
Napi::Value copy_landed(const Napi::CallbackInfo& info) {
  Napi::Value value = info[0];
  if (!value.IsExternal() || !value.As<Napi::Object>().CheckTypeTag(&LandingHolder::kTag))
    throw Napi::TypeError::New(info.Env(), "cuda-stream-pool internal: expected a copy landing");
  auto* landing = value.As<Napi::External<std::shared_ptr<Landing>>>().Data();
  return Napi::Boolean::New(info.Env(), settle_landing(info.Env(), **landing));
}

// memoryFill(stream, dst, offset, value, count, elementSize): count elements of 1 or 4 bytes.
Napi::Value memory_fill(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_box<StreamBox>(info[0]);
  auto dst = unwrap_box<DeviceBufferBox>(info[1]);
  size_t offset = to_size(info[2]);
  uint32_t value = info[3].As<Napi::Number>().Uint32Value();
  size_t count = to_size(info[4]);
  int element = info[5].As<Napi::Number>().Int32Value();
  Use<DeviceBufferBox> use_dst(*dst, "DeviceBuffer", "fill");
  Use<StreamBox> use_stream(*stream, "Stream", "fill");
  check_span("destination", offset, count * static_cast<size_t>(element), dst->bytes, env);
  make_current(stream->device);
  if (element == 4)
    check(drv().cuMemsetD32Async(dst->ptr + offset, value, count, stream->handle), "cuMemsetD32Async",
          stream->device, [&] { return std::string(copy_text(*stream, count * 4)); });
  else
    check(drv().cuMemsetD8Async(dst->ptr + offset, static_cast<unsigned char>(value), count, stream->handle),
          "cuMemsetD8Async", stream->device, [&] { return std::string(copy_text(*stream, count)); });
  note_use(*dst, stream, environment_of(env), true);
  return env.Undefined();
}

// Bytes as JS numbers: exact up to 2**53; the "no limit" value UINT64_MAX reads as Infinity.
double bytes_number(cuuint64_t value) {
  if (value == std::numeric_limits<cuuint64_t>::max()) return std::numeric_limits<double>::infinity();
  return static_cast<double>(value);
}

cuuint64_t pool_attribute(int device, CUmemPool_attribute which, const char* name) {
  cuuint64_t value = 0;
  check(drv().cuMemPoolGetAttribute(default_pool(device), which, &value), "cuMemPoolGetAttribute", device,
        [&] { return std::string(device_text(device) + ", " + name); });
  return value;
}

// memoryPoolInfo(device) -> { usedBytes, reservedBytes, releaseThresholdBytes } of the default pool.
Napi::Value memory_pool_info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int device = info[0].As<Napi::Number>().Int32Value();
  make_current(device);
  Napi::Object out = Napi::Object::New(env);
  out.Set("usedBytes", bytes_number(pool_attribute(device, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, "used bytes")));
  out.Set("reservedBytes",
          bytes_number(pool_attribute(device, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, "reserved bytes")));
  out.Set("releaseThresholdBytes",
          bytes_number(pool_attribute(device, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, "release threshold")));
  return out;
}

// memoryPoolSetReleaseThreshold(device, bytes | Infinity)
Napi::Value memory_pool_set_release_threshold(const Napi::CallbackInfo& info) {
  int device = info[0].As<Napi::Number>().Int32Value();
  double requested = info[1].As<Napi::Number>().DoubleValue();
  cuuint64_t value = requested == std::numeric_limits<double>::infinity() ? std::numeric_limits<cuuint64_t>::max()
                                                                          : static_cast<cuuint64_t>(requested);
  make_current(device);
  check(drv().cuMemPoolSetAttribute(default_pool(device), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &value),
        "cuMemPoolSetAttribute", device, [&] { return std::string(device_text(device) + ", release threshold " + std::to_string(value)); });
  return info.Env().Undefined();
}

// memoryPoolTrim(device, bytesToKeep)
Napi::Value memory_pool_trim(const Napi::CallbackInfo& info) {
  int device = info[0].As<Napi::Number>().Int32Value();
  size_t keep = to_size(info[1]);
  make_current(device);
  check(drv().cuMemPoolTrimTo(default_pool(device), keep), "cuMemPoolTrimTo", device,
        [&] { return std::string(device_text(device) + ", keeping " + std::to_string(keep) + " bytes"); });
  return info.Env().Undefined();
}

// ---------------------------------------------------------------------------------------------------------------
// Native baselines for src/bench/memory.ts: the same work as the TS calls, as plain driver loops. They block the
// calling thread for the whole loop (a benchmark's baseline, never library behaviour).

double elapsed_ns(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
}

// benchMemcpy(device, toDevice, bytes, iterations) -> nanoseconds for `iterations` copies of `bytes` between a
// pinned block and a device allocation on a private stream, from the first enqueue until the stream is idle.
Napi::Value bench_memcpy(const Napi::CallbackInfo& info) {
  int device = info[0].As<Napi::Number>().Int32Value();
  bool to_device = info[1].As<Napi::Boolean>().Value();
  size_t bytes = to_size(info[2]);
  int iterations = info[3].As<Napi::Number>().Int32Value();
  make_current(device);
  CUstream stream = nullptr;
  check(drv().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", device);
  CUdeviceptr dptr = 0;
  Block* block = nullptr;
  double ns = 0;
  CUresult r = drv().cuMemAllocFromPoolAsync(&dptr, bytes, default_pool(device), stream);
  try {
    check(r, "cuMemAllocFromPoolAsync", device, [&] { return std::string(std::to_string(bytes) + " bytes"); });
    block = pinned_cache().acquire(bytes, device);
    auto copy = [&] {
      return to_device ? drv().cuMemcpyHtoDAsync(dptr, block->ptr, bytes, stream)
                       : drv().cuMemcpyDtoHAsync(block->ptr, dptr, bytes, stream);
    };
    check(copy(), "cuMemcpyAsync", device);  // warm-up
    check(drv().cuStreamSynchronize(stream), "cuStreamSynchronize", device);
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; i++) check(copy(), "cuMemcpyAsync", device);
    check(drv().cuStreamSynchronize(stream), "cuStreamSynchronize", device);
    ns = elapsed_ns(start);
  } catch (...) {
    if (dptr) check_quiet(drv().cuMemFreeAsync(dptr, stream), device);
    check_quiet(drv().cuStreamSynchronize(stream), device);
    if (block) pinned_cache().release(block);
    check_quiet(drv().cuStreamDestroy(stream), device);
    throw;
  }
  check_quiet(drv().cuMemFreeAsync(dptr, stream), device);
  check_quiet(drv().cuStreamSynchronize(stream), device);
  pinned_cache().release(block);
  check_quiet(drv().cuStreamDestroy(stream), device);
  return Napi::Number::New(info.Env(), ns);
}

// benchAllocFree(device, bytes, iterations) -> nanoseconds for `iterations` cuMemAllocFromPoolAsync +
// cuMemFreeAsync pairs on a private stream (enqueue cost; the stream is synchronized after the clock stops).
Napi::Value bench_alloc_free(const Napi::CallbackInfo& info) {
  int device = info[0].As<Napi::Number>().Int32Value();
  size_t bytes = to_size(info[1]);
  int iterations = info[2].As<Napi::Number>().Int32Value();
  make_current(device);
  CUmemoryPool pool = default_pool(device);
  CUstream stream = nullptr;
  check(drv().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", device);
  double ns = 0;
  CUresult failure = CUDA_SUCCESS;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations && failure == CUDA_SUCCESS; i++) {
    CUdeviceptr dptr = 0;
    failure = drv().cuMemAllocFromPoolAsync(&dptr, bytes, pool, stream);
    if (failure == CUDA_SUCCESS) failure = drv().cuMemFreeAsync(dptr, stream);
  }
  ns = elapsed_ns(start);
  check_quiet(drv().cuStreamSynchronize(stream), device);
  check_quiet(drv().cuStreamDestroy(stream), device);
  check(failure, "cuMemAllocFromPoolAsync", device, [&] { return std::string(std::to_string(bytes) + " bytes"); });
  return Napi::Number::New(info.Env(), ns);
}

}  // namespace

void register_memory(Napi::Env env, Napi::Object exports) {
  auto add = [&](const char* name, Napi::Function fn) { exports.Set(name, fn); };
  add("deviceBufferAlloc", Napi::Function::New<js_entry<device_buffer_alloc>>(env, "deviceBufferAlloc"));
  add("deviceBufferFree", Napi::Function::New<js_entry<device_buffer_free>>(env, "deviceBufferFree"));
  add("deviceBufferUse", Napi::Function::New<js_entry<device_buffer_use>>(env, "deviceBufferUse"));
  add("deviceBufferShare", Napi::Function::New<js_entry<device_buffer_share>>(env, "deviceBufferShare"));
  add("deviceBufferAttach", Napi::Function::New<js_entry<device_buffer_attach>>(env, "deviceBufferAttach"));
  add("pinnedAlloc", Napi::Function::New<js_entry<pinned_alloc>>(env, "pinnedAlloc"));
  add("pinnedFree", Napi::Function::New<js_entry<pinned_free>>(env, "pinnedFree"));
  add("pinnedTrimCache", Napi::Function::New<js_entry<pinned_trim_cache>>(env, "pinnedTrimCache"));
  add("pinnedCacheInfo", Napi::Function::New<js_entry<pinned_cache_info>>(env, "pinnedCacheInfo"));
  add("copyDeviceToDevice", Napi::Function::New<js_entry<copy_device_to_device>>(env, "copyDeviceToDevice"));
  add("copyPinnedToDevice", Napi::Function::New<js_entry<copy_pinned<true>>>(env, "copyPinnedToDevice"));
  add("copyDeviceToPinned", Napi::Function::New<js_entry<copy_pinned<false>>>(env, "copyDeviceToPinned"));
  add("copyPageableToDevice", Napi::Function::New<js_entry<copy_pageable_to_device>>(env, "copyPageableToDevice"));
  add("copyDeviceToPageable", Napi::Function::New<js_entry<copy_device_to_pageable>>(env, "copyDeviceToPageable"));
  add("copyLanded", Napi::Function::New<js_entry<copy_landed>>(env, "copyLanded"));
  add("memoryFill", Napi::Function::New<js_entry<memory_fill>>(env, "memoryFill"));
  add("memoryPoolInfo", Napi::Function::New<js_entry<memory_pool_info>>(env, "memoryPoolInfo"));
  add("memoryPoolSetReleaseThreshold",
      Napi::Function::New<js_entry<memory_pool_set_release_threshold>>(env, "memoryPoolSetReleaseThreshold"));
  add("memoryPoolTrim", Napi::Function::New<js_entry<memory_pool_trim>>(env, "memoryPoolTrim"));
  add("benchMemcpy", Napi::Function::New<js_entry<bench_memcpy>>(env, "benchMemcpy"));
  add("benchAllocFree", Napi::Function::New<js_entry<bench_alloc_free>>(env, "benchAllocFree"));
}

}  // namespace csp
