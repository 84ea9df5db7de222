// The live-object counters, one set per process.
#include "internal/live-counters.h"

namespace csp {

LiveCounters& live() {
  static LiveCounters counters;
  return counters;
}

}  // namespace csp
