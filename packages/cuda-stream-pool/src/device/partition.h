// Partitions of a device's multiprocessors (green contexts): see Note [partitions] in partition.cc.
#pragma once
#include "internal/cuda-driver.h"

namespace csp {

// The green context of partition `index` of `device`'s split, or null when there is no such partition. Any thread.
CUgreenCtx partition_context(int device, int index);

// The multiprocessors partition `index` of `device` got, or 0 when there is no such partition. Any thread.
unsigned partition_multiprocessors(int device, int index);

}  // namespace csp
