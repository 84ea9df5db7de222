// Live-object counters: what the library holds right now, process-wide, for cuda.liveObjects() and leak tests.
#pragma once
#include <atomic>
#include <cstdint>

namespace csp {

struct LiveCounters {
  std::atomic<int64_t> streams{0}, events{0}, modules{0}, device_bytes{0}, pinned_bytes{0}, managed_bytes{0};
  std::atomic<int64_t> registered_bytes{0};  // host memory page-locked by HostRegistration, until unregistered
  std::atomic<int64_t> graphs{0}, graph_execs{0};  // driver graphs and executable graphs not yet destroyed
  // Device memory whose free the driver refused or that could not be freed after every use: never freed (it may
  // still be in use), and no longer in device_bytes.
  std::atomic<int64_t> leaked_device_bytes{0};
};
LiveCounters& live();

}  // namespace csp
