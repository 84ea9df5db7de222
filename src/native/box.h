// Handle boxes: a driver handle shared by every JS wrapper and thread that uses it, guarded so that a handle
// destroyed by one thread is never passed to the driver by another. See Note [handle guard].
//
// Note [handle guard]: each call that passes a handle to the driver holds the box's shared lock for the
// duration of the call; destroy takes the exclusive lock, so it waits for calls in flight, marks the box
// destroyed, then frees the handle. A JS flag alone is not enough: another worker may hold the same box.
// Nothing is keyed by the raw handle value (the driver reuses them, Note [handle reuse]); boxes are keyed by
// identity (their address inside a shared_ptr).
#pragma once
#include <napi.h>

#include <memory>
#include <mutex>
#include <shared_mutex>

#include "check.h"

namespace csp {

struct Box {
  std::shared_mutex mutex;
  bool destroyed = false;
  int device = 0;
  virtual ~Box() = default;
};

// Holds the box's shared lock for the duration of one driver call; throws Destroyed when it is gone.
template <class B>
class Use {
 public:
  Use(B& box, const char* resource, const char* method) : lock_(box.mutex), box_(box) {
    if (box.destroyed) throw Destroyed{resource, method};
  }
  B* operator->() const { return &box_; }

 private:
  std::shared_lock<std::shared_mutex> lock_;
  B& box_;
};

// An External carrying one shared_ptr to a box, type-tagged so that a wrong object cannot be unwrapped.
template <class B>
Napi::External<std::shared_ptr<B>> wrap_box(Napi::Env env, std::shared_ptr<B> box) {
  auto holder = new std::shared_ptr<B>(std::move(box));
  auto external = Napi::External<std::shared_ptr<B>>::New(
      env, holder, [](Napi::BasicEnv, std::shared_ptr<B>* h) { delete h; });
  external.TypeTag(&B::kTag);
  return external;
}

template <class B>
std::shared_ptr<B> unwrap_box(const Napi::Value& value) {
  if (!value.IsExternal() || !value.As<Napi::Object>().CheckTypeTag(&B::kTag))
    throw Napi::TypeError::New(value.Env(), std::string("cuda-stream-pool internal: expected a ") + B::kName +
                                                " handle box");
  return *value.As<Napi::External<std::shared_ptr<B>>>().Data();
}

inline int64_t to_int64(const Napi::Value& v) {
  if (v.IsBigInt()) {
    bool lossless = false;
    return v.As<Napi::BigInt>().Int64Value(&lossless);
  }
  return v.As<Napi::Number>().Int64Value();
}

inline uint64_t to_uint64(const Napi::Value& v) {
  if (v.IsBigInt()) {
    bool lossless = false;
    return v.As<Napi::BigInt>().Uint64Value(&lossless);
  }
  return static_cast<uint64_t>(v.As<Napi::Number>().Int64Value());
}

}  // namespace csp
