#!/usr/bin/env bash
# The CPU suite, with the simulated driver's asynchronous and failure-injecting tests, against the library's addon
# built with AddressSanitizer and UndefinedBehaviorSanitizer (linux-x64). Node.js itself is not instrumented, so the
# sanitizer runtime is preloaded into every process of the run. Leak detection is off: the library keeps some
# process-wide state on purpose until exit (retained contexts, the poller, the pinned cache).
#   sanitizers.sh <work folder>     from the repository root, after npm ci (the packages' dist/ and build/ exist)
set -euo pipefail
repo=$PWD
tree=$1/sanitized
rm -rf "$tree"
mkdir -p "$tree"
# A copy of the tree, so the instrumented addon never replaces the one the other stages test. dist/ is copied rather
# than linked: the library finds its addon beside its own real path. Its node_modules links every dependency of the
# repository's, except the two packages, which are this copy's.
tar -c --exclude=./node_modules --exclude=./.git --exclude=./packages/cuda-stream-pool/build . | tar -x -C "$tree"
mkdir "$tree/node_modules"
for entry in "$repo"/node_modules/* "$repo"/node_modules/.bin; do
  case $(basename "$entry") in cuda-stream-pool | cuda-stream-pool-bench) ;; *) ln -s "$entry" "$tree/node_modules/" ;; esac
done
ln -s ../packages/cuda-stream-pool ../packages/cuda-stream-pool-bench "$tree/node_modules/"
cd "$tree/packages/cuda-stream-pool"
# Without the vptr check: it reads RTTI, and Node.js is built without it, so destroying a std::shared_ptr whose control
# block Node made (v8::ArrayBuffer::GetBackingStore()'s, held by a host registration) is reported falsely.
flags='-fsanitize=address,undefined -fno-sanitize=vptr -fno-omit-frame-pointer -g'
npx --no-install node-gyp configure >/dev/null
CXXFLAGS="$flags" LDFLAGS="-fsanitize=address,undefined" make -C build -j "$(nproc)" cuda_stream_pool >/dev/null
# Read whole before grep stops at the first match (under pipefail, ldd could then fail writing to the closed pipe).
linked=$(ldd build/Release/cuda_stream_pool.node)
grep -q libasan <<<"$linked" || { echo 'the addon is not instrumented'; exit 1; }
cd "$tree"
# The benchmark's addon (copied with the tree) stays uninstrumented, for the suites that load it.
LD_PRELOAD=$(g++ -print-file-name=libasan.so) \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
  UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1 \
  node dist/test/support/run-tests.js
