// A batch: one thread's share of the executor benchmark (the main thread's, or a worker's). It owns the thread's
// inputs and task slots, and runs its tasks with a fixed number in flight. See issue 6, "Scale".
import { Device, Event, Stream, StreamPool, type SharedStreamPool } from '../index.js';
import { benchKernels } from './kernels.js';
import type { Mode } from './modes.js';
import { runNativeBatch } from './native-mode.js';
import { freePartitions, preparePartitions } from './partitions.js';
import type { InputSpec } from './reference.js';
import { runTask, Slot, type TaskContext, type TaskRecord } from './task.js';

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

/** The outcome of one run of a batch. */
export interface BatchResult {
  records: TaskRecord[];
  /** Host wall-clock times (ms since the epoch, sub-ms precision, comparable across threads) of the first task's
   * start and the last task's verified end. */
  startEpochMs: number;
  endEpochMs: number;
  /** Host wall-clock time at which the timing origin was recorded; aligns the threads' timelines. */
  originEpochMs: number;
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
   * `onTaskDone` is called after every task (progress). */
  async run(mode: Mode, first: number, count: number, timed: boolean, onTaskDone?: () => void): Promise<BatchResult> {
    if (mode === 'native') {
      // The C++ threads report when all are done, so progress advances by the whole batch at once.
      const result = await runNativeBatch(this.ctx, this.slots, this.thread, first, count, timed);
      for (let i = 0; i < count; i++) onTaskDone?.();
      return result;
    }
    // The origin is recorded on an idle stream of its own and complete before the first task, so every phase
    // time (Event.elapsedMs from it) is defined and positive.
    this.ctx.origin.record(this.#originStream);
    await this.ctx.origin.synchronize();
    const originEpochMs = epochNow();
    const records: TaskRecord[] = [];
    let next = 0;
    let failure: { error: unknown } | undefined;
    const startEpochMs = epochNow();
    await Promise.all(
      this.slots.map(async (slot) => {
        while (failure === undefined && next < count) {
          const task = first + next++;
          try {
            records.push(await runTask(this.ctx, mode, slot, task, this.thread, timed));
          } catch (error) {
            failure ??= { error };
          }
          onTaskDone?.();
        }
      }),
    );
    const endEpochMs = epochNow();
    if (failure) throw failure.error;
    return { records, startEpochMs, endEpochMs, originEpochMs };
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
