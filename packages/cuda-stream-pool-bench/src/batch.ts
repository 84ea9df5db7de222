// A batch: one thread's share of the executor benchmark (the main thread's, or a worker's). It owns the thread's
// inputs and task slots, and runs its tasks with a fixed number in flight.
import { cuda, Device, Event, Stream, StreamPool, type GraphExec, type SharedStreamPool } from 'cuda-stream-pool';
import { graphsOf, launchGraph } from './graph-task.js';
import { benchKernels } from './kernels.js';
import type { Mode } from './modes.js';
import { runNativeBatch } from './native-mode.js';
import { freePartitions, preparePartitions } from './partitions.js';
import type { InputSpec } from './reference.js';
import { enqueue, Slot, verify, type BatchResult, type TaskContext, type TaskRecord } from './task.js';

/** Measured tasks between two progress reports of a run (each report to a worker's parent is a message). */
const PROGRESS_EVERY = 64;

/** What a thread needs to set itself up; structured-cloneable, so a worker gets it as `workerData`. */
export interface BatchSetup {
  device: number;
  spec: InputSpec;
  /** references[p][k], computed once by the main thread. */
  references: Float32Array[];
  /** Task slots (tasks in flight) of this thread. */
  slots: number;
  corrupt: { task: number; element: number } | undefined;
  /** Record phase events for the timeline (see TaskContext.marks). */
  marks: boolean;
  /** The pool to attach to, in a worker; the main thread passes its own pool to {@link BatchThread.create}. */
  sharedPool?: SharedStreamPool;
  /** 0 for the main thread, 1.. for workers. */
  thread: number;
}

/** Host wall-clock time in ms since the epoch with sub-millisecond precision, comparable between threads. */
export function epochNow(): number {
  return performance.timeOrigin + performance.now();
}

/** One thread's benchmark state: kernels, pinned inputs, slots, the timing origin. Lifetime: owns everything it
 * allocates; {@link BatchThread.dispose} frees it (and detaches an attached pool). */
export class BatchThread {
  readonly ctx: TaskContext;
  readonly slots: Slot[];
  readonly thread: number;
  #originStream: Stream;
  #attachedPool: StreamPool | undefined;

  private constructor(ctx: TaskContext, slots: Slot[], thread: number, originStream: Stream, attachedPool: StreamPool | undefined) {
    this.ctx = ctx;
    this.slots = slots;
    this.thread = thread;
    this.#originStream = originStream;
    this.#attachedPool = attachedPool;
  }

  /** Loads the kernels and allocates the inputs, slots and timing origin of this thread, all before timing.
   * `pool`: the main thread's pool; a worker attaches `setup.sharedPool` instead. */
  static async create(setup: BatchSetup, pool?: StreamPool): Promise<BatchThread> {
    const device = Device.get(setup.device);
    const kernels = await benchKernels(device);
    const attachedPool = !pool && setup.sharedPool ? StreamPool.attach(setup.sharedPool) : undefined;
    const partitions = preparePartitions(setup.spec);
    const slots: Slot[] = [];
    const origin = Event.create({ device, timing: true });
    const originStream = Stream.create({ device });
    try {
      // The slots' device memory is allocated in order on the origin stream, ready before the first task.
      for (let i = 0; i < setup.slots; i++) slots.push(new Slot(device, setup.spec.elements, originStream));
      await originStream.synchronize();
    } catch (error) {
      for (const slot of slots) slot.free();
      freePartitions(partitions);
      origin.destroy();
      originStream.destroy();
      attachedPool?.destroy();
      throw error;
    }
    const ctx: TaskContext = {
      device,
      kernel: kernels.fmaSteps,
      elements: setup.spec.elements,
      intensity: setup.spec.intensity,
      partitions,
      sample: setup.spec.sample,
      references: setup.references,
      corrupt: setup.corrupt,
      pool: pool ?? attachedPool,
      marks: setup.marks,
      origin,
    };
    return new BatchThread(ctx, slots, setup.thread, originStream, attachedPool);
  }

  /** Runs tasks `first` to `first + count - 1` in `mode`, with one task in flight per slot; a slot takes the next
   * task as soon as its previous one is verified. `timed` false: a warm-up (not recorded, never corrupted).
   * Stops taking tasks at the first failure and rejects with it once the tasks in flight have ended.
   * `onTasksDone(n)` reports progress: every PROGRESS_EVERY measured tasks, and the rest at the end.
   * See Note [a task loop as lean as a user's]. */
  async run(mode: Mode, first: number, count: number, timed: boolean, onTasksDone?: (tasks: number) => void): Promise<BatchResult> {
    if (mode === 'native') {
      // The C++ threads report when all are done, so progress advances by the whole batch at once.
      const result = await runNativeBatch(this.ctx, this.slots, this.thread, first, count, timed);
      onTasksDone?.(count);
      return result;
    }
    // The origin is recorded on an idle stream of its own and complete before the first task, so every phase
    // time (Event.elapsedMs from it) is defined and positive.
    this.ctx.origin.record(this.#originStream);
    await this.ctx.origin.synchronize();
    const originEpochMs = epochNow();
    const log = new TaskLog(count, timed && this.ctx.marks);
    const state: LoopState = { next: 0, done: 0, failure: undefined, onTasksDone };
    // The thread's counters: with --devices and no workers one thread runs a batch per device at once, and each
    // would count the others' waits too; but a single JS thread never waits for itself, so those stay 0.
    const before = cuda.submission();
    const startEpochMs = epochNow();
    await Promise.all(this.slots.map((slot) => taskLoop(this.ctx, mode, slot, first, count, timed, log, state)));
    const endEpochMs = epochNow();
    const after = cuda.submission();
    if (onTasksDone && state.done % PROGRESS_EVERY !== 0) onTasksDone(state.done % PROGRESS_EVERY);
    if (state.failure) throw state.failure.error;
    return {
      records: log.records(first, this.thread),
      startEpochMs,
      endEpochMs,
      originEpochMs,
      orderWaits: after.orderWaits - before.orderWaits,
      orderWaitMs: after.orderWaitMs - before.orderWaitMs,
    };
  }

  /** Frees the slots (their device memory in stream order on the origin stream, after every stream that used it) and
   * inputs, destroys the timing origin, detaches an attached pool. Each part is freed once. */
  dispose(): void {
    for (const slot of this.slots) slot.free();
    this.slots.length = 0;
    freePartitions(this.ctx.partitions);
    this.ctx.partitions = [];
    this.ctx.origin.destroy();
    this.#originStream.destroy();
    this.#attachedPool?.destroy();
    this.#attachedPool = undefined;
  }
}

/* Note [a task loop as lean as a user's]: the JS modes are compared with `native`, whose C++ threads do per task the
 * driver calls, the wait and the check of the sample, and record the latency into arrays made before the run. So the
 * JS loop does per task what a user's code would, and the same bookkeeping as the C++ loop, nothing more:
 * - one async function per slot (taskLoop), not a frame per task and another per mode: each task takes its stream
 *   inline (the mode's one call: getStream(), Stream.create(), pool.run(), ...), queues the copy, the launch and the
 *   copy back (one graph launch in `graph` mode), awaits stream.synchronize(), then lets the stream go;
 * - its latency, its stream and (with --phases) its event times go into arrays made before the run (TaskLog), by
 *   plain stores; the records, with their stream ids as text, are built after the run's end time was taken;
 * - the sample is checked per task in every mode, as `native` checks it in C++ (the slot's output is reused by its
 *   next task, so it cannot wait for the end of the run);
 * - progress is counted per task and reported every PROGRESS_EVERY tasks (a worker's report is a message).
 */

/** The counters a run's slot loops share. */
interface LoopState {
  /** The next task to take, from 0 (the run's first). */
  next: number;
  /** Measured tasks done, for progress. */
  done: number;
  failure: { error: unknown } | undefined;
  onTasksDone: ((tasks: number) => void) | undefined;
}

/** What a run records per task, in arrays made before it starts (Note [a task loop as lean as a user's]). */
class TaskLog {
  readonly latencyMs: Float64Array;
  readonly streams: (Stream | undefined)[];
  /** Four GPU times per task (ms from the origin) when marks are read; else empty. */
  readonly marks: Float64Array;

  constructor(count: number, marks: boolean) {
    this.latencyMs = new Float64Array(count);
    this.streams = new Array<Stream | undefined>(count).fill(undefined);
    this.marks = new Float64Array(marks ? count * 4 : 0);
  }

  /** The records of the tasks that completed, in task order. */
  records(first: number, thread: number): TaskRecord[] {
    const records: TaskRecord[] = [];
    const withMarks = this.marks.length > 0;
    for (let i = 0; i < this.streams.length; i++) {
      const stream = this.streams[i];
      if (stream === undefined) continue; // not run: the run failed first
      const m = this.marks;
      const marks: TaskRecord['marks'] = withMarks ? [m[i * 4]!, m[i * 4 + 1]!, m[i * 4 + 2]!, m[i * 4 + 3]!] : [0, 0, 0, 0];
      records.push({ task: first + i, streamId: String(stream.id), thread, marks, latencyMs: this.latencyMs[i]! });
    }
    return records;
  }
}

/** One slot's tasks of a run: takes the next task until none is left or one failed (Note [a task loop as lean as a
 * user's]). Never rejects: a failure is kept in `state` and ends every slot's loop. */
async function taskLoop(ctx: TaskContext, mode: Mode, slot: Slot, first: number, count: number, timed: boolean, log: TaskLog, state: LoopState): Promise<void> {
  const { device, partitions } = ctx;
  const pool = ctx.pool;
  if ((mode === 'pool' || mode === 'lease' || mode === 'graph') && pool === undefined)
    throw new Error(`cuda-stream-pool bench: mode ${mode} ran without a stream pool; this is a bug in the benchmark.`);
  let execs: GraphExec[] | undefined;
  while (state.failure === undefined && state.next < count) {
    const i = state.next++;
    const task = first + i;
    const partition = partitions[task % partitions.length]!;
    try {
      const started = performance.now();
      let stream: Stream;
      switch (mode) {
        case 'lease':
          // What a user writes for a task of its own: the stream is the lease's, released when the callback settles.
          stream = await pool!.run(async (leased: Stream) => {
            enqueue(ctx, slot, leased, partition);
            await leased.synchronize();
            return leased;
          });
          break;
        case 'per-task':
          stream = Stream.create({ device });
          try {
            enqueue(ctx, slot, stream, partition);
            await stream.synchronize();
          } finally {
            stream.destroy();
          }
          break;
        case 'graph':
          stream = pool!.getStream();
          execs ??= await graphsOf(ctx, slot); // captured by the warm-up, looked up once per run after that
          launchGraph(ctx, slot, stream, partition, execs);
          await stream.synchronize();
          break;
        default:
          // The task waits for its stream, as a task written against this API would. On a stream that other tasks
          // share (legacy, per-thread, pool) that includes their work queued before this call: the cost of sharing,
          // which the modes are there to show.
          stream = mode === 'pool' ? pool!.getStream() : mode === 'legacy' ? Stream.legacy(device) : Stream.perThread(device);
          enqueue(ctx, slot, stream, partition);
          await stream.synchronize();
      }
      log.latencyMs[i] = performance.now() - started;
      verify(ctx, slot, task, partition, mode, timed);
      log.streams[i] = stream;
      if (log.marks.length > 0) for (let k = 0; k < 4; k++) log.marks[i * 4 + k] = Event.elapsedMs(ctx.origin, slot.events[k]!);
    } catch (error) {
      state.failure ??= { error };
    }
    if (state.onTasksDone && ++state.done % PROGRESS_EVERY === 0) state.onTasksDone(PROGRESS_EVERY);
  }
}
