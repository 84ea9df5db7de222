// The table through which JS holds native objects: a native object is a number to JS. See Note [handle table].
//
// Note [handle table]: each environment (the main thread, each worker) has a table of slots, each holding one
// shared_ptr to a native object (internal/native-object.h) with its kind. JS gets a slot's handle, a number that encodes the slot's
// index (low 24 bits) and the slot's generation (the 29 bits above), and passes it back on every call; the lookup
// checks the index, the generation and the kind, so a forged number is a TypeError and a handle whose slot was
// released is a DestroyedError, never another object's object. It replaces a type-tagged External per object: making one,
// and the weak handle and finalizer that came with it, cost about a microsecond per object, more than most calls
// that made it.
//  - A slot is released when its object is destroyed (destroy(), free(), unload()), by the native call that destroys
//    it; when its JS owner is collected (a FinalizationRegistry in src/binding/native-ref-lifetime.ts); or when the
//    environment tears down (every slot left, in the table's destructor). Releasing drops the slot's shared_ptr:
//    the object lives on while native code (a pending wait, a graph, another thread's slot) still holds it.
//  - A slot may name a forget action, run when the slot is released while its object is still live (the object was
//    forgotten, not destroyed): a device buffer's frees the memory in stream order (later, when a capture is open
//    on its device); a stream's ends a capture begun through it in this thread (Note [abandoned captures] in
//    graph/graph.cc). Forget actions run on the environment's JS thread, no JS, never throw.
//  - Short-lived objects never meet the FinalizationRegistry: JS registers an owner only once it has lived past a
//    flush of its nursery (native-ref-lifetime.ts). A registered slot is marked tracked; releasing it explicitly leaves it
//    out of the free list until the registry's callback comes, so that a late callback never finds its index in use
//    by another object.
//  - Only the environment's own thread touches its table: no lock.
#pragma once
#include <napi.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace csp {

// What releasing a slot does to a native object that its JS owner forgot (never destroyed); must be idempotent. It
// gets the slot's reference, so that it may keep the object for later.
using ForgetAction = void (*)(const std::shared_ptr<void>& object);

class HandleTable {
 public:
  // Why a lookup failed.
  enum class Miss { kNone, kNotAHandle, kWrongKind, kReleased };

  HandleTable();
  ~HandleTable();  // environment teardown: releases every slot left, running their forget actions
  HandleTable(const HandleTable&) = delete;
  HandleTable& operator=(const HandleTable&) = delete;

  // A new slot holding `object` of `kind`; returns its handle.
  double insert(std::shared_ptr<void> object, const napi_type_tag* kind, ForgetAction forget);
  // The object of a live slot of `kind` named by `handle`, else null and `miss` says why.
  const std::shared_ptr<void>* find(double handle, const napi_type_tag* kind, Miss& miss) const;
  // Releases the slot (running its forget action); `collected`: the registry's callback for a tracked slot, which
  // also frees the slot's index. False for a handle that names no live slot. Never throws.
  bool release(double handle, bool collected);
  // Marks a live slot as registered with the FinalizationRegistry; false when it was released already.
  bool track(double handle);
  // Live slots: a native object a JS object can still reach through this table.
  size_t live() const { return live_; }

 private:
  struct Slot {
    std::shared_ptr<void> object;  // null once released
    const napi_type_tag* kind = nullptr;
    ForgetAction forget = nullptr;
    uint32_t generation = 1;
    uint32_t next_free = 0;
    bool tracked = false;
  };
  Slot* slot_of(double handle, uint32_t& generation);
  void free_index(uint32_t index);

  std::vector<Slot> slots_;
  uint32_t free_head_ = 0;  // 0: none (slot 0 is never handed out, so no handle is 0)
  size_t live_ = 0;
};

// The calling environment's table (binding.cc).
HandleTable& handle_table(napi_env env);

}  // namespace csp
