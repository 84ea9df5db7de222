#!/usr/bin/env bash
# Regenerates the committed PTX of the benchmark and test kernels from their .cu sources (needs nvcc).
#   bash scripts/build-ptx.sh
# nvcc 13 writes PTX ISA 9.0, which only a CUDA 13 driver loads; these kernels use nothing newer than ISA 8.0
# (CUDA 12.0, the oldest driver the library supports), so the version line is lowered to keep them loadable there.
set -euo pipefail
cd "$(dirname "$0")/.."
for source in packages/cuda-stream-pool-bench/kernels/bench.cu test/kernels/test-kernels.cu; do
  nvcc -ptx -arch=compute_80 -o "${source%.cu}.ptx" "$source"
  sed -i 's/^\.version .*/.version 8.0/' "${source%.cu}.ptx"
done
