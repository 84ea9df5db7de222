// Copies and fills in stream order between device buffers and pinned memory (pageable JS memory goes through
// staging.cc). Runs on: any JS thread (main or worker). Each call makes its driver call and records the buffers'
// uses (Note [buffer uses]); error details are built only when a call fails.
#include <algorithm>
#include <deque>
#include <optional>

#include "binding/binding.h"
#include "internal/context.h"
#include "internal/copy-kernel.h"
#include "internal/device-faults.h"
#include "internal/loader.h"
#include "internal/memory.h"
#include "internal/submission.h"

namespace csp {

std::string where(const NativeStream& stream) {
  unsigned long long id = 0;
  std::string out = device_text(stream.device);
  if (drv().cuStreamGetId(stream.handle, &id) == CUDA_SUCCESS) out += ", stream " + std::to_string(id);
  return out;
}

std::string copy_text(const NativeStream& stream, size_t bytes) {
  return where(stream) + ", " + std::to_string(bytes) + " bytes";
}

void check_span(const char* what, size_t offset, size_t bytes, size_t size, Napi::Env env) {
  if (offset > size || bytes > size - offset)
    throw Napi::RangeError::New(env, std::string("cuda-stream-pool internal: ") + what + " range [" +
                                         std::to_string(offset) + ", +" + std::to_string(bytes) +
                                         ") exceeds its " + std::to_string(size) + " bytes");
}

namespace {

// The driver call of copyDeviceToDevice, made by the calling thread or the submission thread.
void issue_device_copy(const std::shared_ptr<NativeStream>& stream, CUdeviceptr to, int to_device, CUdeviceptr from,
                       int from_device, size_t bytes) {
  make_current(stream->device);
  if (to_device == from_device) {
    check(drv().cuMemcpyDtoDAsync(to, from, bytes, stream->handle), "cuMemcpyDtoDAsync", stream->device,
          [&] { return std::string(copy_text(*stream, bytes)); });
    return;
  }
  // Between devices, in the order of a stream of either one: direct where peer access is enabled, else staged by the
  // driver through host memory (Note [peer access] in device.cc).
  check(drv().cuMemcpyPeerAsync(to, primary_context(to_device), from, primary_context(from_device), bytes, stream->handle),
        "cuMemcpyPeerAsync", stream->device, [&] {
          return copy_text(*stream, bytes) + " from device " + std::to_string(from_device) + " to device " +
                 std::to_string(to_device);
        });
}

// The driver calls of a pinned copy: the copy, then the fence that keeps the pinned block from reuse until it is done.
template <bool ToDevice>
void issue_pinned_copy(const std::shared_ptr<NativeStream>& stream, NativePinnedBuffer& pinned, CUdeviceptr device_ptr, char* host,
                       size_t bytes) {
  make_current(stream->device);
  if (ToDevice)
    check(drv().cuMemcpyHtoDAsync(device_ptr, host, bytes, stream->handle), "cuMemcpyHtoDAsync", stream->device,
          [&] { return std::string(copy_text(*stream, bytes)); });
  else
    check(drv().cuMemcpyDtoHAsync(host, device_ptr, bytes, stream->handle), "cuMemcpyDtoHAsync", stream->device,
          [&] { return std::string(copy_text(*stream, bytes)); });
  fence_pinned(pinned, stream);
}

// The driver call of memoryFill.
void issue_fill(const std::shared_ptr<NativeStream>& stream, CUdeviceptr at, uint32_t value, size_t count, int element) {
  make_current(stream->device);
  if (element == 4)
    check(drv().cuMemsetD32Async(at, value, count, stream->handle), "cuMemsetD32Async", stream->device,
          [&] { return std::string(copy_text(*stream, count * 4)); });
  else
    check(drv().cuMemsetD8Async(at, static_cast<unsigned char>(value), count, stream->handle), "cuMemsetD8Async",
          stream->device, [&] { return std::string(copy_text(*stream, count)); });
}

// copyDeviceToDevice(), operands (Note [operand scratch] in binding.h) stream, dst, dstOffset, src, srcOffset, bytes:
// the buffers may be on two devices, the stream on either of them. The uses are noted on the stream whatever device
// it is on, so each buffer's free waits for it (Note [buffer uses] in device-buffer.cc).
Napi::Value copy_device_to_device(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Operands operands(env);
  auto stream = operands.unwrap<NativeStream>(0);
  auto dst = operands.unwrap<NativeDeviceBuffer>(1);
  size_t dst_offset = operands.size(2);
  auto src = operands.unwrap<NativeDeviceBuffer>(3);
  size_t src_offset = operands.size(4);
  size_t bytes = operands.size(5);
  Use<NativeDeviceBuffer> use_dst(*dst, "DeviceBuffer", "copy");
  std::optional<Use<NativeDeviceBuffer>> use_src;
  if (src != dst) use_src.emplace(*src, "DeviceBuffer", "copy");
  Use<NativeStream> use_stream(*stream, "Stream", "copy");
  check_span("destination", dst_offset, bytes, dst->bytes, env);
  check_span("source", src_offset, bytes, src->bytes, env);
  const int environment = operands.environment();
  Submitter* submitter = recording_for(env, *stream);
  make_current(stream->device);
  note_use_before_work(*dst, stream, environment);
  if (src != dst) note_use_before_work(*src, stream, environment);
  const CUdeviceptr to = dst->ptr + dst_offset, from = src->ptr + src_offset;
  // Reading another device's memory depends on that device's work (Note [cross-device dependencies]).
  const bool reads_other_device = src->device != stream->device;
  if (submitter) {
    // The operation takes this call's entries and references (an owned stream: nothing to note after the work).
    if (reads_other_device) stream->owner().dependencies.add(device_bit(src->device), stream->device);
    Held<NativeDeviceBuffer> from_buffer =
        use_src ? Held<NativeDeviceBuffer>(std::move(src), *use_src) : Held<NativeDeviceBuffer>(src, "DeviceBuffer", "copy");
    record_operation(*submitter, Held<NativeStream>(std::move(stream), use_stream),
                     [d = Held<NativeDeviceBuffer>(std::move(dst), use_dst), f = std::move(from_buffer), to, from, bytes](
                         const FailurePointer& failure, const Held<NativeStream>& s) {
                       if (failure) return false;
                       issue_device_copy(s.pointer(), to, d->device, from, f->device, bytes);
                       return true;
                     });
    return env.Undefined();
  }
  issue_device_copy(stream, to, dst->device, from, src->device, bytes);
  note_use_after_work(*dst, stream, environment);
  if (src != dst) note_use_after_work(*src, stream, environment);
  if (reads_other_device) stream->owner().dependencies.add(device_bit(src->device), stream->device);
  return env.Undefined();
}

// copyPinnedToDevice(), operands (Note [operand scratch] in binding.h) stream, dst, dstOffset, pinned, pinnedOffset,
// bytes, when ToDevice; copyDeviceToPinned(), operands stream, pinned, pinnedOffset, src, srcOffset, bytes, otherwise.
// One body for both directions.
template <bool ToDevice>
Napi::Value copy_pinned(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Operands operands(env);
  auto stream = operands.unwrap<NativeStream>(0);
  auto device = operands.borrow<NativeDeviceBuffer>(ToDevice ? 1 : 3);
  size_t device_offset = operands.size(ToDevice ? 2 : 4);
  auto pinned = operands.borrow<NativePinnedBuffer>(ToDevice ? 3 : 1);
  size_t pinned_offset = operands.size(ToDevice ? 4 : 2);
  size_t bytes = operands.size(5);
  Use<NativePinnedBuffer> use_pinned(*pinned, "PinnedBuffer", "copy");
  Use<NativeDeviceBuffer> use_device(*device, "DeviceBuffer", "copy");
  Use<NativeStream> use_stream(*stream, "Stream", "copy");
  if (ToDevice) {
    check_span("destination", device_offset, bytes, device->bytes, env);
    check_span("source", pinned_offset, bytes, pinned->bytes, env);
  } else {
    check_span("destination", pinned_offset, bytes, pinned->bytes, env);
    check_span("source", device_offset, bytes, device->bytes, env);
  }
  const int environment = operands.environment();
  Submitter* submitter = recording_for(env, *stream);
  make_current(stream->device);
  note_use_before_work(*device, stream, environment);
  CUdeviceptr device_ptr = device->ptr + device_offset;
  char* host = static_cast<char*>(pinned->data) + pinned_offset;
  if (submitter) {
    // The operation takes this call's entries and references (an owned stream: nothing to note after the work).
    record_operation(*submitter, Held<NativeStream>(std::move(stream), use_stream),
                     [d = Held<NativeDeviceBuffer>(device.shared(), use_device),
                      p = Held<NativePinnedBuffer>(pinned.shared(), use_pinned), device_ptr, host,
                      bytes](const FailurePointer& failure, const Held<NativeStream>& s) {
                       if (failure) return false;
                       issue_pinned_copy<ToDevice>(s.pointer(), *p, device_ptr, host, bytes);
                       return true;
                     });
    return env.Undefined();
  }
  issue_pinned_copy<ToDevice>(stream, *pinned, device_ptr, host, bytes);
  note_use_after_work(*device, stream, environment);
  return env.Undefined();
}

// memoryFill(stream, dst, offset, value, count, elementSize): count elements of 1 or 4 bytes.
Napi::Value memory_fill(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_native<NativeStream>(info[0]);
  auto dst = unwrap_native<NativeDeviceBuffer>(info[1]);
  size_t offset = to_size(info[2]);
  uint32_t value = info[3].As<Napi::Number>().Uint32Value();
  size_t count = to_size(info[4]);
  int element = info[5].As<Napi::Number>().Int32Value();
  Use<NativeDeviceBuffer> use_dst(*dst, "DeviceBuffer", "fill");
  Use<NativeStream> use_stream(*stream, "Stream", "fill");
  // count * element could wrap: compared in elements first.
  if (count > dst->bytes / static_cast<size_t>(element)) check_span("destination", offset, dst->bytes + 1, dst->bytes, env);
  check_span("destination", offset, count * static_cast<size_t>(element), dst->bytes, env);
  const int environment = environment_of(env);
  Submitter* submitter = recording_for(env, *stream);
  make_current(stream->device);
  note_use_before_work(*dst, stream, environment);
  const CUdeviceptr at = dst->ptr + offset;
  if (submitter) {
    // The operation takes this call's entries and references (an owned stream: nothing to note after the work).
    record_operation(*submitter, Held<NativeStream>(std::move(stream), use_stream),
                     [d = Held<NativeDeviceBuffer>(std::move(dst), use_dst), at, value, count,
                      element](const FailurePointer& failure, const Held<NativeStream>& s) {
                       if (failure) return false;
                       issue_fill(s.pointer(), at, value, count, element);
                       return true;
                     });
    return env.Undefined();
  }
  issue_fill(stream, at, value, count, element);
  note_use_after_work(*dst, stream, environment);
  return env.Undefined();
}

// Note [batched copies]: stream.copyBatch() queues many copies in one driver call, cuMemcpyBatchAsync (CUDA 12.8 and
// later; the 12.8 ABI has a failIdx output that 13.0 dropped, and the loader resolves whichever the driver has). The
// copies of a batch run in stream order as a whole but in any order among themselves, as the driver documents. Each
// source is read in stream order, except pageable JS memory, which the driver reads before the call returns
// (CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL): the bytes as they are at the call, as staging would take them, with
// no staging. A batch of small pieces between device and pinned memory goes to the library's copy kernel instead,
// one launch for them all (Note [copy kernel] in internal/copy-kernel.cc), whatever the driver's version. Where
// neither can be used (an older driver, or the legacy default stream, which cuMemcpyBatchAsync refuses), copyBatch
// returns false having done nothing, and stream/copy.ts queues the copies one by one instead.
enum BatchOperand : uint8_t { kBatchDevice = 0, kBatchPinned = 1, kBatchPageable = 2, kBatchRegistered = 3 };

// copyBatch(stream, operands, kinds, layout) -> whether the batch was queued. `operands` holds each memory the
// batch names once: a DeviceBuffer or PinnedBuffer ref, or (a source only) a Uint8Array over a whole pageable buffer;
// kinds[j] says which operands[j] is (BatchOperand: a registered host buffer's ref is a PinnedBuffer's, told apart for
// the copy kernel). Copy i is layout[5i..5i+4]: the destination's and the source's operand index, their offsets and
// the bytes. Checked by stream/copy.ts: at least one side of each copy is a DeviceBuffer on the stream's device, and
// no copy is empty. Naming each memory once keeps a batch of many pieces of few buffers to a few unwraps and entries.
Napi::Value copy_batch(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_native<NativeStream>(info[0]);
  auto operands = info[1].As<Napi::Array>();
  auto kinds = info[2].As<Napi::Uint8Array>();
  auto layout = info[3].As<Napi::TypedArray>().As<Napi::Float64Array>();
  const Driver& driver = drv();
  const size_t count = layout.ElementLength() / 5;
  const size_t operand_count = kinds.ElementLength();
  const bool driver_batch = (driver.cuMemcpyBatchAsync || driver.cuMemcpyBatchAsync_v12080) && stream->handle != CU_STREAM_LEGACY;
  // Whether the pieces suit the copy kernel, as far as their count and kinds tell before anything is entered.
  bool kernel_batch = count >= kCopyKernelMinPieces && count <= kCopyKernelMaxPieces;
  bool registered = false;
  for (size_t j = 0; j < operand_count; j++) {
    if (kinds[j] == kBatchPageable) kernel_batch = false;
    if (kinds[j] == kBatchRegistered) registered = true;
  }
  if (!driver_batch && !kernel_batch) return Napi::Boolean::New(env, false);
  Use<NativeStream> use_stream(*stream, "Stream", "copyBatch");
  // Each operand entered once, with where its bytes start and how many there are.
  struct Memory {
    CUdeviceptr base = 0;
    size_t bytes = 0;
    bool pageable = false;
  };
  std::vector<Memory> memories(operand_count);
  std::vector<std::shared_ptr<NativeDeviceBuffer>> devices;
  std::vector<std::shared_ptr<NativePinnedBuffer>> pinned;
  std::deque<Use<NativeDeviceBuffer>> device_uses;
  std::deque<Use<NativePinnedBuffer>> pinned_uses;
  for (size_t j = 0; j < operand_count; j++) {
    const Napi::Value operand = operands.Get(static_cast<uint32_t>(j));
    Memory& memory = memories[j];
    switch (kinds[j]) {
      case kBatchDevice: {
        auto buffer = unwrap_native<NativeDeviceBuffer>(operand);
        device_uses.emplace_back(*buffer, "DeviceBuffer", "copyBatch");
        memory = {buffer->ptr, buffer->bytes, false};
        if (buffer->device != stream->device) kernel_batch = false;
        devices.push_back(std::move(buffer));
        break;
      }
      case kBatchRegistered:
      case kBatchPinned: {
        auto buffer = unwrap_native<NativePinnedBuffer>(operand);
        pinned_uses.emplace_back(*buffer, "PinnedBuffer", "copyBatch");
        memory = {reinterpret_cast<CUdeviceptr>(buffer->data), buffer->bytes, false};
        pinned.push_back(std::move(buffer));
        break;
      }
      default: {
        auto view = operand.As<Napi::Uint8Array>();
        memory = {reinterpret_cast<CUdeviceptr>(view.Data()), view.ByteLength(), true};
      }
    }
  }
  std::vector<CUdeviceptr> dsts(count), srcs(count);
  std::vector<size_t> sizes(count);
  std::vector<CUmemcpyAttributes> attributes;
  std::vector<size_t> attribute_starts;
  size_t total = 0;
  for (size_t i = 0; i < count; i++) {
    const double* entry = &layout[5 * i];
    const Memory& dst = memories.at(static_cast<size_t>(entry[0]));
    const Memory& src = memories.at(static_cast<size_t>(entry[1]));
    const size_t dst_offset = static_cast<size_t>(entry[2]), src_offset = static_cast<size_t>(entry[3]);
    const size_t bytes = static_cast<size_t>(entry[4]);
    check_span("destination", dst_offset, bytes, dst.bytes, env);
    check_span("source", src_offset, bytes, src.bytes, env);
    dsts[i] = dst.base + dst_offset;
    srcs[i] = src.base + src_offset;
    sizes[i] = bytes;
    total += bytes;
    if (bytes > kCopyKernelMaxPieceBytes) kernel_batch = false;
    // One attribute entry for each run of copies that read their sources alike.
    const CUmemcpySrcAccessOrder order = src.pageable ? CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL : CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    if (attributes.empty() || attributes.back().srcAccessOrder != order) {
      CUmemcpyAttributes attribute{};
      attribute.srcAccessOrder = order;
      attributes.push_back(attribute);
      attribute_starts.push_back(i);
    }
  }
  if (count == 0) return Napi::Boolean::New(env, true);
  const int environment = environment_of(env);
  make_current(stream->device);
  CUfunction kernel = nullptr;
  if (kernel_batch && (!registered || registered_memory_addressable(stream->device))) kernel = copy_kernel(stream->device);
  if (!kernel && !driver_batch) return Napi::Boolean::New(env, false);
  for (auto& buffer : devices) note_use_before_work(*buffer, stream, environment);
  if (kernel) {
    std::vector<CopyPiece> pieces(count);
    for (size_t i = 0; i < count; i++) pieces[i] = {dsts[i], srcs[i], sizes[i]};
    const CUresult launched = launch_copy_kernel(kernel, stream->handle, pieces);
    // A refused launch that leaves the device usable (out of resources, say) queued nothing: the copies go the
    // driver's way instead. A sticky fault is the device's, and is reported.
    if (launched == CUDA_SUCCESS || is_sticky(launched)) {
      check(launched, "cuLaunchKernel", stream->device, [&] {
        return where(*stream) + ", the library's copy kernel for a batch of " + std::to_string(count) + " copies, " +
               std::to_string(total) + " bytes";
      });
      for (auto& buffer : pinned) fence_pinned(*buffer, stream);
      for (auto& buffer : devices) note_use_after_work(*buffer, stream, environment);
      return Napi::Boolean::New(env, true);
    }
    if (!driver_batch) return Napi::Boolean::New(env, false);
  }
  CUresult r;
  if (driver.cuMemcpyBatchAsync)
    r = driver.cuMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), count, attributes.data(),
                                  attribute_starts.data(), attributes.size(), stream->handle);
  else {
    size_t failed = 0;
    r = driver.cuMemcpyBatchAsync_v12080(dsts.data(), srcs.data(), sizes.data(), count, attributes.data(),
                                         attribute_starts.data(), attributes.size(), &failed, stream->handle);
  }
  check(r, "cuMemcpyBatchAsync", stream->device, [&] {
    return where(*stream) + ", a batch of " + std::to_string(count) + " copies, " + std::to_string(total) + " bytes";
  });
  for (auto& buffer : pinned) fence_pinned(*buffer, stream);
  for (auto& buffer : devices) note_use_after_work(*buffer, stream, environment);
  return Napi::Boolean::New(env, true);
}

// copy2D(stream, dst, dstKind, dstOffset, dstPitch, src, srcKind, srcOffset, srcPitch, widthBytes, height): `height`
// rows of `widthBytes` bytes, each side's rows `pitch` bytes apart from `offset`; each side a DeviceBuffer (kind 0)
// or a PinnedBuffer or registered host memory (kind 1). Checked by stream/copy.ts; issued by the calling thread
// (after what it recorded, with deferred submission).
Napi::Value copy_2d(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_native<NativeStream>(info[0]);
  const bool dst_device = info[2].As<Napi::Number>().Int32Value() == kBatchDevice;
  const size_t dst_offset = to_size(info[3]), dst_pitch = to_size(info[4]);
  const bool src_device = info[6].As<Napi::Number>().Int32Value() == kBatchDevice;
  const size_t src_offset = to_size(info[7]), src_pitch = to_size(info[8]);
  const size_t width = to_size(info[9]), height = to_size(info[10]);
  Use<NativeStream> use_stream(*stream, "Stream", "copy2D");
  std::shared_ptr<NativeDeviceBuffer> device_side[2];
  std::shared_ptr<NativePinnedBuffer> pinned_side[2];
  std::optional<Use<NativeDeviceBuffer>> device_use[2];
  std::optional<Use<NativePinnedBuffer>> pinned_use[2];
  CUDA_MEMCPY2D copy{};
  copy.WidthInBytes = width;
  copy.Height = height;
  const size_t extent_dst = height == 0 ? 0 : (height - 1) * dst_pitch + width;
  const size_t extent_src = height == 0 ? 0 : (height - 1) * src_pitch + width;
  for (int side = 0; side < 2; side++) {
    const bool first = side == 0;
    const bool device = first ? dst_device : src_device;
    const size_t offset = side == 0 ? dst_offset : src_offset, extent = side == 0 ? extent_dst : extent_src;
    const char* what = side == 0 ? "destination" : "source";
    CUmemorytype type;
    CUdeviceptr address = 0;
    void* host = nullptr;
    if (device) {
      device_side[side] = unwrap_native<NativeDeviceBuffer>(info[first ? 1 : 5]);
      if (side == 1 && device_side[1] == device_side[0]) {
        check_span(what, offset, extent, device_side[1]->bytes, env);
        copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        copy.srcDevice = device_side[1]->ptr + offset;
        copy.srcPitch = src_pitch;
        device_side[1] = nullptr;  // one buffer: entered, and its use noted, once
        continue;
      }
      device_use[side].emplace(*device_side[side], "DeviceBuffer", "copy2D");
      check_span(what, offset, extent, device_side[side]->bytes, env);
      type = CU_MEMORYTYPE_DEVICE;
      address = device_side[side]->ptr + offset;
    } else {
      pinned_side[side] = unwrap_native<NativePinnedBuffer>(info[first ? 1 : 5]);
      pinned_use[side].emplace(*pinned_side[side], "PinnedBuffer", "copy2D");
      check_span(what, offset, extent, pinned_side[side]->bytes, env);
      type = CU_MEMORYTYPE_HOST;
      host = static_cast<char*>(pinned_side[side]->data) + offset;
    }
    if (side == 0) {
      copy.dstMemoryType = type;
      copy.dstDevice = address;
      copy.dstHost = host;
      copy.dstPitch = dst_pitch;
    } else {
      copy.srcMemoryType = type;
      copy.srcDevice = address;
      copy.srcHost = host;
      copy.srcPitch = src_pitch;
    }
  }
  if (width == 0 || height == 0) return env.Undefined();
  const int environment = environment_of(env);
  make_current(stream->device);
  for (auto& buffer : device_side)
    if (buffer) note_use_before_work(*buffer, stream, environment);
  check(drv().cuMemcpy2DAsync(&copy, stream->handle), "cuMemcpy2DAsync", stream->device, [&] {
    return where(*stream) + ", " + std::to_string(height) + " rows of " + std::to_string(width) + " bytes (pitches " +
           std::to_string(dst_pitch) + " and " + std::to_string(src_pitch) + ")";
  });
  for (auto& pinned : pinned_side)
    if (pinned) fence_pinned(*pinned, stream);
  for (auto& buffer : device_side)
    if (buffer) note_use_after_work(*buffer, stream, environment);
  return env.Undefined();
}

}  // namespace

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kCopyExports[] = {
    {"copyDeviceToDevice", "", unordered<copy_device_to_device>},
    {"copyPinnedToDevice", "", unordered<copy_pinned<true>>},
    {"copyDeviceToPinned", "", unordered<copy_pinned<false>>},
    {"memoryFill", "ref, ref, number, number, number, number", unordered<memory_fill>},
    {"copyBatch", "ref, array, Uint8Array, object", entry<copy_batch>},
    {"copy2D", "ref, ref, number, number, number, ref, number, number, number, number, number", entry<copy_2d>},
};

void register_copy(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kCopyExports);
}

}  // namespace csp
