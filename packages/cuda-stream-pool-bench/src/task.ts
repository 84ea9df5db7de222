// One executor task's parts: its slot (what it owns), its work (copy a partition in, run fma_steps, copy the result
// out into the slot's pinned output), the check of a sample against the CPU reference, and the records a run of tasks
// yields. The loop that runs tasks, waits for them and records them is BatchThread.run (batch.ts). With a timeline,
// event timestamps mark each phase.
import { DeviceBuffer, Event, PinnedBuffer, type Device, type GraphExec, type Kernel, type Stream, type StreamPool } from 'cuda-stream-pool';
import { ulpDistance } from './fmaf.js';
import { fmaGrid, FMA_BLOCK } from './kernels.js';
import type { Mode } from './modes.js';
import type { Partition } from './partitions.js';
import { FMA_A, FMA_B } from './reference.js';

/** The most float32 ulps an output element may differ from its reference. The kernel and the reference compute the
 * same correctly rounded fmaf chain, so they should agree exactly; the margin only absorbs a driver that contracts
 * differently, and anything else (a wrong partition, stale memory, a lost copy) is off by millions of ulps. */
export const ULP_TOLERANCE = 4;

/** Everything a thread's tasks share during one run. */
export interface TaskContext {
  device: Device;
  /** fma_steps, loaded in this thread. */
  kernel: Kernel;
  elements: number;
  intensity: number;
  partitions: Partition[];
  /** Output elements every task verifies. */
  sample: number[];
  /** references[p][k]: the expected value of partition p's element sample[k]. */
  references: Float32Array[];
  /** The test hook: corrupt this element of this (timed) task's output before it is verified. */
  corrupt: { task: number; element: number } | undefined;
  /** The shared pool, for the pool modes. */
  pool: StreamPool | undefined;
  /** Record the phase events and read their times (for --timeline); off, tasks do only their own work. */
  marks: boolean;
  /** The timing event every phase time is measured from; recorded and complete before a run's first task. */
  origin: Event;
}

/** A task's timed facts: the stream it ran on and when each phase started and ended on the GPU. */
export interface TaskRecord {
  /** The task number over the whole run (0 to tasks - 1), whichever thread ran it. */
  task: number;
  /** The stream's driver id (cuStreamGetId), as a decimal string. */
  streamId: string;
  /** The thread that ran the task: 0 for the main thread, 1.. for workers. */
  thread: number;
  /** GPU times in ms from the run's origin: copy-in start, kernel start, copy-out start, copy-out end; all 0 when the
   * context's `marks` is off. */
  marks: [number, number, number, number];
  /** Host time from taking a stream to seeing the copy-out complete, ms. */
  latencyMs: number;
}

/** The outcome of one run of a batch (BatchThread.run in batch.ts, or runNativeBatch in native-mode.ts). */
export interface BatchResult {
  records: TaskRecord[];
  /** Host wall-clock times (ms since the epoch, sub-ms precision, comparable across threads) of the first task's
   * start and the last task's verified end. */
  startEpochMs: number;
  endEpochMs: number;
  /** Host wall-clock time at which the timing origin was recorded; aligns the threads' timelines. */
  originEpochMs: number;
  /** The batch's operations that deferred submission held back until another thread had issued an earlier operation
   * of their stream (`cuda.submission().orderWaits` over the batch); 0 in direct mode and for `native`. */
  orderWaits: number;
  /** Milliseconds those operations waited, in total (`cuda.submission().orderWaitMs` over the batch). */
  orderWaitMs: number;
}

/** A task's output did not match the reference. The CLI prints the message and exits 1. */
export class VerificationError extends Error {
  constructor(
    readonly task: number,
    readonly element: number,
    readonly value: number,
    readonly expected: number,
    readonly mode: Mode,
  ) {
    const ulps = ulpDistance(value, expected);
    super(
      `verification failed: task ${task} (mode ${mode}) element ${element} is ${value.toPrecision(9)}, expected ` +
        `${expected.toPrecision(9)} (${Number.isFinite(ulps) ? `${ulps} float32 ulps apart` : 'not a number'}; at most ${ULP_TOLERANCE} ` +
        'allowed). The GPU result differs from the CPU reference: check the device (device.healthy) and the kernel PTX.',
    );
    this.name = 'VerificationError';
  }
}

/** A task slot: what one task in flight owns, allocated before timing and reused by the slot's next task once the
 * previous one was verified: the device memory the task computes in, the pinned output, the timing events, and in
 * `graph` mode the task's executables.
 *
 * Why device memory per slot and not per task: a stream-ordered allocation per task (DeviceBuffer.alloc on the task's
 * stream) measures the memory pool, not the streams: profiled on an H200, it took half the JS thread's time in pool
 * mode (cuMemAllocFromPoolAsync reusing memory across 32 streams), and the issue asks for memory allocated before
 * timing. The slot's next task may run on another stream; it starts only after the previous one completed. */
export class Slot {
  readonly buffer: DeviceBuffer;
  readonly output: PinnedBuffer;
  readonly view: Float32Array;
  readonly events: [Event, Event, Event, Event];
  /** `graph` mode: the task captured once per partition, by partition index (graph-task.ts); destroyed by
   * {@link Slot.free}. */
  graphs: GraphExec[] | undefined;

  /** Allocates on `stream` (the thread's setup stream); the caller waits for it before the first task. */
  constructor(device: Device, elements: number, stream: Stream) {
    const made: { destroy(): void }[] = [];
    try {
      this.buffer = DeviceBuffer.alloc(elements * 4, { stream });
      made.push({ destroy: () => this.buffer.free() });
      this.output = PinnedBuffer.alloc(elements * 4);
      made.push({ destroy: () => this.output.free() });
      const events: Event[] = [];
      for (let i = 0; i < 4; i++) {
        events.push(Event.create({ device, timing: true }));
        made.push(events[i]!);
      }
      this.events = events as [Event, Event, Event, Event];
    } catch (error) {
      for (const thing of made.reverse()) thing.destroy();
      throw error;
    }
    this.view = this.output.view(Float32Array);
  }

  /** Destroys the executables (before the memory their nodes name), frees the memory (in stream order, after every
   * stream that used it) and destroys the events. */
  free(): void {
    for (const exec of this.graphs ?? []) exec.destroy();
    this.graphs = undefined;
    for (const event of this.events) event.destroy();
    this.buffer.free();
    this.output.free();
  }
}

/** Enqueues the task's work on `stream`, with the phase events when marks are on; returns at once. */
export function enqueue(ctx: TaskContext, slot: Slot, stream: Stream, partition: Partition): void {
  const [copyInStart, kernelStart, copyOutStart, end] = slot.events;
  const bytes = ctx.elements * 4;
  if (ctx.marks) copyInStart.record(stream);
  stream.copy(slot.buffer, partition.pinned, { byteLength: bytes });
  if (ctx.marks) kernelStart.record(stream);
  ctx.kernel.launch({ grid: fmaGrid(ctx.elements), block: FMA_BLOCK, stream }, slot.buffer, ctx.elements, ctx.intensity, FMA_A, FMA_B);
  if (ctx.marks) copyOutStart.record(stream);
  stream.copy(slot.output, slot.buffer, { byteLength: bytes });
  if (ctx.marks) end.record(stream);
}

/** Compares the sample of the slot's output with the references; throws {@link VerificationError} on the first
 * element more than {@link ULP_TOLERANCE} ulps off. Every mode checks each task's sample once it completed, the
 * `native` mode in C++, the others here, so that both do the same work per task. */
export function verify(ctx: TaskContext, slot: Slot, task: number, partition: Partition, mode: Mode, timed: boolean): void {
  if (timed && ctx.corrupt && ctx.corrupt.task === task) {
    const at = ctx.corrupt.element;
    slot.view[at] = Math.fround(slot.view[at]! + 1); // the test hook: see CORRUPT_VARIABLE in src/cli/options.ts
  }
  const expected = ctx.references[partition.index]!;
  for (let k = 0; k < ctx.sample.length; k++) {
    const element = ctx.sample[k]!;
    const value = slot.view[element]!;
    // Equal is the rule (see ULP_TOLERANCE); the ulp distance is only worked out for the rare other case.
    if (value !== expected[k] && !(ulpDistance(value, expected[k]!) <= ULP_TOLERANCE))
      throw new VerificationError(task, element, value, expected[k]!, mode);
  }
}
