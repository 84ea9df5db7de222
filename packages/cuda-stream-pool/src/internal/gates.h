// Gates, each over a borrowed ticket slot (tickets.h), for streamed copies (Note [staging] in internal/staging.cc).
#pragma once
#include "internal/cuda-driver.h"

#include <cstdint>

namespace csp {

struct TicketSlot;

// A gate: a word of mapped pinned memory that a stream waits on (cuStreamWaitValue64, GEQ) and the host opens by
// raising it. Piece k of a streamed copy waits for `base + k + 1`. The device's context is current.
struct Gate {
  TicketSlot* slot = nullptr;
  uint64_t* word = nullptr;
  CUdeviceptr address = 0;
  uint64_t base = 0;
};
Gate acquire_gate(int device);
// Raises the gate to `value` (release store; the GPU sees it without a driver call). Any thread.
void open_gate(const Gate& gate, uint64_t value);
// The gate's slot goes back once its last value is written. Any thread.
void release_gate(const Gate& gate, uint64_t last_value);

}  // namespace csp
