// The sticky-fault record: the first sticky error seen on each device in this process. After one, the device's
// context is unusable, so cleanup on it stops throwing (Rules in src/internal/DESIGN.md).
#pragma once
#include "internal/cuda-driver.h"

namespace csp {

// Whether `code` is a sticky fault (illegal address, launch failure, ...): the context cannot be used after it.
bool is_sticky(CUresult code);

// The first sticky error seen on a device in this process, CUDA_SUCCESS while healthy. Any thread.
CUresult device_fault(int device);
void record_fault(int device, CUresult code);

}  // namespace csp
