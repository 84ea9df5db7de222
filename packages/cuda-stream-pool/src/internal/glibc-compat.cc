// Definitions that the statically linked libstdc++ would otherwise take from a glibc newer than the README's floor;
// see glibc-compat.h. Hidden: they serve this binary only and never replace the process's own.
#include <cstdint>
#if defined(__linux__) && defined(__GLIBC__)
#include <sys/syscall.h>
#include <unistd.h>

extern "C" {

// glibc 2.32: libstdc++ skips atomic reference counting while this is nonzero. Zero says "may be multithreaded",
// which is always correct for an addon (Node runs several threads).
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;

// glibc 2.36: std::random_device's default source, which libstdc++ links in whether or not it is used (the addon
// does not use it). Reads the kernel's generator, as glibc's does.
__attribute__((visibility("hidden"))) std::uint32_t arc4random() {
  std::uint32_t value = 0;
  while (syscall(SYS_getrandom, &value, sizeof(value), 0) != static_cast<long>(sizeof(value))) {
  }
  return value;
}
}
#endif
