// Force-included into every file of the addons (binding.gyp: -include), so that a binary built on a new glibc
// loads on an old one. glibc 2.34 moved dlopen and the pthread functions into libc.so.6 under new symbol versions;
// binding each to its first version (still exported by every later glibc) keeps the binaries at the glibc floor the
// README states. The libraries that held them before 2.34 (libdl.so.2, libpthread.so.0) are linked as needed.
#pragma once
#if defined(__linux__)
#include <features.h>  // defines __GLIBC__; this header comes before every other
#endif
#if defined(__linux__) && defined(__GLIBC__)
// Functions added to glibc after its first x86-64 release have later first versions there; arm64's port began at 2.17.
#if defined(__x86_64__)
#define CSP_GLIBC_BASE_VERSION "GLIBC_2.2.5"
#define CSP_GLIBC_CONDATTR_SETCLOCK_VERSION "GLIBC_2.3.3"
#define CSP_GLIBC_SETNAME_VERSION "GLIBC_2.12"
#elif defined(__aarch64__)
#define CSP_GLIBC_BASE_VERSION "GLIBC_2.17"
#define CSP_GLIBC_CONDATTR_SETCLOCK_VERSION "GLIBC_2.17"
#define CSP_GLIBC_SETNAME_VERSION "GLIBC_2.17"
#endif
#ifdef CSP_GLIBC_BASE_VERSION
#define CSP_PIN_SYMBOL(name) __asm__(".symver " #name "," #name "@" CSP_GLIBC_BASE_VERSION);
CSP_PIN_SYMBOL(dlopen)
CSP_PIN_SYMBOL(dlsym)
CSP_PIN_SYMBOL(dlerror)
CSP_PIN_SYMBOL(dladdr)
CSP_PIN_SYMBOL(dlclose)
CSP_PIN_SYMBOL(pthread_once)
CSP_PIN_SYMBOL(pthread_rwlock_rdlock)
CSP_PIN_SYMBOL(pthread_rwlock_wrlock)
CSP_PIN_SYMBOL(pthread_rwlock_unlock)
CSP_PIN_SYMBOL(pthread_rwlock_tryrdlock)
CSP_PIN_SYMBOL(pthread_rwlock_trywrlock)
CSP_PIN_SYMBOL(pthread_rwlock_init)
CSP_PIN_SYMBOL(pthread_rwlock_destroy)
CSP_PIN_SYMBOL(pthread_key_create)
CSP_PIN_SYMBOL(pthread_key_delete)
CSP_PIN_SYMBOL(pthread_getspecific)
CSP_PIN_SYMBOL(pthread_setspecific)
CSP_PIN_SYMBOL(pthread_create)
CSP_PIN_SYMBOL(pthread_join)
CSP_PIN_SYMBOL(pthread_detach)
__asm__(".symver pthread_condattr_setclock,pthread_condattr_setclock@" CSP_GLIBC_CONDATTR_SETCLOCK_VERSION);
__asm__(".symver pthread_setname_np,pthread_setname_np@" CSP_GLIBC_SETNAME_VERSION);
#undef CSP_PIN_SYMBOL
#endif
#endif
