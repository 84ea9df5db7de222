// Worker for test/gpu/device/multi-device.test.ts. workerData.mode:
//  'interleave'  run test/support/interleave.ts with workerData.seed and workerData.rounds; post { failures }
//  'group'       run 4 tasks through its own StreamPool.forDevices([0, 1]); post each task's [device, buffer device, right]
import { parentPort, workerData } from 'node:worker_threads';

import { DeviceBuffer, StreamPool } from 'cuda-stream-pool';
import { interleave } from '../support/interleave.js';

const { mode, seed, rounds } = workerData as { mode: 'interleave' | 'group'; seed: number; rounds: number };
if (mode === 'interleave') {
  parentPort!.postMessage({ failures: await interleave(seed, rounds) });
} else {
  const group = StreamPool.forDevices([0, 1]);
  const tasks = await Promise.all(
    Array.from({ length: 4 }, (_, task) =>
      group.run(async (stream) => {
        using buffer = DeviceBuffer.alloc(64);
        stream.fill(buffer, task + 1);
        const values = await buffer.toArray(Uint8Array, { stream });
        return [stream.device.ordinal, buffer.device.ordinal, values.every((v) => v === task + 1)];
      }),
    ),
  );
  group.destroy();
  parentPort!.postMessage({ tasks });
}
