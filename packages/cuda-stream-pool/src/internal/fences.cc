// Asymmetric fences (Note [asymmetric fences] in fences.h).
#include "internal/fences.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace csp {

namespace {

bool register_membarrier() {
  const long commands = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0);
  if (commands < 0 || !(commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return false;
  return syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0;
}

}  // namespace

bool membarrier_fences() {
  static const bool registered = register_membarrier();
  return registered;
}

bool heavy_fence() {
  if (!membarrier_fences()) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return true;
  }
  for (int attempt = 0; attempt < 3; attempt++)
    if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) == 0) return true;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return false;
}

}  // namespace csp
