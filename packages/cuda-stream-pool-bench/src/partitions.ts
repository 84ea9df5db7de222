// The executor benchmark's inputs in pinned memory: one buffer per distinct partition, filled before timing and reused
// round-robin by the tasks (task t reads partition t % count). The values come from reference.ts.
import { PinnedBuffer } from 'cuda-stream-pool';
import { fillPartition, type InputSpec } from './reference.js';

/** One partition in pinned memory, ready to be copied to the device. */
export interface Partition {
  index: number;
  pinned: PinnedBuffer;
}

/** Allocates and fills the pinned inputs. Lifetime: the caller frees them with {@link freePartitions}. */
export function preparePartitions(spec: InputSpec): Partition[] {
  const out: Partition[] = [];
  try {
    for (let p = 0; p < spec.partitions; p++) {
      const pinned = PinnedBuffer.alloc(spec.elements * 4);
      out.push({ index: p, pinned });
      fillPartition(pinned.view(Float32Array), p);
    }
    return out;
  } catch (error) {
    freePartitions(out);
    throw error;
  }
}

/** Frees the pinned inputs (returns at once; the memory goes back to the library's pinned cache). */
export function freePartitions(partitions: Partition[]): void {
  for (const partition of partitions) partition.pinned.free();
}
