// The one way the native layer keeps an exception from escaping code that the runtime, the driver or a thread of ours
// calls. No Node-API here, so that code built without it (the capture guard's CPU check) uses it too.
#pragma once

namespace csp {

// Runs the body of a callback that the runtime or a thread of ours calls (a finalizer, a cleanup hook, a thread-safe
// function's call, a thread's body): nothing may escape it, or the process aborts (std::terminate). A failure there
// has nobody to report to, and node-addon-api throws Napi::Error from any N-API call once a worker is terminating.
template <class F>
void never_throws(F&& body) noexcept {
  try {
    body();
  } catch (...) {
  }
}

}  // namespace csp
