// Placeholder replaced by the pool's shared state.
#include "addon.h"
namespace csp {
void register_pool(Napi::Env, Napi::Object) {}
}  // namespace csp
