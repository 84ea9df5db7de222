// How the library reads a caller's typed arrays, DataViews and ArrayBuffers: through the intrinsic getters, captured
// at load, never through properties the caller could shadow on the object (`Object.defineProperty(view, 'buffer',
// ...)`) or on a subclass. A shadowed `buffer` would otherwise make a copy read a decoy's bytes.
import { types } from 'node:util';

import { invalidValue } from '../internal/validate.js';

const getter = (prototype: object, key: string): ((this: unknown) => unknown) => Object.getOwnPropertyDescriptor(prototype, key)!.get!;

const TypedArrayPrototype = Object.getPrototypeOf(Uint8Array.prototype) as object;
const typedBuffer = getter(TypedArrayPrototype, 'buffer');
const typedByteOffset = getter(TypedArrayPrototype, 'byteOffset');
const typedByteLength = getter(TypedArrayPrototype, 'byteLength');
const dataViewBuffer = getter(DataView.prototype, 'buffer');
const dataViewByteOffset = getter(DataView.prototype, 'byteOffset');
const dataViewByteLength = getter(DataView.prototype, 'byteLength');
const arrayBufferByteLength = getter(ArrayBuffer.prototype, 'byteLength');
const sharedByteLength = getter(SharedArrayBuffer.prototype, 'byteLength');
// Node 20 has no ArrayBuffer.prototype.detached; use it where it exists.
const arrayBufferDetached = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'detached')?.get;
const arrayBufferResizable = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'resizable')?.get;
const sharedGrowable = Object.getOwnPropertyDescriptor(SharedArrayBuffer.prototype, 'growable')?.get;
const isView = ArrayBuffer.isView;

/** True for a resizable ArrayBuffer or a growable SharedArrayBuffer. @internal */
export function isResizable(memory: ArrayBufferLike): boolean {
  const read = types.isSharedArrayBuffer(memory) ? sharedGrowable : arrayBufferResizable;
  return read?.call(memory) === true;
}

/** Where a view's bytes are, read through the intrinsic getters. `detached` is true when its ArrayBuffer was
 * detached (transferred, or given to another thread); `byteOffset` and `byteLength` are then 0. @internal */
interface ViewBytes {
  buffer: ArrayBufferLike;
  byteOffset: number;
  byteLength: number;
  detached: boolean;
}

/** True for an ArrayBuffer (never a SharedArrayBuffer) that was detached. @internal */
export function isDetached(memory: ArrayBufferLike): boolean {
  if (!types.isArrayBuffer(memory)) return false;
  if (arrayBufferDetached) return arrayBufferDetached.call(memory) === true;
  if (arrayBufferByteLength.call(memory) !== 0) return false;
  try {
    new Uint8Array(memory); // throws only for a detached buffer
    return false;
  } catch {
    return true;
  }
}

/** The length of an ArrayBuffer or SharedArrayBuffer, through the intrinsic getter (0 once detached). @internal */
export function memoryByteLength(memory: ArrayBufferLike): number {
  return (types.isSharedArrayBuffer(memory) ? sharedByteLength : arrayBufferByteLength).call(memory) as number;
}

/** The bytes of `view` (a TypedArray, Buffer or DataView, as `ArrayBuffer.isView` says), through the intrinsic
 * getters. @internal */
export function viewBytes(view: ArrayBufferView): ViewBytes {
  const typed = types.isTypedArray(view);
  const buffer = (typed ? typedBuffer : dataViewBuffer).call(view) as ArrayBufferLike;
  const detached = isDetached(buffer);
  if (detached) return { buffer, byteOffset: 0, byteLength: 0, detached };
  return {
    buffer,
    byteOffset: (typed ? typedByteOffset : dataViewByteOffset).call(view) as number,
    byteLength: (typed ? typedByteLength : dataViewByteLength).call(view) as number,
    detached,
  };
}

/** True for a TypedArray, Buffer or DataView (`ArrayBuffer.isView`, captured at load). @internal */
export function isArrayBufferView(value: unknown): value is ArrayBufferView {
  return isView(value);
}

/** `TypeError` ERR_INVALID_ARG_VALUE: `name` is (a view of) a detached ArrayBuffer. @internal */
export function detachedError(name: string, view: boolean): TypeError {
  return invalidValue(
    name,
    `is ${view ? 'a view of an ArrayBuffer that' : 'an ArrayBuffer that'} is detached (transferred, or posted to another thread with a transfer list), so it has no bytes to copy; pass live memory.`,
    detachedError,
  );
}
