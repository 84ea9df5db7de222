// Compile-time check of packages/cuda-stream-pool/src/internal/cuda-driver.h against the CUDA toolkit's cuda.h and cudaTypedefs.h: every
// function type of the loader's table against the toolkit's PFN_<name>_v<version>, and every enum value, struct size,
// field offset and field type declared by hand. Compiling it is most of the test; running it checks the two stream
// handle values. .ci/run does both where cuda.h exists:
//   g++ -std=c++17 -I packages/cuda-stream-pool/src -I <toolkit>/include test/native/cuda-driver-check.cc -o check && ./check
// The project's header comes first, so that cuda.h's macros (CU_STREAM_LEGACY, CU_MEMHOSTALLOC_PORTABLE) do not
// rewrite its names; its values are captured before cuda.h is included.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "internal/cuda-driver.h"
#include "internal/loader.h"

namespace own = csp;
constexpr unsigned int own_memhostalloc[] = {own::CU_MEMHOSTALLOC_PORTABLE, own::CU_MEMHOSTALLOC_DEVICEMAP,
                                             own::CU_MEMHOSTALLOC_WRITECOMBINED};
constexpr unsigned int own_memhostregister_portable = own::CU_MEMHOSTREGISTER_PORTABLE;
constexpr int own_device_cpu = own::CU_DEVICE_CPU;
constexpr int own_ipc_handle_size = own::CU_IPC_HANDLE_SIZE;
// The special stream handles are pointers; their integer values are compared instead.
const std::uintptr_t own_stream_legacy = reinterpret_cast<std::uintptr_t>(own::CU_STREAM_LEGACY);
const std::uintptr_t own_stream_per_thread = reinterpret_cast<std::uintptr_t>(own::CU_STREAM_PER_THREAD);

#include <cuda.h>
#include <cudaTypedefs.h>

static_assert(CUDA_VERSION >= 12000, "the check needs a CUDA 12.0 or newer toolkit");

// Corresponds<Own, Toolkit>: the same type, up to the namespace that names it. Structural for pointers, const and
// function types; by the list below for named types (whose layout is then checked field by field).
template <class Own, class Toolkit>
struct Corresponds : std::is_same<Own, Toolkit> {};
template <class A, class B>
struct Corresponds<A*, B*> : Corresponds<A, B> {};
template <class A, class B>
struct Corresponds<const A, const B> : Corresponds<A, B> {};
template <class RA, class... A, class RB, class... B>
struct Corresponds<RA(A...), RB(B...)>
    : std::bool_constant<sizeof...(A) == sizeof...(B) && Corresponds<RA, RB>::value &&
                         (Corresponds<A, B>::value && ...)> {};

#define CORRESPONDING(own_type, toolkit_type) \
  template <>                                 \
  struct Corresponds<own::own_type, toolkit_type> : std::true_type {};
// Opaque handles.
CORRESPONDING(CUctx_st, CUctx_st)
CORRESPONDING(CUmod_st, CUmod_st)
CORRESPONDING(CUfunc_st, CUfunc_st)
CORRESPONDING(CUkern_st, CUkern_st)
CORRESPONDING(CUstream_st, CUstream_st)
CORRESPONDING(CUevent_st, CUevent_st)
CORRESPONDING(CUmemPoolHandle_st, CUmemPoolHandle_st)
CORRESPONDING(CUgraph_st, CUgraph_st)
CORRESPONDING(CUgraphNode_st, CUgraphNode_st)
CORRESPONDING(CUgraphExec_st, CUgraphExec_st)
CORRESPONDING(CUgreenCtx_st, CUgreenCtx_st)
CORRESPONDING(CUarray_st, CUarray_st)
CORRESPONDING(CUdevResourceDesc_st, CUdevResourceDesc_st)
// Enums (values checked below).
CORRESPONDING(CUresult, CUresult)
CORRESPONDING(CUdevice_attribute, CUdevice_attribute)
CORRESPONDING(CUfunction_attribute, CUfunction_attribute)
CORRESPONDING(CUjit_option, CUjit_option)
CORRESPONDING(CUmemPool_attribute, CUmemPool_attribute)
CORRESPONDING(CUmem_advise, CUmem_advise)
CORRESPONDING(CUmemLocationType, CUmemLocationType)
CORRESPONDING(CUmemAccess_flags, CUmemAccess_flags)
CORRESPONDING(CUstreamCaptureStatus, CUstreamCaptureStatus)
CORRESPONDING(CUstreamCaptureMode, CUstreamCaptureMode)
CORRESPONDING(CUgraphNodeType, CUgraphNodeType)
CORRESPONDING(CUgraphExecUpdateResult, CUgraphExecUpdateResult)
CORRESPONDING(CUdriverProcAddressQueryResult, CUdriverProcAddressQueryResult)
CORRESPONDING(CUlaunchAttributeID, CUlaunchAttributeID)
CORRESPONDING(CUmemcpySrcAccessOrder, CUmemcpySrcAccessOrder)
CORRESPONDING(CUdevResourceType, CUdevResourceType)
CORRESPONDING(CUmemorytype, CUmemorytype)
// Structs and unions (layouts checked below).
CORRESPONDING(CUmemLocation, CUmemLocation_v1)
CORRESPONDING(CUmemAccessDesc, CUmemAccessDesc_v1)
CORRESPONDING(CUipcMemHandle, CUipcMemHandle_v1)
CORRESPONDING(CUipcEventHandle, CUipcEventHandle_v1)
CORRESPONDING(CUgraphExecUpdateResultInfo, CUgraphExecUpdateResultInfo_v1)
CORRESPONDING(CUDA_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2)
CORRESPONDING(CUlaunchAttributeValue, CUlaunchAttributeValue)
CORRESPONDING(CUlaunchAttribute, CUlaunchAttribute)
CORRESPONDING(CUlaunchConfig, CUlaunchConfig)
CORRESPONDING(CUmemcpyAttributes, CUmemcpyAttributes_v1)
CORRESPONDING(CUdevSmResource, CUdevSmResource)
CORRESPONDING(CUdevResource, CUdevResource)
CORRESPONDING(CUDA_MEMCPY2D, CUDA_MEMCPY2D_v2)
#undef CORRESPONDING

// Scalar typedefs.
static_assert(std::is_same_v<own::cuuint32_t, cuuint32_t>);
static_assert(std::is_same_v<own::cuuint64_t, cuuint64_t>);
static_assert(std::is_same_v<own::CUdevice, CUdevice_v1>);
static_assert(std::is_same_v<own::CUdeviceptr, CUdeviceptr_v2>);
static_assert(Corresponds<std::remove_pointer_t<own::CUoccupancyB2DSize>,
                          std::remove_pointer_t<CUoccupancyB2DSize>>::value);

// Every entry point of the loader's table, at the ABI version the table names.
#define CHECK_ENTRY_POINT(name, version)                                                                  \
  static_assert(Corresponds<std::remove_pointer_t<own::PFN_##name>,                                       \
                            std::remove_pointer_t<PFN_##name##_v##version>>::value,                       \
                "PFN_" #name " in cuda-driver.h differs from the toolkit's PFN_" #name "_v" #version);
CSP_DRIVER_FUNCTIONS(CHECK_ENTRY_POINT)
CSP_OPTIONAL_DRIVER_FUNCTIONS(CHECK_ENTRY_POINT)
CHECK_ENTRY_POINT(cuDriverGetVersion, 2020)
CHECK_ENTRY_POINT(cuGetProcAddress, 12000)
static_assert(Corresponds<std::remove_pointer_t<own::PFN_cuMemcpyBatchAsync_v12080>,
                          std::remove_pointer_t<PFN_cuMemcpyBatchAsync_v12080>>::value,
              "PFN_cuMemcpyBatchAsync_v12080 in cuda-driver.h differs from the toolkit's");
#undef CHECK_ENTRY_POINT
// The required table is asked for at 12.0, so none of its versions may be later.
#define CHECK_REQUIRED_VERSION(name, version) static_assert(version <= 12000, #name " is not in the CUDA 12.0 ABI");
CSP_DRIVER_FUNCTIONS(CHECK_REQUIRED_VERSION)
#undef CHECK_REQUIRED_VERSION

// Enum values: the underlying size and each value declared.
#define CHECK_ENUM(type) static_assert(sizeof(own::type) == sizeof(::type), #type " differs in size");
CHECK_ENUM(CUresult)
CHECK_ENUM(CUdevice_attribute)
CHECK_ENUM(CUfunction_attribute)
CHECK_ENUM(CUjit_option)
CHECK_ENUM(CUmemPool_attribute)
CHECK_ENUM(CUmem_advise)
CHECK_ENUM(CUmemLocationType)
CHECK_ENUM(CUmemAccess_flags)
CHECK_ENUM(CUstreamCaptureStatus)
CHECK_ENUM(CUstreamCaptureMode)
CHECK_ENUM(CUgraphNodeType)
CHECK_ENUM(CUgraphExecUpdateResult)
CHECK_ENUM(CUdriverProcAddressQueryResult)
CHECK_ENUM(CUlaunchAttributeID)
CHECK_ENUM(CUmemcpySrcAccessOrder)
CHECK_ENUM(CUdevResourceType)
CHECK_ENUM(CUmemorytype)
#undef CHECK_ENUM

#define CHECK_VALUE(name) static_assert(static_cast<long long>(own::name) == static_cast<long long>(::name), #name);
#define CSP_CHECKED_VALUES(X)                                                                                        \
  X(CUDA_SUCCESS) X(CUDA_ERROR_INVALID_VALUE) X(CUDA_ERROR_OUT_OF_MEMORY) X(CUDA_ERROR_NOT_INITIALIZED)              \
  X(CUDA_ERROR_DEINITIALIZED) X(CUDA_ERROR_STUB_LIBRARY) X(CUDA_ERROR_DEVICE_UNAVAILABLE) X(CUDA_ERROR_NO_DEVICE)    \
  X(CUDA_ERROR_INVALID_DEVICE) X(CUDA_ERROR_INVALID_IMAGE) X(CUDA_ERROR_INVALID_CONTEXT)                             \
  X(CUDA_ERROR_NO_BINARY_FOR_GPU) X(CUDA_ERROR_ECC_UNCORRECTABLE) X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED)              \
  X(CUDA_ERROR_INVALID_PTX) X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION) X(CUDA_ERROR_JIT_COMPILER_NOT_FOUND)             \
  X(CUDA_ERROR_JIT_COMPILATION_DISABLED) X(CUDA_ERROR_INVALID_SOURCE)                                                \
  X(CUDA_ERROR_FILE_NOT_FOUND) X(CUDA_ERROR_INVALID_HANDLE) X(CUDA_ERROR_ILLEGAL_STATE) X(CUDA_ERROR_NOT_FOUND)      \
  X(CUDA_ERROR_NOT_READY) X(CUDA_ERROR_ILLEGAL_ADDRESS) X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)                        \
  X(CUDA_ERROR_LAUNCH_TIMEOUT) X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) X(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED)       \
  X(CUDA_ERROR_CONTEXT_IS_DESTROYED) X(CUDA_ERROR_ASSERT) X(CUDA_ERROR_TOO_MANY_PEERS)                               \
  X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)                              \
  X(CUDA_ERROR_HARDWARE_STACK_ERROR) X(CUDA_ERROR_ILLEGAL_INSTRUCTION) X(CUDA_ERROR_MISALIGNED_ADDRESS)              \
  X(CUDA_ERROR_INVALID_ADDRESS_SPACE) X(CUDA_ERROR_INVALID_PC) X(CUDA_ERROR_LAUNCH_FAILED) X(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)                          \
  X(CUDA_ERROR_NOT_PERMITTED) X(CUDA_ERROR_NOT_SUPPORTED) X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)                   \
  X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) X(CUDA_ERROR_STREAM_CAPTURE_MERGE) X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED) \
  X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED) X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION)                                       \
  X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) X(CUDA_ERROR_CAPTURED_EVENT) X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)       \
  X(CUDA_ERROR_TIMEOUT) X(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) X(CUDA_ERROR_EXTERNAL_DEVICE) X(CUDA_ERROR_INVALID_CLUSTER_SIZE) X(CUDA_ERROR_INVALID_RESOURCE_TYPE) X(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION) X(CUDA_ERROR_UNKNOWN)  \
  X(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK) X(CU_DEVICE_ATTRIBUTE_WARP_SIZE)                                      \
  X(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) X(CU_DEVICE_ATTRIBUTE_INTEGRATED)                                      \
  X(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY) X(CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS)                               \
  X(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID) X(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID) X(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)   \
  X(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING) X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)                          \
  X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR) X(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)        \
  X(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY) X(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS)                                \
  X(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) X(CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM)    \
  X(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN) X(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) X(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH) X(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)             \
  X(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1) X(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1)           \
  X(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS) X(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR)          \
  X(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK) X(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)                                  \
  X(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES) X(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES) X(CU_FUNC_ATTRIBUTE_NUM_REGS)          \
  X(CU_FUNC_ATTRIBUTE_PTX_VERSION) X(CU_FUNC_ATTRIBUTE_BINARY_VERSION)                                               \
  X(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) X(CU_JIT_MAX_REGISTERS) X(CU_JIT_INFO_LOG_BUFFER)               \
  X(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES) X(CU_JIT_ERROR_LOG_BUFFER) X(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)              \
  X(CU_JIT_LOG_VERBOSE) X(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) X(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)                 \
  X(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) X(CU_MEMPOOL_ATTR_USED_MEM_CURRENT) X(CU_MEMPOOL_ATTR_USED_MEM_HIGH)          \
  X(CU_STREAM_DEFAULT) X(CU_STREAM_NON_BLOCKING) X(CU_EVENT_DEFAULT) X(CU_EVENT_BLOCKING_SYNC)                       \
  X(CU_EVENT_DISABLE_TIMING) X(CU_EVENT_INTERPROCESS) X(CU_EVENT_WAIT_DEFAULT) X(CU_STREAM_WAIT_VALUE_GEQ)           \
  X(CU_STREAM_WAIT_VALUE_EQ) X(CU_STREAM_WAIT_VALUE_AND) X(CU_STREAM_WAIT_VALUE_NOR) X(CU_STREAM_WAIT_VALUE_FLUSH)   \
  X(CU_STREAM_WRITE_VALUE_DEFAULT) X(CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) X(CU_MEM_ATTACH_GLOBAL)                \
  X(CU_MEM_ATTACH_HOST) X(CU_MEM_ATTACH_SINGLE) X(CU_MEM_ADVISE_SET_READ_MOSTLY) X(CU_MEM_ADVISE_UNSET_READ_MOSTLY)  \
  X(CU_MEM_ADVISE_SET_PREFERRED_LOCATION) X(CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION) X(CU_MEM_ADVISE_SET_ACCESSED_BY) \
  X(CU_MEM_ADVISE_UNSET_ACCESSED_BY) X(CU_MEM_LOCATION_TYPE_INVALID) X(CU_MEM_LOCATION_TYPE_DEVICE)                  \
  X(CU_MEM_LOCATION_TYPE_HOST) X(CU_MEM_LOCATION_TYPE_HOST_NUMA) X(CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT)           \
  X(CU_MEM_LOCATION_TYPE_MAX) X(CU_MEM_ACCESS_FLAGS_PROT_NONE) X(CU_MEM_ACCESS_FLAGS_PROT_READ)                       \
  X(CU_MEM_ACCESS_FLAGS_PROT_READWRITE) X(CU_MEM_ACCESS_FLAGS_PROT_MAX) X(CU_STREAM_CAPTURE_STATUS_NONE) X(CU_STREAM_CAPTURE_STATUS_ACTIVE)                    \
  X(CU_STREAM_CAPTURE_STATUS_INVALIDATED) X(CU_STREAM_CAPTURE_MODE_GLOBAL) X(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)    \
  X(CU_STREAM_CAPTURE_MODE_RELAXED) X(CU_GRAPH_NODE_TYPE_KERNEL) X(CU_GRAPH_NODE_TYPE_MEMCPY)                        \
  X(CU_GRAPH_NODE_TYPE_MEMSET) X(CU_GRAPH_NODE_TYPE_HOST) X(CU_GRAPH_NODE_TYPE_GRAPH) X(CU_GRAPH_NODE_TYPE_EMPTY)    \
  X(CU_GRAPH_NODE_TYPE_WAIT_EVENT) X(CU_GRAPH_NODE_TYPE_EVENT_RECORD) X(CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL)         \
  X(CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT) X(CU_GRAPH_NODE_TYPE_MEM_ALLOC) X(CU_GRAPH_NODE_TYPE_MEM_FREE)                \
  X(CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) X(CU_GRAPH_NODE_TYPE_CONDITIONAL)                                               \
  X(CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) X(CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)                           \
  X(CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) X(CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)                      \
  X(CU_GRAPH_EXEC_UPDATE_SUCCESS) X(CU_GRAPH_EXEC_UPDATE_ERROR) X(CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED)       \
  X(CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED) X(CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED)                     \
  X(CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED) X(CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED)                       \
  X(CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE) X(CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED)         \
  X(CU_GET_PROC_ADDRESS_DEFAULT) X(CU_GET_PROC_ADDRESS_LEGACY_STREAM) X(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) \
  X(CU_GET_PROC_ADDRESS_SUCCESS) X(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) X(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) \
  X(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) X(CU_LAUNCH_ATTRIBUTE_IGNORE) X(CU_LAUNCH_ATTRIBUTE_COOPERATIVE)                \
  X(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) X(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)                 \
  X(CU_MEMCPY_SRC_ACCESS_ORDER_INVALID) X(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM) X(CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL) \
  X(CU_MEMCPY_SRC_ACCESS_ORDER_ANY) X(CU_MEMCPY_SRC_ACCESS_ORDER_MAX) X(CU_DEV_RESOURCE_TYPE_INVALID)                \
  X(CU_DEV_RESOURCE_TYPE_SM) X(CU_GREEN_CTX_DEFAULT_STREAM) X(CU_MEMORYTYPE_HOST) X(CU_MEMORYTYPE_DEVICE)               \
  X(CU_MEMORYTYPE_ARRAY) X(CU_MEMORYTYPE_UNIFIED) X(CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT)
CSP_CHECKED_VALUES(CHECK_VALUE)
#undef CHECK_VALUE
static_assert(own_ipc_handle_size == CU_IPC_HANDLE_SIZE, "CU_IPC_HANDLE_SIZE");

// The values cuda.h defines as macros, captured above.
static_assert(own_memhostalloc[0] == CU_MEMHOSTALLOC_PORTABLE && own_memhostalloc[1] == CU_MEMHOSTALLOC_DEVICEMAP &&
              own_memhostalloc[2] == CU_MEMHOSTALLOC_WRITECOMBINED);
static_assert(own_device_cpu == CU_DEVICE_CPU);
static_assert(own_memhostregister_portable == CU_MEMHOSTREGISTER_PORTABLE);

// Struct layouts: size, alignment, and each field's offset and type.
#define CHECK_LAYOUT(own_type, toolkit_type)                                                      \
  static_assert(sizeof(own::own_type) == sizeof(toolkit_type), #own_type " differs in size");     \
  static_assert(alignof(own::own_type) == alignof(toolkit_type), #own_type " differs in alignment");
#define CHECK_FIELD(own_type, toolkit_type, field)                                                                   \
  static_assert(offsetof(own::own_type, field) == offsetof(toolkit_type, field), #own_type "." #field " offset");   \
  static_assert(Corresponds<decltype(own::own_type::field), decltype(toolkit_type::field)>::value,                \
                #own_type "." #field " type");
CHECK_LAYOUT(CUmemLocation, CUmemLocation_v1)
CHECK_FIELD(CUmemLocation, CUmemLocation_v1, type)
CHECK_FIELD(CUmemLocation, CUmemLocation_v1, id)
CHECK_LAYOUT(CUmemAccessDesc, CUmemAccessDesc_v1)
CHECK_FIELD(CUmemAccessDesc, CUmemAccessDesc_v1, location)
CHECK_FIELD(CUmemAccessDesc, CUmemAccessDesc_v1, flags)
CHECK_LAYOUT(CUipcMemHandle, CUipcMemHandle_v1)
CHECK_LAYOUT(CUipcEventHandle, CUipcEventHandle_v1)
CHECK_LAYOUT(CUgraphExecUpdateResultInfo, CUgraphExecUpdateResultInfo_v1)
CHECK_FIELD(CUgraphExecUpdateResultInfo, CUgraphExecUpdateResultInfo_v1, result)
CHECK_FIELD(CUgraphExecUpdateResultInfo, CUgraphExecUpdateResultInfo_v1, errorNode)
CHECK_FIELD(CUgraphExecUpdateResultInfo, CUgraphExecUpdateResultInfo_v1, errorFromNode)
#define KERNEL_NODE_FIELD(field) CHECK_FIELD(CUDA_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2, field)
CHECK_LAYOUT(CUDA_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2)
KERNEL_NODE_FIELD(func)
KERNEL_NODE_FIELD(gridDimX)
KERNEL_NODE_FIELD(gridDimY)
KERNEL_NODE_FIELD(gridDimZ)
KERNEL_NODE_FIELD(blockDimX)
KERNEL_NODE_FIELD(blockDimY)
KERNEL_NODE_FIELD(blockDimZ)
KERNEL_NODE_FIELD(sharedMemBytes)
KERNEL_NODE_FIELD(kernelParams)
KERNEL_NODE_FIELD(extra)
KERNEL_NODE_FIELD(kern)
KERNEL_NODE_FIELD(ctx)
#undef KERNEL_NODE_FIELD
CHECK_LAYOUT(CUlaunchAttributeValue, CUlaunchAttributeValue)
CHECK_FIELD(CUlaunchAttributeValue, CUlaunchAttributeValue, cooperative)
CHECK_FIELD(CUlaunchAttributeValue, CUlaunchAttributeValue, programmaticStreamSerializationAllowed)
// clusterDim is an unnamed struct in both headers: its place and its three fields are compared.
static_assert(offsetof(own::CUlaunchAttributeValue, clusterDim) == offsetof(CUlaunchAttributeValue, clusterDim));
static_assert(sizeof(own::CUlaunchAttributeValue::clusterDim) == sizeof(CUlaunchAttributeValue::clusterDim));
static_assert(offsetof(decltype(own::CUlaunchAttributeValue::clusterDim), z) ==
              offsetof(decltype(CUlaunchAttributeValue::clusterDim), z));
CHECK_LAYOUT(CUlaunchAttribute, CUlaunchAttribute)
CHECK_FIELD(CUlaunchAttribute, CUlaunchAttribute, id)
CHECK_FIELD(CUlaunchAttribute, CUlaunchAttribute, value)
CHECK_LAYOUT(CUmemcpyAttributes, CUmemcpyAttributes_v1)
CHECK_FIELD(CUmemcpyAttributes, CUmemcpyAttributes_v1, srcAccessOrder)
CHECK_FIELD(CUmemcpyAttributes, CUmemcpyAttributes_v1, srcLocHint)
CHECK_FIELD(CUmemcpyAttributes, CUmemcpyAttributes_v1, dstLocHint)
CHECK_FIELD(CUmemcpyAttributes, CUmemcpyAttributes_v1, flags)
CHECK_LAYOUT(CUdevSmResource, CUdevSmResource)
CHECK_FIELD(CUdevSmResource, CUdevSmResource, smCount)
CHECK_FIELD(CUdevSmResource, CUdevSmResource, minSmPartitionSize)
CHECK_FIELD(CUdevSmResource, CUdevSmResource, smCoscheduledAlignment)
CHECK_LAYOUT(CUdevResource, CUdevResource)
CHECK_FIELD(CUdevResource, CUdevResource, type)
CHECK_FIELD(CUdevResource, CUdevResource, sm)
#if CUDA_VERSION >= 13010
// Work-queue resources (CUDA 13.1), checked by offset where the toolkit has them.
static_assert(offsetof(own::CUdevResource, wqConfig) == offsetof(CUdevResource, wqConfig), "CUdevResource.wqConfig offset");
CHECK_LAYOUT(CUdevWorkqueueConfigResource, CUdevWorkqueueConfigResource)
static_assert(offsetof(own::CUdevWorkqueueConfigResource, wqConcurrencyLimit) == offsetof(CUdevWorkqueueConfigResource, wqConcurrencyLimit), "wqConcurrencyLimit offset");
static_assert(offsetof(own::CUdevWorkqueueConfigResource, sharingScope) == offsetof(CUdevWorkqueueConfigResource, sharingScope), "sharingScope offset");
static_assert(own::CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG == ::CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG, "workqueue type");
static_assert(own::CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED == ::CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED, "workqueue scope");
#endif
#define MEMCPY2D_FIELD(field) CHECK_FIELD(CUDA_MEMCPY2D, CUDA_MEMCPY2D_v2, field)
CHECK_LAYOUT(CUDA_MEMCPY2D, CUDA_MEMCPY2D_v2)
MEMCPY2D_FIELD(srcXInBytes)
MEMCPY2D_FIELD(srcY)
MEMCPY2D_FIELD(srcMemoryType)
MEMCPY2D_FIELD(srcHost)
MEMCPY2D_FIELD(srcDevice)
MEMCPY2D_FIELD(srcArray)
MEMCPY2D_FIELD(srcPitch)
MEMCPY2D_FIELD(dstXInBytes)
MEMCPY2D_FIELD(dstY)
MEMCPY2D_FIELD(dstMemoryType)
MEMCPY2D_FIELD(dstHost)
MEMCPY2D_FIELD(dstDevice)
MEMCPY2D_FIELD(dstArray)
MEMCPY2D_FIELD(dstPitch)
MEMCPY2D_FIELD(WidthInBytes)
MEMCPY2D_FIELD(Height)
#undef MEMCPY2D_FIELD
#define LAUNCH_CONFIG_FIELD(field) CHECK_FIELD(CUlaunchConfig, CUlaunchConfig, field)
CHECK_LAYOUT(CUlaunchConfig, CUlaunchConfig)
LAUNCH_CONFIG_FIELD(gridDimX)
LAUNCH_CONFIG_FIELD(gridDimY)
LAUNCH_CONFIG_FIELD(gridDimZ)
LAUNCH_CONFIG_FIELD(blockDimX)
LAUNCH_CONFIG_FIELD(blockDimY)
LAUNCH_CONFIG_FIELD(blockDimZ)
LAUNCH_CONFIG_FIELD(sharedMemBytes)
LAUNCH_CONFIG_FIELD(hStream)
LAUNCH_CONFIG_FIELD(attrs)
LAUNCH_CONFIG_FIELD(numAttrs)
#undef LAUNCH_CONFIG_FIELD
#undef CHECK_FIELD
#undef CHECK_LAYOUT

// The special stream handles, compared at run time (pointer values are not constant expressions).
int main() {
  if (own_stream_legacy != reinterpret_cast<std::uintptr_t>(CU_STREAM_LEGACY)) return 1;
  if (own_stream_per_thread != reinterpret_cast<std::uintptr_t>(CU_STREAM_PER_THREAD)) return 2;
  return 0;
}
