// Landings: staged device-to-host copies finished on their JS thread.
#include "internal/landing.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <mutex>
#include <vector>

#include "internal/context.h"
#include "internal/device-faults.h"
#include "internal/lock-order.h"
#include "internal/memory.h"
#include "internal/never-throws.h"
#include "internal/submission.h"

namespace csp {

const napi_type_tag Landing::kTag = {0x6373702d6c616e64ULL, 0x6564000000000007ULL};

namespace {

// Ends the staging of a copy that ended with `result`: given back (Landing::release) when the copy left it free, done
// or on a device that faulted (whose context runs nothing more); otherwise the device may still be writing it, so its
// release never runs, and what the release holds (a pinned block, which would go back to the cache when let go) is
// kept for good; the chunks of the staging arena stay out of use by not being put back. Returns whether it went back.
bool end_staging(Landing& landing, CUresult result) {
  if (result == CUDA_SUCCESS || device_fault(landing.marker.device) != CUDA_SUCCESS) {
    if (landing.release) landing.release();
    return true;
  }
  if (!landing.release) return false;
  static OrderedMutex* mutex = new OrderedMutex(LockLevel::kLeaf, "staging kept out of use");
  static auto* kept = new std::vector<std::function<void()>>();
  std::lock_guard<OrderedMutex> lock(*mutex);
  kept->push_back(std::move(landing.release));
  landing.release = nullptr;
  return false;
}

}  // namespace

void drop_landing(Landing& landing, CUresult result) {
  if (landing.finished.exchange(true)) return;
  end_staging(landing, result);
  drop_marker(landing);
}

void drop_marker(Landing& landing) {
  if (landing.marker_holders.fetch_sub(1, std::memory_order_acq_rel) == 1) return_marker(landing.marker);
}

namespace {

// The destination's memory, or null when its buffer was detached or transferred (or is not the copy's size).
void* destination_memory(Napi::Env env, Landing& landing) {
  napi_value value = nullptr;
  if (!landing.destination || napi_get_reference_value(env, landing.destination, &value) != napi_ok || !value) return nullptr;
  napi_typedarray_type type;
  size_t length = 0;
  void* data = nullptr;
  napi_value buffer = nullptr;
  size_t offset = 0;
  bool detached = true;
  if (napi_get_typedarray_info(env, value, &type, &length, &data, &buffer, &offset) != napi_ok ||
      napi_is_detached_arraybuffer(env, buffer, &detached) != napi_ok || detached || length != landing.bytes)
    return nullptr;
  return data;
}

// The longest landing made on this thread (one JS thread per environment), in nanoseconds.
thread_local double longest_ns = 0;

// Lands bytes [landed_bytes, to) when the destination is still there, after the earlier landings into the same bytes
// that are done: a copy ordered after another (same stream, or through an event) is done only if that one is, though
// its marker may be seen done first.
void land_up_to(Napi::Env env, Landing& landing, size_t to) {
  const size_t from = landing.landed_bytes.load(std::memory_order_relaxed);
  if (to <= from || !landing.copy_out) return;
  std::vector<std::shared_ptr<Landing>> before;
  before.swap(landing.before);
  for (auto& earlier : before) settle_landing(env, *earlier);  // one still not done was not ordered before this
  if (void* data = destination_memory(env, landing)) {
    const auto start = std::chrono::steady_clock::now();
    landing.copy_out(data, from, to);
    longest_ns = std::max(longest_ns, static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                              std::chrono::steady_clock::now() - start).count()));
  }
  landing.landed_bytes.store(to, std::memory_order_relaxed);
}

}  // namespace

void finish_landing(Napi::Env env, Landing& landing, CUresult result) {
  if (landing.finished.exchange(true)) return;
  if (result == CUDA_SUCCESS) land_up_to(env, landing, landing.bytes);
  if (landing.destination) napi_delete_reference(env, landing.destination);
  landing.destination = nullptr;
  end_staging(landing, result);
  report_failed_copy(landing, result);
  // Once finished, nothing calls these: what they hold (a streamed copy's gathered bytes, the size of the copy) goes
  // now, not when JS lets the landing go.
  landing.copy_out = nullptr;
  landing.poll = nullptr;
  landing.release = nullptr;
  drop_marker(landing);
}

void report_failed_copy(Landing& landing, CUresult result) {
  // A sticky code is a device's fault, which the stream's waits report already; after a fault of the copy's own
  // device its staging is free and nothing more runs there.
  if (result == CUDA_SUCCESS || is_sticky(result) || device_fault(landing.marker.device) != CUDA_SUCCESS) return;
  if (landing.failure_reported.exchange(true, std::memory_order_acq_rel)) return;
  never_throws("reporting a failed copy into a JS array", [&] {
    if (std::shared_ptr<NativeStream> owner = landing.stream.lock())
      carry_failure(*owner, std::make_shared<const RecordedFailure>(
                                CudaFailure{result, "cuEventQuery",
                                            device_text(landing.marker.device) + ", a copy of " + std::to_string(landing.bytes) +
                                                " bytes from device memory into a JS array through pinned staging"},
                                true));
  });
}

double longest_landing_ns() { return longest_ns; }

bool claim_part(Landing& landing) {
  if (landing.dependency_devices) return false;
  if (landing.ready_bytes.load(std::memory_order_acquire) <= landing.landed_bytes.load(std::memory_order_relaxed)) return false;
  return !landing.part_posted.exchange(true, std::memory_order_acq_rel);
}

void land_part(Napi::Env env, Landing& landing) {
  landing.part_posted.store(false, std::memory_order_release);
  if (landing.finished.load(std::memory_order_acquire) || landing.dependency_devices) return;
  land_up_to(env, landing, landing.ready_bytes.load(std::memory_order_acquire));
}

bool settle_landing(Napi::Env env, Landing& landing) {
  if (landing.finished.load(std::memory_order_acquire)) return true;
  // A failed copy never lands: its staging may hold another copy's bytes.
  CUresult result = CUDA_SUCCESS;
  if (landing.marker_done.load(std::memory_order_acquire)) {
    result = landing.marker_result.load(std::memory_order_relaxed);
  } else {
    if (CUresult fault = device_fault(landing.marker.device)) {
      result = fault;
    } else if (landing.stream_idle.load(std::memory_order_acquire) && !landing.streamed) {
      result = CUDA_SUCCESS;  // its markers are done too (a lost ticket or a failed query would not tell)
    } else if (landing.poll) {
      result = landing.poll();
      if (result == CUDA_ERROR_NOT_READY) {
        if (!landing.dependency_devices) land_up_to(env, landing, landing.ready_bytes.load(std::memory_order_acquire));
        return false;
      }
    } else {
      if (landing.marker.event && !make_current_quiet(landing.marker.device)) return false;
      result = marker_status(landing.marker);
      // Only done or a sticky fault settles it here; a query that failed otherwise is the poller's to judge.
      if (result != CUDA_SUCCESS && device_fault(landing.marker.device) == CUDA_SUCCESS) return false;
    }
    // Work that waited on other devices is done only if none of them faulted: asked now, as the poller asks before it
    // reports such a wait done (Note [cross-device dependencies]).
    if (result == CUDA_SUCCESS && landing.dependency_devices) {
      const DependencyFault fault = dependency_fault(landing.dependency_devices, true);
      make_current_quiet(landing.marker.device);  // asking made the other devices' contexts current
      if (fault.code) result = fault.code;
    }
  }
  finish_landing(env, landing, result);
  return true;
}

}  // namespace csp
