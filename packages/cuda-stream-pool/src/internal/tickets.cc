// Ticket slots. See Note [completion engine] in stream/completion.h.
#include "internal/tickets.h"

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "binding/errors.h"
#include "internal/loader.h"
#include "internal/lock-order.h"

namespace csp {

namespace {

constexpr size_t kSlotsPerSlab = 4096;

class TicketSlots {
 public:
  // A slot whose device address is valid for `device`. The device's context is current. Throws CudaFailure.
  TicketSlot* acquire(int device) {
    std::lock_guard<OrderedMutex> lock(mutex_);
    collect_locked();
    if (free_.empty()) add_slab_locked(device);
    TicketSlot* slot = free_.back();
    if (slot->address_device != device) {
      check(drv().cuMemHostGetDevicePointer(&slot->address, slot->word, 0), "cuMemHostGetDevicePointer", device);
      slot->address_device = device;
    }
    free_.pop_back();
    return slot;
  }

  // Reusable once its last write landed (a stream destroyed with work queued still writes later).
  void release(TicketSlot* slot) {
    std::lock_guard<OrderedMutex> lock(mutex_);
    retiring_.push_back(slot);
  }

 private:
  void collect_locked() {
    size_t kept = 0;
    for (TicketSlot* slot : retiring_) {
      if (load_word(slot->word) == slot->issued)
        free_.push_back(slot);
      else
        retiring_[kept++] = slot;
    }
    retiring_.resize(kept);
  }

  void add_slab_locked(int device) {
    void* memory = nullptr;
    // Mapped (DEVICEMAP) so a stream can write it, PORTABLE for every context, and cached on the host (not
    // write-combined) because the poller reads it.
    check(drv().cuMemHostAlloc(&memory, kSlotsPerSlab * sizeof(uint64_t),
                               CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
          "cuMemHostAlloc", device, [&] { return std::string("device " + std::to_string(device) + ", ticket slots"); });
    auto* words = static_cast<uint64_t*>(memory);
    std::memset(words, 0, kSlotsPerSlab * sizeof(uint64_t));
    for (size_t i = 0; i < kSlotsPerSlab; i++) {
      auto* slot = new TicketSlot();
      slot->word = words + i;
      free_.push_back(slot);
    }
  }

  OrderedMutex mutex_{LockLevel::kMarkerPool, "completion ticket slots"};
  std::vector<TicketSlot*> free_;
  std::vector<TicketSlot*> retiring_;
};

TicketSlots& ticket_slots() {
  static TicketSlots* slots = new TicketSlots();  // never destroyed: streams may die during exit
  return *slots;
}

}  // namespace

TicketSlot* acquire_ticket(int device) { return ticket_slots().acquire(device); }

void release_ticket(TicketSlot* slot) {
  if (slot) ticket_slots().release(slot);
}

}  // namespace csp
