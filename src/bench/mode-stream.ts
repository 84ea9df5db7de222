// How a task gets its stream in each executor benchmark mode: the legacy stream, the per-thread default stream, a
// stream per task, a pool stream handed out round-robin, or an exclusive lease. See modes.ts and DESIGN.md "The problem".
import { Stream, type Device, type StreamPool } from '../index.js';
import type { Mode } from './modes.js';

/** Runs `task` on a stream chosen as `mode` says and settles with its outcome. The stream is only valid until
 * `task`'s promise settles (a per-task stream is destroyed then, a lease released), so `task` awaits its own work.
 * `pool` is required by the pool modes. */
export async function onModeStream<T>(mode: Mode, device: Device, pool: StreamPool | undefined, task: (stream: Stream) => Promise<T>): Promise<T> {
  switch (mode) {
    case 'legacy':
      return task(Stream.legacy(device));
    case 'per-thread':
      return task(Stream.perThread(device));
    case 'per-task': {
      const stream = Stream.create({ device });
      try {
        return await task(stream);
      } finally {
        stream.destroy();
      }
    }
    case 'pool':
      return task(requirePool(pool, mode).getStream());
    case 'lease':
      return requirePool(pool, mode).run((stream: Stream) => task(stream));
    case 'native':
      throw new Error('cuda-stream-pool bench: mode native runs on C++ threads (native-mode.ts), never on a library stream; this is a bug in the benchmark.');
  }
}

function requirePool(pool: StreamPool | undefined, mode: Mode): StreamPool {
  if (!pool) throw new Error(`cuda-stream-pool bench: mode ${mode} ran without a stream pool; this is a bug in the benchmark.`);
  return pool;
}
