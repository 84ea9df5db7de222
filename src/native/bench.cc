// Placeholder: replaced by the native baselines of the benchmarks.
#include "addon.h"
namespace csp {
void register_bench(Napi::Env, Napi::Object) {}
}  // namespace csp
