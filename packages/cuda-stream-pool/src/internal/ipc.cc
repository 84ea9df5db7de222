// Device memory and events shared between processes of one machine, through the driver's interprocess (IPC)
// handles. Runs on: any JS thread.
#include <cstring>

#include "binding/binding.h"
#include "internal/context.h"
#include "internal/loader.h"
#include "internal/memory.h"
#include "stream/event.h"
#include "stream/stream.h"

/* Note [interprocess memory]: which of the driver's ways to share memory between processes, and what it costs.
 * - The legacy IPC calls: cuIpcGetMemHandle turns an allocation into 64 opaque bytes, and another process opens them
 *   with cuIpcOpenMemHandle. The bytes are plain data, so any channel carries them (a message, a job's payload in a
 *   queue, a file); nothing but the driver is needed on either side.
 * - The other way, a memory pool created with a shareable handle type, exports a file descriptor, which must cross
 *   between processes over a Unix socket (SCM_RIGHTS), and every allocation from it is exported and imported again.
 *   It keeps stream-ordered allocation, at the price of a socket handshake per pool and per-pointer export data. For
 *   the long-lived buffers that processes share (allocated once, written and read many times), the legacy calls are
 *   simpler and enough, so the library takes them.
 * - The cost: cuIpcGetMemHandle refuses memory from a stream-ordered pool, so an exportable buffer comes from
 *   cuMemAlloc, which is not stream-ordered: it is allocated at once, and its free (and an importer's close,
 *   cuIpcCloseMemHandle) first waits for the work ordered before it on the freeing stream (cuStreamSynchronize)
 *   and then releases the memory (free_memory in memory/device-buffer.cc). Everything else about such a buffer is a
 *   DeviceBuffer's: copies, fills, kernel arguments, uses on other streams, views, share() to workers.
 * - Lifetimes across processes are the caller's to order: the exporter must keep the buffer until every importer has
 *   closed it (the driver leaves a mapping of freed memory undefined). The library checks what it can: the public
 *   handle names the exporting process, an import from a process that has exited is a DestroyedError before the
 *   driver is asked, and the driver's refusal of a freed or foreign handle is a CudaError.
 * - Events: an interprocess event (CU_EVENT_INTERPROCESS, without timing) exports the same way; the importer waits on
 *   it with stream.waitEvent() or event.synchronize(), and the exporter's records move it.
 */

namespace csp {
namespace {

// The 64 handle bytes from a Uint8Array (the TS side checks the length).
template <class Handle>
Handle handle_from(const Napi::Uint8Array& bytes) {
  Handle handle;
  std::memcpy(handle.reserved, bytes.Data(), sizeof handle.reserved);
  return handle;
}

template <class Handle>
Napi::Value handle_to_js(Napi::Env env, const Handle& handle) {
  Napi::Uint8Array bytes = Napi::Uint8Array::New(env, sizeof handle.reserved);
  std::memcpy(bytes.Data(), handle.reserved, sizeof handle.reserved);
  return bytes;
}

// deviceBufferExportIpc(ref) -> Uint8Array(64): the buffer's IPC memory handle (cuIpcGetMemHandle).
Napi::Value device_buffer_export_ipc(const Napi::CallbackInfo& info) {
  auto buffer = unwrap_native<NativeDeviceBuffer>(info[0]);
  Use<NativeDeviceBuffer> use(*buffer, "DeviceBuffer", "exportIpcHandle");
  make_current(buffer->device);
  CUipcMemHandle handle;
  check(drv().cuIpcGetMemHandle(&handle, buffer->ptr), "cuIpcGetMemHandle", buffer->device,
        [&] { return "a buffer of " + std::to_string(buffer->bytes) + " bytes on device " + std::to_string(buffer->device); });
  return handle_to_js(info.Env(), handle);
}

// deviceBufferOpenIpc(stream, handle, bytes) -> ref: another process's exported memory, opened on the stream's
// device (cuIpcOpenMemHandle), as a buffer whose allocation stream is `stream`. The allocation must hold `bytes`
// (cuMemGetAddressRange); else it is closed again and RangeError names both sizes.
Napi::Value device_buffer_open_ipc(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_native<NativeStream>(info[0]);
  CUipcMemHandle handle = handle_from<CUipcMemHandle>(info[1].As<Napi::Uint8Array>());
  size_t bytes = to_size(info[2]);
  Use<NativeStream> use(*stream, "Stream", "DeviceBuffer.openIpcHandle");
  const int device = stream->device;
  make_current(device);
  auto object = new_device_buffer(env, stream, bytes, MemoryOrigin::kImported);
  CUresult r = drv().cuIpcOpenMemHandle(&object->ptr, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  if (r != CUDA_SUCCESS) {
    discard_device_buffer(*object);
    check(r, "cuIpcOpenMemHandle", device, [&] {
      return "device " + std::to_string(device) + "; the exporting process may have freed the buffer, or the handle was exported by this process";
    });
  }
  CUdeviceptr base = 0;
  size_t size = 0;
  r = drv().cuMemGetAddressRange(&base, &size, object->ptr);
  if (r != CUDA_SUCCESS || base != object->ptr || size < bytes) {
    check_quiet(drv().cuIpcCloseMemHandle(object->ptr), device);
    discard_device_buffer(*object);
    check(r, "cuMemGetAddressRange", device, [&] { return "device " + std::to_string(device); });
    throw Napi::RangeError::New(env, "The exported allocation holds " + std::to_string(size) + " bytes, fewer than the handle's byteLength " +
                                         std::to_string(bytes) + ": the handle was altered, or another allocation took the exporter's address.");
  }
  return wrap_device_buffer(env, std::move(object));
}

// eventExportIpc(ref) -> Uint8Array(64): an interprocess event's handle (cuIpcGetEventHandle).
Napi::Value event_export_ipc(const Napi::CallbackInfo& info) {
  auto event = unwrap_native<NativeEvent>(info[0]);
  Use<NativeEvent> use(*event, "Event", "exportIpcHandle");
  make_current(event->device);
  CUipcEventHandle handle;
  check(drv().cuIpcGetEventHandle(&handle, event->handle), "cuIpcGetEventHandle", event->device,
        [&] { return "device " + std::to_string(event->device); });
  return handle_to_js(info.Env(), handle);
}

// eventOpenIpc(device, handle) -> ref: another process's interprocess event, opened on `device` (cuIpcOpenEventHandle).
Napi::Value event_open_ipc(const Napi::CallbackInfo& info) {
  int device = info[0].As<Napi::Number>().Int32Value();
  CUipcEventHandle handle = handle_from<CUipcEventHandle>(info[1].As<Napi::Uint8Array>());
  make_current(device);
  CUevent opened = nullptr;
  check(drv().cuIpcOpenEventHandle(&opened, handle), "cuIpcOpenEventHandle", device, [&] {
    return "device " + std::to_string(device) + "; the exporting process may have destroyed the event, or the handle was exported by this process";
  });
  return wrap_native(info.Env(), adopt_event(device, opened));
}

}  // namespace

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kIpcExports[] = {
    {"deviceBufferExportIpc", "ref", entry<device_buffer_export_ipc>},
    {"deviceBufferOpenIpc", "ref, Uint8Array, number", entry<device_buffer_open_ipc>},
    {"eventExportIpc", "ref", entry<event_export_ipc>},
    {"eventOpenIpc", "number, Uint8Array", entry<event_open_ipc>},
};

void register_ipc(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kIpcExports);
}

}  // namespace csp
