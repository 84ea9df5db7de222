// Memory that JS sees through V8's own objects: the addon's only use of V8's C++ API. See Note [V8 in one place] in
// v8-memory.cc. Nothing here exposes V8's types, so only v8-memory.cc includes v8.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "binding/binding.h"

namespace csp {

// Memory that every thread sees as one SharedArrayBuffer (Note [one backing store] in pool/pool.cc).
class SharedWords {
 public:
  SharedWords() = default;
  // Zeroed, 64-byte aligned memory of `bytes` bytes (a multiple of 64), freed once the last SharedArrayBuffer over
  // it in any thread and every SharedWords copy have let go of it, on whichever thread that happens.
  static SharedWords allocate(size_t bytes);
  int32_t* words() const { return words_; }
  // A new SharedArrayBuffer over the same backing store, for the calling JS thread.
  Napi::Value to_js(Napi::Env env) const;

 private:
  std::shared_ptr<void> store_;  // the v8::BackingStore
  int32_t* words_ = nullptr;
};

// The memory of an ArrayBuffer or SharedArrayBuffer, kept alive by holding its backing store: a transfer to another
// thread, or a detach, moves or drops the JS object but not the memory, which is freed once `keep` and every JS
// object over it have let go. `data` is null for a detached or empty buffer.
struct HeldMemory {
  std::shared_ptr<void> keep;
  void* data = nullptr;
  size_t bytes = 0;
};
HeldMemory hold_memory(const Napi::Value& buffer);

}  // namespace csp
