extern "C" __global__ void smids(unsigned int* out) {
  unsigned int id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  unsigned long long start; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  unsigned long long now = start;
  while (now - start < 200000) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  if (threadIdx.x == 0) out[blockIdx.x] = id;
}
extern "C" __global__ void spin(unsigned long long ns, unsigned int* flag) {
  unsigned long long start; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  unsigned long long now = start;
  while (now - start < ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  *flag = 1;
}
