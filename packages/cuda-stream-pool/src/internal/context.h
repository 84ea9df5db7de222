// Primary contexts: retained once per device for the life of the process, made current by every entry point.
#pragma once
#include "internal/cuda-driver.h"

#include "device/device.h"

namespace csp {

// Retains the device's primary context on first use and makes it current on the calling thread. Any thread.
// Steady state: one cuCtxGetCurrent and no lock (Note [current context]).
// Throws Unavailable without a driver, CudaFailure when the retain fails or the ordinal is out of range.
void make_current(int device);

// The device's primary context, retained on first use as make_current does, without making it current: the peer
// context that peer access and peer copies name. Any thread. Throws as make_current.
CUcontext primary_context(int device);

// The device whose primary context is current on this thread (cuCtxGetCurrent), -1 when none of the library's is.
// Any thread.
int current_device();

// The device whose primary context is current on this thread, else the first device whose context the process
// retained, else 0: for work that needs some context but no particular device (portable pinned memory). Any thread.
int context_device();

// True once the process has retained the device's primary context (on first use of the device). Any thread.
bool context_retained(int device);

// As make_current, but never throws; returns false when the context could not be made current.
bool make_current_quiet(int device);

// Note [library streams]: one non-blocking stream per device that the library owns, for work that has no live user
// stream to go to (a free whose stream was destroyed) and for asking the driver about a device's health. Created on
// first need and never destroyed, like the retained primary context; process-wide because a free may run in a
// finalizer of any thread. The caller has made the device's context current. Throws CudaFailure; a failed creation
// is retried next time.
CUstream library_stream(int device);

}  // namespace csp
