// How objects other than bigints become 'ptr' kernel arguments (DeviceBuffer implements it).
import type { Stream } from '../stream/stream.js';

/** Implemented by objects that pass a device pointer to a kernel: returns the pointer (a bigint, or a number when it is
 * at most 2 ** 53, which costs no BigInt) and records that the memory is used on `stream` (so it is not freed before
 * that work). @internal */
export const asKernelPointer = Symbol('cuda-stream-pool.asKernelPointer');

export interface KernelPointer {
  [asKernelPointer](stream: Stream): number | bigint;
}

/** `T`, which must implement KernelPointer. The library's classes do not name KernelPointer in an `implements`
 * clause, which would put this internal interface into their public declarations: each passes itself to this type
 * instead, which fails to compile when the class stops implementing it. @internal */
export type ImplementsKernelPointer<T extends KernelPointer> = T;

export function isKernelPointer(value: unknown): value is KernelPointer {
  return typeof value === 'object' && value !== null && asKernelPointer in value;
}
