// Internals shared by the memory files: device buffers (device-buffer.cc), pinned buffers and their cache
// (pinned-buffer.cc), copies and fills (copy.cc), pageable staging (staging.cc) and the memory pool (memory-pool.cc). Runs on:
// any JS thread (main or worker). Memory the GPU may still use is not freed or reused until that work is done.
#pragma once
#include <napi.h>
#include "internal/cuda-driver.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "internal/native-object.h"
#include "stream/stream.h"
#include "internal/lock-order.h"

namespace csp {

inline constexpr size_t kMiB = size_t{1} << 20;

inline std::string device_text(int device) { return "device " + std::to_string(device); }

// "device 0, stream 12": the stream id where the driver can tell it, for error messages only.
std::string where(const NativeStream& stream);

// "device 0, stream 12, 4096 bytes", for error messages only.
std::string copy_text(const NativeStream& stream, size_t bytes);

inline size_t to_size(const Napi::Value& value) { return static_cast<size_t>(to_uint64(value)); }

// The TS layer checked every range; this only keeps a bug there from reaching the driver. Throws RangeError.
void check_span(const char* what, size_t offset, size_t bytes, size_t size, Napi::Env env);

// The calling thread's environment id (AddonData::environment_id).
int environment_of(Napi::Env env);

// Enters a stream's object without throwing; `alive()` says whether its handle may be passed to the driver.
// See Note [handle guard] in native-object.h.
class TryUse {
 public:
  explicit TryUse(NativeStream& object) : object_(object), alive_(object.enter()) {}
  ~TryUse() {
    if (alive_) object_.leave();
  }
  TryUse(const TryUse&) = delete;
  TryUse& operator=(const TryUse&) = delete;
  bool alive() const { return alive_; }

 private:
  NativeStream& object_;
  bool alive_;
};

// The device's default memory pool (cuDeviceGetDefaultMemPool), looked up once. Allocations name it explicitly, so
// another library changing the device's current pool (cuDeviceSetMemPool) does not move ours. The device's context
// is current. Throws CudaFailure.
CUmemoryPool default_pool(int device);

// Makes `stream` record its last work when it is destroyed (Note [stream retirement] in stream.h). The caller holds
// an entry of the stream's object (alive). Throws CudaFailure; a failed creation is retried next time.
void watch_retirement(NativeStream& stream);

struct Block;  // pinned-buffer.cc: one block of the pinned cache

// The pinned memory of one PinnedBuffer. Its ArrayBuffer's finalizer owns the block (views outlive the wrapper);
// free() only retires the object and detaches the ArrayBuffer, which runs that finalizer. See Note [handle guard].
struct NativePinnedBuffer : NativeObject {
  static const napi_type_tag kTag;
  static constexpr const char* kName = "PinnedBuffer";
  Block* block = nullptr;  // null once the ArrayBuffer's finalizer gave it back
  void* data = nullptr;    // the block's memory
  size_t bytes = 0;
  std::atomic<bool> counted{true};  // in live().pinned_bytes until free() or the ArrayBuffer's finalizer

  // free(): copies are refused from now on; waits for copies being queued on other threads.
  void free();
  // The ArrayBuffer's finalizer (once): the block goes back to the cache once queued copies are done.
  void give_back();
};

// A block of the pinned cache outside any PinnedBuffer (staging's last resort). It goes back to the cache when
// destroyed and is reused once every copy fenced on it is done; a block whose fence failed is leaked instead (so is a
// PinnedBuffer's: see fence_pinned).
class PinnedBlock {
 public:
  PinnedBlock(size_t bytes, int device);  // the device's context is current; throws CudaFailure
  ~PinnedBlock();
  PinnedBlock(const PinnedBlock&) = delete;
  PinnedBlock& operator=(const PinnedBlock&) = delete;
  void* data() const;
  // A copy using the block was just queued on `stream` (held, context current). Never throws.
  void fence(const std::shared_ptr<NativeStream>& stream);

 private:
  Block* block_;
};

// Host memory the driver page-locked in place (cuMemHostRegister: Note [registered host memory] in
// memory/host-registration.cc), as a block of the pinned cache that is never reused: once released and its fences
// have completed, the cache unregisters it and lets `keep` go. `base`/`bytes`: the registered pages.
Block* registered_block(void* base, size_t bytes, int device, std::shared_ptr<void> keep);
// Hands a registered block back (its holder is done); it is unregistered once its copies are done: now, when they
// already are, else at a later use of the cache. Never throws.
void release_registered(Block* block);

// Records that a copy using `pinned` was just queued on `stream` (Note [pinned cache]): its block is reused only
// after that copy. The caller holds entries of both objects and the device's context is current. Throws CudaFailure;
// the block is then never reused nor freed, since the copy may still run.
void fence_pinned(NativePinnedBuffer& pinned, const std::shared_ptr<NativeStream>& stream);

// Note [buffer uses]: a device buffer remembers each stream it was used on (by object identity, never the raw handle,
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
//    fill, and for kernel arguments and recordStream in a microtask of that thread (memory/device-buffer.ts). A free
//    racing with that thread's still-running JS may miss its newest work; uses from other threads need the same
//    care as any cross-thread ordering.
// Guards: a free retires the buffer's object and waits for the calls in flight (retire_and_wait), which keeps every
// other user out; `uses_mutex` follows Note [lock order] in native-object.h.

struct BufferUse {
  std::shared_ptr<NativeStream> stream;
  int environment = 0;      // the thread that reported the use (it alone can record on a per-thread stream)
  CUevent event = nullptr;  // created on first need; destroyed with the buffer
};

// Where a device buffer's memory came from, which says how it goes back (Note [interprocess memory] in internal/ipc.cc).
enum class MemoryOrigin {
  kPool,       // cuMemAllocFromPoolAsync: freed in stream order (cuMemFreeAsync)
  kExportable, // cuMemAlloc, so that cuIpcGetMemHandle can export it: cuMemFree once the work before the free is done
  kImported,   // cuIpcOpenMemHandle of another process's export: cuIpcCloseMemHandle, likewise
};

struct NativeDeviceBuffer : NativeObject {
  static const napi_type_tag kTag;
  static constexpr const char* kName = "DeviceBuffer";
  MemoryOrigin origin = MemoryOrigin::kPool;
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  int owner_environment = 0;
  uint64_t share_id = 0;  // set once by share(), under the share registry's mutex
  OrderedMutex uses_mutex{LockLevel::kBufferUses, "device buffer uses"};
  std::vector<BufferUse> uses;  // uses[0]: the allocation stream
  // The stream of the entry note_use last found or made, written under uses_mutex: a use on the same stream again
  // (most are) needs no lock. Its entry holds the stream object, so the address names no other stream meanwhile.
  std::atomic<const NativeStream*> last_noted{nullptr};
  ~NativeDeviceBuffer() override;
};

// A new buffer object of `bytes` on `stream`'s device, whose allocation stream is `stream`, before its memory exists:
// the caller sets `ptr` (or, failing, calls discard_device_buffer) and then wraps it with wrap_device_buffer. The
// caller holds an entry of `stream`.
std::shared_ptr<NativeDeviceBuffer> new_device_buffer(Napi::Env env, const std::shared_ptr<NativeStream>& stream, size_t bytes, MemoryOrigin origin);
// Forgets a buffer object whose memory could not be made (nothing to free).
void discard_device_buffer(NativeDeviceBuffer& buffer);
// The owner's handle of a buffer whose memory exists: counted in the live bytes; releasing the handle while the
// buffer is live (its DeviceBuffer was collected, or the thread exits) frees it as free() would.
Napi::Value wrap_device_buffer(Napi::Env env, std::shared_ptr<NativeDeviceBuffer> buffer);

// Reports a use of `buffer` on `stream` (Note [buffer uses]); `after_work`: the work is already queued, so a
// per-thread stream of a borrowing thread is recorded now. The caller holds an entry of both objects and the device's
// context is current. Throws CudaFailure.
void note_use(NativeDeviceBuffer& buffer, const std::shared_ptr<NativeStream>& stream, int environment, bool after_work);

// The two halves of reporting a use around the call that queues the work: the use is noted before (a failure after
// queuing must not leave a free unaware of the work), and a per-thread stream of a borrowing thread records it after.
inline void note_use_before_work(NativeDeviceBuffer& buffer, const std::shared_ptr<NativeStream>& stream, int environment) {
  note_use(buffer, stream, environment, false);
}
inline void note_use_after_work(NativeDeviceBuffer& buffer, const std::shared_ptr<NativeStream>& stream, int environment) {
  if (stream->handle == CU_STREAM_PER_THREAD && environment != buffer.owner_environment)
    note_use(buffer, stream, environment, true);
}

}  // namespace csp
