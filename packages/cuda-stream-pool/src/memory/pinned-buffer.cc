// Pinned (page-locked) host memory: PinnedBuffers and the process-wide cache of pinned blocks they come from. Runs
// on: any JS thread (main or worker); a block goes back to the cache from its ArrayBuffer's finalizer.
#include <algorithm>
#include <atomic>
#include <map>
#include <vector>

#include "binding/binding.h"
#include "internal/context.h"
#include "internal/device-faults.h"
#include "internal/live-counters.h"
#include "internal/loader.h"
#include "internal/memory.h"
#include "internal/lock-order.h"

namespace csp {

// Note [pinned cache]: pinned (page-locked) host memory is recycled, never freed while the GPU works: on the H200
// cuMemFreeHost waited 463 ms for a kernel on an unrelated stream and stalled other threads as long, and
// cuMemHostAlloc of 64 MiB took 47 ms. So PinnedBuffers (and the rare staged copy that finds no staging chunk, Note
// [staging] in staging.cc) take blocks from one process-wide cache, and give them back instead of freeing them:
//  - a block's holder (a PinnedBuffer's ArrayBuffer, or one staged copy) records a fence (an event) on each stream
//    that queued a copy using it, right after that copy; one fence per stream, re-recorded, so they stay few.
//  - release() hands a block back with its fences; it becomes reusable once they have all completed (checked with
//    cuEventQuery, never waited for, whenever the cache is asked for a block).
//  - cuMemFreeHost runs only in trim() (PinnedBuffer.trimCache()); what is cached at exit goes with the process.
// Blocks come in size classes (powers of two up to 1 MiB, then whole MiB) and a request takes the smallest idle block
// of at least its class and at most twice that, so a block is reused across slightly different sizes. Blocks are
// allocated CU_MEMHOSTALLOC_PORTABLE: usable with the context of every device.

struct Fence {
  std::weak_ptr<NativeStream> stream;  // identity only (Note [handle reuse]); never passed to the driver from here
  int device = 0;
  CUevent event = nullptr;
};

struct Block {
  void* ptr = nullptr;
  size_t size = 0;
  // Added to while the block has a holder, under fences_mutex: with deferred submission, copies of one PinnedBuffer
  // on streams of two shards are fenced by two submission threads at once. The cache's alone after release().
  std::vector<Fence> fences;
  OrderedMutex fences_mutex{LockLevel::kLeaf, "pinned block fences"};
  std::atomic<bool> unfenced{false};  // a fence failed, so a queued copy may use it at any time: never reused, never freed
  // Registered host memory (Note [registered host memory]): unregistered, never reused, once its fences completed.
  bool registered = false;
  int device = 0;             // whose context registered it
  std::shared_ptr<void> keep; // the memory's owner (a JS backing store), let go once unregistered
};

// Compared with the shared_ptr itself: a weak_ptr made from it per copy would add two atomic counts on the stream's
// control block, which submission threads share.
bool same_stream(const std::weak_ptr<NativeStream>& a, const std::shared_ptr<NativeStream>& b) {
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
    std::vector<Block*> done;
    {
      std::lock_guard<OrderedMutex> lock(mutex_);
      collect_locked();
      done.swap(unregistering_);
      auto it = idle_.lower_bound(want);
      if (it != idle_.end() && it->first <= 2 * want) {
        Block* block = it->second;
        idle_.erase(it);
        idle_bytes_ -= block->size;
        unregister(done);
        return block;
      }
    }
    unregister(done);
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

  // Records that a copy using `block` was just queued on `stream` (the caller holds an entry of its object, and its
  // context is current). Throws CudaFailure; then the block must not be reused (the caller leaks it).
  void fence(Block& block, const std::shared_ptr<NativeStream>& stream) {
    auto fail = [&](CUresult r) {
      block.unfenced = true;
      check(r, "cuEventRecord", stream->device, [&] { return std::string(where(*stream)); });
    };
    // The stream's fence, if it has one: re-recorded outside the lock (two threads re-recording it both follow their
    // own copies, so the later record follows both).
    CUevent known = nullptr;
    {
      std::lock_guard<OrderedMutex> lock(block.fences_mutex);
      for (const Fence& f : block.fences)
        if (same_stream(f.stream, stream)) {
          known = f.event;
          break;
        }
    }
    if (known) {
      if (CUresult r = drv().cuEventRecord(known, stream->handle)) fail(r);
      return;
    }
    Fence f;
    f.stream = stream;
    f.device = stream->device;
    try {
      f.event = take_event(stream->device);
    } catch (...) {
      block.unfenced = true;
      throw;
    }
    if (CUresult r = drv().cuEventRecord(f.event, stream->handle)) {
      put_event(f.device, f.event);
      fail(r);
    }
    std::lock_guard<OrderedMutex> lock(block.fences_mutex);
    block.fences.push_back(std::move(f));
  }

  // The holder is done with `block`; it is reused once its fences completed. Any JS thread.
  void release(Block* block) {
    if (block->unfenced) return;  // leaked: freeing or reusing it could pull memory from under a queued copy
    std::lock_guard<OrderedMutex> lock(mutex_);
    retiring_.push_back(block);
  }

  // Moves what is done to idle, and unregisters the registered blocks that are done. Any JS thread.
  void collect() {
    std::vector<Block*> done;
    {
      std::lock_guard<OrderedMutex> lock(mutex_);
      collect_locked();
      done.swap(unregistering_);
    }
    unregister(done);
  }

  // cuMemFreeHost for every idle block; returns the bytes freed. May stall while the GPU works (that is why it is
  // explicit). Blocks still in use or waiting for queued copies stay.
  size_t trim() {
    std::vector<Block*> victims, done;
    {
      std::lock_guard<OrderedMutex> lock(mutex_);
      collect_locked();
      done.swap(unregistering_);
      for (auto& entry : idle_) victims.push_back(entry.second);
      idle_.clear();
      idle_bytes_ = 0;
    }
    unregister(done);
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
    collect();
    std::lock_guard<OrderedMutex> lock(mutex_);
    return idle_bytes_;
  }
  size_t total_bytes() const { return total_bytes_.load(); }

 private:
  CUevent take_event(int device) {
    {
      std::lock_guard<OrderedMutex> lock(mutex_);
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
    std::lock_guard<OrderedMutex> lock(mutex_);
    spare_events_[device].push_back(event);
  }

  // Moves returned blocks and retiring blocks whose fences all completed to idle. Holds mutex_; makes only
  // non-blocking driver calls (cuEventQuery).
  // Fences of other devices are queried in their own contexts; the caller's context is current again afterwards
  // (it may be about to queue a copy with the block).
  void collect_locked() {
    if (retiring_.empty()) return;
    const int caller = current_device();
    size_t kept = 0;
    for (Block* block : retiring_) {
      auto& fences = block->fences;
      fences.erase(std::remove_if(fences.begin(), fences.end(),
                                  [this](const Fence& f) {
                                    if (!make_current_quiet(f.device)) return true;  // no context: no GPU work
                                    CUresult r = check_quiet(drv().cuEventQuery(f.event), f.device);
                                    if (r == CUDA_SUCCESS) {
                                      spare_events_[f.device].push_back(f.event);
                                      return true;
                                    }
                                    // After a sticky fault the context runs nothing more: the copy will never
                                    // touch the block. Any other failure says nothing about the copy: asked again
                                    // at the next collection.
                                    return is_sticky(r);
                                  }),
                   fences.end());
      if (fences.empty() && block->registered)
        unregistering_.push_back(block);
      else if (fences.empty())
        add_idle_locked(block);
      else
        retiring_[kept++] = block;
    }
    retiring_.resize(kept);
    if (caller >= 0) make_current_quiet(caller);
  }

  // cuMemHostUnregister of registered blocks whose copies are done, outside the cache's lock (the call may wait).
  static void unregister(std::vector<Block*>& done) {
    if (done.empty()) return;
    const int caller = current_device();
    for (Block* block : done) {
      if (make_current_quiet(block->device)) check_quiet(drv().cuMemHostUnregister(block->ptr), block->device);
      delete block;  // lets the memory's owner go
    }
    done.clear();
    if (caller >= 0) make_current_quiet(caller);
  }

  void add_idle_locked(Block* block) {
    idle_.emplace(block->size, block);
    idle_bytes_ += block->size;
  }

  OrderedMutex mutex_{LockLevel::kCache, "pinned cache"};
  std::multimap<size_t, Block*> idle_;
  std::vector<Block*> retiring_;
  std::vector<Block*> unregistering_;  // registered blocks whose copies are done, to unregister outside the lock
  std::vector<CUevent> spare_events_[kMaxDevices];
  size_t idle_bytes_ = 0;
  std::atomic<size_t> total_bytes_{0};
};

PinnedCache& pinned_cache() {
  static PinnedCache* cache = new PinnedCache();  // never destroyed: blocks may come back during exit
  return *cache;
}


const napi_type_tag NativePinnedBuffer::kTag = {0x6373702d70696e6eULL, 0x6564000000000005ULL};

void NativePinnedBuffer::free() {
  retire_and_wait();
  if (counted.exchange(false)) live().pinned_bytes -= static_cast<int64_t>(bytes);
}

void NativePinnedBuffer::give_back() {
  free();
  if (block) pinned_cache().release(block);
  block = nullptr;
}

PinnedBlock::PinnedBlock(size_t bytes, int device) : block_(pinned_cache().acquire(bytes, device)) {}

PinnedBlock::~PinnedBlock() {
  never_throws("returning a pinned block to the cache", [&] { pinned_cache().release(block_); });
}

void* PinnedBlock::data() const { return block_->ptr; }

void PinnedBlock::fence(const std::shared_ptr<NativeStream>& stream) {
  try {
    pinned_cache().fence(*block_, stream);
  } catch (...) {
    // The cache then never takes the block back (Block::unfenced).
  }
}

Block* registered_block(void* base, size_t bytes, int device, std::shared_ptr<void> keep) {
  auto* block = new Block();
  block->ptr = base;
  block->size = bytes;
  block->registered = true;
  block->device = device;
  block->keep = std::move(keep);
  return block;
}

void release_registered(Block* block) {
  never_throws("releasing registered host memory", [&] {
    pinned_cache().release(block);
    pinned_cache().collect();
  });
}

void fence_pinned(NativePinnedBuffer& pinned, const std::shared_ptr<NativeStream>& stream) {
  pinned_cache().fence(*pinned.block, stream);
}

namespace {

// pinnedAlloc(bytes) -> { ref, buffer: ArrayBuffer over the block }: a block from the cache (Note [pinned cache]).
Napi::Value pinned_alloc(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t bytes = to_size(info[0]);
  // cuMemHostAlloc needs a context; a PORTABLE block serves every device, so the thread's own or any retained one.
  const int device = context_device();
  make_current(device);
  auto object = make_native<NativePinnedBuffer>();
  object->bytes = bytes;
  object->block = pinned_cache().acquire(bytes, device);
  object->data = object->block->ptr;
  live().pinned_bytes += static_cast<int64_t>(bytes);
  auto owner = new std::shared_ptr<NativePinnedBuffer>(object);
  Napi::ArrayBuffer buffer;
  try {
    buffer = Napi::ArrayBuffer::New(
        env, object->block->ptr, bytes,
        [](Napi::BasicEnv, void*, std::shared_ptr<NativePinnedBuffer>* hint) {
          // Runs on: the JS thread that made the ArrayBuffer, once it and every view are gone (or at teardown).
          never_throws("PinnedBuffer finalizer", [&] { (*hint)->give_back(); });
          delete hint;
        },
        owner);
  } catch (...) {
    delete owner;
    object->give_back();
    throw;
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("ref", wrap_native(env, object));
  out.Set("buffer", buffer);
  return out;
}

// pinnedFree(ref, arrayBuffer): copies are refused from now on and the views detach; the ArrayBuffer's finalizer then
// gives the block back. Returns at once; waits only for a copy being queued on this object by another call.
Napi::Value pinned_free(const Napi::CallbackInfo& info) {
  auto object = unwrap_native<NativePinnedBuffer>(info[0]);
  object->free();
  Napi::ArrayBuffer buffer = info[1].As<Napi::ArrayBuffer>();
  if (!buffer.IsDetached()) buffer.Detach();
  release_native(info[0]);
  return info.Env().Undefined();
}

// pinnedTrimCache() -> bytes freed (cuMemFreeHost of every idle block).
Napi::Value pinned_trim_cache(const Napi::CallbackInfo& info) {
  require_driver();
  make_current(context_device());
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

}  // namespace

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kPinnedExports[] = {
    {"pinnedAlloc", "number", entry<pinned_alloc>},
    {"pinnedFree", "ref, ArrayBuffer", entry<pinned_free>},
    {"pinnedTrimCache", "", entry<pinned_trim_cache>},
    {"pinnedCacheInfo", "", entry<pinned_cache_info>},
};

void register_pinned(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kPinnedExports);
}

}  // namespace csp
