// A library preloaded (LD_PRELOAD) into a child process by test/sim/membarrier-fallback.test.ts: it stands in for
// libc's syscall() and refuses membarrier(2) as some kernels and sandboxes do, so that deferred submission's fallback
// fences run in CI. MEMBARRIER_SHIM selects what it refuses:
//   absent   every membarrier command fails with ENOSYS (Linux before 4.14, qemu-user, seccomp sandboxes): the
//            library must find no membarrier and use full fences on both sides;
//   failing  the query and the registration succeed (answered here, whatever the kernel has), every
//            MEMBARRIER_CMD_PRIVATE_EXPEDITED then fails with ENOMEM (Linux may fail it for want of memory): the
//            sleeping side must wait with timeouts.
// Every other system call goes to libc. At exit it writes "membarrier shim: <n> refused" to stderr.
#include <dlfcn.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

using SyscallFunction = long (*)(long, ...);

std::atomic<long> refused{0};

enum class Mode { kOff, kAbsent, kFailing };

Mode mode() {
  static const Mode chosen = [] {
    const char* value = std::getenv("MEMBARRIER_SHIM");
    if (value && std::strcmp(value, "absent") == 0) return Mode::kAbsent;
    if (value && std::strcmp(value, "failing") == 0) return Mode::kFailing;
    return Mode::kOff;
  }();
  return chosen;
}

__attribute__((destructor)) void report() { std::fprintf(stderr, "membarrier shim: %ld refused\n", refused.load()); }

}  // namespace

extern "C" long syscall(long number, ...) {
  // Six arguments, as many as a Linux system call takes; the x86-64 and arm64 calling conventions make reading
  // unused ones harmless.
  va_list list;
  va_start(list, number);
  long a[6];
  for (long& argument : a) argument = va_arg(list, long);
  va_end(list);
  if (number == __NR_membarrier) {
    const Mode chosen = mode();
    // Failing: the query and the registration succeed whatever the kernel has, so the failing command is called.
    if (chosen == Mode::kFailing && a[0] == MEMBARRIER_CMD_QUERY) return MEMBARRIER_CMD_PRIVATE_EXPEDITED;
    if (chosen == Mode::kFailing && a[0] == MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) return 0;
    if (chosen == Mode::kAbsent || (chosen == Mode::kFailing && a[0] == MEMBARRIER_CMD_PRIVATE_EXPEDITED)) {
      refused.fetch_add(1);
      errno = chosen == Mode::kAbsent ? ENOSYS : ENOMEM;
      return -1;
    }
  }
  static const auto real = reinterpret_cast<SyscallFunction>(dlsym(RTLD_NEXT, "syscall"));
  return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
