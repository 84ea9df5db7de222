// The native box behind a library object, and the check that a value is one, for the files below that object's own
// file: an event records on a stream, a copy reads a device buffer, without importing stream.ts or device-buffer.ts.
// So imports flow one way: a file imports only files below it (type-only imports are erased, and exempt). Each class
// registers its pair from a static block of its own file, which runs when that file loads; before then no such
// object can exist, so `is` says false.
import type { Box } from '../binding/binding.js';
import type { DeviceBuffer } from '../memory/device-buffer.js';
import type { ManagedBuffer } from '../memory/managed-buffer.js';
import type { Stream } from '../stream/stream.js';

/** A class's brand check and box accessor. @internal */
export interface Handles<T> {
  /** True for an object the class made (an object that merely inherits its prototype is not one). */
  is(value: unknown): value is T;
  /** The live object's native box. @throws {@link DestroyedError} after destroy or free (`method` names the caller). */
  box(object: T, method: string): Box;
}

function unregistered<T>(): Handles<T> {
  return {
    is: (_value: unknown): _value is T => false,
    box: () => {
      throw new Error('cuda-stream-pool: a handle was used before its class loaded');
    },
  };
}

/** Streams' handles, registered by src/stream.ts. @internal */
export const streams: Handles<Stream> = unregistered();
/** Device buffers' handles, registered by src/device-buffer.ts; `offset` is where a buffer's bytes start in its
 * allocation's box (0, or a subarray's offset). @internal */
export const deviceBuffers: Handles<DeviceBuffer> & { offset(buffer: DeviceBuffer): number } = {
  ...unregistered<DeviceBuffer>(),
  offset: () => 0,
};
/** Managed buffers' handles, registered by src/managed-buffer.ts. @internal */
export const managedBuffers: Handles<ManagedBuffer> = unregistered();
