// Device buffers: stream-ordered allocations from the device's default memory pool (cuMemAllocFromPoolAsync),
// freed in stream order and safely across streams (Note [buffer uses]), shared with other threads by id. Runs on:
// any JS thread (main or worker); a forgotten buffer is freed by its finalizer.
#include <atomic>
#include <cstdio>
#include <optional>
#include <thread>
#include <unordered_map>

#include "binding/binding.h"
#include "internal/context.h"
#include "internal/device-faults.h"
#include "internal/live-counters.h"
#include "stream/capture.h"
#include "stream/event.h"
#include "internal/loader.h"
#include "internal/memory.h"
#include "internal/lock-order.h"
#include "internal/never-throws.h"

namespace csp {

const napi_type_tag NativeDeviceBuffer::kTag = {0x6373702d64657662ULL, 0x7566000000000006ULL};

int environment_of(Napi::Env env) { return AddonData::of(env).environment_id; }

CUmemoryPool default_pool(int device) {
  static std::atomic<CUmemoryPool> pools[kMaxDevices] = {};
  CUmemoryPool pool = pools[device].load(std::memory_order_acquire);
  if (pool) return pool;
  CUdevice dev = 0;
  check(drv().cuDeviceGet(&dev, device), "cuDeviceGet", device);
  check(drv().cuDeviceGetDefaultMemPool(&pool, dev), "cuDeviceGetDefaultMemPool", device,
        [&] { return device_text(device); });
  pools[device].store(pool, std::memory_order_release);  // the same value from every thread that races here
  return pool;
}

void watch_retirement(NativeStream& stream) {
  std::call_once(stream.retired_once, [&stream] {
    CUevent event = nullptr;
    check(drv().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate", stream.device,
          [&] { return device_text(stream.device); });
    stream.retired = event;
  });
}

// Note [buffer uses]: a device buffer remembers each stream it was used on (by object identity, never the raw handle,
// Note [handle reuse]), starting with its allocation stream; each entry has an event. A buffer used on one stream is
// freed on it (cuMemFreeAsync). A buffer used on several is freed on the library stream of its device, after events
// recorded at the free on every stream it was used on, the free's own stream included: the memory is reused only
// after the work those streams had queued before the free, and no user stream gains a dependency it did not ask for
// (a free on a shared pool stream does not wait for another task's kernel):
//  - an entry's event is normally recorded at the free, on the entry's stream: that captures everything the stream
//    had queued by then, including work queued after the call that reported the use (a kernel launch follows
//    asKernelPointer; recordStream precedes the work it announces).
//  - a destroyed stream cannot be recorded on; its `retired` event, recorded by its destroy, stands for its last work
//    (Note [stream retirement]); watch_retirement() arms it when the entry is made. Once that record completed, the
//    entry is dropped the next time the buffer meets a new stream, so a long-lived buffer does not keep every
//    short-lived stream that used it.
//  - CU_STREAM_PER_THREAD names the calling thread's stream, so another thread's per-thread stream cannot be recorded
//    on from the freeing thread. For those the using thread records the entry's event itself: right after a copy or
//    fill, and for kernel arguments and recordStream in a microtask of that thread (memory/device-buffer.ts). A free
//    racing with that thread's still-running JS may miss its newest work; uses from other threads need the same
//    care as any cross-thread ordering.
//  - a stream of another device (a peer copy, recordStream) is an entry like any other: its event lives in that
//    stream's context and is recorded there, and the library stream of the buffer's device waits on it
//    (cuStreamWaitEvent takes an event of another device), so a free on one device waits for the other's reads.
// Guards: a free retires the buffer's object and waits for the calls in flight (retire_and_wait), which keeps every
// other user out; `uses_mutex` follows Note [lock order] in native-object.h.

namespace {

// Note [shared buffers]: share() gives a buffer a process-unique id; attach(id) in any thread finds the same object
// (a borrowed view: never frees, its uses delay the owner's free). Keyed by that id, never by an address; weak, so a
// forgotten owner still frees.
struct ShareRegistry {
  OrderedMutex mutex{LockLevel::kLeaf, "device buffer share registry"};
  std::unordered_map<uint64_t, std::weak_ptr<NativeDeviceBuffer>> objects;
  uint64_t next_id = 1;
};
ShareRegistry& shares() {
  static ShareRegistry* registry = new ShareRegistry();  // never destroyed: objects may die during exit
  return *registry;
}

// Drops the entries of destroyed streams whose last work is done (their `retired` record completed): a buffer that
// lives long and is used by many short-lived streams would otherwise keep every one of their objects, and an event
// each. Never the allocation stream's entry (uses[0]), which a free prefers. Only entries of `device`, whose context
// is current. Under uses_mutex.
void forget_finished_uses(NativeDeviceBuffer& buffer, int device) {
  auto finished = [device](const BufferUse& use) {
    const NativeStream& stream = *use.stream;
    return stream.device == device && stream.handle_destroyed.load(std::memory_order_acquire) && stream.retired &&
           drv().cuEventQuery(stream.retired) == CUDA_SUCCESS &&
           (!use.event || drv().cuEventQuery(use.event) == CUDA_SUCCESS);
  };
  if (buffer.uses.size() < 2) return;
  size_t kept = 1;
  for (size_t i = 1; i < buffer.uses.size(); i++) {
    BufferUse& use = buffer.uses[i];
    if (finished(use)) {
      if (use.event) check_quiet(drv().cuEventDestroy(use.event), device);
      continue;
    }
    if (kept != i) buffer.uses[kept] = std::move(use);
    kept++;
  }
  buffer.uses.resize(kept);
}

}  // namespace

void note_use(NativeDeviceBuffer& buffer, const std::shared_ptr<NativeStream>& used, int environment, bool after_work) {
  const std::shared_ptr<NativeStream>& stream = NativeStream::owner_of(used);  // Note [borrowed library streams]
  const bool record_now = after_work && stream->handle == CU_STREAM_PER_THREAD && environment != buffer.owner_environment;
  if (!record_now && buffer.last_noted.load(std::memory_order_acquire) == stream.get()) return;
  std::lock_guard<OrderedMutex> lock(buffer.uses_mutex);
  BufferUse* use = nullptr;
  for (BufferUse& u : buffer.uses)
    if (u.stream == stream) use = &u;
  if (!use) {
    // Cleared first: forgetting may drop the last reference to the stream it names, whose address a new stream could
    // then take, and a failure below must not leave it set.
    buffer.last_noted.store(nullptr, std::memory_order_release);
    forget_finished_uses(buffer, stream->device);
    watch_retirement(*stream);
    buffer.uses.push_back(BufferUse{stream, environment, nullptr});
    use = &buffer.uses.back();
  }
  buffer.last_noted.store(stream.get(), std::memory_order_release);
  if (!record_now) return;
  if (!use->event)
    check(drv().cuEventCreate(&use->event, CU_EVENT_DISABLE_TIMING), "cuEventCreate", stream->device,
          [&] { return std::string(where(*stream)); });
  check(drv().cuEventRecord(use->event, stream->handle), "cuEventRecord", stream->device, [&] { return std::string(where(*stream)); });
}

namespace {

// What a free did: whether it was the first, and its first failure (the driver call and its result).
struct FreeOutcome {
  bool freed = false;  // false: freed before
  CUresult failure = CUDA_SUCCESS;
  const char* call = "";
};

// Frees `buffer` once, in the order of `target` when given and alive, else of the allocation stream when alive, else
// of the library stream; after every other entry of Note [buffer uses]. `environment` is the calling thread. Waits
// for calls in flight on other threads (retire_and_wait). When `marker` is given, records it right after the free,
// on the stream that frees. Never throws: failures come back in the outcome (finalizers use it too).
FreeOutcome free_memory(NativeDeviceBuffer& buffer, const std::shared_ptr<NativeStream>& target, int environment,
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
  // Makes a device's context current; a failure is the outcome's (with the driver's own result) unless one came first.
  // The device whose context this free made current last (-1: none yet, or unknown after a failure): nothing else
  // changes it meanwhile, so entering it again needs no driver call (a free on one device asks once, not three times).
  int current_on = -1;
  auto enter = [&fail, &current_on](int on) {
    if (on == current_on) return true;
    current_on = -1;
    try {
      make_current(on);
      current_on = on;
      return true;
    } catch (const CudaFailure& f) {
      fail(f.code, "cuCtxSetCurrent");
    } catch (...) {
      fail(CUDA_ERROR_INVALID_CONTEXT, "cuCtxSetCurrent");
    }
    return false;
  };
  auto enter_quiet = [&current_on](int on) {
    if (on != current_on) current_on = make_current_quiet(on) ? on : -1;
    return on == current_on;
  };
  if (!enter(device)) {
    live().leaked_device_bytes += static_cast<int64_t>(buffer.bytes);
    return out;
  }
  // Retired with nothing in flight: note_use is kept out, so `uses` needs no uses_mutex here.
  // The free's own stream, entered (alive) until the free is queued.
  std::optional<TryUse> free_use;
  NativeStream* free_on = nullptr;
  NativeStream* target_object = target ? NativeStream::owner_of(target).get() : nullptr;  // as note_use records it
  for (NativeStream* candidate : {target_object, buffer.uses.empty() ? nullptr : buffer.uses[0].stream.get()}) {
    if (!candidate) continue;
    free_use.emplace(*candidate);
    if (free_use->alive()) {
      free_on = candidate;
      break;
    }
    free_use.reset();
  }
  // What the free must follow on streams other than its own: events recorded now, or a destroyed stream's last work.
  std::vector<CUevent> after;
  bool ordered = true;
  for (BufferUse& use : buffer.uses) {
    if (use.stream.get() == free_on) continue;
    // A stream of another device (a peer copy) is recorded on in its own context (Note [current context]).
    if (!enter(use.stream->device)) {
      ordered = false;
      continue;
    }
    TryUse use_lock(*use.stream);
    const bool foreign_per_thread = use.stream->handle == CU_STREAM_PER_THREAD && use.environment != environment;
    if (use_lock.alive() && !foreign_per_thread) {
      if (!use.event && fail(drv().cuEventCreate(&use.event, CU_EVENT_DISABLE_TIMING), "cuEventCreate")) {
        ordered = false;
        continue;
      }
      if (fail(drv().cuEventRecord(use.event, use.stream->handle), "cuEventRecord")) ordered = false;
    }
    if (!use_lock.alive() && use.stream->retired) after.push_back(use.stream->retired);
    if (use.event) after.push_back(use.event);
  }
  // Without its own context current, the device's library stream must not be asked for: made now, it would be made
  // in another device's context and refuse every later free of this device.
  const bool current = enter(device);
  if (!current) ordered = false;
  CUstream free_stream = free_on ? free_on->handle : nullptr;
  CUevent own = nullptr;  // the free's own stream, as one more event for the library stream to follow
  if (!after.empty() || !free_on) {
    if (free_on) {
      if (fail(drv().cuEventCreate(&own, CU_EVENT_DISABLE_TIMING), "cuEventCreate") ||
          fail(drv().cuEventRecord(own, free_stream), "cuEventRecord"))
        ordered = false;
      else
        after.push_back(own);
    }
    try {
      if (current) free_stream = library_stream(device);
    } catch (const CudaFailure& f) {
      fail(f.code, "cuStreamCreate");
      ordered = false;
    }
    for (CUevent event : after)
      if (ordered && fail(drv().cuStreamWaitEvent(free_stream, event, 0), "cuStreamWaitEvent")) ordered = false;
  }
  // A missing wait could free memory that another stream still uses: leak it instead.
  bool released = false;
  if (ordered && buffer.origin == MemoryOrigin::kPool) {
    released = !fail(drv().cuMemFreeAsync(buffer.ptr, free_stream), "cuMemFreeAsync");
  } else if (ordered && !fail(drv().cuStreamSynchronize(free_stream), "cuStreamSynchronize")) {
    // Not stream-ordered (Note [interprocess memory] in internal/ipc.cc): released once the work before it is done.
    if (buffer.origin == MemoryOrigin::kExportable)
      released = !fail(drv().cuMemFree(buffer.ptr), "cuMemFree");
    else
      released = !fail(drv().cuIpcCloseMemHandle(buffer.ptr), "cuIpcCloseMemHandle");
  }
  if (!released) live().leaked_device_bytes += static_cast<int64_t>(buffer.bytes);
  // The free is work on its stream: a later wait there must not share a ticket written before it.
  if (free_on && free_stream == free_on->handle) free_on->submissions.fetch_add(1, std::memory_order_release);
  if (marker && free_stream) fail(drv().cuEventRecord(marker, free_stream), "cuEventRecord");
  if (own) check_quiet(drv().cuEventDestroy(own), device);  // released by the driver once its record completed
  for (BufferUse& use : buffer.uses)
    if (use.event && enter_quiet(use.stream->device)) check_quiet(drv().cuEventDestroy(use.event), use.stream->device);
  // Dropping the last reference to a stream of another device below releases it in that device's context.
  for (BufferUse& use : buffer.uses)
    if (use.stream->device != device) current_on = -1;
  // Leaves the free's stream before the uses go: they may hold its last reference.
  free_use.reset();
  buffer.last_noted.store(nullptr, std::memory_order_relaxed);
  buffer.uses.clear();  // drops the stream objects: nothing can use the buffer any more
  // A free is a call on the buffer's device: that context stays current, whatever other devices' streams it visited.
  if (current_on != device) make_current_quiet(device);
  return out;
}

// A free that nobody called (the buffer's owner was collected) has no caller to throw to: its failure is counted where
// cuda.callbackFailures() reports it, unless the device has a sticky fault, which every wait reports already.
void report_unowned_free(const FreeOutcome& out, const NativeDeviceBuffer& buffer, const char* where) {
  if (out.failure == CUDA_SUCCESS || device_fault(buffer.device) != CUDA_SUCCESS) return;
  never_throws(where, [&] {
    char what[200];
    std::snprintf(what, sizeof what, "%s failed with %s freeing %zu bytes on device %d; they stay allocated", out.call,
                  result_text(out.failure).name.c_str(), buffer.bytes, buffer.device);
    callback_failures().record(where, what);
  });
}

}  // namespace

NativeDeviceBuffer::~NativeDeviceBuffer() {
  // The owner's finalizer frees; this only catches a native object that somehow was not, and only from a thread that cannot
  // record on anyone's per-thread stream (environment 0 is no thread).
  report_unowned_free(free_memory(*this, nullptr, 0, nullptr), *this, "freeing a DeviceBuffer nobody freed");
  if (share_id) {
    std::lock_guard<OrderedMutex> lock(shares().mutex);
    shares().objects.erase(share_id);
  }
}

namespace {

}  // namespace

std::shared_ptr<NativeDeviceBuffer> new_device_buffer(Napi::Env env, const std::shared_ptr<NativeStream>& stream, size_t bytes, MemoryOrigin origin) {
  watch_retirement(*NativeStream::owner_of(stream));
  auto object = make_native<NativeDeviceBuffer>();
  object->origin = origin;
  object->device = stream->device;
  object->bytes = bytes;
  object->owner_environment = environment_of(env);
  object->uses.push_back(BufferUse{NativeStream::owner_of(stream), object->owner_environment, nullptr});
  object->last_noted.store(object->uses[0].stream.get(), std::memory_order_relaxed);
  return object;
}

void discard_device_buffer(NativeDeviceBuffer& buffer) {
  buffer.retire_and_wait();  // nothing to free
  buffer.last_noted.store(nullptr, std::memory_order_relaxed);
  buffer.uses.clear();
}

Napi::Value wrap_device_buffer(Napi::Env env, std::shared_ptr<NativeDeviceBuffer> buffer) {
  live().device_bytes += static_cast<int64_t>(buffer->bytes);
  return wrap_native(env, std::move(buffer), [](const std::shared_ptr<void>& forgotten) {
    // free() releases the handle of a buffer it freed: nothing left to do, and no capture guard to consult.
    if (static_cast<NativeDeviceBuffer*>(forgotten.get())->retired()) return;
    // A forgotten buffer is freed when its owner is collected, which may come while a stream that used it captures:
    // the free and the events it records would go into that capture and invalidate it, where an explicit free() is
    // refused (Note [capture safety] in stream/capture.ts). So while any capture is open on the buffer's device, the
    // free waits, the buffer kept alive, until the last closes; it then runs on the capture guard's thread, which
    // is no JS thread: a use on an owner's per-thread stream cannot be ordered from there (as for the destructor).
    auto object = std::static_pointer_cast<NativeDeviceBuffer>(forgotten);
    outside_captures(object->device, [object, here = std::this_thread::get_id()] {
      report_unowned_free(free_memory(*object, nullptr, std::this_thread::get_id() == here ? object->owner_environment : 0, nullptr),
                          *object, "freeing a garbage-collected DeviceBuffer");
    });
  });
}

namespace {

// deviceBufferAlloc(stream, bytes, exportable) -> object: stream-ordered on the stream, from the device's default pool;
// or, exportable, from cuMemAlloc at once (Note [interprocess memory] in internal/ipc.cc), with `stream` as its
// allocation stream all the same; -1 or -2 (the capture status negated) when the stream is capturing. The address is
// read apart (deviceBufferPointer): a result object with named properties cost more than the allocation.
Napi::Value device_buffer_alloc(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_native<NativeStream>(info[0]);
  size_t bytes = to_size(info[1]);
  const bool exportable = info[2].As<Napi::Boolean>().Value();
  Use<NativeStream> use(*stream, "Stream", "DeviceBuffer.alloc");
  // Refused on a capturing stream (Note [capture safety] in stream/capture.ts): the capture status, negated. Checked
  // here, not by a second call from JS: that call was a sixth of an allocation's own cost.
  if (const int status = capture_status(*stream)) return Napi::Number::New(env, -status);
  const int device = stream->device;
  make_current(device);
  // Before the object exists: a failure to find the pool must not leave an object whose bytes were never counted.
  CUmemoryPool pool = exportable ? nullptr : default_pool(device);
  auto object = new_device_buffer(env, stream, bytes, exportable ? MemoryOrigin::kExportable : MemoryOrigin::kPool);
  const char* call = exportable ? "cuMemAlloc" : "cuMemAllocFromPoolAsync";
  CUresult r = exportable ? drv().cuMemAlloc(&object->ptr, bytes) : drv().cuMemAllocFromPoolAsync(&object->ptr, bytes, pool, stream->handle);
  if (r != CUDA_SUCCESS) {
    discard_device_buffer(*object);
    check(r, call, device, [&] { return std::string(where(*stream) + ", " + std::to_string(bytes) + " bytes requested"); });
  }
  fact_scratch(env)[0] = static_cast<uint64_t>(object->ptr);  // for kernel arguments, without a BigInt
  return wrap_device_buffer(env, std::move(object));
}

// deviceBufferPointer(ref) -> the allocation's address as a bigint; also after the free (no driver call).
Napi::Value device_buffer_pointer(const Napi::CallbackInfo& info) {
  return Napi::BigInt::New(info.Env(), static_cast<uint64_t>(unwrap_native<NativeDeviceBuffer>(info[0])->ptr));
}

// deviceBufferFree(ref, stream | undefined, wantMarker) -> internal event ref recorded after the free, or undefined;
// or, refusing the free while its stream or a stream that used the buffer is capturing, that stream's capture status
// negated. The buffer's handle is released, its address left in the fact scratch (Note [fact scratch]). Never throws
// after a sticky fault of the device: frees stop throwing then (Rules in src/internal/DESIGN.md).
Napi::Value device_buffer_free(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto buffer = unwrap_native<NativeDeviceBuffer>(info[0]);
  uint64_t* facts = fact_scratch(env);
  facts[0] = static_cast<uint64_t>(buffer->ptr);
  std::shared_ptr<NativeStream> target = info[1].IsUndefined() ? nullptr : unwrap_native<NativeStream>(info[1]);
  // A free on a capturing stream, or a use on one: the free would record an event into that capture and make another
  // stream wait on it, which the driver refuses with an isolation error that invalidates the capture. Refused before
  // anything changes (Note [capture safety] in stream/capture.ts): -status, and in the fact scratch the stream's id
  // where the native layer knows it (0 where no wrapper ever read it: the driver refuses the question during a
  // capture) and 1 when it is not the free's own stream (the given one, else the allocation stream, the first use).
  auto refuse = [&](NativeStream& capturing, int status, bool another) {
    facts[1] = capturing.info_known.load(std::memory_order_acquire) ? capturing.id : 0;
    facts[2] = another ? 1 : 0;
    make_current_quiet(buffer->device);  // the capture check may have visited another device's context
    return Napi::Number::New(env, -status);
  };
  if (target)
    if (const int status = capture_status(*target)) return refuse(target->owner(), status, false);
  if (!buffer->retired()) {
    std::lock_guard<OrderedMutex> lock(buffer->uses_mutex);
    for (size_t k = 0; k < buffer->uses.size(); k++) {
      BufferUse& use = buffer->uses[k];
      TryUse alive(*use.stream);
      if (!alive.alive()) continue;
      if (const int status = capture_status(*use.stream)) return refuse(*use.stream, status, target || k > 0);
    }
  }
  std::shared_ptr<NativeEvent> marker;
  if (info[2].As<Napi::Boolean>().Value() && device_fault(buffer->device) == CUDA_SUCCESS)
    marker = create_event(buffer->device, CU_EVENT_DISABLE_TIMING, false);
  FreeOutcome out = free_memory(*buffer, target, environment_of(env), marker ? marker->handle : nullptr);
  release_native(info[0]);  // after the free: a live object's release would free it as forgotten
  if (out.failure != CUDA_SUCCESS && device_fault(buffer->device) == CUDA_SUCCESS)
    check(out.failure, out.call, buffer->device,
          [&] { return std::string(device_text(buffer->device) + ", freeing " + std::to_string(buffer->bytes) + " bytes"); });
  if (!marker || !out.freed) return env.Undefined();
  return wrap_native(env, marker);
}

// deviceBufferUse(ref, stream, use): the buffer is (or is about to be) used on the stream; Note [buffer uses]. `use`
// (the USE_ constants of device-buffer.ts) is a kernel launch's argument (0), recordStream() (1), or the note after a launch
// on the per-thread stream (2, after its work); a number rather than the method's name, whose conversion from a JS
// string cost more than the rest of the call. Unordered (Note [deferred submission]): it only notes the use, which
// a free reads after issuing what was recorded, and a per-thread stream it records on is never recorded on.
Napi::Value device_buffer_use(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto buffer = unwrap_native<NativeDeviceBuffer>(info[0]);
  auto stream = unwrap_native<NativeStream>(info[1]);
  const uint32_t use = info[2].As<Napi::Number>().Uint32Value();
  const bool after_work = use == 2;
  // The call a DestroyedError names: the buffer's own method, or the call of another object that used it.
  Use<NativeDeviceBuffer> use_buffer(*buffer, "DeviceBuffer", use == 1 ? "recordStream" : "kernel.launch");
  Use<NativeStream> use_stream(*stream, "Stream", use == 1 ? "buffer.recordStream" : "kernel.launch");
  make_current(stream->device);
  note_use(*buffer, stream, environment_of(env), after_work);
  return env.Undefined();
}

// deviceBufferShare(ref) -> id (bigint) that deviceBufferAttach finds in any thread; Note [shared buffers].
Napi::Value device_buffer_share(const Napi::CallbackInfo& info) {
  auto buffer = unwrap_native<NativeDeviceBuffer>(info[0]);
  Use<NativeDeviceBuffer> use(*buffer, "DeviceBuffer", "share");
  std::lock_guard<OrderedMutex> lock(shares().mutex);
  if (!buffer->share_id) {
    buffer->share_id = shares().next_id++;
    shares().objects.emplace(buffer->share_id, buffer);
  }
  return Napi::BigInt::New(info.Env(), buffer->share_id);
}

// deviceBufferAttach(id) -> { ref, ptr, bytes, device }: a borrowed object of the same buffer; undefined for an id that
// share() never gave (one outside 1 to 2**64 - 1 included, never truncated onto a real id). DestroyedError once the
// owner freed it (or forgot it and its finalizer ran).
Napi::Value device_buffer_attach(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsBigInt()) return env.Undefined();
  bool lossless = false;
  uint64_t id = info[0].As<Napi::BigInt>().Uint64Value(&lossless);
  if (!lossless) return env.Undefined();
  std::shared_ptr<NativeDeviceBuffer> buffer;
  {
    std::lock_guard<OrderedMutex> lock(shares().mutex);
    if (id == 0 || id >= shares().next_id) return env.Undefined();
    auto it = shares().objects.find(id);
    if (it != shares().objects.end()) buffer = it->second.lock();
  }
  if (!buffer) throw Destroyed{"DeviceBuffer", "attach"};
  Use<NativeDeviceBuffer> use(*buffer, "DeviceBuffer", "attach");
  Napi::Object out = Napi::Object::New(env);
  out.Set("ptr", Napi::BigInt::New(env, static_cast<uint64_t>(buffer->ptr)));
  out.Set("bytes", static_cast<double>(buffer->bytes));
  out.Set("device", buffer->device);
  out.Set("ref", wrap_native(env, buffer));
  return out;
}

}  // namespace

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kDeviceBufferExports[] = {
    {"deviceBufferAlloc", "ref, number, boolean", entry<device_buffer_alloc>},
    {"deviceBufferPointer", "ref", entry<device_buffer_pointer>},
    {"deviceBufferFree", "ref, ref?, boolean", entry<device_buffer_free>},
    {"deviceBufferUse", "ref, ref, number", unordered<device_buffer_use>},
    {"deviceBufferShare", "ref", entry<device_buffer_share>},
    {"deviceBufferAttach", "bigint", entry<device_buffer_attach>},
};

void register_device_buffer(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kDeviceBufferExports);
}

}  // namespace csp
