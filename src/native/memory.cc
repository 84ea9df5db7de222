// Placeholder: replaced by the memory concept file.
#include "addon.h"
namespace csp {
void register_memory(Napi::Env, Napi::Object) {}
}  // namespace csp
