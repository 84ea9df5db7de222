// The benchmark addon (cuda_stream_pool_bench.node): the native baselines that `cuda-stream-pool bench` prints beside
// the library's figures, built as a binary of its own so that the library's binary carries no benchmark code. The CLI
// loads it by explicit path (src/bench-addon.ts). Loading it never touches the driver: without a GPU every call
// throws the library's CudaUnavailableError, with the loader's reason. Context-aware: each worker thread that loads
// it gets its own EnvironmentData.
#include "driver.h"

namespace csp::bench {

void register_calls(Napi::Env env, Napi::Object exports);     // calls.cc: per-call baselines of `bench micro`
void register_executor(Napi::Env env, Napi::Object exports);  // executor.cc: the `native` mode of `bench`
void register_graph_baseline(Napi::Env env, Napi::Object exports);  // graph-baseline.cc: the graph rows' baseline
void register_wake_observer(Napi::Env env, Napi::Object exports);  // wake-observer.cc: the wake-latency row

namespace {

// setErrorFactory(factory): the function that makes this environment's errors, ('cuda', code, call, detail) or
// ('unavailable', reason) => Error; JS passes one that builds the library's error classes.
Napi::Value set_error_factory(const Napi::CallbackInfo& info) {
  info.Env().GetInstanceData<EnvironmentData>()->error_factory = Napi::Persistent(info[0].As<Napi::Function>());
  return info.Env().Undefined();
}

Napi::Object init(Napi::Env env, Napi::Object exports) {
  env.SetInstanceData<EnvironmentData>(new EnvironmentData());
  exports.Set("setErrorFactory", Napi::Function::New<set_error_factory>(env, "setErrorFactory"));
  register_calls(env, exports);
  register_executor(env, exports);
  register_graph_baseline(env, exports);
  register_wake_observer(env, exports);
  return exports;
}

}  // namespace
}  // namespace csp::bench

static Napi::Object init_bench_addon(Napi::Env env, Napi::Object exports) { return csp::bench::init(env, exports); }
NODE_API_MODULE(cuda_stream_pool_bench, init_bench_addon)
