// The public API of cuda-stream-pool: every name a user can import.
// The declarations use Symbol.dispose and Symbol.asyncDispose; this brings their types to every project that
// imports the package, whatever its "lib" setting and whether or not it has @types/node.
/// <reference lib="esnext.disposable" preserve="true" />
import { warnAboutEnvironment } from './binding/environment.js';

export { cuda, type LiveObjects } from './binding/cuda.js';
export type { SubmissionStats } from './binding/binding.js';
export { Device, type ComputeCapability, type StreamPriorityRange, type DeviceMemoryInfo, type DeviceSynchronizeOptions } from './device/device.js';
export { DevicePartition, type WorkQueueConfiguration } from './device/partition.js';
export { Stream, type StreamOptions, type WaitOptions, type CaptureOptions, type CopyOperand, type BatchCopy } from './stream/stream.js';
export { Graph, GraphExec, type GraphKernelNode } from './graph/graph.js';
export { type CaptureMode } from './stream/capture.js';
export { Event, type EventOptions, type EventIpcHandle, type EventOpenIpcOptions } from './stream/event.js';
export { currentStream, withStream } from './stream/scope.js';
export { completionStats, type CompletionStats } from './stream/completion.js';
export { StreamPool, type PoolOptions, type SharedStreamPool, type StreamPoolStats, type AcquireOptions, type TryAcquireOptions, type RunOptions, type CloseOptions } from './pool/pool.js';
export { StreamLease } from './pool/stream-lease.js';
export { StreamPoolGroup } from './pool/pool-group.js';
export { Module, type ModuleLoadOptions } from './kernel/module.js';
export { Kernel, type Dim3, type LaunchOptions, type KernelAttributes, type MaxPotentialBlockSizeOptions } from './kernel/kernel.js';
export { type ParamType, type KernelArgument, type KernelArguments } from './kernel/signature.js';
export { Program, type CompileOptions } from './kernel/program.js';
export { CudaError, CudaUnavailableError, DestroyedError, CompileError, CaptureError, UnsupportedError } from './binding/errors.js';
export { DeviceBuffer, type DeviceBufferAllocOptions, type DeviceBufferFromOptions, type ToArrayOptions, type TypedArrayConstructor, type DeviceBufferFreeOptions, type DeviceBufferAttachOptions, type SharedDeviceBuffer, type DeviceBufferIpcHandle, type DeviceBufferOpenIpcOptions } from './memory/device-buffer.js';
export { PinnedBuffer, type PinnedViewConstructor, type PinnedCacheInfo } from './memory/pinned-buffer.js';
export { HostRegistration } from './memory/host-registration.js';
export { type CopyOptions, type Copy2DOptions, type FillOptions, type FillType } from './stream/copy.js';
export { MemoryPool } from './memory/memory-pool.js';
export { ManagedBuffer, type ManagedBufferAllocOptions, type ManagedAdvice, type ManagedAdviseOptions } from './memory/managed-buffer.js';

// Unknown values of the library's environment variables are said once, at the first import.
warnAboutEnvironment();
