// How objects other than bigints become 'ptr' kernel arguments (DeviceBuffer implements it).
import type { Stream } from '../stream/stream.js';

/** Implemented by objects that pass a device pointer to a kernel: returns the pointer and records that the
 * memory is used on `stream` (so it is not freed before that work). @internal */
export const asKernelPointer = Symbol('cuda-stream-pool.asKernelPointer');

export interface KernelPointer {
  [asKernelPointer](stream: Stream): bigint;
}

export function isKernelPointer(value: unknown): value is KernelPointer {
  return typeof value === 'object' && value !== null && asKernelPointer in value;
}
