// Partitions of a device's multiprocessors: green contexts made once per device and process, whose streams run
// kernels only on their share of the multiprocessors. Runs on: any JS thread (main or worker).
#include <mutex>
#include <vector>

#include "binding/binding.h"
#include "device/device.h"
#include "device/partition.h"
#include "internal/context.h"
#include "internal/loader.h"
#include "internal/memory.h"

namespace csp {

// Note [partitions]: a partition is a green context (cuGreenCtxCreate) over a share of the device's multiprocessors,
// and a stream made in it (cuGreenCtxStreamCreate) runs its kernels only there. What the driver documents and what
// was measured on an H200 with a CUDA 13.0 driver decide how the library uses them:
//  - The driver rounds each share up to its granularity (8 multiprocessors there, reported by cuDeviceGetDevResource
//    as minSmPartitionSize and smCoscheduledAlignment) and lets green contexts overlap: a second split of the whole
//    device succeeds beside the first. So the split is made once per device and process, here, and every thread gets
//    the same partitions; they never overlap, and each reports the multiprocessors it really got.
//  - Everything else stays in the primary context, which every library call makes current: a kernel of a module
//    loaded in the primary context runs on a partition's stream (on the partition's multiprocessors only),
//    stream-ordered allocations and frees, events, waits across streams and stream memory operations work with it,
//    and cuCtxSynchronize of the primary context (device.synchronize()) waits for the partitions' work too. A green
//    context is never made current: a stream created while one is current would belong to it.
//  - A partition's streams are non-blocking (the driver refuses others), so the legacy default stream does not
//    order them.
//  - Green contexts live as long as the process (like the primary contexts the library retains): a stream of a
//    destroyed green context would fail every call with CUDA_ERROR_CONTEXT_IS_DESTROYED.
//  - From CUDA 13.1 a green context also has a work-queue configuration (CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG): how
//    many stream-ordered workloads it expects at once, and whether its work shares the device's queues with every
//    context or keeps to queues of its own where it can. Each partition reports the configuration the driver gave
//    it, read once at the split; with an older driver, or where the driver will not say, it reports none. The
//    library leaves the driver's default (shared) in place.

namespace {

struct Split {
  bool made = false;
  std::vector<unsigned> requested;  // multiprocessors asked for, per partition; the rest has none
  std::vector<unsigned> counts;     // multiprocessors each partition got
  std::vector<CUgreenCtx> contexts;
  // Each partition's work-queue configuration (CUDA 13.1), or a limit of 0 where the driver did not give one.
  std::vector<CUdevWorkqueueConfigResource> work_queues;
};

std::mutex& splits_mutex() {
  static std::mutex* mutex = new std::mutex();  // never destroyed: streams may be made during exit
  return *mutex;
}

Split& split_of(int device) {
  static Split* splits = new Split[kMaxDevices];
  return splits[device];
}

// Why partitions cannot be made on this driver, or nullptr.
const char* missing_entry_points() {
  const Driver& d = drv();
  if (!d.cuDeviceGetDevResource || !d.cuDevSmResourceSplitByCount || !d.cuDevResourceGenerateDesc ||
      !d.cuGreenCtxCreate || !d.cuGreenCtxGetDevResource || !d.cuGreenCtxStreamCreate)
    return "the CUDA driver has no green contexts with streams (they need CUDA 12.5 or later)";
  return nullptr;
}

Napi::Object describe_split(Napi::Env env, const Split& split) {
  Napi::Object out = Napi::Object::New(env);
  Napi::Array requested = Napi::Array::New(env, split.requested.size());
  Napi::Array counts = Napi::Array::New(env, split.counts.size());
  for (size_t i = 0; i < split.requested.size(); i++) requested.Set(static_cast<uint32_t>(i), split.requested[i]);
  for (size_t i = 0; i < split.counts.size(); i++) counts.Set(static_cast<uint32_t>(i), split.counts[i]);
  Napi::Array queues = Napi::Array::New(env, split.work_queues.size());
  for (size_t i = 0; i < split.work_queues.size(); i++) {
    const CUdevWorkqueueConfigResource& q = split.work_queues[i];
    if (q.wqConcurrencyLimit == 0) {
      queues.Set(static_cast<uint32_t>(i), env.Null());
      continue;
    }
    Napi::Object queue = Napi::Object::New(env);
    queue.Set("concurrencyLimit", q.wqConcurrencyLimit);
    queue.Set("balanced", q.sharingScope == CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED);
    queues.Set(static_cast<uint32_t>(i), queue);
  }
  out.Set("requested", requested);
  out.Set("counts", counts);
  out.Set("workQueues", queues);
  return out;
}

// partitionInfo(device) -> { reason } where partitions cannot be made, else { total, minimum, alignment, split }:
// the device's multiprocessors, the smallest partition and the step partitions grow by, and the split made so far
// ({ requested, counts, workQueues: per partition { concurrencyLimit, balanced } or null }) or null.
Napi::Value partition_info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int device = info[0].As<Napi::Number>().Int32Value();
  Napi::Object out = Napi::Object::New(env);
  if (const char* reason = missing_entry_points()) {
    out.Set("reason", reason);
    return out;
  }
  make_current(device);
  CUdevice handle = 0;
  check(drv().cuDeviceGet(&handle, device), "cuDeviceGet", device);
  CUdevResource all{};
  const CUresult r = drv().cuDeviceGetDevResource(handle, &all, CU_DEV_RESOURCE_TYPE_SM);
  if (r == CUDA_ERROR_NOT_SUPPORTED) {
    out.Set("reason", "the device cannot be partitioned (cuDeviceGetDevResource: CUDA_ERROR_NOT_SUPPORTED)");
    return out;
  }
  check(r, "cuDeviceGetDevResource", device);
  out.Set("total", all.sm.smCount);
  out.Set("minimum", all.sm.minSmPartitionSize);
  out.Set("alignment", all.sm.smCoscheduledAlignment);
  std::lock_guard<std::mutex> lock(splits_mutex());
  const Split& split = split_of(device);
  out.Set("split", split.made ? Napi::Value(describe_split(env, split)) : env.Null());
  return out;
}

// partitionCreate(device, counts: number[]) -> { requested, counts, workQueues }: splits the device once; a later call gets the
// split made first, whatever it asks (partition.ts compares). Each count is rounded up by the driver; the
// multiprocessors left over make one more partition when there are at least the driver's smallest partition.
Napi::Value partition_create(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int device = info[0].As<Napi::Number>().Int32Value();
  Napi::Array asked = info[1].As<Napi::Array>();
  if (const char* reason = missing_entry_points())
    throw Napi::Error::New(env, std::string("cuda-stream-pool internal: ") + reason);  // partition.ts checks first
  std::lock_guard<std::mutex> lock(splits_mutex());
  Split& split = split_of(device);
  if (split.made) return describe_split(env, split);
  make_current(device);
  CUdevice handle = 0;
  check(drv().cuDeviceGet(&handle, device), "cuDeviceGet", device);
  CUdevResource rest{};
  check(drv().cuDeviceGetDevResource(handle, &rest, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource", device);
  std::vector<CUdevResource> groups;
  Split made;
  for (uint32_t i = 0; i < asked.Length(); i++) {
    const unsigned want = asked.Get(i).As<Napi::Number>().Uint32Value();
    CUdevResource group{}, remaining{};
    unsigned count = 1;
    check(drv().cuDevSmResourceSplitByCount(&group, &count, &rest, &remaining, 0, want), "cuDevSmResourceSplitByCount",
          device, [&] {
            return device_text(device) + ", partition " + std::to_string(i) + " of " + std::to_string(want) +
                   " multiprocessors from the " + std::to_string(rest.sm.smCount) + " left";
          });
    groups.push_back(group);
    made.requested.push_back(want);
    rest = remaining;
  }
  // What is left makes one more partition, when it is at least the smallest the driver makes.
  if (rest.sm.smCount > 0 && rest.sm.smCount >= rest.sm.minSmPartitionSize) {
    groups.push_back(rest);
    made.requested.push_back(0);
  }
  for (size_t i = 0; i < groups.size(); i++) {
    CUdevResourceDesc desc = nullptr;
    CUgreenCtx context = nullptr;
    check(drv().cuDevResourceGenerateDesc(&desc, &groups[i], 1), "cuDevResourceGenerateDesc", device);
    check(drv().cuGreenCtxCreate(&context, desc, handle, CU_GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate", device,
          [&] { return device_text(device) + ", " + std::to_string(groups[i].sm.smCount) + " multiprocessors"; });
    // Kept even if a later step fails: a context the process holds costs little, and nothing can use it yet.
    made.contexts.push_back(context);
    CUdevResource got{};
    check(drv().cuGreenCtxGetDevResource(context, &got, CU_DEV_RESOURCE_TYPE_SM), "cuGreenCtxGetDevResource", device);
    made.counts.push_back(got.sm.smCount);
    // Informational: a driver that will not say leaves the partition without a reported configuration.
    CUdevResource queues{};
    if (load_driver().driver_version < 13010 ||
        drv().cuGreenCtxGetDevResource(context, &queues, CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG) != CUDA_SUCCESS)
      queues.wqConfig.wqConcurrencyLimit = 0;
    made.work_queues.push_back(queues.wqConfig);
  }
  made.made = true;
  split = std::move(made);
  return describe_split(env, split);
}

}  // namespace

CUgreenCtx partition_context(int device, int index) {
  if (device < 0 || device >= kMaxDevices || index < 0) return nullptr;
  std::lock_guard<std::mutex> lock(splits_mutex());
  const Split& split = split_of(device);
  return static_cast<size_t>(index) < split.contexts.size() ? split.contexts[index] : nullptr;
}

unsigned partition_multiprocessors(int device, int index) {
  if (device < 0 || device >= kMaxDevices || index < 0) return 0;
  std::lock_guard<std::mutex> lock(splits_mutex());
  const Split& split = split_of(device);
  return static_cast<size_t>(index) < split.counts.size() ? split.counts[index] : 0;
}

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kPartitionExports[] = {
    {"partitionInfo", "number", entry<partition_info>},
    {"partitionCreate", "number, array", entry<partition_create>},
};

void register_partition(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kPartitionExports);
}

}  // namespace csp
