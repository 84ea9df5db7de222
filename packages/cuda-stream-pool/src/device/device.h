// The most devices the process-wide per-device tables hold (retained contexts, fault records, per-device caches);
// a larger ordinal is refused where its context is made current.
#pragma once

namespace csp {

constexpr int kMaxDevices = 64;

}  // namespace csp
