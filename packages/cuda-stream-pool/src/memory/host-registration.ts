// Page-locking memory the caller already has: HostRegistration. Mechanism and its rules: Note [registered host
// memory] in memory/host-registration.cc.
import { types } from 'node:util';

import { native, type NativeRef } from '../binding/binding.js';
import { requireCuda } from '../binding/cuda.js';
import type { CaptureError } from '../binding/errors.js';
import { checkConstruction, guardReceivers, internalConstruction, invalidType, invalidValue, lockFields } from '../internal/validate.js';
import { detachedError, isArrayBufferView, isDetached, isResizable, memoryByteLength, viewBytes } from './host-views.js';
import { pinnedRecordOf, setRegisteredRecord, type PinnedRecord } from './pinned-buffer.js';

/** This thread's registrations of each buffer: one record that copies use, through the ref of one of the live
 * registrations (each has its own ref to the one native registration). */
interface Shared {
  record: PinnedRecord;
  refs: Set<NativeRef>;
}
const shared = new WeakMap<ArrayBufferLike, Shared>();

/** A registration forgotten without `unregister()` ends when it is collected. */
const forgotten = new FinalizationRegistry<{ memory: WeakRef<ArrayBufferLike>; ref: NativeRef }>(({ memory, ref }) => end(memory.deref(), ref));

function end(memory: ArrayBufferLike | undefined, ref: NativeRef): void {
  const entry = memory === undefined ? undefined : shared.get(memory);
  if (memory !== undefined && entry) {
    entry.refs.delete(ref);
    if (entry.refs.size === 0) {
      shared.delete(memory);
      setRegisteredRecord(memory, undefined);
    } else if (entry.record.ref === ref) {
      entry.record.ref = entry.refs.values().next().value!; // copies go on through a registration still live
    }
  }
  native.hostUnregister(ref);
}

/** Host memory the caller already has (an `ArrayBuffer`, a `SharedArrayBuffer`, or the buffer behind a view),
 * page-locked in place (cuMemHostRegister), so that `stream.copy()` with that buffer or any view of it, in the thread
 * that registered it, runs as a pinned copy: asynchronous, at the bandwidth of a {@link PinnedBuffer}, without
 * staging and without first copying into a PinnedBuffer. Registering takes time (the driver locks every page: about
 * as long as allocating pinned memory of that size), so register memory that is copied many times.
 *
 * The registration keeps the memory alive until it ends, even if the ArrayBuffer is transferred or detached
 * meanwhile; copies with a detached buffer are refused. It ends with `unregister()` (or `using`), when this object
 * is collected (keep it referenced while its copies should be pinned), or when its thread exits; the pages are
 * unlocked, and the memory let go, once the copies queued with it are done. A stream capturing a graph refuses
 * copies of registered memory ({@link CaptureError}): the graph would outlive the registration; capture copies of a
 * PinnedBuffer.
 *
 * Do not: register a `Buffer` that is a slice of Node's shared pool (refused: `Buffer.allocUnsafe()` and
 * `Buffer.from()` of small sizes; use `Buffer.alloc()` or an ArrayBuffer of its own); register two buffers that share
 * a memory page (refused: buffers under about 128 KiB often do, since the allocator packs them; register one larger
 * buffer and views of it instead); expect a registration to
 * speed up copies in another thread (each thread copies through its own registrations; a SharedArrayBuffer can be
 * registered in each). Registering the same buffer again, in any thread, shares the first registration.
 *
 * Thread-safety: the thread that registered it. Follows: `cudaHostRegister` in PyTorch's `pin_memory` of existing
 * tensors and in CuPy. Wraps: cuMemHostRegister (CU_MEMHOSTREGISTER_PORTABLE), cuMemHostUnregister.
 * @example
 * ```ts
 * const samples = new Float32Array(1 << 24);
 * using registration = HostRegistration.register(samples);
 * stream.copy(device, samples); // a pinned copy now
 * ```
 */
export class HostRegistration {
  #ref: NativeRef | undefined;
  #memory: ArrayBufferLike;
  /** The bytes of the buffer that copies see as pinned (its whole length, also when a view was registered). */
  readonly byteLength: number;
  /** The bytes the driver page-locked: the whole pages under the buffer, so up to two pages more. */
  readonly registeredBytes: number;

  /** @internal (from {@link HostRegistration.register}) */
  constructor(token: symbol, ref: NativeRef, memory: ArrayBufferLike, registeredBytes: number) {
    checkConstruction(token, 'HostRegistration', 'HostRegistration.register(memory)');
    this.#ref = ref;
    this.#memory = memory;
    this.byteLength = memoryByteLength(memory);
    this.registeredBytes = registeredBytes;
    lockFields(this, ['byteLength', 'registeredBytes']);
    forgotten.register(this, { memory: new WeakRef(memory), ref }, this);
  }

  static {
    guardReceivers(HostRegistration, (value) => #ref in value);
  }

  /** Page-locks `memory` (for a view: the whole buffer behind it) until {@link HostRegistration.unregister}.
   * @param memory - an `ArrayBuffer`, a `SharedArrayBuffer` or a view of one; not empty, not detached, not resizable.
   * @throws `TypeError` ERR_INVALID_ARG_TYPE for anything else; ERR_INVALID_ARG_VALUE for a detached, empty or
   * resizable buffer, a `Buffer` that is a slice of Node's pool, a buffer whose pages another registration shares,
   * or one a PinnedBuffer made; {@link CudaUnavailableError} without a GPU; {@link CudaError} when the driver refuses
   * (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED when another library registered those pages). */
  static register(memory: ArrayBuffer | SharedArrayBuffer | ArrayBufferView): HostRegistration {
    let buffer: ArrayBufferLike;
    if (isArrayBufferView(memory)) {
      const view = viewBytes(memory);
      buffer = view.buffer;
      if (view.detached) throw detachedError('memory', true);
      if (Buffer.isBuffer(memory) && view.byteLength !== memoryByteLength(buffer))
        throw invalidValue('memory', `is a Buffer of ${view.byteLength} bytes in a shared ArrayBuffer of ${memoryByteLength(buffer)} bytes (as Node's pool of small Buffers gives out), whose pages hold other Buffers; register a Buffer.alloc() or an ArrayBuffer of its own.`);
    } else if (types.isArrayBuffer(memory) || types.isSharedArrayBuffer(memory)) {
      buffer = memory;
      if (isDetached(buffer)) throw detachedError('memory', false);
    } else {
      throw invalidType('memory', 'an ArrayBuffer, a SharedArrayBuffer or an ArrayBufferView', memory);
    }
    if (isResizable(buffer))
      throw invalidValue('memory', 'is (a view of) a resizable or growable buffer, whose memory could move; register a fixed-length buffer.');
    if (memoryByteLength(buffer) === 0) throw invalidValue('memory', 'is empty: there are no pages to lock.');
    const existing = pinnedRecordOf(buffer);
    if (existing && !existing.registered) throw invalidValue('memory', 'is the memory of a PinnedBuffer, which is page-locked already.');
    requireCuda();
    const result = native.hostRegister(buffer);
    if (result.overlaps)
      throw invalidValue('memory', `shares a memory page with another registered buffer (its pages at 0x${result.overlaps[0].toString(16)} to 0x${result.overlaps[1].toString(16)}); two registrations cannot lock one page, and buffers under about 128 KiB often share pages. Register one buffer that holds both, or unregister the other first.`);
    const entry = shared.get(buffer);
    if (entry) entry.refs.add(result.ref!);
    else {
      const record: PinnedRecord = { ref: result.ref!, freed: false, registered: true };
      shared.set(buffer, { record, refs: new Set([result.ref!]) });
      setRegisteredRecord(buffer, record);
    }
    return new HostRegistration(internalConstruction, result.ref!, buffer, result.registered!);
  }

  /** Whether the registration is in force (false after `unregister()`). */
  get registered(): boolean {
    return this.#ref !== undefined;
  }

  /** Ends the registration: later copies with the buffer are ordinary (staged) copies again. Returns at once; the
   * pages are unlocked once the copies queued with them are done (at once when they are). A second call does
   * nothing. Wraps: cuMemHostUnregister. */
  unregister(): void {
    const ref = this.#ref;
    if (ref === undefined) return;
    this.#ref = undefined;
    forgotten.unregister(this);
    end(this.#memory, ref);
  }

  /** Same as `unregister()`. */
  [Symbol.dispose](): void {
    this.unregister();
  }
}
