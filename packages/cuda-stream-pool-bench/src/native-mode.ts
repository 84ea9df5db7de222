// The `native` mode of the executor benchmark: the thread's tasks run by C++ threads of the benchmark addon (one per
// slot, each on a stream of its own, completing with cuStreamSynchronize), on the same pinned partitions, slots,
// kernel, verification sample and references as the library's modes. The baseline the other modes are compared with.
import { benchAddon, type NativeTaskPlan } from './bench-addon.js';
import { benchPtx, fmaGrid, FMA_BLOCK } from './kernels.js';
import { FMA_A, FMA_B } from './reference.js';
import { ULP_TOLERANCE, VerificationError, type BatchResult, type Slot, type TaskContext, type TaskRecord } from './task.js';

/** Runs tasks `first` to `first + count - 1` natively, as BatchThread.run does in the other modes: resolves once every
 * task is verified, with the same records. `timed` false: a warm-up (never corrupted by the test hook).
 * @throws {@link VerificationError} when a task's output is wrong; the library's CudaError when the driver fails. */
export async function runNativeBatch(ctx: TaskContext, slots: Slot[], thread: number, first: number, count: number, timed: boolean): Promise<BatchResult> {
  const sample = ctx.sample;
  const references = new Float32Array(ctx.partitions.length * sample.length);
  for (const partition of ctx.partitions) references.set(ctx.references[partition.index]!, partition.index * sample.length);
  const corrupt = timed ? ctx.corrupt : undefined;
  const plan: NativeTaskPlan = {
    device: ctx.device.ordinal,
    ptx: benchPtx(),
    elements: ctx.elements,
    intensity: ctx.intensity,
    grid: fmaGrid(ctx.elements),
    block: FMA_BLOCK,
    a: FMA_A,
    b: FMA_B,
    partitions: ctx.partitions.map((partition) => partition.pinned.bytes),
    slots: slots.map((slot) => ({ memory: slot.buffer.ptr, output: slot.output.bytes })),
    sample: Uint32Array.from(sample),
    references,
    ulpTolerance: ULP_TOLERANCE,
    first,
    count,
    corruptTask: corrupt?.task ?? -1,
    corruptElement: corrupt?.element ?? 0,
    marks: ctx.marks,
  };
  const outcome = await benchAddon().runTasks(plan);
  const mismatch = outcome.mismatch;
  if (mismatch) throw new VerificationError(mismatch.task, mismatch.element, mismatch.value, mismatch.expected, 'native');
  const streamIds = outcome.streamIds.map(String);
  const records: TaskRecord[] = [];
  for (let i = 0; i < count; i++) {
    const at = i * 4;
    const marks: TaskRecord['marks'] =
      timed && ctx.marks ? [outcome.marks[at]!, outcome.marks[at + 1]!, outcome.marks[at + 2]!, outcome.marks[at + 3]!] : [0, 0, 0, 0];
    records.push({ task: first + i, streamId: streamIds[outcome.slotOf[i]!]!, thread, marks, latencyMs: outcome.latencyMs[i]! });
  }
  return { records, startEpochMs: outcome.startEpochMs, endEpochMs: outcome.endEpochMs, originEpochMs: outcome.originEpochMs, orderWaits: 0, orderWaitMs: 0 };
}
