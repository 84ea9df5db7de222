// A stream pool: shared streams (getStream), exclusive leases (tryAcquire, acquire, run), its statistics, a worker
// thread that attaches the pool and a device buffer shared with it, and close().
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';

import { currentStream, DeviceBuffer, StreamPool } from 'cuda-stream-pool';

import { cleanUp, expectAll, expectElements, type ErrorDescription, RemoteError, WrongResult, type Workload } from '../workload.js';

const BYTES = 16 << 10;

export const workload: Workload = {
  name: 'pool',
  async run() {
    const pool = new StreamPool({ size: 4 });
    let shared: DeviceBuffer | undefined;
    await cleanUp(
      async () => {
        const input = Uint8Array.from({ length: BYTES }, (_, i) => (i * 5 + 2) & 0xff);
        const stream = pool.getStream(0);
        shared = DeviceBuffer.from(input, { stream });
        expectElements('getStream round trip', await shared.toArray(Uint8Array, { stream }), input);
        const lease = pool.tryAcquire();
        if (!lease) throw new WrongResult('an idle pool lent nothing');
        try {
          lease.stream.fill(shared, 9);
          await lease.stream.synchronize();
        } finally {
          lease.release();
        }
        const leased = await pool.acquire();
        try {
          expectAll('a lease sees the fill', await shared.toArray(Uint8Array, { stream: leased.stream }), 9);
        } finally {
          leased.release();
        }
        const copied = await pool.run(async () => {
          using scratch = DeviceBuffer.from(input);
          return await scratch.toArray(Uint8Array, { stream: currentStream() });
        });
        expectElements('run() round trip', copied, input);
        if (pool.stats().size !== 4) throw new WrongResult('the pool has the wrong size');
        await pool.getStream(0).synchronize();
        const worker = new Worker(new URL('../pool-worker.js', import.meta.url), {
          workerData: { pool: pool.share(), buffer: shared.share() },
        });
        const exit = once(worker, 'exit'); // before the message: the worker exits right after posting it
        const [message] = (await once(worker, 'message')) as [{ bytes?: Uint8Array; error?: ErrorDescription }];
        await exit;
        if (message.error) throw new RemoteError('the worker', message.error);
        expectAll('the worker filled the shared buffer', message.bytes!, 0x3c);
      },
      () => shared?.free(),
      () => pool.close(),
    );
  },
};
