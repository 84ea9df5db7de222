// The sticky-fault record: the first sticky error seen on each device in this process. After one, the device's
// context is unusable, so cleanup on it stops throwing (Rules in src/internal/DESIGN.md). And the record of which
// other devices' work a stream or event waited on, through which such a fault reaches them.
//
// Note [cross-device dependencies]: a stream of device 0 made to wait on device 1's work (waitEvent of an event of
// device 1, waitStream of a stream of device 1) or reading device 1's memory (a peer copy) cannot finish correctly
// once device 1 faults: on a GPU its wait on device 1 never ends, and a driver that let it go on (the simulated one
// does) would hand out bytes device 1 never wrote, on a healthy device, without an error. So each such call records
// device 1 in the stream's DeviceDependencies, a set of devices as a bit mask, after its work is queued; waitStream
// and waitEvent also take over the set of what they wait on (an event keeps its stream's set from its last record),
// so a dependency passes through streams of the same device. The rule:
//  - A wait takes a snapshot of the set before its marker is queued. While it is pending, the poller asks the
//    snapshot's devices about faults along with the wait's own device; a fault on one of them fails the wait with
//    that fault, naming that device (wait_result). A wait whose own work is done asks them before it is reported,
//    and only a clean answer reports it done, so a driver that lets the wait go on cannot slip wrong bytes through.
//  - That clean answer clears the snapshot's devices from the set: what was queued before the marker no longer
//    depends on them, and the stream does not carry a dependency forever. A dependency recorded after the snapshot
//    survives the clear (the records count below).
//  - Blocking waits do the same: stream and event synchronizeSync poll rather than block in the driver while the set
//    is not empty (a wait that never ends could not report), and device.synchronize() asks the devices that some
//    stream of the device depends on (counted per device, as streams gain and lose them) after its cuCtxSynchronize.
//  - Lock-free: the set and its count are two atomics; a stream that never waits across devices pays one load per
//    wait and nothing else. Asking a device about its fault is a driver call (and changes the calling thread's
//    current context), made with no lock held (Note [lock order] in native-object.h).
#pragma once
#include "internal/cuda-driver.h"

#include <atomic>
#include <cstdint>
#include <functional>

namespace csp {

// Whether `code` is a sticky fault (illegal address, launch failure, ...): the context cannot be used after it.
bool is_sticky(CUresult code);

// The first sticky error seen on a device in this process, CUDA_SUCCESS while healthy. Any thread.
CUresult device_fault(int device);
void record_fault(int device, CUresult code);

// Asks the driver whether `device` has a sticky fault (a query of its library stream, which reports one; check_quiet
// records it) unless one is recorded already. Makes the device's context current. Never throws; any thread.
void ask_fault(int device);

inline uint64_t device_bit(int device) { return uint64_t{1} << device; }

// What a wait saw of a DeviceDependencies when it began.
struct DependencySnapshot {
  uint64_t devices = 0;  // bit d: device d
  uint64_t records = 0;
};

// The devices whose work a stream's (or an event's) queued work waited on (Note [cross-device dependencies]). Any
// thread. `home` is the stream's device, whose per-device count (device_dependencies) follows the set; -1 for an
// event, which is not counted.
class DeviceDependencies {
 public:
  // A hint, for the hot path: 0 while the set is empty.
  uint64_t devices() const { return devices_.load(std::memory_order_relaxed); }
  DependencySnapshot snapshot() const;
  // Adds `devices`; called after the work that depends on them was queued.
  void add(uint64_t devices, int home);
  // The set becomes `devices` (an event recorded again). Not counted.
  void replace(uint64_t devices);
  // A wait that began at `seen` completed and found none of its devices faulted: they leave the set, unless a record
  // came after `seen`.
  void clear(const DependencySnapshot& seen, int home);
  // The stream is gone: its devices leave the per-device count.
  void forget(int home);

 private:
  // Counted before the devices are added, so that a clear that misses a record's devices sees its count.
  std::atomic<uint64_t> records_{0};
  std::atomic<uint64_t> devices_{0};
};

// The devices that some stream of `device` depends on now, for device.synchronize(). Any thread.
uint64_t device_dependencies(int device);

// A fault of another device that a wait depended on; device -1 when none.
struct DependencyFault {
  int device = -1;
  CUresult code = CUDA_SUCCESS;
};

// The first of `devices` with a sticky fault: among those recorded, or, with `ask`, after asking each (ask_fault).
DependencyFault dependency_fault(uint64_t devices, bool ask);

// A wait that began at `seen` found its own work done: asks `seen`'s devices, and clears them from `set` when none
// faulted. Returns the fault found, if any. Changes the calling thread's current context.
DependencyFault settle_dependencies(DeviceDependencies& set, const DependencySnapshot& seen, int home);

// Polls `query` (SUCCESS, NOT_READY or the failure; it makes its own context current) until it reports anything
// but NOT_READY, asking `devices` about faults every 10 ms meanwhile: a blocking wait on work that waited on another
// device, which never ends once that device faulted. Returns that fault, or none once `query` stops reporting
// NOT_READY (the caller then learns the outcome in its usual way).
DependencyFault poll_until_done(const std::function<CUresult()>& query, uint64_t devices);

// A blocking wait on `device`'s work that may have waited on other devices (streamSynchronize, eventSynchronize):
// polled with `query` while `set` holds devices (poll_until_done), then `block`, the driver's own wait (it throws
// CudaFailure when the work failed on `device`), then the devices asked (settle_dependencies with `home`). Returns the
// fault of a device the work waited on, or none. `device`'s context is current on return.
DependencyFault synchronize_with_dependencies(DeviceDependencies& set, int device, int home,
                                              const std::function<CUresult()>& query, const std::function<void()>& block);

// A wait's result as JS receives it: the CUresult, or, when the fault is another device's that the work waited on,
// that CUresult plus (device + 1) * 65536 (waitError in stream/completion.ts decodes it).
inline double wait_result(CUresult code, int dependency) {
  return static_cast<double>(code) + (dependency < 0 ? 0.0 : (dependency + 1) * 65536.0);
}
inline double wait_result(const DependencyFault& fault) { return wait_result(fault.code, fault.device); }

}  // namespace csp
