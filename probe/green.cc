// Probe: how green contexts behave with primary-context modules, memory, events and synchronization.
#include <cuda.h>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#define R(x) do { CUresult r_ = (x); const char* n_ = nullptr; cuGetErrorName(r_, &n_); printf("%-70s -> %s\n", #x, n_ ? n_ : "?"); } while (0)
static std::string ptx() { std::ifstream f("probe/k.ptx"); std::stringstream s; s << f.rdbuf(); return s.str(); }
int main() {
  cuInit(0);
  int version = 0; cuDriverGetVersion(&version); printf("driver %d\n", version);
  CUdevice dev; cuDeviceGet(&dev, 0);
  CUcontext primary; cuDevicePrimaryCtxRetain(&primary, dev); cuCtxSetCurrent(primary);
  CUdevResource all{}; R(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
  printf("sm count %u, min partition %u, alignment %u\n", all.sm.smCount, all.sm.minSmPartitionSize, all.sm.smCoscheduledAlignment);
  for (unsigned ask : {1u, 7u, 16u, 33u}) {
    CUdevResource group[4]{}; unsigned n = 1; CUdevResource rest{};
    CUresult r = cuDevSmResourceSplitByCount(group, &n, &all, &rest, 0, ask);
    printf("split ask %u -> r=%d groups %u, group %u sms, rest %u sms\n", ask, r, n, group[0].sm.smCount, rest.sm.smCount);
  }
  unsigned n = 0; CUdevResource dummy{};
  R(cuDevSmResourceSplitByCount(nullptr, &n, &all, &dummy, 0, 16)); printf("groups of 16 possible: %u\n", n);
  CUdevResource group[1]{}; n = 1; CUdevResource rest{};
  R(cuDevSmResourceSplitByCount(group, &n, &all, &rest, 0, 16));
  CUdevResourceDesc d1, d2; R(cuDevResourceGenerateDesc(&d1, group, 1)); R(cuDevResourceGenerateDesc(&d2, &rest, 1));
  CUgreenCtx g1, g2; R(cuGreenCtxCreate(&g1, d1, dev, CU_GREEN_CTX_DEFAULT_STREAM)); R(cuGreenCtxCreate(&g2, d2, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  CUdevResource got{}; R(cuGreenCtxGetDevResource(g1, &got, CU_DEV_RESOURCE_TYPE_SM)); printf("g1 sm %u\n", got.sm.smCount);
  R(cuGreenCtxGetDevResource(g2, &got, CU_DEV_RESOURCE_TYPE_SM)); printf("g2 sm %u\n", got.sm.smCount);
  // overlapping second split of the whole device while g1, g2 exist
  CUdevResource again[1]{}; n = 1; CUdevResource rest2{};
  R(cuDevSmResourceSplitByCount(again, &n, &all, &rest2, 0, 100)); CUdevResourceDesc d3; R(cuDevResourceGenerateDesc(&d3, again, 1));
  CUgreenCtx g3; R(cuGreenCtxCreate(&g3, d3, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  CUstream s1, s2; R(cuGreenCtxStreamCreate(&s1, g1, CU_STREAM_NON_BLOCKING, 0)); R(cuGreenCtxStreamCreate(&s2, g2, CU_STREAM_NON_BLOCKING, 0));
  int least, greatest; cuCtxGetStreamPriorityRange(&least, &greatest);
  CUstream s1p; R(cuGreenCtxStreamCreate(&s1p, g1, CU_STREAM_NON_BLOCKING, greatest));
  CUstream sblock; R(cuGreenCtxStreamCreate(&sblock, g1, 0, 0));
  CUcontext c1; R(cuCtxFromGreenCtx(&c1, g1)); printf("c1 %p primary %p\n", (void*)c1, (void*)primary);
  CUcontext sc; R(cuStreamGetCtx(s1, &sc)); printf("stream ctx %p\n", (void*)sc);
  unsigned long long id; R(cuStreamGetId(s1, &id)); printf("stream id %llu\n", id);
  // modules loaded under the primary context, launched on a green stream
  cuCtxSetCurrent(primary);
  std::string image = ptx();
  CUmodule m; R(cuModuleLoadData(&m, image.c_str()));
  CUfunction smids, spin; R(cuModuleGetFunction(&smids, m, "smids")); R(cuModuleGetFunction(&spin, m, "spin"));
  CUdeviceptr out; R(cuMemAllocAsync(&out, 4 * 1024, s1)); // primary current, green stream
  void* args[] = {&out};
  R(cuLaunchKernel(smids, 1024, 1, 1, 32, 1, 1, 0, s1, args, nullptr)); // primary current, primary module, green stream
  R(cuStreamSynchronize(s1));
  std::vector<unsigned> ids(1024); R(cuMemcpyDtoH(ids.data(), out, 4 * 1024));
  std::set<unsigned> distinct(ids.begin(), ids.end()); printf("primary function on g1 stream: %zu distinct SMs\n", distinct.size());
  R(cuLaunchKernel(smids, 1024, 1, 1, 32, 1, 1, 0, s2, args, nullptr)); R(cuStreamSynchronize(s2));
  R(cuMemcpyDtoH(ids.data(), out, 4 * 1024)); distinct = std::set<unsigned>(ids.begin(), ids.end()); printf("on g2 stream: %zu distinct SMs\n", distinct.size());
  // green ctx current
  R(cuCtxSetCurrent(c1));
  R(cuLaunchKernel(smids, 1024, 1, 1, 32, 1, 1, 0, s1, args, nullptr)); R(cuStreamSynchronize(s1));
  CUstream plain; R(cuStreamCreate(&plain, CU_STREAM_NON_BLOCKING)); // while green current
  R(cuLaunchKernel(smids, 1024, 1, 1, 32, 1, 1, 0, plain, args, nullptr)); R(cuStreamSynchronize(plain));
  R(cuMemcpyDtoH(ids.data(), out, 4 * 1024)); distinct = std::set<unsigned>(ids.begin(), ids.end()); printf("plain stream created under green current: %zu distinct SMs\n", distinct.size());
  CUmodule m2; R(cuModuleLoadData(&m2, image.c_str())); // module loaded while green current
  CUfunction smids2; R(cuModuleGetFunction(&smids2, m2, "smids"));
  cuCtxSetCurrent(primary);
  R(cuLaunchKernel(smids2, 1024, 1, 1, 32, 1, 1, 0, s1, args, nullptr)); R(cuStreamSynchronize(s1));
  CUstream ps; R(cuStreamCreate(&ps, CU_STREAM_NON_BLOCKING));
  R(cuLaunchKernel(smids2, 1024, 1, 1, 32, 1, 1, 0, ps, args, nullptr)); R(cuStreamSynchronize(ps));
  // library loading
  CUlibrary lib; R(cuLibraryLoadData(&lib, image.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel kern; R(cuLibraryGetKernel(&kern, lib, "smids"));
  R(cuLaunchKernel((CUfunction)kern, 1024, 1, 1, 32, 1, 1, 0, s1, args, nullptr)); R(cuStreamSynchronize(s1));
  // events across
  CUevent e; R(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  CUdeviceptr flag; R(cuMemAlloc(&flag, 4)); R(cuMemsetD32(flag, 0, 1));
  void* spin_args[] = {nullptr, &flag}; unsigned long long ns = 300000000ull; spin_args[0] = &ns;
  R(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s1, spin_args, nullptr));
  R(cuEventRecord(e, s1)); R(cuStreamWaitEvent(ps, e, 0));
  // does cuCtxSynchronize on the primary wait for green work?
  R(cuCtxSynchronize());
  unsigned f = 7; R(cuMemcpyDtoH(&f, flag, 4)); printf("after primary cuCtxSynchronize, spin on g1 done: %u\n", f);
  R(cuMemsetD32(flag, 0, 1));
  R(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s1, spin_args, nullptr));
  R(cuCtxSetCurrent(c1)); R(cuCtxSynchronize()); R(cuMemcpyDtoH(&f, flag, 4)); printf("after green cuCtxSynchronize: %u\n", f);
  cuCtxSetCurrent(primary);
  // stream-ordered free on green stream; memory pool
  R(cuMemFreeAsync(out, s1)); R(cuStreamSynchronize(s1));
  // legacy stream of primary vs green stream
  R(cuMemsetD32(flag, 0, 1));
  R(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, sblock, spin_args, nullptr));
  R(cuStreamSynchronize(CU_STREAM_LEGACY)); R(cuMemcpyDtoH(&f, flag, 4)); printf("legacy sync waits for blocking green stream: %u\n", f);
  // stream write value on green stream
  CUdeviceptr word; R(cuMemAlloc(&word, 8)); R(cuStreamWriteValue64(s1, word, 5, 0)); R(cuStreamSynchronize(s1));
  // destroy order
  R(cuStreamDestroy(s1)); R(cuStreamDestroy(s1p)); R(cuStreamDestroy(sblock)); R(cuStreamDestroy(s2));
  R(cuGreenCtxDestroy(g1)); R(cuGreenCtxDestroy(g2)); R(cuGreenCtxDestroy(g3));
  // a stream of a destroyed green context
  CUgreenCtx g4; R(cuGreenCtxCreate(&g4, d1, dev, CU_GREEN_CTX_DEFAULT_STREAM)); CUstream s4; R(cuGreenCtxStreamCreate(&s4, g4, CU_STREAM_NON_BLOCKING, 0));
  R(cuGreenCtxDestroy(g4)); R(cuStreamQuery(s4));
  // workqueue config / stream timing: concurrency
  printf("done\n");
  return 0;
}
