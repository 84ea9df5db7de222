// Note [handle table] (handle-table.h). Runs on: the environment's JS thread only.
#include "internal/handle-table.h"

#include "internal/native-object.h"
#include "internal/never-throws.h"

namespace csp {

namespace {
constexpr uint32_t kIndexBits = 24;
constexpr uint32_t kMaxIndex = (1u << kIndexBits) - 1;
constexpr uint32_t kMaxGeneration = (1u << 29) - 1;  // index and generation fit a double's 53-bit integers
constexpr double kIndexScale = static_cast<double>(1u << kIndexBits);
// So every integer below 2^53 decodes to a generation of at most kMaxGeneration (slot_of need not check it).
static_assert(kMaxGeneration == (1ull << (53 - kIndexBits)) - 1);
}  // namespace

HandleTable::HandleTable() : slots_(1) {}

HandleTable::~HandleTable() {
  for (uint32_t index = 1; index < slots_.size(); index++) {
    Slot& slot = slots_[index];
    if (!slot.object) continue;
    std::shared_ptr<void> object = std::move(slot.object);
    if (slot.forget) never_throws("releasing a native object at environment teardown", [&] { slot.forget(object); });
  }
}

double HandleTable::insert(std::shared_ptr<void> object, const napi_type_tag* kind, ForgetAction forget) {
  uint32_t index = free_head_;
  if (index != 0) {
    free_head_ = slots_[index].next_free;
  } else {
    if (slots_.size() > kMaxIndex) throw std::runtime_error("more than 16777215 live CUDA objects in one thread");
    index = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& slot = slots_[index];
  slot.object = std::move(object);
  slot.kind = kind;
  slot.forget = forget;
  slot.tracked = false;
  live_++;
  return static_cast<double>(slot.generation) * kIndexScale + index;
}

HandleTable::Slot* HandleTable::slot_of(double handle, uint32_t& generation) {
  // Integer arithmetic after one range check, which also keeps the conversion defined: floor() and a division per
  // handle were the dearest part of a lookup.
  if (!(handle >= 1 && handle < 9007199254740992.0)) return nullptr;
  const auto bits = static_cast<uint64_t>(handle);
  if (static_cast<double>(bits) != handle) return nullptr;  // not an integer
  const auto index = static_cast<uint32_t>(bits & kMaxIndex);
  if (index == 0 || index >= slots_.size()) return nullptr;
  generation = static_cast<uint32_t>(bits >> kIndexBits);
  return &slots_[index];
}

const std::shared_ptr<void>* HandleTable::find(double handle, const napi_type_tag* kind, Miss& miss) const {
  uint32_t generation = 0;
  const Slot* slot = const_cast<HandleTable*>(this)->slot_of(handle, generation);
  if (slot == nullptr || generation == 0 || generation > slot->generation) {
    miss = Miss::kNotAHandle;
    return nullptr;
  }
  if (generation < slot->generation || slot->kind == nullptr) {
    miss = Miss::kReleased;  // the slot was released, and may hold another object now
    return nullptr;
  }
  if (slot->kind != kind) {
    miss = Miss::kWrongKind;
    return nullptr;
  }
  if (!slot->object) {
    miss = Miss::kReleased;
    return nullptr;
  }
  miss = Miss::kNone;
  return &slot->object;
}

bool HandleTable::release(double handle, bool collected) {
  uint32_t generation = 0;
  Slot* slot = slot_of(handle, generation);
  if (slot == nullptr || generation != slot->generation) return false;
  const auto index = static_cast<uint32_t>(slot - slots_.data());
  const bool was_live = slot->object != nullptr;
  if (was_live) {
    std::shared_ptr<void> object = std::move(slot->object);
    live_--;
    if (slot->forget) never_throws("releasing a native object", [&] { slot->forget(object); });
  }
  // A tracked slot keeps its index until the registry's callback, which may still come.
  if (!slot->tracked || collected) free_index(index);
  return was_live;
}

bool HandleTable::track(double handle) {
  uint32_t generation = 0;
  Slot* slot = slot_of(handle, generation);
  if (slot == nullptr || generation != slot->generation || !slot->object) return false;
  slot->tracked = true;
  return true;
}

void HandleTable::free_index(uint32_t index) {
  Slot& slot = slots_[index];
  slot.kind = nullptr;
  slot.forget = nullptr;
  slot.tracked = false;
  // A generation that would not fit the handle retires the index for good.
  if (slot.generation >= kMaxGeneration) return;
  slot.generation++;
  slot.next_free = free_head_;
  free_head_ = index;
}

}  // namespace csp
