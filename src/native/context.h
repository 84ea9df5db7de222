// Primary contexts: retained once per device for the life of the process, made current by every entry point.
#pragma once
#include "cuda-driver.h"

namespace csp {

// Retains the device's primary context on first use and makes it current on the calling thread. Any thread.
// Throws Unavailable without a driver, CudaFailure when the retain fails.
void make_current(int device);

// As make_current, but never throws; returns false when the context could not be made current.
bool make_current_quiet(int device);

}  // namespace csp
