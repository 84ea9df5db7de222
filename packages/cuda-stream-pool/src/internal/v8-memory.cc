// The addon's only use of V8's C++ API: SharedWords (the pool's shared words) and hold_memory (the memory of a
// registered ArrayBuffer). Runs on: any JS thread.
//
// Note [V8 in one place]: nothing else includes v8.h. Node-API cannot make a SharedArrayBuffer over native memory
// that every thread reaches synchronously, which StreamPool.default() needs (Note [one backing store] in
// pool/pool.cc), and cannot keep an ArrayBuffer's memory alive across a transfer or a detach, which a registration
// of that memory as page-locked needs (Note [registered host memory] in memory/host-registration.cc). V8's C++ API
// is outside Node-API's promise of one binary for every Node.js version, so this file uses the fewest calls that do
// the job (BackingStore creation, destruction and GetBackingStore, SharedArrayBuffer::New, Isolate::GetCurrent), all
// unchanged from Node.js 20 to 24; CI loads one build under Node.js 20, 22 and 24 and runs the whole CPU suite with
// it. Node's own Node-API converts between v8::Local<v8::Value> and napi_value by copying the pointer; so does this.
#include <v8.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "internal/v8-memory.h"

namespace csp {

static_assert(sizeof(napi_value) == sizeof(v8::Local<v8::Value>), "napi_value and v8::Local<v8::Value> differ in size");

SharedWords SharedWords::allocate(size_t bytes) {
  void* memory = std::aligned_alloc(64, bytes);
  if (memory == nullptr) throw std::bad_alloc();
  std::memset(memory, 0, bytes);
  SharedWords out;
  out.words_ = static_cast<int32_t*>(memory);
  std::shared_ptr<v8::BackingStore> store = v8::SharedArrayBuffer::NewBackingStore(
      memory, bytes, [](void* data, size_t, void*) { std::free(data); }, nullptr);
  out.store_ = std::move(store);
  return out;
}

Napi::Value SharedWords::to_js(Napi::Env env) const {
  auto store = std::static_pointer_cast<v8::BackingStore>(store_);
  v8::Local<v8::Value> buffer = v8::SharedArrayBuffer::New(v8::Isolate::GetCurrent(), store);
  napi_value out;
  std::memcpy(&out, &buffer, sizeof(out));
  return Napi::Value(env, out);
}

HeldMemory hold_memory(const Napi::Value& buffer) {
  napi_value raw = buffer;
  v8::Local<v8::Value> value;
  std::memcpy(&value, &raw, sizeof(raw));
  std::shared_ptr<v8::BackingStore> store;
  if (value->IsArrayBuffer())
    store = value.As<v8::ArrayBuffer>()->GetBackingStore();
  else if (value->IsSharedArrayBuffer())
    store = value.As<v8::SharedArrayBuffer>()->GetBackingStore();
  HeldMemory out;
  if (!store) return out;
  out.data = store->Data();
  out.bytes = store->ByteLength();
  out.keep = std::move(store);
  return out;
}

}  // namespace csp
