// CUDA events: markers recorded on a stream, for ordering between streams and for timing.
import { native, NOT_READY, operands, type NativeRef } from '../binding/binding.js';
import { adopt, released } from '../binding/native-ref-lifetime.js';
import { Device, resolveDevice } from '../device/device.js';
import { CaptureError, DestroyedError } from '../binding/errors.js';
import { landPending, waitError, waitFor, waitSignal } from './completion.js';
// Type-only: Event.record(stream: Stream) names the class that sits above this file (the cycle test allows it).
import type { Stream, WaitOptions } from './stream.js';
import { privateState, register, streams } from '../internal/handles.js';
import { checkConstruction, guardReceivers, internalConstruction, invalidState, invalidType, invalidValue, validateBoolean, validateOptions } from '../internal/validate.js';
import { checkExporter, ipcHandleHex, ipcRecord } from '../internal/ipc.js';

/** Options for {@link Event.create}. */
export interface EventOptions {
  /** The device, as a `Device` or an ordinal. @defaultValue 0 */
  device?: Device | number;
  /** Record timestamps so that {@link Event.elapsedMs} works; off makes recording and waiting cheaper
   * (CU_EVENT_DISABLE_TIMING when false). @defaultValue false */
  timing?: boolean;
  /** `synchronizeSync()` sleeps in the kernel instead of spinning on a CPU core (CU_EVENT_BLOCKING_SYNC).
   * @defaultValue false */
  blockingSync?: boolean;
  /** An event that another process can wait on ({@link Event.exportIpcHandle}; CU_EVENT_INTERPROCESS). Such an
   * event has no timing: with `timing: true` it is an ERR_INVALID_ARG_VALUE. @defaultValue false */
  interprocess?: boolean;
}

/** What {@link Event.exportIpcHandle} returns: a plain record, structured-cloneable and JSON-serializable, that
 * another process of this machine passes to {@link Event.openIpcHandle}. */
export interface EventIpcHandle {
  /** Always `'cuda-stream-pool:EventIpcHandle'`. */
  readonly kind: 'cuda-stream-pool:EventIpcHandle';
  /** The driver's IPC event handle (cuIpcGetEventHandle): 64 bytes as 128 lowercase hexadecimal digits. */
  readonly handle: string;
  /** The exporting process's id: an import is refused once it has exited. */
  readonly processId: number;
}

/** Options for {@link Event.openIpcHandle}. */
export interface EventOpenIpcOptions {
  /** The device to open the event on (the exporter's device; its ordinal in this process may differ).
   * @defaultValue 0 */
  device?: Device | number;
}

const IPC_KIND = 'cuda-stream-pool:EventIpcHandle';

/** An event's ref, and the ref of the capturing stream it was last recorded on, for stream/stream.ts. @internal */
export const events = privateState<{ ref(event: Event, method: string): NativeRef; captured(event: Event): NativeRef | undefined }>('Event', ['ref', 'captured']);

/** A CUDA event. Owns its `CUevent` (cuEventDestroy on `destroy()`, `[Symbol.dispose]`, or by a finalizer when
 * forgotten). An event that was never recorded counts as complete.
 * Thread-safety: safe against concurrent calls from the thread that has it; not shared with workers.
 *
 * @example
 * ```ts
 * using start = Event.create({ timing: true }), end = Event.create({ timing: true });
 * start.record(stream); kernel.launch({ grid, block, stream }); end.record(stream);
 * await end.synchronize();
 * console.log(Event.elapsedMs(start, end));
 * ```
 */
export class Event {
  #ref: NativeRef;
  #destroyed = false;
  #recorded = false;
  // The stream ref and id when last recorded on a capturing stream (Note [capture safety] in stream/capture.ts).
  #captured: { ref: NativeRef; streamId: bigint } | undefined;
  // Getters over private fields: events are made per operation (stream.recordEvent()), and defining non-writable
  // properties on each one cost more than the event's native call.
  readonly #device: Device;
  readonly #timing: boolean;
  #interprocess = false;
  /** The device the event belongs to. */
  get device(): Device {
    return this.#device;
  }
  /** Whether the event records timestamps (`options.timing`). */
  get timing(): boolean {
    return this.#timing;
  }

  private constructor(token: symbol, ref: NativeRef, device: Device, timing: boolean) {
    checkConstruction(token, 'Event', 'Event.create() or stream.recordEvent()');
    adopt(this, ref);
    this.#ref = ref;
    this.#device = device;
    this.#timing = timing;
  }

  static {
    guardReceivers(Event, (value) => #ref in value);
    register(events, { ref: (event, method) => event.#use(method), captured: (event) => event.#captured?.ref });
  }

  #use(method: string): NativeRef {
    if (this.#destroyed) throw new DestroyedError('Event', method);
    return this.#ref;
  }

  /** The ref, for a wait on the recorded work, which the driver refuses while the event was last recorded during a
   * capture. */
  #waitable(method: string): NativeRef {
    const ref = this.#use(method);
    if (this.#captured !== undefined)
      throw new CaptureError(`event.${method}()`, this.#captured.streamId, 'the event was last recorded on a capturing stream, so it marks work in a graph, not work that runs; record it again outside the capture first');
    return ref;
  }

  /** Creates an event. @throws {@link CudaUnavailableError} without a GPU; `TypeError` for bad options, and
   * ERR_INVALID_ARG_VALUE for `interprocess` with `timing`. Wraps: cuEventCreate. Lifetime: owned; `destroy()` or
   * `using`. */
  static create(options?: EventOptions): Event {
    const o = validateOptions<EventOptions>(options, 'options', 'Event', ['device', 'timing', 'blockingSync', 'interprocess']);
    const timing = o.timing === undefined ? false : validateBoolean(o.timing, 'options.timing');
    const blockingSync = o.blockingSync === undefined ? false : validateBoolean(o.blockingSync, 'options.blockingSync');
    const interprocess = o.interprocess === undefined ? false : validateBoolean(o.interprocess, 'options.interprocess');
    if (interprocess && timing) throw invalidValue('options.timing', 'must be false for an interprocess event: the driver gives them no timing.');
    const device = resolveDevice(o.device);
    const event = new Event(internalConstruction, native.eventCreate(device.ordinal, timing, blockingSync, interprocess), device, timing);
    event.#interprocess = interprocess;
    return event;
  }

  /** A record that another process of this machine passes to {@link Event.openIpcHandle}: there, `stream.waitEvent()`
   * and `event.synchronize()` wait for the work this process recorded the event after. Plain data: send it any way.
   * Record the event before the other process waits on it: a wait on an event never recorded returns at once.
   * @throws `TypeError` ERR_INVALID_STATE when the event was not created with `{ interprocess: true }`;
   * {@link DestroyedError} after `destroy()`; {@link CudaError} when the driver refuses. Wraps: cuIpcGetEventHandle. */
  exportIpcHandle(): EventIpcHandle {
    const ref = this.#use('exportIpcHandle');
    if (!this.#interprocess) throw invalidState('exportIpcHandle() needs an event created with Event.create({ interprocess: true }).');
    const bytes = native.eventExportIpc(ref);
    return Object.freeze({ kind: IPC_KIND, handle: ipcHandleHex(bytes), processId: process.pid });
  }

  /** Opens, in this process, an interprocess event of another process ({@link Event.exportIpcHandle}): waits on it
   * (`stream.waitEvent(event)`, `event.synchronize()`, `query()`) follow the exporter's records. Recording it here
   * moves it for the exporter too. No timing.
   * @param handle - the record `exportIpcHandle()` returned, unchanged (or parsed back from its JSON).
   * @throws `TypeError` ERR_INVALID_ARG_TYPE when `handle` is not such a record; ERR_INVALID_ARG_VALUE for a bad
   * `handle.handle` or a handle of this process; `RangeError` ERR_OUT_OF_RANGE for a bad `processId`;
   * {@link DestroyedError} when the exporting process has exited; {@link CudaError} when the driver refuses.
   * Wraps: cuIpcOpenEventHandle. Lifetime: owned; `destroy()` or `using`. */
  static openIpcHandle(handle: EventIpcHandle, options?: EventOpenIpcOptions): Event {
    const { record, bytes } = ipcRecord<EventIpcHandle>(handle, IPC_KIND, 'an EventIpcHandle from event.exportIpcHandle()');
    checkExporter(record.processId, 'Event', 'openIpcHandle');
    const o = validateOptions<EventOpenIpcOptions>(options, 'options', 'Event.openIpcHandle', ['device']);
    const device = resolveDevice(o.device);
    const event = new Event(internalConstruction, native.eventOpenIpc(device.ordinal, bytes), device, false);
    event.#interprocess = true;
    event.#recorded = true; // by the exporter, as far as this process can tell
    return event;
  }

  /** Captures the work queued on `stream` so far; the event completes when that work is done. Re-recording moves
   * the marker. Recorded on a stream that is capturing a graph, it marks a point in the graph instead: waiting on it
   * (`other.waitEvent(event)`) forks `other` into the capture, and `query`, `synchronize`, `synchronizeSync` and
   * `Event.elapsedMs` throw {@link CaptureError} until it is recorded again outside a capture.
   * @throws `TypeError` ERR_INVALID_ARG_VALUE for a stream of another device. Wraps: cuEventRecord. */
  record(stream: Stream): this {
    if (!streams.is(stream)) throw invalidType('stream', 'a Stream', stream);
    const ref = this.#use('record');
    if (streams.device(stream) !== this.#device)
      throw invalidValue('stream', `is on device ${stream.device.ordinal}, but the event is on device ${this.#device.ordinal}.`);
    const target = streams.ref(stream, 'event.record');
    operands[0] = ref;
    operands[1] = target;
    const capturing = native.eventRecord();
    this.#recorded = true;
    this.#captured = capturing === 0 ? undefined : { ref: target, streamId: stream.id };
    return this;
  }

  /** True when the recorded work is done (or the event was never recorded). Never blocks.
   * @throws {@link CudaError} when the recorded work failed; {@link CaptureError} when last recorded during a capture.
   * Wraps: cuEventQuery. */
  query(): boolean {
    const status = native.eventStatus(this.#waitable('query'));
    if (status === 0) {
      landPending(); // a copy into a JS array queued before lands before the work is reported done
      return true;
    }
    if (status === NOT_READY) return false;
    throw waitError(status, 'cuEventQuery', `device ${this.device.ordinal}`);
  }

  /** Resolves once the recorded work is done, without blocking the event loop: the library's poller thread queries
   * the event (cuEventQuery) and wakes this thread. Rejects as {@link Stream.synchronize} does; an event destroyed
   * while the wait is pending still settles (its driver event lives until the wait ends).
   * Thread-safety: any thread. Wraps: cuEventQuery. */
  synchronize(options?: WaitOptions): Promise<void> {
    let signal: AbortSignal | undefined;
    let ref: NativeRef;
    try {
      signal = waitSignal(options);
      ref = this.#waitable('synchronize');
    } catch (error) {
      return Promise.reject(error);
    }
    return waitFor('event', ref, 'cuEventSynchronize', () => `device ${this.device.ordinal}`, signal);
  }



  /** Blocks the calling thread (and its event loop) until the recorded work is done; prefer
   * {@link Event.synchronize}. Copies into JS arrays queued by this thread before the record have landed when it
   * returns. Wraps: cuEventSynchronize. */
  synchronizeSync(): void {
    const status = native.eventSynchronize(this.#waitable('synchronizeSync'));
    if (status !== 0) throw waitError(status, 'cuEventSynchronize', `device ${this.device.ordinal}`);
    landPending(); // a copy into a JS array queued before lands before the work is reported done
  }

  /** Milliseconds between two recorded events (resolution about 0.5 µs).
   * @throws `TypeError` ERR_INVALID_ARG_VALUE if either event has timing off or was never recorded, or the two belong
   * to different devices;
   * {@link CudaError} `CUDA_ERROR_NOT_READY` if either is not complete yet (the one place NOT_READY is an error).
   * Wraps: cuEventElapsedTime. */
  static elapsedMs(start: Event, end: Event): number {
    for (const [name, event] of [['start', start], ['end', end]] as const) {
      if (!(event instanceof Event)) throw invalidType(name, 'an Event', event);
      event.#waitable('elapsedMs');
      if (!event.timing) throw invalidValue(name, 'was created with timing off; create it with { timing: true }.');
      if (!event.#recorded) throw invalidValue(name, 'was never recorded; call event.record(stream) first.');
    }
    if (end.device !== start.device)
      throw invalidValue('end', `is on device ${end.device.ordinal}, but "start" is on device ${start.device.ordinal}; elapsed time is measured between events of one device.`);
    return native.eventElapsed(start.#ref, end.#ref);
  }

  /** True after `destroy()`. */
  get destroyed(): boolean {
    return this.#destroyed;
  }

  /** Destroys the event (cuEventDestroy); waits already queued on it still work. Idempotent; never throws after a
   * device fault. */
  destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    native.eventDestroy(this.#ref);
    released(this);
  }

  /** Same as {@link Event.destroy}. */
  [Symbol.dispose](): void {
    this.destroy();
  }

  /** Waits for the recorded work as `synchronize()` does (never blocking the event loop), then destroys the event,
   * also when that work failed; rejects with that work's {@link CudaError}. Idempotent. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#destroyed) return;
    try {
      await this.synchronize();
    } finally {
      this.destroy();
    }
  }
}
