#!/usr/bin/env bash
# Tests the packed packages (the library and the benchmark) as a user gets them. Run by .ci/run in a private mount namespace (unshare --mount), where it
# hides the CUDA toolkit, Node's headers and every compiler, so installing can only succeed without compiling.
#   installed-package.sh <library tarball> <benchmark tarball> <work folder> <node binary> [--qemu <arm64 library root>]
# With --qemu the node binary is an arm64 one, run through qemu-aarch64-static, and only the parts that load the
# binary run (imports, the CLI's exit codes, a smoke test of a few test files); type checks, npx and the whole suite
# need the machine's own Node.js.
set -euo pipefail
library_tarball=$1 bench_tarball=$2 work=$3 node_bin=$4 qemu_root=${6:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$work"

# Hide what a source build would need. Each hidden tool becomes /dev/null, which cannot be executed.
for hidden in /usr/local/cuda /usr/include/node; do
  [ -d "$hidden" ] && mount -t tmpfs none "$hidden"
done
for tool in /usr/bin/cc /usr/bin/c++ /usr/bin/cpp /usr/bin/make /usr/bin/*gcc* /usr/bin/*g++* /usr/bin/clang*; do
  [ -e "$tool" ] && mount --bind /dev/null "$tool"
done
if printf 'int main() { return 0; }\n' | g++ -x c++ - -o "$work/compiled" 2>/dev/null; then
  echo 'a C++ compiler is still reachable'
  exit 1
fi
[ ! -e /usr/local/cuda/include/cuda.h ] || { echo 'cuda.h is still reachable'; exit 1; }
echo 'hidden: the CUDA toolkit, Node.js headers, gcc, g++, cc, c++, make'

project=$work/project
mkdir -p "$project"
cd "$project"
# allowScripts: npm 11 runs a dependency's install script only when the project allows it; the script must then
# find the prebuilt binary and compile nothing.
printf '{ "name": "consumer", "version": "1.0.0", "private": true,
  "allowScripts": { "cuda-stream-pool": true, "cuda-stream-pool-bench": true } }\n' >package.json
# The library alone first: it pulls no dependency of the benchmark or its command.
npm install --no-audit --no-fund --foreground-scripts "$library_tarball"
installed=$project/node_modules/cuda-stream-pool
for dependency in commander zod cli-progress cli-table3 cuda-stream-pool-bench; do
  [ ! -e "$project/node_modules/$dependency" ] || { echo "installing the library pulled $dependency"; exit 1; }
done
echo "the library alone: $(ls "$project/node_modules" | tr '\n' ' ')"
npm install --no-audit --no-fund --foreground-scripts "$bench_tarball"
installed_bench=$project/node_modules/cuda-stream-pool-bench
for package in "$installed" "$installed_bench"; do
  [ ! -e "$package/build" ] || { echo "the install compiled the addon of $package (build/ exists)"; exit 1; }
done
echo 'installed without compiling: no build/ folder in either package'

if [ -n "$qemu_root" ]; then
  # Children (the test runner's files, the tests' own child processes) start process.execPath: point it at a
  # wrapper that runs the arm64 Node.js through qemu, in every process, through a preloaded module.
  cat >"$work/node-arm64" <<EOF
#!/bin/sh
exec qemu-aarch64-static -L "$qemu_root" "$node_bin" "\$@"
EOF
  chmod +x "$work/node-arm64"
  printf 'process.execPath = %s;\n' "'$work/node-arm64'" >"$work/exec-path.mjs"
  export NODE_OPTIONS="--import=file://$work/exec-path.mjs"
  node_bin=$work/node-arm64
fi
"$node_bin" -p '`Node.js ${process.version} on ${process.platform}-${process.arch}`'


# The shipped binary loads: the driver, not the addon, is what is missing here.
cat >esm.mjs <<'EOF'
import { cuda, StreamPool, Device } from 'cuda-stream-pool';
if (cuda.available || !/libcuda\.so\.1/.test(cuda.unavailableReason) || Device.count() !== 0) {
  console.error('unexpected state:', cuda.available, cuda.unavailableReason);
  process.exit(1);
}
console.log(`ESM import: cuda.available is false; reason: ${cuda.unavailableReason}`);
if (typeof StreamPool !== 'function') process.exit(1);
EOF
"$node_bin" esm.mjs
cat >cjs.cjs <<'EOF'
const { cuda, StreamPool } = require('cuda-stream-pool');
if (cuda.available || !/libcuda\.so\.1/.test(cuda.unavailableReason) || typeof StreamPool !== 'function') process.exit(1);
console.log('CommonJS require: the same exports');
EOF
"$node_bin" --no-warnings cjs.cjs

cli=$installed_bench/dist/cli/main.js
version=$("$node_bin" "$cli" -v)
[ "$version" = "$(node -p "require('$installed_bench/package.json').version")" ] || { echo "-v printed $version"; exit 1; }
set +e
"$node_bin" "$cli" bench 2>"$work/bench.err"
status=$?
set -e
cat "$work/bench.err"
[ "$status" = 2 ] || { echo "bench exited $status, not 2"; exit 1; }
grep -q 'bench needs a CUDA GPU and cannot run here: tried to open the CUDA driver library' "$work/bench.err"

if [ -z "$qemu_root" ]; then
  [ "$(npx --no-install cuda-stream-pool --version)" = "$version" ]
  set +e
  npx --no-install cuda-stream-pool bench 2>/dev/null
  status=$?
  set -e
  [ "$status" = 2 ] || { echo "npx cuda-stream-pool bench exited $status, not 2"; exit 1; }
  echo "npx cuda-stream-pool --version: $version; bench: exit 2 with the reason"

  # The shipped declarations, strictly, without and then with @types/node.
  cat >check.ts <<'EOF'
import { cuda, currentStream, CudaError, CudaUnavailableError, Device, DeviceBuffer, PinnedBuffer, StreamPool, type Stream } from 'cuda-stream-pool';

export async function run(): Promise<number> {
  if (!cuda.available) return cuda.unavailableReason?.length ?? 0;
  const device: Device = Device.get(0);
  await using pool = new StreamPool({ device, size: 4 });
  return pool.run(async () => {
    const stream: Stream = currentStream();
    using host = PinnedBuffer.alloc(1024);
    await using buffer = DeviceBuffer.alloc(1024, { stream });
    stream.copy(buffer, host.bytes, { byteLength: 1024 });
    await stream.synchronize({ signal: AbortSignal.timeout(1000) });
    return buffer.byteLength;
  });
}
run().catch((error: unknown) => {
  if (error instanceof CudaError) console.error(error.code, error.message);
  else if (error instanceof CudaUnavailableError) console.error(error.reason);
});
EOF
  for types in '[]' '["node"]'; do
    [ "$types" = '[]' ] || npm install --no-audit --no-fund --no-save @types/node@20 >/dev/null
    printf '{ "compilerOptions": { "strict": true, "noEmit": true, "skipLibCheck": false, "target": "ES2022",
      "lib": ["ES2022", "DOM"], "module": "NodeNext", "moduleResolution": "NodeNext", "types": %s },
      "files": ["check.ts"] }\n' "$types" >tsconfig.json
    node "$repo/node_modules/typescript/bin/tsc" -p tsconfig.json
    echo "strict TypeScript against the shipped declarations with types $types: no errors"
  done
fi

# The test suite against the installed copies: its compiled tests in a tree whose packages/ are the installed ones
# and whose node_modules links the repository's dependencies but the installed packages, so every import of the
# library (by name, or by #library/ path) reaches node_modules/cuda-stream-pool, which has no build/.
suite=$work/suite
mkdir -p "$suite/dist" "$suite/test" "$suite/packages" "$suite/node_modules"
cp "$repo/package.json" "$suite/"
cp -r "$repo/dist/test" "$repo/dist/examples" "$suite/dist/"
cp -r "$repo/test/kernels" "$suite/test/"
ln -s "$installed" "$installed_bench" "$suite/packages/"
for entry in "$repo"/node_modules/* "$repo"/node_modules/.bin; do
  case $(basename "$entry") in cuda-stream-pool | cuda-stream-pool-bench) ;; *) ln -s "$entry" "$suite/node_modules/" ;; esac
done
ln -s "$installed" "$installed_bench" "$suite/node_modules/"
cd "$suite"
if [ -z "$qemu_root" ]; then
  "$node_bin" dist/test/support/run-tests.js
else
  # A smoke test of the arm64 binary: the files below load it and drive its no-driver paths, its native threads and
  # its unloading (the whole suite under emulation would take a quarter of CI's time). node --test starts each file
  # with the path it read before any preload ran, which qemu cannot start without binfmt_misc; so each file runs
  # directly (node:test then runs its tests in that process) and the counts add up.
  passed=0 failed=0 skipped=0 status=0
  for file in cpu/unavailable cpu/errors native/never-throws cpu/addon-unload workers/terminating-worker; do
    "$node_bin" --expose-gc "dist/test/$file.test.js" >"$work/test.tap" 2>&1 || status=1
    grep -E '^not ok|^# (pass|fail|skipped)' "$work/test.tap" | sed "s|^|$file: |" | grep -v ': # ' || true
    count() { sed -n "s/^# $1 \([0-9]*\)$/\1/p" "$work/test.tap" | tail -1; }
    passed=$((passed + $(count pass))) failed=$((failed + $(count fail))) skipped=$((skipped + $(count skipped)))
    [ "$(count fail)" = 0 ] || cat "$work/test.tap"
  done
  echo "$passed passed, $failed failed, $skipped skipped"
  [ "$status" = 0 ] && [ "$failed" = 0 ] && [ "$passed" -gt 0 ]
fi
