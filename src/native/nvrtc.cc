// Placeholder: replaced by the nvrtc concept file.
#include "addon.h"
namespace csp {
void register_nvrtc(Napi::Env, Napi::Object) {}
}  // namespace csp
