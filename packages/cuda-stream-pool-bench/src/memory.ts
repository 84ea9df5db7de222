// Micro-benchmarks of stream-ordered memory, each beside the same work in a native C++ loop of the same run (the
// benchmark addon, native/calls.cc): 64 MiB copies pinned<->device in GB/s, from a registered ArrayBuffer against a
// PinnedBuffer, pageable copies through staging
// against pinned copies and against the driver's own copy of pageable memory (64 KiB, 4 MiB and 64 MiB), the
// enqueue cost of a small pinned copy, 64 small copies in one batch against 64 single copies, and an alloc+free pair.
import { Device, DeviceBuffer, HostRegistration, PinnedBuffer, Stream, completionStats } from 'cuda-stream-pool';
import { benchAddon } from './bench-addon.js';
import { nativeSample, steadySync, steadySyncBeside, summarize, targetAddedNs, targetRatio, targetUnlessRecorded } from './harness.js';
import type { MicroResult, Sample } from './schema.js';

/** Options of {@link memoryMicroBenchmarks}. */
export interface MemoryMicroOptions {
  /** The device, as an ordinal. @defaultValue 0 */
  device?: number;
  /** Bytes per copy. @defaultValue 64 MiB */
  copyBytes?: number;
  /** Copies per timed run. @defaultValue 8 */
  copiesPerRun?: number;
  /** Timed runs (after one warm-up run). @defaultValue 9 */
  runs?: number;
}

function gbPerSecond(bytes: number, ns: number): number {
  return bytes / ns; // bytes per ns is 10^9 bytes per second
}

function throughputRow(name: string, value: Sample, baselineName: string, baseline: Sample, target?: number): MicroResult {
  const ratio = value.median / baseline.median;
  const row: MicroResult = { name, unit: 'GB/s', value, baselineName, baseline, ratio, better: 'higher' };
  if (target !== undefined) {
    row.target = `≥ ${target} of the ${baselineName}`;
    row.met = ratio >= target;
  }
  return row;
}

/** Measures copies and allocations through the library beside native loops on the same device in the same run:
 * pinned host→device and device→host throughput (target: at least 0.95 of a C++ loop of cuMemcpy*Async on the same
 * memory), pageable copies through the library's staging at 64 KiB, 4 MiB and 64 MiB (against pinned copies of the
 * same size, and against a C++ loop of the driver's own pageable copy, which blocks its thread), the longest pauses
 * pageable copies give the event loop, and the
 * cost of a `DeviceBuffer.alloc()` + `free()` pair (against cuMemAllocFromPoolAsync + cuMemFreeAsync in C++).
 * Needs a GPU; takes a few seconds.
 * @throws {@link CudaUnavailableError} without a GPU; {@link CudaError} when the driver fails. */
export async function memoryMicroBenchmarks(options: MemoryMicroOptions = {}): Promise<MicroResult[]> {
  const device = Device.get(options.device ?? 0);
  const ordinal = device.ordinal;
  const bytes = options.copyBytes ?? 64 << 20;
  const copies = options.copiesPerRun ?? 8;
  const runs = options.runs ?? 9;
  const mib = `${(bytes / 2 ** 20).toFixed(0)} MiB`;
  const addon = benchAddon();
  const results: MicroResult[] = [];

  const stream = Stream.create({ device });
  const buffer = DeviceBuffer.alloc(bytes, { stream });
  const pinned = PinnedBuffer.alloc(bytes);
  try {
    // One timed run of the library: `copies` copies, then wait for the stream. Returns GB/s.
    const library = async (copy: () => void): Promise<number> => {
      const start = process.hrtime.bigint();
      for (let i = 0; i < copies; i++) copy();
      await stream.synchronize();
      return gbPerSecond(copies * bytes, Number(process.hrtime.bigint() - start));
    };
    const nativeRun = (toDevice: boolean): number => gbPerSecond(copies * bytes, addon.copyLoop(ordinal, copies, toDevice, pinned.bytes, bytes).totalNs);

    // Library and native runs interleave, so drift (clocks, other load) hits both alike.
    const measure = async (copy: () => void, toDevice: boolean): Promise<[Sample, Sample]> => {
      const mine: number[] = [];
      const theirs: number[] = [];
      for (let r = -1; r < runs; r++) {
        const a = await library(copy);
        const b = nativeRun(toDevice);
        if (r >= 0) {
          mine.push(a);
          theirs.push(b);
        }
      }
      return [summarize(mine), summarize(theirs)];
    };

    // Two library copies alternating, each run against the other, as `measure` does with the native loop.
    const measureBoth = async (first: () => void, second: () => void): Promise<[Sample, Sample]> => {
      const a: number[] = [];
      const b: number[] = [];
      for (let r = -1; r < runs; r++) {
        const x = await library(first);
        const y = await library(second);
        if (r >= 0) {
          a.push(x);
          b.push(y);
        }
      }
      return [summarize(a), summarize(b)];
    };

    const [h2d, h2dNative] = await measure(() => stream.copy(buffer, pinned), true);
    results.push(throughputRow(`stream.copy() pinned → device, ${mib}`, h2d, 'cuMemcpyHtoDAsync (C++ loop)', h2dNative, 0.95));
    const [d2h, d2hNative] = await measure(() => stream.copy(pinned, buffer), false);
    results.push(throughputRow(`stream.copy() device → pinned, ${mib}`, d2h, 'cuMemcpyDtoHAsync (C++ loop)', d2hNative, 0.95));

    // The same copy from an ArrayBuffer of the caller's, registered (page-locked in place), against the PinnedBuffer.
    const own = new Uint8Array(bytes);
    const registration = HostRegistration.register(own);
    try {
      const [fromRegistered, fromPinned] = await measureBoth(() => stream.copy(buffer, own), () => stream.copy(buffer, pinned));
      results.push(throughputRow(`stream.copy() registered ArrayBuffer → device, ${mib}`, fromRegistered, `stream.copy() PinnedBuffer → device, ${mib}`, fromPinned, 0.95));
    } finally {
      registration.unregister();
    }

    results.push(...(await pageableRows(stream, buffer, pinned, ordinal, runs)));

    // A small pinned copy: the per-call cost of enqueuing it, few enough per run that the stream's queue never fills.
    const smallBytes = 4096;
    const smallCopies = 500;
    const smallSample = steadySync((calls) => {
      for (let i = 0; i < calls; i++) stream.copy(buffer, pinned, { byteLength: smallBytes });
    }, { minCalls: smallCopies, maxCalls: smallCopies, runs, between: () => stream.synchronizeSync() });
    stream.synchronizeSync();
    const smallBaseline = nativeSample(() => {
      stream.synchronizeSync();
      return addon.copyLoop(ordinal, smallCopies, true, pinned.bytes, smallBytes).enqueueNs;
    }, runs, smallCopies);
    results.push(
      targetUnlessRecorded(
        {
          name: 'stream.copy() pinned → device, 4 KiB, per call',
          unit: 'ns',
          value: smallSample,
          baselineName: 'cuMemcpyHtoDAsync (C++ loop)',
          baseline: smallBaseline,
          ratio: smallSample.median / smallBaseline.median,
          better: 'lower',
        },
        (result) => targetAddedNs(result, 100),
      ),
    );

    results.push(...batchRows(stream, buffer, pinned, runs));

    const pairBytes = 1 << 20;
    const iterations = 2000;
    // Each pair queues its allocation and free on the stream: at most `iterations` a run, the stream idle between runs.
    const { library: pairs, native: nativePairs } = steadySyncBeside((calls) => {
      for (let i = 0; i < calls; i++) DeviceBuffer.alloc(pairBytes, { stream }).free();
    }, (calls) => addon.allocFreeLoop(ordinal, calls, pairBytes), { minCalls: iterations, maxCalls: iterations, runs, between: () => stream.synchronizeSync() });
    await stream.synchronize();
    const toMicroseconds = (s: Sample): Sample => ({ ...s, median: s.median / 1000, p10: s.p10 / 1000, p90: s.p90 / 1000 });
    results.push(
      targetRatio(
        {
          name: 'DeviceBuffer.alloc() + free(), 1 MiB',
          unit: 'µs',
          value: toMicroseconds(pairs),
          baselineName: 'cuMemAllocFromPoolAsync + cuMemFreeAsync (C++ loop)',
          baseline: toMicroseconds(nativePairs),
          ratio: pairs.median / nativePairs.median,
          better: 'lower',
        },
        1.3,
      ),
    );
  } finally {
    buffer.free();
    pinned.free();
    await stream.synchronize();
    stream.destroy();
  }
  return results;
}

/** Copies in one batch of the batch rows, and bytes of each. */
const BATCH_COPIES = 64;
const BATCH_PIECE = 4096;
/** The batch target: 64 small copies in one stream.copyBatch() at most this many times 64 stream.copy() calls. */
const BATCH_TARGET = 1 / 1.5;

/** 64 copies of 4 KiB from pinned memory and from pageable JS memory to the device, in one `stream.copyBatch()`
 * against 64 `stream.copy()` calls, each timed from the first call until the stream has finished them (a
 * synchronizeSync() per round of 64). */
function batchRows(stream: Stream, buffer: DeviceBuffer, pinned: PinnedBuffer, runs: number): MicroResult[] {
  const pageable = Array.from({ length: BATCH_COPIES }, (_, i) => new Uint8Array(BATCH_PIECE).fill(i));
  const rows: MicroResult[] = [];
  for (const [what, source] of [['pinned', (i: number) => pinned.bytes.subarray(i * BATCH_PIECE, (i + 1) * BATCH_PIECE)], ['pageable', (i: number) => pageable[i]!]] as const) {
    const copies = Array.from({ length: BATCH_COPIES }, (_, i) => ({ dst: buffer, src: source(i), dstOffset: i * BATCH_PIECE }));
    const round = (batched: boolean) => (rounds: number) => {
      for (let r = 0; r < rounds; r++) {
        if (batched) stream.copyBatch(copies);
        else for (const c of copies) stream.copy(c.dst, c.src, { dstOffset: c.dstOffset });
        stream.synchronizeSync();
      }
    };
    const options = { minCalls: 20, maxCalls: 200, runs };
    const single = steadySync(round(false), options);
    const batch = steadySync(round(true), options);
    const row: MicroResult = {
      name: `stream.copyBatch() of ${BATCH_COPIES} ${what} → device copies of 4 KiB, to the last copy done`,
      unit: 'µs',
      value: { ...batch, median: batch.median / 1000, p10: batch.p10 / 1000, p90: batch.p90 / 1000 },
      baselineName: `${BATCH_COPIES} stream.copy() calls${what === 'pageable' ? ' (staged)' : ''}`,
      baseline: { ...single, median: single.median / 1000, p10: single.p10 / 1000, p90: single.p90 / 1000 },
      ratio: batch.median / single.median,
      better: 'lower',
    };
    rows.push(what === 'pinned' ? targetRatio(row, Number(BATCH_TARGET.toFixed(3))) : row);
  }
  return rows;
}

/** The sizes of the pageable rows, each with the copies of one timed run and the targets of its rows: against the
 * pinned copy of the same size, and against the driver's own pageable copy. */
const PAGEABLE_SIZES: readonly { bytes: number; copies: number; ofPinned?: number; ofDriver?: number }[] = [
  { bytes: 64 << 10, copies: 256 },
  { bytes: 4 << 20, copies: 32, ofPinned: 0.35 },
  { bytes: 64 << 20, copies: 8, ofPinned: 0.5, ofDriver: 2 },
];

/** Pageable copies through staging, both directions, at each of PAGEABLE_SIZES: every copy awaited before the next
 * (so the staging cap is free at each call), beside pinned copies made the same way and a C++ loop of the driver's
 * own pageable copy (`cuMemcpy*Async` on plain host memory, which blocks its thread). Then the longest event-loop
 * pauses: a host-to-device call (it snapshots the source), a landing of device-to-host bytes into the array
 * (`completionStats().longestLandingNs`). `buffer` and `pinned` hold at least 64 MiB. */
async function pageableRows(stream: Stream, buffer: DeviceBuffer, pinned: PinnedBuffer, ordinal: number, runs: number): Promise<MicroResult[]> {
  const addon = benchAddon();
  const rows: MicroResult[] = [];
  let longestCallNs = 0;
  for (const { bytes, copies, ofPinned, ofDriver } of PAGEABLE_SIZES) {
    const size = bytes >= 1 << 20 ? `${bytes >> 20} MiB` : `${bytes >> 10} KiB`;
    const pageable = new Uint8Array(bytes).fill(1);
    const pinnedView = new Uint8Array(pinned.bytes.buffer, pinned.bytes.byteOffset, bytes);
    for (const toDevice of [true, false]) {
      // Returns GB/s; `pauses`: note the longest call (the warm-up run grows the staging, a one-time cost).
      const timedRun = async (host: Uint8Array, pauses = false): Promise<number> => {
        const start = process.hrtime.bigint();
        for (let i = 0; i < copies; i++) {
          const before = process.hrtime.bigint();
          if (toDevice) stream.copy(buffer, host, { byteLength: bytes });
          else stream.copy(host, buffer, { byteLength: bytes });
          if (pauses && toDevice) longestCallNs = Math.max(longestCallNs, Number(process.hrtime.bigint() - before));
          await stream.synchronize();
        }
        return gbPerSecond(copies * bytes, Number(process.hrtime.bigint() - start));
      };
      const library: number[] = [];
      const viaPinned: number[] = [];
      const driver: number[] = [];
      for (let r = -1; r < runs; r++) {
        const a = await timedRun(pageable, r >= 0);
        const b = await timedRun(pinnedView);
        const c = gbPerSecond(copies * bytes, addon.copyLoop(ordinal, copies, toDevice, pageable, bytes).totalNs);
        if (r >= 0) {
          library.push(a);
          viaPinned.push(b);
          driver.push(c);
        }
      }
      const name = `stream.copy() ${toDevice ? 'pageable → device' : 'device → pageable'} through staging, ${size}`;
      const value = summarize(library);
      rows.push(throughputRow(name, value, `stream.copy() ${toDevice ? 'pinned → device' : 'device → pinned'}, each awaited`, summarize(viaPinned), ofPinned));
      rows.push(throughputRow(`${name}, against the driver`, value, `${toDevice ? 'cuMemcpyHtoDAsync' : 'cuMemcpyDtoHAsync'} of pageable memory (C++ loop, blocking)`, summarize(driver), ofDriver));
    }
  }
  const largest = `${PAGEABLE_SIZES[PAGEABLE_SIZES.length - 1]!.bytes >> 20} MiB`;
  for (const [what, ns] of [
    [`stream.copy() pageable → device, up to ${largest}: the longest call (the snapshot of the source)`, longestCallNs],
    [`stream.copy() device → pageable, up to ${largest}: the longest landing into the array`, completionStats().longestLandingNs],
  ] as const) {
    const ms = ns / 1e6;
    rows.push({ name: `event-loop pause, ${what}`, unit: 'ms', value: { median: ms, p10: ms, p90: ms, runs: 1 }, better: 'lower' });
  }
  return rows;
}
