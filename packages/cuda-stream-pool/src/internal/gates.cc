// Gates over ticket slots.
#include "internal/gates.h"

#include "internal/tickets.h"

namespace csp {

Gate acquire_gate(int device) {
  Gate gate;
  gate.slot = acquire_ticket(device);
  gate.word = gate.slot->word;
  gate.address = gate.slot->address;
  gate.base = gate.slot->issued;
  return gate;
}

void open_gate(const Gate& gate, uint64_t value) { __atomic_store_n(gate.word, value, __ATOMIC_RELEASE); }

void release_gate(const Gate& gate, uint64_t last_value) {
  gate.slot->issued = last_value;
  release_ticket(gate.slot);
}

}  // namespace csp
