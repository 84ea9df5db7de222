// Kernels for the GPU tests. Regenerate the PTX beside this file with:
//   bash scripts/build-ptx.sh
// (compute_80 PTX is JIT-compiled by the driver for the GPU at hand.) test/gpu/kernel/program.test.ts fails when the kernels or
// their parameters here differ from the PTX. See Note [prebuilt test kernels] in test/support/gpu.ts.

__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins for `ns` nanoseconds of device time; thread 0 of block 0 writes [start, end] %globaltimer stamps to
// `stamps` (two u64) when it is not null.
extern "C" __global__ void spin(unsigned long long ns, unsigned long long* stamps) {
  unsigned long long start = global_timer_ns();
  unsigned long long now = start;
  while (now - start < ns) now = global_timer_ns();
  if (stamps && threadIdx.x == 0 && blockIdx.x == 0) {
    stamps[0] = start;
    stamps[1] = now;
  }
}

// Does nothing: launch overhead.
extern "C" __global__ void empty() {}

// Writes through an address that no allocation covers: a sticky CUDA_ERROR_ILLEGAL_ADDRESS.
extern "C" __global__ void write_invalid(unsigned long long address) {
  *reinterpret_cast<volatile int*>(address) = 42;
}

// out[i] = value for i < n.
extern "C" __global__ void fill_u32(unsigned int* out, unsigned int value, unsigned int n) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}
