// Stream capture: which streams are capturing, what a capture records for its graph, and the guard that refuses
// operations that are illegal while a stream captures. See Note [capture safety] below and Note [capture flag] in
// stream/stream.h.
import { native, type NativeRef } from '../binding/binding.js';
import { CaptureError } from '../binding/errors.js';

/* Note [capture safety]: between `stream.beginCapture()` and `stream.endCapture()` the work queued on the stream is
 * recorded into a graph, not run. The driver answers operations that would wait for that work or run work outside
 * the graph (cuStreamQuery, cuStreamSynchronize, cuEventQuery of an event recorded during the capture, a
 * stream-ordered allocation or free, a host function) by invalidating the whole capture. The library checks first and
 * throws {@link CaptureError}, which leaves the capture usable:
 * - every native stream (`NativeStream`) carries a capture flag, set when a capture begins on the stream and when the stream joins one (it
 *   waits on a capturing stream, or on an event recorded on one); it is process-wide, so a pool stream captured under
 *   a lease in one thread refuses a synchronize() from a task in another thread that got it from getStream();
 * - the guarded operations: stream.query(), synchronize(), synchronizeSync(); DeviceBuffer.alloc() and free() on a
 *   capturing stream (a graph made here owns no memory: allocate before the capture, free after it); a copy staged
 *   through pageable host memory (the graph would replay a staging block long since reused; use a PinnedBuffer); and
 *   event.query(), synchronize(), synchronizeSync() and Event.elapsedMs() of an event last recorded on a capturing
 *   stream (the driver refuses those until the event is recorded again outside a capture);
 * - per thread, one record per capture collects what the graph must keep alive (device buffers, pinned memory,
 *   kernels) and its kernel nodes in launch order; streams that joined the capture share their origin's record. Work
 *   that another thread queues into the capture is recorded by the driver but kept alive by nobody: capture in one
 *   thread.
 */

/** What one capture collected, in the thread that began it. @internal */
export interface CaptureRecord {
  /** The ref and id of the stream the capture began on. */
  readonly origin: NativeRef;
  readonly streamId: bigint;
  /** The origin stream's ref and those of streams that joined the capture. */
  readonly members: Set<NativeRef>;
  /** Objects the graph's work uses: DeviceBuffers, PinnedBuffers or views of pinned memory, Kernels. */
  readonly held: Set<object>;
  /** Kernel launches in capture order with their kernel node (0n when the driver did not name exactly one). A kernel
   * is held as an object: this file sits below the kernel folder, and graph/graph.ts gives it its type back. */
  readonly kernelNodes: { kernel: object; node: bigint }[];
}

/** A capture mode: which API calls the driver prohibits while the capture runs (CUstreamCaptureMode:
 * CU_STREAM_CAPTURE_MODE_GLOBAL, _THREAD_LOCAL, _RELAXED). */
export type CaptureMode = 'global' | 'thread-local' | 'relaxed';

/** The capture modes of `stream.beginCapture()`, as CUstreamCaptureMode values. @internal */
export const CAPTURE_MODES = { global: 0, 'thread-local': 1, relaxed: 2 } as const satisfies Record<CaptureMode, number>;

// This thread's captures, by the ref of each member stream.
const records = new Map<NativeRef, CaptureRecord>();

/** 0: `ref`'s stream is not capturing; 1: capturing; 2: its capture was invalidated. No driver call unless a capture
 * flag is set. @internal */
export function captureStatus(ref: NativeRef): number {
  return native.streamCaptureStatus(ref);
}

/** Throws {@link CaptureError} naming `operation` when the stream of `ref` is capturing (`stream.id`, read only then,
 * names it).
 * The one guard for every operation that is illegal during a capture (Note [capture safety]). @internal */
export function requireNotCapturing(ref: NativeRef, stream: { readonly id: bigint }, operation: string): void {
  const status = native.streamCaptureStatus(ref);
  if (status !== 0) throw captureRefusal(status, stream.id, operation);
}

/** The CaptureError for `operation` on a stream in capture state `status` (1 active, 2 invalidated); `subject` names
 * the capturing stream in the message where it is not the one the call was made on. @internal */
export function captureRefusal(status: number, streamId: bigint, operation: string, subject = 'the stream'): CaptureError {
  const why = status === 2 ? `${subject} is capturing a graph (an invalidated capture: end it with endCapture())` : `${subject} is capturing a graph, which records work instead of running it`;
  return new CaptureError(operation, streamId, `not allowed while ${why}; call it after stream.endCapture()`);
}

// A capture whose stream object owns its ref and is collected mid-capture: the native layer ends the capture when the
// ref's slot is released; this drops its record, which would otherwise hold what the graph's work used for good.
const forgottenCaptures = new FinalizationRegistry<NativeRef>((ref) => {
  const record = records.get(ref);
  if (record !== undefined && record.origin === ref) for (const member of record.members) records.delete(member);
});

/** Begins a capture on `ref` in `mode` and opens its record; `owner`: the object whose collection releases the ref
 * (a created or borrowed stream), when there is one. @throws {@link CaptureError} when the stream is already
 * capturing; CudaError when the driver refuses. @internal */
export function beginCapture(ref: NativeRef, streamId: bigint, mode: CaptureMode, owner?: object): void {
  requireNotCapturing(ref, { id: streamId }, 'stream.beginCapture()');
  native.streamBeginCapture(ref, CAPTURE_MODES[mode]);
  const record: CaptureRecord = { origin: ref, streamId, members: new Set([ref]), held: new Set(), kernelNodes: [] };
  records.set(ref, record);
  if (owner !== undefined) forgottenCaptures.register(owner, ref, record);
}

/** Ends the capture begun on `ref` in this thread: the graph's ref and the record. The record is closed whatever
 * happens. @throws {@link CaptureError} when no capture began on this stream in this thread; CudaError
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (the partial graph is destroyed) or CUDA_ERROR_STREAM_CAPTURE_UNJOINED.
 * @internal */
export function endCapture(ref: NativeRef, streamId: bigint): { graph: NativeRef; record: CaptureRecord } {
  const record = records.get(ref);
  if (record === undefined || record.streamId !== streamId) {
    const why =
      record !== undefined
        ? `the stream joined the capture begun on stream ${record.streamId}; end that capture on that stream`
        : captureStatus(ref) !== 0
          ? 'the stream is capturing, but the capture was not begun through this Stream object in this thread (another thread, or another object for the same driver stream, such as one from Stream.fromHandle()); end it through the object and in the thread that began it'
          : 'the stream is not capturing; call stream.beginCapture() first';
    throw new CaptureError('stream.endCapture()', streamId, why);
  }
  try {
    return { graph: native.streamEndCapture(ref), record };
  } finally {
    for (const member of record.members) records.delete(member);
    forgottenCaptures.unregister(record);
  }
}

/** Ends and discards a capture begun on `ref` in this thread that nobody can end any more: its stream is being
 * destroyed, or the lease whose stream it is ended (the stream goes back to its pool not capturing). Never throws.
 * @internal */
export function abandonCapture(ref: NativeRef): void {
  if (records.size === 0) return;
  const record = records.get(ref);
  if (record === undefined || record.origin !== ref) return;
  try {
    native.graphDestroy(native.streamEndCapture(ref));
  } catch {
    // Invalidated, unjoined or destroyed: the capture is over either way.
  } finally {
    for (const member of record.members) records.delete(member);
    forgottenCaptures.unregister(record);
  }
}

/** Records that work queued on `ref`'s stream uses `objects`, when that stream is capturing in this thread: the
 * graph keeps them alive. Free when no capture is open in this thread. @internal */
export function noteCaptured(ref: NativeRef, ...objects: unknown[]): void {
  if (records.size === 0) return;
  const record = records.get(ref);
  if (record === undefined) return;
  for (const object of objects) if (typeof object === 'object' && object !== null) record.held.add(object);
}

/** After a launch of `kernel` on `ref`'s stream: when it is capturing in this thread, keeps the kernel alive and
 * notes its kernel node. @internal */
export function noteCapturedLaunch(ref: NativeRef, kernel: object): void {
  if (records.size === 0) return;
  const record = records.get(ref);
  if (record === undefined) return;
  record.held.add(kernel);
  record.kernelNodes.push({ kernel, node: native.streamCaptureLastNode(ref) });
}

/** After `ref`'s stream waited on work of `source`'s stream (waitStream, or waitEvent on an event recorded there):
 * when `source` is capturing, `ref` has joined its capture; mark it and share the record. @internal */
export function noteJoin(ref: NativeRef, source: NativeRef | undefined): void {
  if (source === undefined || source === ref || captureStatus(source) === 0) return;
  native.streamCaptureRefresh(ref);
  const record = records.get(source);
  if (record === undefined || records.get(ref) === record) return;
  records.set(ref, record);
  record.members.add(ref);
}
