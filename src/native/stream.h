// Stream boxes: a CUstream shared by every wrapper and thread that uses it. See Note [handle guard] in box.h.
#pragma once
#include "box.h"

namespace csp {

struct StreamBox : Box {
  static const napi_type_tag kTag;
  static constexpr const char* kName = "Stream";
  CUstream handle = nullptr;
  bool owned = false;  // owned: cuStreamDestroy on destroy; borrowed: only the box retires
  ~StreamBox() override;
  // Destroys an owned stream now (queued work still completes); waits for calls in flight. Idempotent.
  void destroy();
};

// Creates an owned stream on `device`; counted in live().streams. Throws CudaFailure.
std::shared_ptr<StreamBox> create_stream(int device, unsigned flags, int priority);

}  // namespace csp
