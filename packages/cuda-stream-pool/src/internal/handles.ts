// The one way a file reaches the private state of a class: the class registers its accessors once, from a static
// block in its body (the only code that can read its #fields), into a key that its users import. A key lives in the
// lowest file both sides can import: the owner's own file when every user sits above it; here when files below the
// owner need it (then it speaks only of low types, so this file imports no class above the bindings and the device).
// Nothing else (no module-level setter, no late-bound variable) carries private state between files.
import type { NativeRef } from '../binding/binding.js';
import type { Device } from '../device/device.js';

const owners = new WeakMap<object, string>();
const registered = new WeakSet<object>();

/** A key for the private accessors of class `owner`. Until the class registers, `before` answers (a brand check says
 * false: no object of the class can exist before its file loads) and every other accessor in `names` throws. @internal */
export function privateState<A extends object>(owner: string, names: readonly (keyof A & string)[], before: Partial<A> = {}): A {
  const key: Record<string, unknown> = {};
  for (const name of names) {
    key[name] = () => {
      throw new Error(`cuda-stream-pool internal: ${owner}.${name} was used before ${owner}'s file loaded`);
    };
  }
  Object.assign(key, before);
  owners.set(key, owner);
  return key as A; // every name has a placeholder, replaced by register()
}

/** Fills `key` with its class's accessors; once per key, from the class's static block. @internal */
export function register<A extends object>(key: A, accessors: A): void {
  if (registered.has(key)) throw new Error(`cuda-stream-pool internal: ${owners.get(key) ?? 'a class'} registered its private state twice`);
  registered.add(key);
  Object.assign(key, accessors);
}

/** What a file below Stream reads of a stream: its public facts. @internal */
export interface StreamFacts {
  readonly device: Device;
  readonly id: bigint;
}

/** What a file below DeviceBuffer and ManagedBuffer reads of one: its public facts. @internal */
export interface DeviceMemory {
  readonly device: Device;
  readonly byteLength: number;
  readonly ptr: bigint;
}

/** The brand check and ref accessor of a class, for files below it. @internal */
interface Handles<T> {
  /** True for an object the class made (an object that merely inherits its prototype is not one). */
  is(value: unknown): value is T;
  /** The live object's native ref. @throws {@link DestroyedError} after destroy or free (`method` names the caller). */
  ref(object: T, method: string): NativeRef;
}

/** Streams' handles, registered by stream/stream.ts; `handle` reads the CUstream without marking it shared with
 * code outside the library; `device` reads a stream's device as `stream.device` does, without the receiver check of
 * the public getter (a call through it costs about 10 ns, several per launch), for a value `is` accepted. @internal */
export const streams = privateState<Handles<StreamFacts> & { handle(stream: StreamFacts): bigint; device(stream: StreamFacts): Device }>('Stream', ['ref', 'handle', 'device'], {
  is: (_value: unknown): _value is StreamFacts => false,
});

/** Device buffers' handles, registered by memory/device-buffer.ts; `offset` is where a buffer's bytes start in its
 * allocation's ref (0, or a subarray's offset); `device` and `byteLength` read what the public getters do, without
 * their receiver check, for a value `is` accepted (copies read them per call). @internal */
export const deviceBuffers = privateState<
  Handles<DeviceMemory> & {
    offset(buffer: DeviceMemory): number;
    pitch(buffer: DeviceMemory): number | undefined;
    device(buffer: DeviceMemory): Device;
    byteLength(buffer: DeviceMemory): number;
  }
>('DeviceBuffer', ['ref', 'offset', 'pitch', 'device', 'byteLength'], { is: (_value: unknown): _value is DeviceMemory => false });

/** Managed buffers' handles, registered by memory/managed-buffer.ts. @internal */
export const managedBuffers = privateState<Handles<DeviceMemory>>('ManagedBuffer', ['ref'], { is: (_value: unknown): _value is DeviceMemory => false });
