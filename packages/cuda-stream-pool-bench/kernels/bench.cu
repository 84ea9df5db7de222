// Kernels of the benchmarks in src/ (`cuda-stream-pool bench` and `bench micro`). The PTX beside this file is
// what the benchmarks load (Module.load); regenerate it after any change with:
//   bash scripts/build-ptx.sh
// compute_80 PTX is JIT-compiled by the driver for the GPU at hand (Ampere and newer) and cached by the driver.
// No fast-math flags: fma_steps must compile to fma.rn.f32, which the CPU reference in src/fmaf.ts emulates.

// The executor task's compute: applies `steps` steps of v = fmaf(v, a, b) to data[i] for every i < n, in place.
// One thread per element; the steps form a dependent chain, so the time grows linearly with `steps`.
extern "C" __global__ void fma_steps(float* data, unsigned int n, unsigned int steps, float a, float b) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = data[i];
  for (unsigned int s = 0; s < steps; ++s) v = fmaf(v, a, b);
  data[i] = v;
}

// Does nothing: the "short kernel" of the synchronize micro-benchmark, launched the same way from JS and from C++.
extern "C" __global__ void empty_kernel() {}

// Spins for `ns` nanoseconds of device time (%globaltimer), launched as one thread. Holds a stream while the host queues
// the work behind it, so that work then runs back to back: phases measured alone then exclude the host's enqueue time.
extern "C" __global__ void hold(unsigned long long ns) {
  unsigned long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  unsigned long long now = start;
  while (now - start < ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
}
