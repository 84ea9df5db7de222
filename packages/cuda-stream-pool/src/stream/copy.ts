// Asynchronous copies and fills in stream order: device<->device, pinned<->device, and pageable JS memory<->device
// through the library's pinned staging. Behind stream.copy() and stream.fill(). See Note [staging] in
// internal/staging.cc: copies never block the JS thread.
import { types } from 'node:util';

import { copyOperands, native, type NativeRef } from '../binding/binding.js';
import { adopt } from '../binding/native-ref-lifetime.js';
import { landingQueued } from './completion.js';
import { DestroyedError, renameDestroyed } from '../binding/errors.js';
import { deviceBuffers, managedBuffers, streams, type DeviceMemory, type StreamFacts } from '../internal/handles.js';
import { PinnedBuffer, pinnedBuffers, pinnedRecordOf, type PinnedRecord } from '../memory/pinned-buffer.js';
import { captureStatus, noteCaptured, requireNotCapturing } from './capture.js';
import { invalidType, invalidValue, outOfRange, validateFloat32, validateInteger, validateOptions } from '../internal/validate.js';
import { detachedError, isArrayBufferView, isDetached, isResizable, memoryByteLength, viewBytes } from '../memory/host-views.js';

/** Options for `stream.copy()`. Offsets count bytes from the start of each operand (for a view: from the view's
 * start). */
export interface CopyOptions {
  /** Bytes to copy. @defaultValue the source's length from `srcOffset` (it must fit the destination) */
  byteLength?: number;
  /** Where in the destination the bytes go. @defaultValue 0 */
  dstOffset?: number;
  /** Where in the source the bytes come from. @defaultValue 0 */
  srcOffset?: number;
}

/** Options for `stream.fill()`. */
export interface FillOptions {
  /** Bytes to fill, a multiple of `elementSize`. @defaultValue the rest of the buffer from `offset` */
  byteLength?: number;
  /** Where the fill starts, in bytes, a multiple of `elementSize`. @defaultValue 0 */
  offset?: number;
  /** The element size in bytes when `value` is a bit pattern: 1 (cuMemsetD8Async) or 4 (cuMemsetD32Async). Not
   * given together with `type`, which implies it. @defaultValue 1 */
  elementSize?: 1 | 4;
  /** The element type `value` is written as, named like kernel parameter types: `'f32'` (a number within the float32
   * range, NaN or ±Infinity; 1.5 is written as 0x3FC00000), `'i32'` (an integer from -2**31 to 2**31 - 1), `'u32'`
   * (0 to 2**32 - 1) or `'u8'` (0 to 255). Without it, `value` is the unsigned bit pattern of one `elementSize`
   * element. */
  type?: FillType;
}

/** The element types `stream.fill()` writes: see {@link FillOptions.type}. */
export type FillType = 'f32' | 'i32' | 'u32' | 'u8';
const FILL_TYPES: readonly FillType[] = ['f32', 'i32', 'u32', 'u8'];

const fillBits = new DataView(new ArrayBuffer(4));

/** `value` as the unsigned bit pattern of one element of `type`. */
function typedFillValue(value: unknown, type: FillType): number {
  if (typeof value !== 'number') throw invalidType('value', `a number (one ${type} element)`, value);
  switch (type) {
    case 'f32':
      fillBits.setFloat32(0, validateFloat32(value, 'value'), true);
      return fillBits.getUint32(0, true);
    case 'i32':
      if (!Number.isInteger(value) || value < -(2 ** 31) || value > 2 ** 31 - 1) throw outOfRange('value', `an i32: an integer from ${-(2 ** 31)} to ${2 ** 31 - 1}`, value);
      return value >>> 0;
    case 'u32':
      if (!Number.isInteger(value) || value < 0 || value > 2 ** 32 - 1) throw outOfRange('value', `a u32: an integer from 0 to ${2 ** 32 - 1}`, value);
      return value;
    case 'u8':
      if (!Number.isInteger(value) || value < 0 || value > 255) throw outOfRange('value', 'a u8: an integer from 0 to 255', value);
      return value;
  }
}

/** The name of a copy's argument in messages, built only when one is thrown: `dst`, `src` and `options.byteLength` of
 * a single copy (`index` -1), `copies[3].dst` and `copies[3].byteLength` of a batch's copy 3. */
function argumentName(index: number, field: string): string {
  if (index >= 0) return `copies[${index}].${field}`;
  return field === 'dst' || field === 'src' ? field : `options.${field}`;
}

const OPERAND_TYPES = 'a DeviceBuffer, a ManagedBuffer, a PinnedBuffer, an ArrayBuffer, a SharedArrayBuffer or an ArrayBufferView';

type Operand =
  | { kind: 'device'; buffer: DeviceMemory; ref: NativeRef; base: number; length: number }
  | { kind: 'managed'; buffer: DeviceMemory; ref: NativeRef; length: number }
  | { kind: 'pinned'; ref: NativeRef; base: number; length: number; registered: boolean }
  | { kind: 'pageable'; memory: ArrayBufferLike; base: number; length: number };

function pinnedOperand(record: PinnedRecord, base: number, length: number, call: string): Operand {
  if (record.freed) throw new DestroyedError('PinnedBuffer', call, 'was freed');
  return { kind: 'pinned', ref: record.ref, base, length, registered: record.registered === true };
}

/** `call` names the method the user called (`'stream.copy'`), for a DestroyedError, which also names the argument.
 * Host memory is read through the intrinsic getters (memory/host-views.ts), so shadowed
 * `buffer`/`byteOffset`/`byteLength` properties are not consulted. */
function operand(value: unknown, index: number, field: 'dst' | 'src', call: string): Operand {
  try {
    return operandOf(value, index, field, call);
  } catch (error) {
    if (!(error instanceof DestroyedError)) throw error;
    const known = `(): the ${error.resource} `;
    const at = error.message.indexOf(known);
    throw new DestroyedError(error.resource, error.message.slice(0, at), `passed as "${argumentName(index, field)}" ${error.message.slice(at + known.length)}`);
  }
}

function operandOf(value: unknown, index: number, field: 'dst' | 'src', call: string): Operand {
  if (deviceBuffers.is(value))
    return { kind: 'device', buffer: value, ref: deviceBuffers.ref(value, call), base: deviceBuffers.offset(value), length: value.byteLength };
  if (managedBuffers.is(value)) return { kind: 'managed', buffer: value, ref: managedBuffers.ref(value, call), length: value.byteLength };
  if (value instanceof PinnedBuffer) return pinnedOperand(pinnedBuffers.record(value), 0, value.byteLength, call);
  let memory: ArrayBufferLike;
  let base = 0;
  let length: number;
  let detached: boolean;
  if (isArrayBufferView(value)) {
    ({ buffer: memory, byteOffset: base, byteLength: length, detached } = viewBytes(value));
  } else if (types.isArrayBuffer(value) || types.isSharedArrayBuffer(value)) {
    memory = value;
    length = memoryByteLength(value);
    detached = isDetached(value);
  } else {
    throw invalidType(argumentName(index, field), OPERAND_TYPES, value, '', operand);
  }
  // A freed PinnedBuffer detaches its views: that is a DestroyedError, found before the detach.
  const record = pinnedRecordOf(memory);
  if (record && !(record.registered && detached)) return pinnedOperand(record, base, length, call);
  if (detached) throw detachedError(argumentName(index, field), memory !== value);
  return { kind: 'pageable', memory, base, length };
}

// Note [pending destinations]: a device-to-host copy into a JS array lands when this thread copies its staging into
// the array (Note [completion engine] in stream/completion.h). Until then the array must not be a copy source
// (it would stage stale bytes): each pending range is kept here with its native landing, which copyLanded() lands
// when the copy is done. Per thread, keyed by the ArrayBuffer, pruned whenever consulted.
interface Pending {
  start: number;
  end: number;
  flag: NativeRef;
  streamId: bigint;
}
const pendingDestinations = new WeakMap<ArrayBufferLike, Pending[]>();

function stillPending(memory: ArrayBufferLike): Pending[] {
  const list = pendingDestinations.get(memory);
  if (!list) return [];
  const pending = list.filter((p) => !native.copyLanded(p.flag));
  if (pending.length === 0) pendingDestinations.delete(memory);
  else if (pending.length !== list.length) pendingDestinations.set(memory, pending);
  return pending;
}

/** An offset option (`field`, named as {@link argumentName} does): an integer from 0 to `size`, the bytes of `what`;
 * 0 when undefined. */
function checkOffset(value: unknown, index: number, field: string, size: number, what: string): number {
  if (value === undefined) return 0;
  if (typeof value !== 'number') throw invalidType(argumentName(index, field), 'an integer', value, '', checkOffset);
  if (!Number.isInteger(value) || value < 0 || value > size)
    throw outOfRange(argumentName(index, field), `an integer from 0 to ${size} (${what} is ${size} bytes)`, value, '', checkOffset);
  return value;
}

/** The `byteLength` option of copy and fill: an integer from 0 to `available`, the `length` bytes of `owner` from
 * the offset option `offsetField` (`offset`) on; `available` when undefined. */
function checkByteLength(value: unknown, available: number, index: number, owner: 'source' | 'buffer', length: number, offsetField: string, offset: number): number {
  if (value === undefined) return available;
  const name = (): string => argumentName(index, 'byteLength');
  if (typeof value !== 'number') throw invalidType(name(), 'an integer', value);
  if (!Number.isInteger(value) || value < 0 || value > available)
    throw outOfRange(name(), `an integer from 0 to ${available} (the ${owner}'s ${length} bytes from "${argumentName(index, offsetField)}" ${offset})`, value);
  return value;
}

/** Throws when `op`, device or managed memory, is not on the stream's device. */
function checkStreamDevice(stream: StreamFacts, op: Operand, index: number, field: 'dst' | 'src'): void {
  if (addressed(op) && op.buffer.device !== stream.device)
    throw invalidValue(argumentName(index, field), `is a ${op.buffer.constructor.name} on device ${op.buffer.device.ordinal}, but the stream is on device ${stream.device.ordinal}.`);
}

/** A copy checked and ready to queue: its operands, offsets and length. */
interface CheckedCopy {
  d: Operand;
  s: Operand;
  dst: unknown;
  src: unknown;
  dstOffset: number;
  srcOffset: number;
  byteLength: number;
}

const COPY_OPTIONS = ['byteLength', 'dstOffset', 'srcOffset'] as const;
const BATCH_COPY_KEYS = ['byteLength', 'dstOffset', 'srcOffset', 'dst', 'src'] as const;

/** What one copy asks for: its operands and its options, each read once. */
interface CopyRequest {
  dst: unknown;
  src: unknown;
  byteLength: unknown;
  dstOffset: unknown;
  srcOffset: unknown;
}

/** A copy's options (validated), read before anything is checked: a getter among them that detaches or shrinks an
 * operand then runs before the operands are looked at, never between the check and the copy. */
function copyRequest(dst: unknown, src: unknown, o: Partial<CopyOptions>): CopyRequest {
  return { dst, src, byteLength: o.byteLength, dstOffset: o.dstOffset, srcOffset: o.srcOffset };
}

/** Every check of one copy on `stream`, as `stream.copy()` makes them; `index` is the copy's place in a batch, -1 for
 * `stream.copy()` (argument names in messages: {@link argumentName}). Names are built only for a message: a batch
 * checks its copies one by one, so this is the per-copy cost of `copyBatch`. */
function checkCopy(stream: StreamFacts, request: CopyRequest, call: string, index = -1): CheckedCopy {
  const { dst, src } = request;
  const d = operand(dst, index, 'dst', call);
  const s = operand(src, index, 'src', call);
  if (!addressed(d) && !addressed(s))
    throw invalidValue(argumentName(index, 'dst'), `and "${argumentName(index, 'src')}" are both host memory; one of them must be a DeviceBuffer (copy between host arrays with TypedArray.prototype.set()).`);
  if ((d.kind === 'managed' && !addressed(s)) || (s.kind === 'managed' && !addressed(d)))
    throw invalidValue(argumentName(index, d.kind === 'managed' ? 'src' : 'dst'), 'is host memory and the other operand a ManagedBuffer, which the host reads and writes directly: use its bytes or view() after synchronizing.');
  // Between DeviceBuffers of two devices the stream may be on either device (a peer copy); every other copy stays on
  // the stream's device.
  if (d.kind === 'device' && s.kind === 'device' && d.buffer.device !== s.buffer.device) {
    if (stream.device !== d.buffer.device && stream.device !== s.buffer.device)
      throw invalidValue('stream', `is on device ${stream.device.ordinal}, but a copy from device ${s.buffer.device.ordinal} to device ${d.buffer.device.ordinal} is ordered on a stream of one of those two devices.`);
  } else {
    checkStreamDevice(stream, d, index, 'dst');
    checkStreamDevice(stream, s, index, 'src');
  }
  // Before the ranges: a length-tracking view of a shrunk buffer would otherwise be refused for its length.
  if (d.kind === 'pageable' && isResizable(d.memory))
    throw invalidValue(argumentName(index, 'dst'), 'is (a view of) a resizable or growable buffer (a resizable ArrayBuffer could shrink under the pending copy, and a view that tracks a growable SharedArrayBuffer\'s length could change length); copy into a fixed-length buffer or a PinnedBuffer.');
  const srcOffset = checkOffset(request.srcOffset, index, 'srcOffset', s.length, 'the source');
  const dstOffset = checkOffset(request.dstOffset, index, 'dstOffset', d.length, 'the destination');
  const available = s.length - srcOffset;
  const room = d.length - dstOffset;
  const byteLength = checkByteLength(request.byteLength, available, index, 'source', s.length, 'srcOffset', srcOffset);
  if (byteLength > room) {
    const name = (field: string): string => argumentName(index, field);
    throw outOfRange(
      name('byteLength'),
      `at most ${room} to fit the destination (its ${d.length} bytes from "${name('dstOffset')}" ${dstOffset})`,
      byteLength,
      request.byteLength === undefined ? `It defaulted to the source's ${s.length} bytes from "${name('srcOffset')}" ${srcOffset}; pass "${name('byteLength')}".` : '',
    );
  }
  if (addressed(d) && addressed(s)) {
    const a = d.buffer.ptr + BigInt(dstOffset);
    const b = s.buffer.ptr + BigInt(srcOffset);
    const n = BigInt(byteLength);
    if (n > 0n && a < b + n && b < a + n)
      throw invalidValue(argumentName(index, 'src'), `overlaps "${argumentName(index, 'dst')}": device memory at 0x${b.toString(16)} to 0x${(b + n).toString(16)} and 0x${a.toString(16)} to 0x${(a + n).toString(16)}; a copy between overlapping ranges is undefined. Copy through a temporary buffer.`);
  }
  if (s.kind === 'pageable') {
    const start = s.base + srcOffset;
    const hit = stillPending(s.memory).find((p) => p.start < start + byteLength && start < p.end);
    if (hit)
      throw invalidValue(argumentName(index, 'src'), `is the destination of a device-to-host copy still pending on stream ${hit.streamId} (bytes ${hit.start} to ${hit.end} of its ArrayBuffer); await that stream's synchronize() before copying from it.`);
  }
  return { d, s, dst, src, dstOffset, srcOffset, byteLength };
}

const addressed = (op: Operand): op is Extract<Operand, { buffer: DeviceMemory }> => op.kind === 'device' || op.kind === 'managed';

function isPeer(d: Operand, s: Operand): boolean {
  return d.kind === 'device' && s.kind === 'device' && d.buffer.device !== s.buffer.device;
}

/** Queues a copy on `stream`; see `Stream.copy`. `call` is the method the user called, for the messages of
 * DestroyedError (`'buffer.toArray'` when toArray copies). @internal */
export function copyOnStream(stream: StreamFacts, dst: unknown, src: unknown, options: unknown, call = 'stream.copy'): void {
  const request = copyRequest(dst, src, validateOptions<CopyOptions>(options, 'options', 'copy', COPY_OPTIONS));
  if (pinnedCopy(stream, request, call)) return;
  const copy = checkCopy(stream, request, call);
  const sb = streams.ref(stream, call);
  if (copy.byteLength === 0) return;
  queueChecked(stream, sb, copy, call);
}

/** Whether `value`, an offset or length option, is undefined or an integer from 0 to `most`. */
const within = (value: unknown, most: number): boolean =>
  value === undefined || (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= most);

/** The common small copy, between a DeviceBuffer and a PinnedBuffer, queued after the checks that {@link checkCopy}
 * makes of it (the device's, the offsets' and the length's; pinned memory needs no other) without building its
 * records, which cost more than queueing the copy where deferred submission only records it. False, with nothing
 * done, for every other copy and for any copy that a check refuses: the general path then queues it or throws its
 * error. The operands are told by brand checks first, which run no Proxy trap, and found live last, after every
 * accessor they have was read, as the general path reads them. */
function pinnedCopy(stream: StreamFacts, request: CopyRequest, call: string): boolean {
  const { dst, src } = request;
  const toDevice = pinnedBuffers.is(src) && deviceBuffers.is(dst);
  if (!toDevice && !(pinnedBuffers.is(dst) && deviceBuffers.is(src))) return false;
  const pinned = (toDevice ? src : dst) as PinnedBuffer;
  const device = (toDevice ? dst : src) as DeviceMemory;
  if (!(pinned instanceof PinnedBuffer) || deviceBuffers.device(device) !== streams.device(stream)) return false;
  const pinnedLength = pinnedBuffers.byteLength(pinned), deviceLength = deviceBuffers.byteLength(device);
  const sourceLength = toDevice ? pinnedLength : deviceLength, destinationLength = toDevice ? deviceLength : pinnedLength;
  if (!within(request.srcOffset, sourceLength) || !within(request.dstOffset, destinationLength)) return false;
  const srcOffset = (request.srcOffset as number | undefined) ?? 0, dstOffset = (request.dstOffset as number | undefined) ?? 0;
  if (!within(request.byteLength, Math.min(sourceLength - srcOffset, destinationLength - dstOffset))) return false;
  const bytes = (request.byteLength as number | undefined) ?? sourceLength - srcOffset;
  if (bytes === 0 || bytes > destinationLength - dstOffset) return false;
  const record = pinnedBuffers.record(pinned);
  if (record.freed || record.registered) return false;
  let deviceRef: NativeRef;
  try {
    deviceRef = deviceBuffers.ref(device, call);
  } catch {
    return false; // freed: the general path names the argument
  }
  const sb = streams.ref(stream, call);
  noteCaptured(sb, dst, src);
  const deviceBase = deviceBuffers.offset(device);
  try {
    if (toDevice) queuePinned(sb, true, deviceRef, deviceBase + dstOffset, record.ref, srcOffset, bytes);
    else queuePinned(sb, false, record.ref, dstOffset, deviceRef, deviceBase + srcOffset, bytes);
  } catch (error) {
    throw renameDestroyed(error, call);
  }
  return true;
}

/** Queues a copy between device memory and pinned memory (`toDevice`: pinned to device) from the refs and byte
 * positions of its destination and source, through the operand scratch. */
function queuePinned(sb: NativeRef, toDevice: boolean, dst: NativeRef, dstAt: number, src: NativeRef, srcAt: number, bytes: number): void {
  copyOperands(sb, dst, dstAt, src, srcAt, bytes);
  if (toDevice) native.copyPinnedToDevice();
  else native.copyDeviceToPinned();
}

function queueChecked(stream: StreamFacts, sb: NativeRef, c: CheckedCopy, call: string): void {
  try {
    queueCopy(stream, sb, c.d, c.s, c.dst, c.src, c.dstOffset, c.srcOffset, c.byteLength, call);
  } catch (error) {
    // The native layer names its own step ("DeviceBuffer.copy()"), e.g. for a borrowed view whose owner freed it.
    throw renameDestroyed(error, call);
  }
}

/** The bytes a batched copy touches: `space` is 'device' (addresses), a pinned buffer's ref, or a host buffer;
 * `start` and `end` are addresses or offsets in that space. */
interface Touched {
  space: unknown;
  start: number;
  end: number;
  index: number;
  writes: boolean;
  registered?: boolean;
}

/** What `op` touches, or undefined for device memory whose addresses a double does not hold exactly (at or above
 * 2^53; unified addresses on Linux lie far below, but the batch then takes the safe path). Numbers, not BigInts: the
 * overlap check runs per copy, and BigInt arithmetic and comparisons were most of a small batch's cost. */
function touched(op: Operand, offset: number, byteLength: number, index: number, writes: boolean): Touched | undefined {
  if (op.kind === 'device' || op.kind === 'managed') {
    const start = Number(op.buffer.ptr) + offset;
    if (!Number.isSafeInteger(start + byteLength)) return undefined;
    return { space: 'device', start, end: start + byteLength, index, writes };
  }
  const start = op.base + offset;
  if (op.kind === 'pinned') return { space: op.ref, start, end: start + byteLength, index, writes, registered: op.registered };
  return { space: op.memory, start, end: start + byteLength, index, writes };
}

/** The bytes two batched copies share, as a user can find them: device memory by address (hex, as the driver and
 * `buffer.ptr` give it), host memory by offset in its buffer. */
function sharedRange(a: Touched, b: Touched): string {
  const start = a.start > b.start ? a.start : b.start;
  const end = a.end < b.end ? a.end : b.end;
  if (a.space === 'device') return `device memory at 0x${start.toString(16)} to 0x${end.toString(16)}`;
  return `${a.registered ? 'registered host' : typeof a.space === 'number' ? 'pinned' : 'host'} bytes ${start} to ${end} of the buffer`;
}

/** Queues the copies of a batch on `stream`; see `Stream.copyBatch`. @internal */
export function copyBatchOnStream(stream: StreamFacts, copies: unknown): void {
  if (!Array.isArray(copies)) throw invalidType('copies', 'an array of { dst, src, byteLength?, dstOffset?, srcOffset? }', copies);
  // Every entry read before any is checked: a getter of a later entry cannot detach or shrink an earlier one's operand.
  const requests: CopyRequest[] = [];
  for (let i = 0; i < copies.length; i++) {
    const entry: unknown = copies[i];
    if (typeof entry !== 'object' || entry === null) throw invalidType(`copies[${i}]`, 'an object { dst, src, byteLength?, dstOffset?, srcOffset? }', entry);
    const e = validateOptions<CopyOptions & { dst: unknown; src: unknown }>(entry, () => `copies[${i}]`, 'copy', BATCH_COPY_KEYS);
    requests.push(copyRequest(e.dst, e.src, e));
  }
  const checked: CheckedCopy[] = [];
  for (let i = 0; i < requests.length; i++) checked.push(checkCopy(stream, requests[i]!, 'stream.copyBatch', i));
  // The copies of a batch run in any order and at once: none may write bytes that another reads or writes. Where an
  // address is beyond what the check holds exactly, the copies are queued one by one, in order, which needs no check.
  const regions = new Map<unknown, Touched[]>();
  const add = (t: Touched | undefined): boolean => {
    if (!t) return false;
    const list = regions.get(t.space);
    if (list) list.push(t);
    else regions.set(t.space, [t]);
    return true;
  };
  let inOrder = false;
  for (let index = 0; index < checked.length; index++) {
    const c = checked[index]!;
    if (c.byteLength === 0) continue;
    if (!add(touched(c.d, c.dstOffset, c.byteLength, index, true)) || !add(touched(c.s, c.srcOffset, c.byteLength, index, false))) {
      inOrder = true;
      regions.clear();
      break;
    }
  }
  for (const list of regions.values()) {
    // Pieces usually come in address order: sorting only when they do not saves most of the check's cost.
    for (let i = 1; i < list.length; i++)
      if (list[i]!.start < list[i - 1]!.start) {
        list.sort((a, b) => a.start - b.start);
        break;
      }
    let writer: Touched | undefined; // the write reaching furthest so far
    let any: Touched | undefined; // the region reaching furthest so far
    for (const t of list) {
      const clash = (t.writes ? any : writer);
      if (clash && clash.end > t.start && clash.index !== t.index)
        throw invalidValue(`copies[${Math.max(clash.index, t.index)}]`, `overlaps copies[${Math.min(clash.index, t.index)}]: ${t.writes && clash.writes ? 'both write' : 'one writes bytes the other reads'} (${sharedRange(t, clash)}); the copies of a batch run in any order. Queue them as separate copies or batches.`);
      if (!any || t.end > any.end) any = t;
      if (t.writes && (!writer || t.end > writer.end)) writer = t;
    }
  }
  const sb = streams.ref(stream, 'stream.copyBatch');
  const batched: CheckedCopy[] = [];
  const single: CheckedCopy[] = [];
  const capturing = captureStatus(sb) !== 0;
  for (const c of checked) {
    if (c.byteLength === 0) continue;
    const batchable = !inOrder && !capturing && (c.d.kind === 'device' || c.d.kind === 'pinned') && c.s.kind !== 'managed' && !isPeer(c.d, c.s);
    (batchable ? batched : single).push(c);
  }
  if (batched.length > 0 && !queueBatch(sb, batched)) single.unshift(...batched);
  for (const c of single) queueChecked(stream, sb, c, 'stream.copyBatch');
}

/** The operand kinds of native.copyBatch and native.copy2D; registered host memory is pinned, told apart for the
 * library's copy kernel, which may address it only where the device allows. */
const BATCH_KIND = { device: 0, pinned: 1, pageable: 2, registered: 3 } as const;

/** Options for `stream.copy2D()`: the rectangle, and where it lies on each side. */
export interface Copy2DOptions {
  /** Bytes of each row to copy, an integer from 0 to each side's pitch. */
  widthBytes: number;
  /** Rows to copy, an integer from 0. */
  height: number;
  /** Bytes from one destination row to the next. @defaultValue the destination's `pitch` if it is a pitched
   * DeviceBuffer, else `widthBytes` */
  dstPitch?: number;
  /** Bytes from one source row to the next. @defaultValue the source's `pitch` if it is a pitched DeviceBuffer, else
   * `widthBytes` */
  srcPitch?: number;
  /** Where the destination's first row starts, in bytes from the start of the operand. @defaultValue 0 */
  dstOffset?: number;
  /** Where the source's first row starts, in bytes from the start of the operand. @defaultValue 0 */
  srcOffset?: number;
}

/** The first destination row and source row whose bytes overlap, rows of `width` bytes from `a` and `b`, `pitchA`
 * and `pitchB` apart, `height` of each; undefined when none do. The rows of each side ascend and do not overlap each
 * other, so one pass over both finds it. */
function rowOverlap(a: bigint, pitchA: number, b: bigint, pitchB: number, width: number, height: number): [number, number] | undefined {
  const w = BigInt(width);
  for (let i = 0, j = 0; i < height && j < height; ) {
    const startA = a + BigInt(i) * BigInt(pitchA);
    const startB = b + BigInt(j) * BigInt(pitchB);
    if (startA < startB + w && startB < startA + w) return [i, j];
    if (startA + w <= startB) i++;
    else j++;
  }
  return undefined;
}

/** Queues a 2D copy on `stream`; see `Stream.copy2D`. @internal */
export function copy2DOnStream(stream: StreamFacts, dst: unknown, src: unknown, options: unknown): void {
  if (options === undefined) throw invalidType('options', 'an object { widthBytes, height, dstPitch?, srcPitch?, dstOffset?, srcOffset? }', options);
  const o = validateOptions<Copy2DOptions>(options, 'options', 'copy2D', ['widthBytes', 'height', 'dstPitch', 'srcPitch', 'dstOffset', 'srcOffset']);
  const width = validateInteger(o.widthBytes, 'options.widthBytes', 0, Number.MAX_SAFE_INTEGER);
  const height = validateInteger(o.height, 'options.height', 0, Number.MAX_SAFE_INTEGER);
  const sides = ([['dst', dst, o.dstPitch, o.dstOffset], ['src', src, o.srcPitch, o.srcOffset]] as const).map(([name, value, pitchOption, offsetOption]) => {
    const op = operand(value, -1, name, 'stream.copy2D');
    if (op.kind === 'pageable')
      throw invalidValue(name, 'is pageable host memory; a 2D copy takes pinned memory: a PinnedBuffer (or a view of one), or a buffer registered with HostRegistration.');
    if (op.kind === 'managed') throw invalidValue(name, 'is a ManagedBuffer; 2D copies take DeviceBuffers and pinned host memory.');
    if (op.kind === 'device' && op.buffer.device !== stream.device)
      throw invalidValue(name, `is a DeviceBuffer on device ${op.buffer.device.ordinal}, but the stream is on device ${stream.device.ordinal}.`);
    const own = op.kind === 'device' ? deviceBuffers.pitch(op.buffer) : undefined;
    const pitch = pitchOption === undefined ? own ?? width : validateInteger(pitchOption, `options.${name}Pitch`, 0, Number.MAX_SAFE_INTEGER);
    if (pitch < width) throw outOfRange(`options.${name}Pitch`, `at least "options.widthBytes" (${width})`, pitch, pitchOption === undefined ? 'It defaulted to "options.widthBytes" or the buffer\'s pitch.' : '');
    const offset = checkOffset(offsetOption, -1, `${name}Offset`, op.length, name === 'dst' ? 'the destination' : 'the source');
    const extent = height === 0 || width === 0 ? 0 : (height - 1) * pitch + width;
    if (extent > op.length - offset)
      throw outOfRange('options.height', `at most ${width === 0 ? height : Math.floor((op.length - offset - width) / pitch) + 1} rows to fit the ${name === 'dst' ? 'destination' : 'source'} (${op.length} bytes from offset ${offset}, rows ${pitch} bytes apart)`, height);
    return { op, pitch, offset, extent };
  });
  const [d, s] = sides as [(typeof sides)[0], (typeof sides)[0]];
  if (d.op.kind !== 'device' && s.op.kind !== 'device')
    throw invalidValue('dst', 'and "src" are both host memory; one of them must be a DeviceBuffer.');
  if (d.op.kind === 'device' && s.op.kind === 'device' && width > 0 && height > 0) {
    const row = rowOverlap(d.op.buffer.ptr + BigInt(d.offset), d.pitch, s.op.buffer.ptr + BigInt(s.offset), s.pitch, width, height);
    if (row)
      throw invalidValue('src', `overlaps "dst": destination row ${row[0]} shares device memory with source row ${row[1]}, and a copy between overlapping ranges is undefined. Copy through a temporary buffer.`);
  }
  const sb = streams.ref(stream, 'stream.copy2D');
  if (width === 0 || height === 0) return;
  requireNotCapturing(sb, stream, 'stream.copy2D()');
  const base = (op: Operand) => (op.kind === 'device' || op.kind === 'pinned' ? op.base : 0);
  const ref = (op: Operand) => (op.kind === 'device' || op.kind === 'pinned' ? op.ref : 0) as NativeRef;
  try {
    native.copy2D(sb, ref(d.op), BATCH_KIND[d.op.kind === 'device' ? 'device' : 'pinned'], base(d.op) + d.offset, d.pitch, ref(s.op), BATCH_KIND[s.op.kind === 'device' ? 'device' : 'pinned'], base(s.op) + s.offset, s.pitch, width, height);
  } catch (error) {
    throw renameDestroyed(error, 'stream.copy2D');
  }
}

// copyBatch's layout, reused: a new Float64Array per batch (a backing store allocated and zeroed) cost as much as the
// checks of all its copies. The native call reads it before returning.
let layoutScratch = new Float64Array(5 * 128);

/** Queues `copies` with the library's copy kernel or one cuMemcpyBatchAsync (see Note [batched copies] in
 * stream/copy.cc); false (nothing queued) where neither can be used. */
function queueBatch(sb: NativeRef, copies: readonly CheckedCopy[]): boolean {
  // Each memory once (a buffer's views share its ref; pageable views their ArrayBuffer), each copy by index.
  const index = new Map<unknown, number>();
  const operands: unknown[] = [];
  const kinds: number[] = [];
  if (layoutScratch.length < copies.length * 5) layoutScratch = new Float64Array(Math.max(copies.length * 5, 2 * layoutScratch.length));
  const layout = layoutScratch;
  const place = (op: Operand): number => {
    if (op.kind === 'managed') throw new Error('cuda-stream-pool internal: managed memory is not batched');
    const key = op.kind === 'pageable' ? op.memory : op.ref;
    let at = index.get(key);
    if (at === undefined) {
      at = operands.length;
      index.set(key, at);
      operands.push(op.kind === 'pageable' ? new Uint8Array(op.memory) : op.ref);
      kinds.push(BATCH_KIND[op.kind === 'pinned' && op.registered ? 'registered' : op.kind]);
    }
    return at;
  };
  for (let i = 0; i < copies.length; i++) {
    const c = copies[i]!;
    const d = c.d, s = c.s;
    layout[5 * i] = place(d);
    layout[5 * i + 1] = place(s);
    layout[5 * i + 2] = (d.kind === 'managed' ? 0 : d.base) + c.dstOffset;
    layout[5 * i + 3] = (s.kind === 'managed' ? 0 : s.base) + c.srcOffset;
    layout[5 * i + 4] = c.byteLength;
  }
  try {
    return native.copyBatch(sb, operands as NativeRef[], Uint8Array.from(kinds), layout.subarray(0, copies.length * 5));
  } catch (error) {
    throw renameDestroyed(error, 'stream.copyBatch');
  }
}

const registered = (op: Operand) => op.kind === 'pinned' && op.registered;

function queueCopy(stream: StreamFacts, sb: NativeRef, d: Operand, s: Operand, dst: unknown, src: unknown, dstOffset: number, srcOffset: number, byteLength: number, call: string): void {
  if (s.kind === 'pageable' || d.kind === 'pageable') requireNotCapturing(sb, stream, `${call}() of pageable host memory (staged; copy a PinnedBuffer instead)`);
  if (registered(s) || registered(d)) requireNotCapturing(sb, stream, `${call}() of registered host memory (a graph would outlive the registration; copy a PinnedBuffer instead)`);
  noteCaptured(sb, dst, src);
  if (d.kind === 'managed' || s.kind === 'managed') {
    // The other side is a DeviceBuffer or managed memory (checked above); the native layer notes a DeviceBuffer's use.
    const other = d.kind === 'managed' ? s : d;
    if (other.kind !== 'device' && other.kind !== 'managed') return; // unreachable: checked above
    const otherOffset = (other.kind === 'device' ? other.base : 0) + (other === s ? srcOffset : dstOffset);
    if (d.kind === 'managed') native.managedCopy(sb, d.ref, dstOffset, other.ref, otherOffset, true, byteLength);
    else if (s.kind === 'managed') native.managedCopy(sb, s.ref, srcOffset, other.ref, otherOffset, false, byteLength);
    return;
  }
  if (d.kind === 'device') {
    if (s.kind === 'device') {
      copyOperands(sb, d.ref, d.base + dstOffset, s.ref, s.base + srcOffset, byteLength);
      native.copyDeviceToDevice();
    } else if (s.kind === 'pinned') queuePinned(sb, true, d.ref, d.base + dstOffset, s.ref, s.base + srcOffset, byteLength);
    else native.copyPageableToDevice(sb, d.ref, d.base + dstOffset, new Uint8Array(s.memory, s.base + srcOffset, byteLength));
    return;
  }
  if (s.kind !== 'device') return; // unreachable: checked above
  if (d.kind === 'pinned') {
    queuePinned(sb, false, d.ref, d.base + dstOffset, s.ref, s.base + srcOffset, byteLength);
    return;
  }
  const start = d.base + dstOffset;
  const flag = native.copyDeviceToPageable(sb, new Uint8Array(d.memory, start, byteLength), s.ref, s.base + srcOffset);
  landingQueued();
  const pending = stillPending(d.memory);
  const entry = { start, end: start + byteLength, flag, streamId: stream.id };
  adopt(entry, flag); // copyLanded() releases it once landed; this, if the array is collected before anyone asks
  pending.push(entry);
  pendingDestinations.set(d.memory, pending);
}

/** Queues a fill on `stream`; see `Stream.fill`. @internal */
export function fillOnStream(stream: StreamFacts, dst: unknown, value: unknown, options: unknown): void {
  const o = validateOptions<FillOptions>(options, 'options', 'fill', ['byteLength', 'offset', 'elementSize', 'type']);
  if (!deviceBuffers.is(dst))
    throw invalidType('dst', 'a DeviceBuffer', dst, dst instanceof PinnedBuffer || isArrayBufferView(dst) ? 'Fill host memory with TypedArray.prototype.fill().' : '');
  let elementSize: 1 | 4;
  let bits: number;
  if (o.type !== undefined) {
    if (!FILL_TYPES.includes(o.type))
      throw invalidValue('options.type', `must be one of 'f32', 'i32', 'u32', 'u8'; received ${typeof o.type === 'string' ? JSON.stringify(o.type) : String(o.type)}.`);
    if (o.elementSize !== undefined)
      throw invalidValue('options.elementSize', `must not be given with "options.type" (${o.type} implies the element size).`);
    elementSize = o.type === 'u8' ? 1 : 4;
    bits = typedFillValue(value, o.type);
  } else {
    elementSize = o.elementSize ?? 1;
    if (elementSize !== 1 && elementSize !== 4)
      throw invalidValue('options.elementSize', `must be 1 or 4; received ${typeof elementSize === 'number' ? elementSize : `${String(elementSize)} (${typeof elementSize})`}.`);
    const max = elementSize === 1 ? 0xff : 0xffffffff;
    if (typeof value !== 'number') throw invalidType('value', 'an integer (the bit pattern of one element)', value);
    if (!Number.isInteger(value) || value < 0 || value > max)
      throw outOfRange(
        'value',
        `an integer from 0 to ${max} (one ${elementSize}-byte element's unsigned bit pattern)`,
        value,
        elementSize === 1 && Number.isInteger(value) && value > max && value <= 0xffffffff ? 'Pass { elementSize: 4 } for 32-bit values, or { type } to give a number.' : '',
      );
    bits = value;
  }
  const ref = deviceBuffers.ref(dst, 'stream.fill');
  if (deviceBuffers.device(dst) !== streams.device(stream))
    throw invalidValue('dst', `is a DeviceBuffer on device ${dst.device.ordinal}, but the stream is on device ${stream.device.ordinal}.`);
  const length = deviceBuffers.byteLength(dst);
  const offset = checkOffset(o.offset, -1, 'offset', length, 'the buffer');
  if (offset % elementSize !== 0)
    throw outOfRange('options.offset', `a multiple of ${elementSize} ("options.elementSize") from 0 to ${length}`, offset);
  const viewOffset = deviceBuffers.offset(dst);
  if (viewOffset % elementSize !== 0)
    throw invalidValue('dst', `is a subarray starting ${viewOffset} bytes into its buffer, which is not a multiple of the ${elementSize}-byte elements.`);
  const room = length - offset;
  const byteLength = checkByteLength(o.byteLength, room, -1, 'buffer', length, 'offset', offset);
  if (byteLength % elementSize !== 0)
    throw outOfRange('options.byteLength', `a multiple of ${elementSize} ("options.elementSize")`, byteLength, o.byteLength === undefined ? `It defaulted to the rest of the buffer from "options.offset" ${offset}.` : '');
  const sb = streams.ref(stream, 'stream.fill');
  if (byteLength === 0) return;
  noteCaptured(sb, dst);
  try {
    native.memoryFill(sb, ref, viewOffset + offset, bits, byteLength / elementSize, elementSize);
  } catch (error) {
    throw renameDestroyed(error, 'stream.fill');
  }
}
