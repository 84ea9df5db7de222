// Keeps device-wide calls of every thread away from graph captures open on the same device. See Note [capture guard].
//
// Note [capture guard]: some calls, made by any thread, invalidate every capture open on their device: a device-wide
// synchronize (cuCtxSynchronize), and calls that synchronize the device or take away what captured work refers to
// (cuMemFree of managed memory, cuModuleUnload). The library makes such "device-wide calls" only through this guard:
// while a capture is open on the device, they are refused (a synchronize) or deferred until the last capture there
// closes (frees, unloads). A check of the count followed by the call would race with a capture beginning in between,
// so both sides meet in a handshake on two counters per device, all sequentially consistent:
//  - a device-wide call counts itself in flight, then reads the open captures; when there are any it uncounts itself
//    and stays out;
//  - a capture counts itself open, then waits (yielding) until no device-wide call is in flight, and only then calls
//    cuStreamBeginCapture.
// So either the call sees the capture and stays out, or the capture begins after the call returned. A capture may
// wait that long for another thread's cuCtxSynchronize; nothing waits while holding a lock. Deferred calls run on a
// thread of the guard's own once no capture is open on their device, each again through the guard.
#pragma once
#include <functional>
#include <vector>

namespace csp {

// One device-wide call: construct it right before the driver call and keep it until the call returned; make the call
// only when allowed(). Never throws; any thread.
class DeviceWideCall {
 public:
  explicit DeviceWideCall(int device);
  ~DeviceWideCall();
  DeviceWideCall(const DeviceWideCall&) = delete;
  DeviceWideCall& operator=(const DeviceWideCall&) = delete;
  bool allowed() const { return allowed_; }

 private:
  int device_;
  bool allowed_;
};

// Runs `call` now when no capture is open on `device`, else, on the guard's thread, once none is. `call` should not
// throw (if it does, the exception is dropped). Never throws; any thread.
void outside_captures(int device, std::function<void()> call) noexcept;

// Captures open on `device` in the whole process (counted from just before cuStreamBeginCapture until the capture
// ended or was abandoned), any thread.
int open_captures(int device);

// For diagnostics: each device with captures open or calls waiting for them to close, as [device, open captures,
// waiting calls] triples, flattened. Never throws.
std::vector<int> capture_guard_state() noexcept;

// Counts a capture open on `device` and waits until no device-wide call is in flight; call right before
// cuStreamBeginCapture, and capture_closing() once it is over (also when cuStreamBeginCapture failed).
void capture_opening(int device);
void capture_closing(int device) noexcept;

}  // namespace csp
