// Managed (unified) memory: cuMemAllocManaged, visible to the host as an external ArrayBuffer and to the device by
// its address; prefetch, advice and stream-ordered copies. Runs on: the JS thread that calls (every function).
//
// Note [managed lifetime]: the memory belongs to its object, which the wrapper's handle (until free()) and the
// ArrayBuffer's finalizer both hold. free() detaches the ArrayBuffer (so no view can read freed memory) and retires the object (Note [handle
// guard]: no new call may use the address); once no call is in flight the address goes to the device's synchronizer,
// which calls cuMemFree only after all work queued on the device so far is done (Note [device synchronizer]). A
// forgotten buffer is freed the same way when the last reference goes.
#include <optional>
#include <string>

#include "binding/binding.h"
#include "internal/native-object.h"
#include "binding/errors.h"
#include "internal/context.h"
#include "internal/live-counters.h"
#include "internal/loader.h"
#include "internal/memory.h"
#include "stream/stream.h"
#include "internal/submission.h"
#include "internal/synchronizer.h"

namespace csp {
namespace {

struct NativeManagedBuffer : NativeObject {
  static const napi_type_tag kTag;
  static constexpr const char* kName = "ManagedBuffer";
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  std::weak_ptr<Synchronizers> synchronizers;

  // A forgotten buffer: the last reference retires it, which queues the free (no call can be in flight then).
  ~NativeManagedBuffer() override { retire(); }

 protected:
  // Runs once, on the thread that retires the object (free(), or the last reference) or leaves it last: queues the
  // memory for release after the device's queued work. Never throws (Note [handle guard]).
  void release() override {
    if (ptr) free_managed_after_work(synchronizers, device, ptr, bytes);
  }
};
const napi_type_tag NativeManagedBuffer::kTag = {0x6373702d6d616e61ULL, 0x6765000000000009ULL};

// The CUdevice for an ordinal, or CU_DEVICE_CPU (-1) for the host.
CUdevice processor(int ordinal, int context_device) {
  if (ordinal < 0) return CU_DEVICE_CPU;
  CUdevice device = 0;
  check(drv().cuDeviceGet(&device, ordinal), "cuDeviceGet", context_device, "device " + std::to_string(ordinal));
  return device;
}

std::string span_text(const NativeManagedBuffer& object, size_t offset, size_t bytes) {
  return "device " + std::to_string(object.device) + ", bytes " + std::to_string(offset) + " to " +
         std::to_string(offset + bytes) + " of a " + std::to_string(object.bytes) + "-byte ManagedBuffer";
}

// managedAlloc(device, bytes) -> { ref, ptr, buffer }: CU_MEM_ATTACH_GLOBAL memory, any stream may use it.
Napi::Value managed_alloc(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int device = info[0].As<Napi::Number>().Int32Value();
  size_t bytes = static_cast<size_t>(info[1].As<Napi::Number>().Int64Value());
  make_current(device);
  auto object = make_native<NativeManagedBuffer>();
  object->device = device;
  object->bytes = bytes;
  object->synchronizers = synchronizers_of(env);
  CUresult r = drv().cuMemAllocManaged(&object->ptr, bytes, CU_MEM_ATTACH_GLOBAL);
  if (r != CUDA_SUCCESS) {
    object->ptr = 0;  // nothing to free
    check(r, "cuMemAllocManaged", device, "device " + std::to_string(device) + ", " + std::to_string(bytes) + " bytes requested");
  }
  live().managed_bytes += static_cast<int64_t>(bytes);
  auto holder = new std::shared_ptr<NativeManagedBuffer>(object);
  Napi::ArrayBuffer buffer;
  try {
    buffer = Napi::ArrayBuffer::New(
        env, reinterpret_cast<void*>(object->ptr), bytes,
        // Runs on: the JS thread, once the ArrayBuffer and every view are gone (or at teardown). Frees nothing
        // itself: the last reference to the object does (Note [managed lifetime]).
        [](Napi::BasicEnv, void*, std::shared_ptr<NativeManagedBuffer>* hint) { delete hint; }, holder);
  } catch (...) {
    delete holder;
    throw;
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("ref", wrap_native(env, object));
  out.Set("ptr", Napi::BigInt::New(env, static_cast<uint64_t>(object->ptr)));
  out.Set("buffer", buffer);
  return out;
}

// managedFree(ref, arrayBuffer): see Note [managed lifetime]. Returns at once.
Napi::Value managed_free(const Napi::CallbackInfo& info) {
  auto object = unwrap_native<NativeManagedBuffer>(info[0]);
  Napi::ArrayBuffer buffer = info[1].As<Napi::ArrayBuffer>();
  if (!buffer.IsDetached()) buffer.Detach();
  object->retire();
  release_native(info[0]);
  return info.Env().Undefined();
}

// managedPrefetch(ref, offset, bytes, target, stream): target a device ordinal, or -1 (CU_DEVICE_CPU) for the host.
Napi::Value managed_prefetch(const Napi::CallbackInfo& info) {
  auto object = unwrap_native<NativeManagedBuffer>(info[0]);
  size_t offset = static_cast<size_t>(info[1].As<Napi::Number>().Int64Value());
  size_t bytes = static_cast<size_t>(info[2].As<Napi::Number>().Int64Value());
  int target = info[3].As<Napi::Number>().Int32Value();
  auto stream = unwrap_native<NativeStream>(info[4]);
  Use<NativeManagedBuffer> use(*object, "ManagedBuffer", "prefetch");
  Use<NativeStream> use_stream(*stream, "Stream", "prefetch");
  check_span("prefetch", offset, bytes, object->bytes, info.Env());
  make_current(stream->device);
  auto prefetch = [offset, bytes, target](NativeManagedBuffer& managed, NativeStream& on) {
    check(drv().cuMemPrefetchAsync(managed.ptr + offset, bytes, processor(target, on.device), on.handle), "cuMemPrefetchAsync",
          on.device, span_text(managed, offset, bytes) + " to " + (target < 0 ? "the host" : "device " + std::to_string(target)));
  };
  if (Submitter* submitter = recording_for(info.Env(), *stream)) {
    record_operation(*submitter, Held<NativeStream>(std::move(stream), use_stream),
                     [m = Held<NativeManagedBuffer>(std::move(object), use), prefetch](const FailurePointer& failure,
                                                                                      const Held<NativeStream>& s) {
                       if (failure) return false;
                       make_current(s->device);
                       prefetch(*m, *s);
                       return true;
                     });
    return info.Env().Undefined();
  }
  prefetch(*object, *stream);
  return info.Env().Undefined();
}

// managedAdvise(ref, offset, bytes, advice, device): advice a CUmem_advise value; device an ordinal or -1 (the host).
Napi::Value managed_advise(const Napi::CallbackInfo& info) {
  auto object = unwrap_native<NativeManagedBuffer>(info[0]);
  size_t offset = static_cast<size_t>(info[1].As<Napi::Number>().Int64Value());
  size_t bytes = static_cast<size_t>(info[2].As<Napi::Number>().Int64Value());
  auto advice = static_cast<CUmem_advise>(info[3].As<Napi::Number>().Int32Value());
  int device = info[4].As<Napi::Number>().Int32Value();
  Use<NativeManagedBuffer> use(*object, "ManagedBuffer", "advise");
  check_span("advice", offset, bytes, object->bytes, info.Env());
  make_current(object->device);
  check(drv().cuMemAdvise(object->ptr + offset, bytes, advice, processor(device, object->device)), "cuMemAdvise", object->device,
        span_text(*object, offset, bytes));
  return info.Env().Undefined();
}

// managedCopy(stream, managed, managedOffset, other, otherOffset, toManaged, bytes): a stream-ordered copy between
// managed memory and `other`, a DeviceBuffer or another ManagedBuffer's object. Both are held for the call, so a free on
// another thread waits for it; a DeviceBuffer's use is noted before the copy is queued, as every copy's is.
Napi::Value managed_copy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_native<NativeStream>(info[0]);
  auto object = unwrap_native<NativeManagedBuffer>(info[1]);
  const size_t offset = to_size(info[2]);
  const size_t other_offset = to_size(info[4]);
  const bool to_managed = info[5].As<Napi::Boolean>().Value();
  const size_t bytes = to_size(info[6]);
  const bool other_is_device = is_native<NativeDeviceBuffer>(info[3]);
  std::shared_ptr<NativeDeviceBuffer> device_buffer;
  std::shared_ptr<NativeManagedBuffer> managed_other;
  std::optional<Use<NativeDeviceBuffer>> use_device;
  std::optional<Use<NativeManagedBuffer>> use_other;
  CUdeviceptr other = 0;
  Use<NativeManagedBuffer> use(*object, "ManagedBuffer", "copy");
  if (other_is_device) {
    device_buffer = unwrap_native<NativeDeviceBuffer>(info[3]);
    use_device.emplace(*device_buffer, "DeviceBuffer", "copy");
    check_span(to_managed ? "source" : "destination", other_offset, bytes, device_buffer->bytes, env);
    other = device_buffer->ptr + other_offset;
  } else {
    managed_other = unwrap_native<NativeManagedBuffer>(info[3]);
    if (managed_other != object) use_other.emplace(*managed_other, "ManagedBuffer", "copy");
    check_span(to_managed ? "source" : "destination", other_offset, bytes, managed_other->bytes, env);
    other = managed_other->ptr + other_offset;
  }
  Use<NativeStream> use_stream(*stream, "Stream", "stream.copy");
  check_span(to_managed ? "destination" : "source", offset, bytes, object->bytes, env);
  make_current(stream->device);
  const int environment = environment_of(env);
  if (device_buffer) note_use_before_work(*device_buffer, stream, environment);
  CUdeviceptr mine = object->ptr + offset;
  check(drv().cuMemcpyAsync(to_managed ? mine : other, to_managed ? other : mine, bytes, stream->handle),
        "cuMemcpyAsync", stream->device, span_text(*object, offset, bytes));
  if (device_buffer) note_use_after_work(*device_buffer, stream, environment);
  return env.Undefined();
}

}  // namespace

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kManagedExports[] = {
    {"managedAlloc", "number, number", entry<managed_alloc>},
    {"managedFree", "ref, ArrayBuffer", entry<managed_free>},
    {"managedPrefetch", "ref, number, number, number, ref", unordered<managed_prefetch>},
    {"managedAdvise", "ref, number, number, number, number", entry<managed_advise>},
    {"managedCopy", "ref, ref, number, ref, number, boolean, number", entry<managed_copy>},
};

void register_managed(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kManagedExports);
}

}  // namespace csp
