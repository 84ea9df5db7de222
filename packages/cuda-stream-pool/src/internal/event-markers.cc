// The event-marker pool. See Note [completion engine] in stream/completion.h.
#include "internal/event-markers.h"

#include <mutex>
#include <string>
#include <vector>

#include "binding/errors.h"
#include "device/device.h"
#include "internal/loader.h"
#include "internal/lock-order.h"

namespace csp {

namespace {

class EventPool {
 public:
  CUevent take(int device) {
    {
      std::lock_guard<OrderedMutex> lock(mutex_);
      auto& spare = spare_[device];
      if (!spare.empty()) {
        CUevent event = spare.back();
        spare.pop_back();
        return event;
      }
    }
    CUevent event = nullptr;
    check(drv().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate", device,
          [&] { return std::string("device " + std::to_string(device) + ", a completion marker"); });
    return event;
  }
  void put(int device, CUevent event) {
    std::lock_guard<OrderedMutex> lock(mutex_);
    spare_[device].push_back(event);
  }

 private:
  OrderedMutex mutex_{LockLevel::kMarkerPool, "completion event-marker pool"};
  std::vector<CUevent> spare_[kMaxDevices];
};

EventPool& event_pool() {
  static EventPool* pool = new EventPool();
  return *pool;
}

}  // namespace

CUevent take_event_marker(int device) { return event_pool().take(device); }

void put_event_marker(int device, CUevent event) { event_pool().put(device, event); }

}  // namespace csp
