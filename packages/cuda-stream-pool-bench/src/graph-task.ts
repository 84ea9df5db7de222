// The executor benchmark's `graph` mode: a task is one GraphExec.launch() of its copy-in, kernel and copy-out,
// captured once per slot and partition before timing. See Note [graph per slot and partition].
import { Graph, Stream, type GraphExec } from 'cuda-stream-pool';
import { fmaGrid, FMA_BLOCK } from './kernels.js';
import type { Partition } from './partitions.js';
import { FMA_A, FMA_B } from './reference.js';
import type { Slot, TaskContext } from './task.js';

/* Note [graph per slot and partition]: a task's three operations differ between tasks only in their addresses: the
 * slot's device buffer and pinned output, and the partition's pinned input. Either each slot keeps one executable per
 * partition (at most 8 partitions, captured on the slot's first graph task, during the warm-up), or each slot keeps one
 * executable whose copy-in node is given the task's partition (cuGraphExecMemcpyNodeSetParams) before each launch.
 * The first is what runs here: a task then costs exactly one driver call on the host (cuGraphLaunch), while the second
 * adds a node update per task; the memory it costs is a few small executables per slot. */

/** Captures the task of `slot` for every partition on a private stream (capture needs an owned or leased stream). */
async function captureSlot(ctx: TaskContext, slot: Slot): Promise<GraphExec[]> {
  const execs: GraphExec[] = [];
  const stream = Stream.create({ device: ctx.device });
  try {
    for (const partition of ctx.partitions) {
      // Relaxed: other slots of this thread instantiate their graphs while this one captures.
      using graph = await Graph.capture(stream, (s) => {
        const bytes = ctx.elements * 4;
        s.copy(slot.buffer, partition.pinned, { byteLength: bytes });
        ctx.kernel.launch({ grid: fmaGrid(ctx.elements), block: FMA_BLOCK, stream: s }, slot.buffer, ctx.elements, ctx.intensity, FMA_A, FMA_B);
        s.copy(slot.output, slot.buffer, { byteLength: bytes });
      }, { mode: 'relaxed' });
      execs.push(graph.instantiate());
    }
  } catch (error) {
    for (const exec of execs) exec.destroy();
    throw error;
  } finally {
    stream.destroy();
  }
  return execs;
}

/** The slot's executables, one per partition: captured by the slot's first graph task (a warm-up task, so before
 * timing) and kept in `slot.graphs`, which {@link Slot.free} destroys. */
export async function graphsOf(ctx: TaskContext, slot: Slot): Promise<GraphExec[]> {
  slot.graphs ??= await captureSlot(ctx, slot);
  return slot.graphs;
}

/** Enqueues the task of `slot` on `partition` as one launch of its executable from `execs` ({@link graphsOf}) on
 * `stream`. With marks on, the phase events bracket the whole graph: the copy-in start before the launch, the other
 * three after it (an event recorded inside a capture marks no time). */
export function launchGraph(ctx: TaskContext, slot: Slot, stream: Stream, partition: Partition, execs: GraphExec[]): void {
  const [copyInStart, kernelStart, copyOutStart, end] = slot.events;
  if (ctx.marks) copyInStart.record(stream);
  execs[partition.index]!.launch(stream);
  if (ctx.marks) for (const event of [kernelStart, copyOutStart, end]) event.record(stream);
}
