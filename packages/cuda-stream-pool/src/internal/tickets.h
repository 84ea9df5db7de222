// Ticket slots: 8-byte words of mapped pinned memory that streams write their completion tickets into, one per
// stream that was waited on (Note [completion engine] in stream/completion.h); a gate borrows one too (gates.h).
#pragma once
#include "internal/cuda-driver.h"

#include <cstdint>

namespace csp {

struct TicketSlot {
  uint64_t* word = nullptr;
  CUdeviceptr address = 0;  // the word in the context of `address_device`
  int address_device = -1;
  uint64_t issued = 0;      // the last value enqueued; under the stream's marker mutex, or the slots' mutex while free
};

// Reads a ticket word; acquire, so that the work before the write that set it is seen done.
inline uint64_t load_word(const uint64_t* word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

// A slot whose device address is valid for `device`. The device's context is current. Throws CudaFailure.
TicketSlot* acquire_ticket(int device);

// A slot goes back once its last write landed. Called by ~NativeStream.
void release_ticket(TicketSlot* slot);

}  // namespace csp
