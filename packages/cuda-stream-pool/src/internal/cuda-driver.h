// The subset of the CUDA driver API this addon uses, declared here so that building needs no CUDA toolkit: types,
// enum values, structs and the function pointer types of the entry points that loader.cc resolves at run time.
// Each function type is the ABI that cuGetProcAddress hands out when asked at the version loader.h lists beside the
// entry point (for example cuStreamDestroy at 4000 is the symbol cuda.h calls cuStreamDestroy_v2).
// test/native/cuda-driver-check.cc checks every declaration here against the toolkit's cuda.h where one exists.
#pragma once
#include <cstddef>
#include <cstdint>

// Calling convention of driver callbacks; empty on Linux, as in cuda.h.
#ifndef CUDA_CB
#define CUDA_CB
#endif

namespace csp {

using cuuint32_t = std::uint32_t;
using cuuint64_t = std::uint64_t;
using CUdevice = int;
using CUdeviceptr = unsigned long long;

// Opaque handles; the driver owns what they point to.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUkern_st;
struct CUstream_st;
struct CUevent_st;
struct CUmemPoolHandle_st;
struct CUgraph_st;
struct CUgraphNode_st;
struct CUgraphExec_st;
struct CUgreenCtx_st;
struct CUarray_st;
struct CUdevResourceDesc_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUkernel = CUkern_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;
using CUmemoryPool = CUmemPoolHandle_st*;
using CUgraph = CUgraph_st*;
using CUgraphNode = CUgraphNode_st*;
using CUgraphExec = CUgraphExec_st*;
using CUgreenCtx = CUgreenCtx_st*;
using CUarray = CUarray_st*;
using CUdevResourceDesc = CUdevResourceDesc_st*;

// The special stream handles: the legacy default stream and the calling thread's per-thread default stream.
inline const CUstream CU_STREAM_LEGACY = reinterpret_cast<CUstream>(std::uintptr_t{0x1});
inline const CUstream CU_STREAM_PER_THREAD = reinterpret_cast<CUstream>(std::uintptr_t{0x2});

// cuMemHostAlloc flags.
constexpr unsigned int CU_MEMHOSTALLOC_PORTABLE = 0x01;
constexpr unsigned int CU_MEMHOSTALLOC_DEVICEMAP = 0x02;
constexpr unsigned int CU_MEMHOSTALLOC_WRITECOMBINED = 0x04;

// cuMemHostRegister flags.
constexpr unsigned int CU_MEMHOSTREGISTER_PORTABLE = 0x01;

enum CUresult {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_STUB_LIBRARY = 34,
  CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_ECC_UNCORRECTABLE = 214,
  CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_JIT_COMPILATION_DISABLED = 223,
  CUDA_ERROR_INVALID_SOURCE = 300,
  CUDA_ERROR_FILE_NOT_FOUND = 301,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_ILLEGAL_STATE = 401,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  CUDA_ERROR_LAUNCH_TIMEOUT = 702,
  CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
  CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705,
  CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
  CUDA_ERROR_ASSERT = 710,
  CUDA_ERROR_TOO_MANY_PEERS = 711,
  CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
  CUDA_ERROR_HARDWARE_STACK_ERROR = 714,
  CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
  CUDA_ERROR_MISALIGNED_ADDRESS = 716,
  CUDA_ERROR_INVALID_ADDRESS_SPACE = 717,
  CUDA_ERROR_INVALID_PC = 718,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720,
  CUDA_ERROR_NOT_PERMITTED = 800,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
  CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
  CUDA_ERROR_STREAM_CAPTURE_MERGE = 902,
  CUDA_ERROR_STREAM_CAPTURE_UNMATCHED = 903,
  CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904,
  CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905,
  CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
  CUDA_ERROR_CAPTURED_EVENT = 907,
  CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908,
  CUDA_ERROR_TIMEOUT = 909,
  CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910,
  CUDA_ERROR_EXTERNAL_DEVICE = 911,
  CUDA_ERROR_INVALID_CLUSTER_SIZE = 912,
  CUDA_ERROR_INVALID_RESOURCE_TYPE = 914,
  CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION = 915,
  CUDA_ERROR_UNKNOWN = 999,
};

enum CUdevice_attribute {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
  CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
  CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS = 31,
  CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT = 51,
  CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT = 40,
  CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
  CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83,
  CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS = 88,
  CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 89,
  CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 91,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 95,
  CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115,
  CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH = 120,
  // Stream memory operations at the 12.0 ABI (cuStreamWriteValue64 and friends are the _v2 entry points): 32-bit
  // ones work on every device; 64-bit ones where CAN_USE_64_BIT_STREAM_MEM_OPS is 1. The _V1 attributes describe
  // the retired v1 entry points and are declared only so nobody mistakes them for these.
  CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1 = 92,
  CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1 = 93,
  CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 122,
  CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR = 123,
};

enum CUfunction_attribute {
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  CU_FUNC_ATTRIBUTE_PTX_VERSION = 5,
  CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

enum CUjit_option {
  CU_JIT_MAX_REGISTERS = 0,
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_JIT_LOG_VERBOSE = 12,
};

enum CUmemPool_attribute {
  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
  CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
  CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,
  CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
  CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8,
};

enum CUstream_flags { CU_STREAM_DEFAULT = 0x0, CU_STREAM_NON_BLOCKING = 0x1 };

enum CUevent_flags {
  CU_EVENT_DEFAULT = 0x0,
  CU_EVENT_BLOCKING_SYNC = 0x1,
  CU_EVENT_DISABLE_TIMING = 0x2,
  CU_EVENT_INTERPROCESS = 0x4,
};

enum CUevent_wait_flags { CU_EVENT_WAIT_DEFAULT = 0x0 };

enum CUstreamWaitValue_flags {
  CU_STREAM_WAIT_VALUE_GEQ = 0x0,
  CU_STREAM_WAIT_VALUE_EQ = 0x1,
  CU_STREAM_WAIT_VALUE_AND = 0x2,
  CU_STREAM_WAIT_VALUE_NOR = 0x3,
  CU_STREAM_WAIT_VALUE_FLUSH = 1 << 30,
};

enum CUstreamWriteValue_flags { CU_STREAM_WRITE_VALUE_DEFAULT = 0x0, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER = 0x1 };

enum CUmemAttach_flags { CU_MEM_ATTACH_GLOBAL = 0x1, CU_MEM_ATTACH_HOST = 0x2, CU_MEM_ATTACH_SINGLE = 0x4 };

enum CUmem_advise {
  CU_MEM_ADVISE_SET_READ_MOSTLY = 1,
  CU_MEM_ADVISE_UNSET_READ_MOSTLY = 2,
  CU_MEM_ADVISE_SET_PREFERRED_LOCATION = 3,
  CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION = 4,
  CU_MEM_ADVISE_SET_ACCESSED_BY = 5,
  CU_MEM_ADVISE_UNSET_ACCESSED_BY = 6,
};

// cuMemPrefetchAsync and cuMemAdvise at the 12.0 ABI take a CUdevice (CU_DEVICE_CPU for the host); CUmemLocation
// is what their CUDA 12.2 versions take instead, declared for entry points that use it.
constexpr CUdevice CU_DEVICE_CPU = -1;

enum CUmemLocationType {
  CU_MEM_LOCATION_TYPE_INVALID = 0x0,
  CU_MEM_LOCATION_TYPE_DEVICE = 0x1,
  CU_MEM_LOCATION_TYPE_HOST = 0x2,
  CU_MEM_LOCATION_TYPE_HOST_NUMA = 0x3,
  CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT = 0x4,
  CU_MEM_LOCATION_TYPE_MAX = 0x7FFFFFFF,
};

struct CUmemLocation {
  CUmemLocationType type;
  int id;
};

// Which devices may access a memory pool's allocations (cuMemPoolSetAccess, cuMemPoolGetAccess).
enum CUmemAccess_flags {
  CU_MEM_ACCESS_FLAGS_PROT_NONE = 0x0,
  CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1,
  CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3,
  CU_MEM_ACCESS_FLAGS_PROT_MAX = 0x7FFFFFFF,
};

struct CUmemAccessDesc {
  CUmemLocation location;
  CUmemAccess_flags flags;
};

// Interprocess handles: opaque bytes that another process opens (cuIpcOpenMemHandle, cuIpcOpenEventHandle).
constexpr int CU_IPC_HANDLE_SIZE = 64;
struct CUipcMemHandle {
  char reserved[CU_IPC_HANDLE_SIZE];
};
struct CUipcEventHandle {
  char reserved[CU_IPC_HANDLE_SIZE];
};
enum CUipcMem_flags { CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1 };

enum CUstreamCaptureStatus {
  CU_STREAM_CAPTURE_STATUS_NONE = 0,
  CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
  CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
};

enum CUstreamCaptureMode {
  CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
  CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
  CU_STREAM_CAPTURE_MODE_RELAXED = 2,
};

enum CUgraphNodeType {
  CU_GRAPH_NODE_TYPE_KERNEL = 0,
  CU_GRAPH_NODE_TYPE_MEMCPY = 1,
  CU_GRAPH_NODE_TYPE_MEMSET = 2,
  CU_GRAPH_NODE_TYPE_HOST = 3,
  CU_GRAPH_NODE_TYPE_GRAPH = 4,
  CU_GRAPH_NODE_TYPE_EMPTY = 5,
  CU_GRAPH_NODE_TYPE_WAIT_EVENT = 6,
  CU_GRAPH_NODE_TYPE_EVENT_RECORD = 7,
  CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL = 8,
  CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT = 9,
  CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
  CU_GRAPH_NODE_TYPE_MEM_FREE = 11,
  CU_GRAPH_NODE_TYPE_BATCH_MEM_OP = 12,
  CU_GRAPH_NODE_TYPE_CONDITIONAL = 13,
};

enum CUgraphInstantiate_flags {
  CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH = 1,
  CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD = 2,
  CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH = 4,
  CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY = 8,
};

enum CUgraphExecUpdateResult {
  CU_GRAPH_EXEC_UPDATE_SUCCESS = 0x0,
  CU_GRAPH_EXEC_UPDATE_ERROR = 0x1,
  CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED = 0x2,
  CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED = 0x3,
  CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED = 0x4,
  CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED = 0x5,
  CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED = 0x6,
  CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE = 0x7,
  CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED = 0x8,
};

// What cuGraphExecUpdate reports beside its CUresult.
struct CUgraphExecUpdateResultInfo {
  CUgraphExecUpdateResult result;
  CUgraphNode errorNode;
  CUgraphNode errorFromNode;
};

// A kernel node's parameters, in the layout of the 12.0 ABI (cuda.h: CUDA_KERNEL_NODE_PARAMS_v2).
struct CUDA_KERNEL_NODE_PARAMS {
  CUfunction func;
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  void** kernelParams;
  void** extra;
  CUkernel kern;  // used only when func is null
  CUcontext ctx;  // used only when func is null
};

// Launch attributes of cuLaunchKernelEx, the three the library sets. The value is a 64-byte union in cuda.h; only
// the members those three use are named here (others hold pointers, hence the union's 8-byte alignment).
enum CUlaunchAttributeID {
  CU_LAUNCH_ATTRIBUTE_IGNORE = 0,
  CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
  CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
  CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
};

union alignas(8) CUlaunchAttributeValue {
  char pad[64];
  int cooperative;
  struct {
    unsigned int x;
    unsigned int y;
    unsigned int z;
  } clusterDim;
  int programmaticStreamSerializationAllowed;
};

struct CUlaunchAttribute {
  CUlaunchAttributeID id;
  char pad[8 - sizeof(CUlaunchAttributeID)];
  CUlaunchAttributeValue value;
};

struct CUlaunchConfig {
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
};

// Batched copies (cuMemcpyBatchAsync): when each copy may read its source. STREAM: in stream order, as any copy;
// DURING_API_CALL: before the call returns (a source that may change right after it, such as pageable JS memory).
enum CUmemcpySrcAccessOrder {
  CU_MEMCPY_SRC_ACCESS_ORDER_INVALID = 0x0,
  CU_MEMCPY_SRC_ACCESS_ORDER_STREAM = 0x1,
  CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL = 0x2,
  CU_MEMCPY_SRC_ACCESS_ORDER_ANY = 0x3,
  CU_MEMCPY_SRC_ACCESS_ORDER_MAX = 0x7FFFFFFF,
};

struct CUmemcpyAttributes {
  CUmemcpySrcAccessOrder srcAccessOrder;
  CUmemLocation srcLocHint;
  CUmemLocation dstLocHint;
  unsigned int flags;
};

// 2D copies (cuMemcpy2DAsync): where each side lives, and the copy, in the layout of the CUDA 3.2 ABI (cuda.h:
// CUDA_MEMCPY2D_v2). The library never uses arrays.
enum CUmemorytype {
  CU_MEMORYTYPE_HOST = 0x01,
  CU_MEMORYTYPE_DEVICE = 0x02,
  CU_MEMORYTYPE_ARRAY = 0x03,
  CU_MEMORYTYPE_UNIFIED = 0x04,
};

struct CUDA_MEMCPY2D {
  size_t srcXInBytes;
  size_t srcY;
  CUmemorytype srcMemoryType;
  const void* srcHost;
  CUdeviceptr srcDevice;
  CUarray srcArray;
  size_t srcPitch;
  size_t dstXInBytes;
  size_t dstY;
  CUmemorytype dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  CUarray dstArray;
  size_t dstPitch;
  size_t WidthInBytes;
  size_t Height;
};

// Partitions of a device's multiprocessors (green contexts, CUDA 12.4 and later; streams in them from 12.5).
// CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG from CUDA 13.1.
enum CUdevResourceType {
  CU_DEV_RESOURCE_TYPE_INVALID = 0,
  CU_DEV_RESOURCE_TYPE_SM = 1,
  CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG = 1000,
};

enum CUdevWorkqueueConfigScope { CU_WORKQUEUE_SCOPE_DEVICE_CTX = 0, CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED = 1 };

// How a context's work reaches the device's work queues (CUDA 13.1).
struct CUdevWorkqueueConfigResource {
  CUdevice device;
  unsigned int wqConcurrencyLimit;
  CUdevWorkqueueConfigScope sharingScope;
};

struct CUdevSmResource {
  unsigned int smCount;
  unsigned int minSmPartitionSize;
  unsigned int smCoscheduledAlignment;
};

// A resource as the driver describes it: the type, space the driver keeps to itself, and the description.
struct CUdevResource {
  CUdevResourceType type;
  unsigned char _internal_padding[92];
  union {
    CUdevSmResource sm;
    CUdevWorkqueueConfigResource wqConfig;
    unsigned char _oversize[48];
  };
};

enum CUgreenCtxCreate_flags { CU_GREEN_CTX_DEFAULT_STREAM = 0x1 };

enum CUdriverProcAddress_flags {
  CU_GET_PROC_ADDRESS_DEFAULT = 0,
  CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1 << 0,
  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1 << 1,
};

enum CUdriverProcAddressQueryResult {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};

using CUoccupancyB2DSize = size_t(CUDA_CB*)(int blockSize);

// Function pointer types, one per entry point, named PFN_<documented name>.
// Opened with dlsym before cuGetProcAddress is known:
using PFN_cuDriverGetVersion = CUresult (*)(int* driverVersion);
using PFN_cuGetProcAddress = CUresult (*)(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                          CUdriverProcAddressQueryResult* symbolStatus);
// Initialisation, errors, devices, contexts:
using PFN_cuInit = CUresult (*)(unsigned int flags);
using PFN_cuGetErrorName = CUresult (*)(CUresult error, const char** name);
using PFN_cuGetErrorString = CUresult (*)(CUresult error, const char** text);
using PFN_cuDeviceGet = CUresult (*)(CUdevice* device, int ordinal);
using PFN_cuDeviceGetCount = CUresult (*)(int* count);
using PFN_cuDeviceGetName = CUresult (*)(char* name, int length, CUdevice device);
using PFN_cuDeviceGetAttribute = CUresult (*)(int* value, CUdevice_attribute attribute, CUdevice device);
using PFN_cuDeviceTotalMem = CUresult (*)(size_t* bytes, CUdevice device);
using PFN_cuDeviceCanAccessPeer = CUresult (*)(int* canAccessPeer, CUdevice device, CUdevice peerDevice);
using PFN_cuDevicePrimaryCtxRetain = CUresult (*)(CUcontext* context, CUdevice device);
using PFN_cuCtxSetCurrent = CUresult (*)(CUcontext context);
using PFN_cuCtxGetCurrent = CUresult (*)(CUcontext* context);
using PFN_cuCtxSynchronize = CUresult (*)();
using PFN_cuCtxGetStreamPriorityRange = CUresult (*)(int* leastPriority, int* greatestPriority);
using PFN_cuCtxEnablePeerAccess = CUresult (*)(CUcontext peerContext, unsigned int flags);
// Streams:
using PFN_cuStreamCreate = CUresult (*)(CUstream* stream, unsigned int flags);
using PFN_cuStreamCreateWithPriority = CUresult (*)(CUstream* stream, unsigned int flags, int priority);
using PFN_cuStreamDestroy = CUresult (*)(CUstream stream);
using PFN_cuStreamQuery = CUresult (*)(CUstream stream);
using PFN_cuStreamSynchronize = CUresult (*)(CUstream stream);
using PFN_cuStreamWaitEvent = CUresult (*)(CUstream stream, CUevent event, unsigned int flags);
using PFN_cuStreamGetId = CUresult (*)(CUstream stream, unsigned long long* id);
using PFN_cuStreamGetPriority = CUresult (*)(CUstream stream, int* priority);
using PFN_cuStreamGetFlags = CUresult (*)(CUstream stream, unsigned int* flags);
using PFN_cuStreamWriteValue64 = CUresult (*)(CUstream stream, CUdeviceptr address, cuuint64_t value,
                                              unsigned int flags);
using PFN_cuStreamWaitValue64 = CUresult (*)(CUstream stream, CUdeviceptr address, cuuint64_t value,
                                             unsigned int flags);
// Events:
using PFN_cuEventCreate = CUresult (*)(CUevent* event, unsigned int flags);
using PFN_cuEventDestroy = CUresult (*)(CUevent event);
using PFN_cuEventRecord = CUresult (*)(CUevent event, CUstream stream);
using PFN_cuEventQuery = CUresult (*)(CUevent event);
using PFN_cuEventSynchronize = CUresult (*)(CUevent event);
using PFN_cuEventElapsedTime = CUresult (*)(float* milliseconds, CUevent start, CUevent end);
// Modules and kernels:
using PFN_cuModuleLoadDataEx = CUresult (*)(CUmodule* module, const void* image, unsigned int optionCount,
                                            CUjit_option* options, void** optionValues);
using PFN_cuModuleUnload = CUresult (*)(CUmodule module);
using PFN_cuModuleGetFunction = CUresult (*)(CUfunction* function, CUmodule module, const char* name);
using PFN_cuModuleGetFunctionCount = CUresult (*)(unsigned int* count, CUmodule module);
using PFN_cuModuleEnumerateFunctions = CUresult (*)(CUfunction* functions, unsigned int count, CUmodule module);
using PFN_cuFuncGetAttribute = CUresult (*)(int* value, CUfunction_attribute attribute, CUfunction function);
using PFN_cuFuncSetAttribute = CUresult (*)(CUfunction function, CUfunction_attribute attribute, int value);
using PFN_cuFuncGetName = CUresult (*)(const char** name, CUfunction function);
using PFN_cuFuncGetParamInfo = CUresult (*)(CUfunction function, size_t index, size_t* offset, size_t* size);
using PFN_cuLaunchKernel = CUresult (*)(CUfunction function, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream stream,
                                        void** kernelParams, void** extra);
using PFN_cuLaunchKernelEx = CUresult (*)(const CUlaunchConfig* config, CUfunction function, void** kernelParams,
                                          void** extra);
using PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor = CUresult (*)(int* blocks, CUfunction function, int blockSize,
                                                                     size_t dynamicSharedMemBytes);
using PFN_cuOccupancyMaxPotentialBlockSize = CUresult (*)(int* minGridSize, int* blockSize, CUfunction function,
                                                          CUoccupancyB2DSize blockSizeToDynamicSharedMemBytes,
                                                          size_t dynamicSharedMemBytes, int blockSizeLimit);
// Memory:
using PFN_cuMemGetInfo = CUresult (*)(size_t* freeBytes, size_t* totalBytes);
using PFN_cuMemAllocAsync = CUresult (*)(CUdeviceptr* pointer, size_t bytes, CUstream stream);
using PFN_cuMemAllocFromPoolAsync = CUresult (*)(CUdeviceptr* pointer, size_t bytes, CUmemoryPool pool,
                                                 CUstream stream);
using PFN_cuMemFreeAsync = CUresult (*)(CUdeviceptr pointer, CUstream stream);
using PFN_cuMemAllocManaged = CUresult (*)(CUdeviceptr* pointer, size_t bytes, unsigned int flags);
using PFN_cuMemPrefetchAsync = CUresult (*)(CUdeviceptr pointer, size_t bytes, CUdevice destination, CUstream stream);
using PFN_cuMemAdvise = CUresult (*)(CUdeviceptr pointer, size_t bytes, CUmem_advise advice, CUdevice device);
using PFN_cuMemHostAlloc = CUresult (*)(void** pointer, size_t bytes, unsigned int flags);
using PFN_cuMemFreeHost = CUresult (*)(void* pointer);
using PFN_cuMemHostRegister = CUresult (*)(void* pointer, size_t bytes, unsigned int flags);
using PFN_cuMemHostUnregister = CUresult (*)(void* pointer);
using PFN_cuMemFree = CUresult (*)(CUdeviceptr pointer);
using PFN_cuMemAlloc = CUresult (*)(CUdeviceptr* pointer, size_t bytes);
using PFN_cuMemGetAddressRange = CUresult (*)(CUdeviceptr* base, size_t* bytes, CUdeviceptr pointer);
using PFN_cuIpcGetMemHandle = CUresult (*)(CUipcMemHandle* handle, CUdeviceptr pointer);
using PFN_cuIpcOpenMemHandle = CUresult (*)(CUdeviceptr* pointer, CUipcMemHandle handle, unsigned int flags);
using PFN_cuIpcCloseMemHandle = CUresult (*)(CUdeviceptr pointer);
using PFN_cuIpcGetEventHandle = CUresult (*)(CUipcEventHandle* handle, CUevent event);
using PFN_cuIpcOpenEventHandle = CUresult (*)(CUevent* event, CUipcEventHandle handle);
using PFN_cuMemHostGetDevicePointer = CUresult (*)(CUdeviceptr* devicePointer, void* hostPointer, unsigned int flags);
using PFN_cuMemcpyAsync = CUresult (*)(CUdeviceptr destination, CUdeviceptr source, size_t bytes, CUstream stream);
using PFN_cuMemcpyHtoDAsync = CUresult (*)(CUdeviceptr destination, const void* source, size_t bytes,
                                           CUstream stream);
using PFN_cuMemcpyDtoHAsync = CUresult (*)(void* destination, CUdeviceptr source, size_t bytes, CUstream stream);
using PFN_cuMemcpyDtoDAsync = CUresult (*)(CUdeviceptr destination, CUdeviceptr source, size_t bytes,
                                           CUstream stream);
using PFN_cuMemcpyPeerAsync = CUresult (*)(CUdeviceptr destination, CUcontext destinationContext, CUdeviceptr source,
                                           CUcontext sourceContext, size_t bytes, CUstream stream);
// cuMemcpyBatchAsync changed between CUDA 12.8 (a failIdx output before the stream) and 13.0 (none); the loader
// resolves the one the driver's version has (Note [batched copies] in stream/copy.cc).
using PFN_cuMemcpyBatchAsync = CUresult (*)(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                                            CUmemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs,
                                            CUstream stream);
using PFN_cuMemcpyBatchAsync_v12080 = CUresult (*)(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                                                   CUmemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs,
                                                   size_t* failIdx, CUstream stream);
using PFN_cuMemcpy2DAsync = CUresult (*)(const CUDA_MEMCPY2D* copy, CUstream stream);
using PFN_cuMemsetD8Async = CUresult (*)(CUdeviceptr destination, unsigned char value, size_t count, CUstream stream);
using PFN_cuMemsetD32Async = CUresult (*)(CUdeviceptr destination, unsigned int value, size_t count,
                                          CUstream stream);
using PFN_cuDeviceGetDefaultMemPool = CUresult (*)(CUmemoryPool* pool, CUdevice device);
using PFN_cuMemPoolGetAttribute = CUresult (*)(CUmemoryPool pool, CUmemPool_attribute attribute, void* value);
using PFN_cuMemPoolSetAttribute = CUresult (*)(CUmemoryPool pool, CUmemPool_attribute attribute, void* value);
using PFN_cuMemPoolTrimTo = CUresult (*)(CUmemoryPool pool, size_t bytesToKeep);
using PFN_cuMemPoolSetAccess = CUresult (*)(CUmemoryPool pool, const CUmemAccessDesc* map, size_t count);
using PFN_cuMemPoolGetAccess = CUresult (*)(CUmemAccess_flags* flags, CUmemoryPool pool, CUmemLocation* location);
// Green contexts:
using PFN_cuDeviceGetDevResource = CUresult (*)(CUdevice device, CUdevResource* result, CUdevResourceType type);
using PFN_cuDevSmResourceSplitByCount = CUresult (*)(CUdevResource* result, unsigned int* nbGroups,
                                                     const CUdevResource* input, CUdevResource* remaining,
                                                     unsigned int useFlags, unsigned int minCount);
using PFN_cuDevResourceGenerateDesc = CUresult (*)(CUdevResourceDesc* desc, CUdevResource* resources,
                                                   unsigned int nbResources);
using PFN_cuGreenCtxCreate = CUresult (*)(CUgreenCtx* context, CUdevResourceDesc desc, CUdevice device,
                                          unsigned int flags);
using PFN_cuGreenCtxGetDevResource = CUresult (*)(CUgreenCtx context, CUdevResource* result, CUdevResourceType type);
using PFN_cuGreenCtxStreamCreate = CUresult (*)(CUstream* stream, CUgreenCtx context, unsigned int flags,
                                                int priority);
// Stream capture and graphs:
using PFN_cuStreamBeginCapture = CUresult (*)(CUstream stream, CUstreamCaptureMode mode);
using PFN_cuStreamEndCapture = CUresult (*)(CUstream stream, CUgraph* graph);
using PFN_cuStreamIsCapturing = CUresult (*)(CUstream stream, CUstreamCaptureStatus* status);
using PFN_cuStreamGetCaptureInfo = CUresult (*)(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id,
                                                CUgraph* graph, const CUgraphNode** dependencies,
                                                size_t* dependencyCount);
using PFN_cuGraphInstantiateWithFlags = CUresult (*)(CUgraphExec* exec, CUgraph graph, unsigned long long flags);
using PFN_cuGraphLaunch = CUresult (*)(CUgraphExec exec, CUstream stream);
using PFN_cuGraphExecUpdate = CUresult (*)(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo* info);
using PFN_cuGraphDestroy = CUresult (*)(CUgraph graph);
using PFN_cuGraphExecDestroy = CUresult (*)(CUgraphExec exec);
using PFN_cuGraphGetNodes = CUresult (*)(CUgraph graph, CUgraphNode* nodes, size_t* count);
using PFN_cuGraphKernelNodeGetParams = CUresult (*)(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* params);
using PFN_cuGraphExecKernelNodeSetParams = CUresult (*)(CUgraphExec exec, CUgraphNode node,
                                                        const CUDA_KERNEL_NODE_PARAMS* params);

}  // namespace csp
