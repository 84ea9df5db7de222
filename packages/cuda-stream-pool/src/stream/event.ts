// CUDA events: markers recorded on a stream, for ordering between streams and for timing.
import { native, NOT_READY, type NativeRef } from '../binding/binding.js';
import { adopt } from '../binding/native-ref-lifetime.js';
import { Device, resolveDevice } from '../device/device.js';
import { CaptureError, DestroyedError } from '../binding/errors.js';
import { landPending, waitError, waitFor, waitSignal } from './completion.js';
// Type-only: Event.record(stream: Stream) names the class that sits above this file (the cycle test allows it).
import type { Stream, WaitOptions } from './stream.js';
import { privateState, register, streams } from '../internal/handles.js';
import { checkConstruction, guardReceivers, internalConstruction, invalidType, invalidValue, validateBoolean, validateOptions } from '../internal/validate.js';

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
}

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

  /** Creates an event. @throws {@link CudaUnavailableError} without a GPU; `TypeError` for bad options.
   * Wraps: cuEventCreate. Lifetime: owned; `destroy()` or `using`. */
  static create(options?: EventOptions): Event {
    const o = validateOptions<EventOptions>(options, 'options', 'Event', ['device', 'timing', 'blockingSync']);
    const timing = o.timing === undefined ? false : validateBoolean(o.timing, 'options.timing');
    const blockingSync = o.blockingSync === undefined ? false : validateBoolean(o.blockingSync, 'options.blockingSync');
    const device = resolveDevice(o.device);
    return new Event(internalConstruction, native.eventCreate(device.ordinal, timing, blockingSync), device, timing);
  }

  /** Captures the work queued on `stream` so far; the event completes when that work is done. Re-recording moves
   * the marker. Recorded on a stream that is capturing a graph, it marks a point in the graph instead: waiting on it
   * (`other.waitEvent(event)`) forks `other` into the capture, and `query`, `synchronize`, `synchronizeSync` and
   * `Event.elapsedMs` throw {@link CaptureError} until it is recorded again outside a capture.
   * @throws `TypeError` ERR_INVALID_ARG_VALUE for a stream of another device. Wraps: cuEventRecord. */
  record(stream: Stream): this {
    if (!streams.is(stream)) throw invalidType('stream', 'a Stream', stream);
    const ref = this.#use('record');
    if (stream.device !== this.#device)
      throw invalidValue('stream', `is on device ${stream.device.ordinal}, but the event is on device ${this.#device.ordinal}.`);
    const target = streams.ref(stream, 'recordEvent');
    const capturing = native.eventRecord(ref, target);
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
