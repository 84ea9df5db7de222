// The checks that the interprocess handles of device buffers and events share (internal/ipc.cc has the driver side
// and Note [interprocess memory]).
import { DestroyedError } from '../binding/errors.js';
import { invalidType, invalidValue, validateInteger } from '../internal/validate.js';

/** A driver IPC handle's 64 bytes as the 128 lowercase hexadecimal digits of a record's `handle`. @internal */
export function ipcHandleHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

/** `record`, checked to be an object whose `kind` is `kind` (`what` says where such a record comes from), with its
 * `handle`'s 64 bytes. @internal */
export function ipcRecord<R extends { readonly kind: string; readonly handle: string }>(record: unknown, kind: R['kind'], what: string): { record: Partial<R>; bytes: Uint8Array } {
  if (record === null || typeof record !== 'object') throw invalidType('handle', what, record);
  const r = record as Partial<R>;
  if (r.kind !== kind) throw invalidType('handle.kind', `'${kind}' (${what})`, r.kind);
  return { record: r, bytes: ipcHandleBytes(r.handle, 'handle.handle') };
}

/** The 64 bytes of a driver IPC handle from its 128 hexadecimal digits (`name` names the field in errors). @internal */
function ipcHandleBytes(hex: unknown, name: string): Uint8Array {
  if (typeof hex !== 'string') throw invalidType(name, 'a string of 128 hexadecimal digits', hex);
  if (hex.length !== 128) throw invalidValue(name, `must be 128 hexadecimal digits (the driver's 64-byte IPC handle); received ${hex.length} characters.`);
  const bad = hex.search(/[^0-9a-f]/i);
  if (bad >= 0) throw invalidValue(name, `must be 128 hexadecimal digits (the driver's 64-byte IPC handle); character ${bad} is ${JSON.stringify(hex[bad])}.`);
  return new Uint8Array(Buffer.from(hex, 'hex'));
}

/** Refuses a handle exported by this process (the driver opens only another process's) or by one that has exited
 * (its memory and events are gone). @internal */
export function checkExporter(processId: unknown, resource: string, method: string): void {
  validateInteger(processId, 'handle.processId', 1, 2 ** 31 - 1);
  if (processId === process.pid)
    throw invalidValue('handle.processId', `is this process (${process.pid}): the driver opens only another process's handles. In this process, use the ${resource} itself (or share() it with a worker).`);
  try {
    process.kill(processId as number, 0);
  } catch (error) {
    // EPERM: it exists but belongs to another user; only ESRCH says it is gone.
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') throw new DestroyedError(resource, method, `was exported by process ${processId}, which has exited`);
  }
}
