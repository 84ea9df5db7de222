// Worker for test/gpu/pool/pool-gpu.test.ts: attaches to a pool shared by the main thread (or takes the default pool).
// workerData: { shared?, mode, tasks?, iterations?, marks?, hold? }. Modes:
//   'lease-spin'      `tasks` concurrent run()s, each spinning 20 ms on its lease's stream with %globaltimer stamps;
//                     posts { records: [{ id, host: [start, end], device: [start, end] }] } (bigints as strings)
//   'stress'          `tasks` concurrent loops of acquire/release, `iterations` in all; `marks` has one Int32 per
//                     stream index, so a stream held twice at once is counted; posts { violations, leases }
//   'until-destroyed' posts 'running' once busy, then loops getStream()/acquire()/query() in 3 tasks until each
//                     meets an error; posts { errors: [{ name, resource, method }] }
//   'hold-exit'       leases `hold` streams, posts { held: ids }, ends without releasing (the thread exits)
//   'hold-stay'       the same, then stays alive until terminated
//   'default'         posts { size, ids } of StreamPool.default() (ids by index, as strings)
import { parentPort, workerData } from 'node:worker_threads';

import { DestroyedError, Stream, StreamPool, type SharedStreamPool } from 'cuda-stream-pool';
import { MS } from '../support/gpu.js';
import { Stamps } from '../support/stamps.js';

interface Data {
  shared?: SharedStreamPool;
  mode: string;
  tasks?: number;
  iterations?: number;
  marks?: SharedArrayBuffer;
  hold?: number;
}
const data = workerData as Data;
const post = (message: unknown) => parentPort!.postMessage(message);

function indexById(pool: StreamPool): Map<bigint, number> {
  return new Map(Array.from({ length: pool.size }, (_, i) => [pool.getStream(i).id, i] as const));
}

switch (data.mode) {
  case 'lease-spin': {
    const pool = StreamPool.attach(data.shared!);
    const tasks = data.tasks ?? 2;
    const setup = Stream.create();
    const stamps = new Stamps(tasks, setup);
    await setup.synchronize();
    const records = await Promise.all(
      Array.from({ length: tasks }, (_, task) =>
        pool.run(async (stream) => {
          const start = process.hrtime.bigint();
          await stamps.spin(stream, 20n * MS, task);
          await stream.synchronize();
          return { task, id: stream.id, host: [start, process.hrtime.bigint()] as const };
        }),
      ),
    );
    const device = await stamps.read(setup);
    stamps.free();
    await setup.synchronize();
    setup.destroy();
    post({
      records: records.map((r) => ({
        id: String(r.id),
        host: r.host.map(String),
        device: device[r.task]!.map(String),
      })),
    });
    break;
  }
  case 'stress': {
    const pool = StreamPool.attach(data.shared!);
    const index = indexById(pool);
    const marks = new Int32Array(data.marks!);
    const tasks = data.tasks ?? 2;
    const perTask = Math.ceil((data.iterations ?? 10_000) / tasks);
    let violations = 0;
    let leases = 0;
    await Promise.all(
      Array.from({ length: tasks }, async (_, task) => {
        for (let i = 0; i < perTask; i++) {
          const lease = await pool.acquire();
          const slot = index.get(lease.stream.id)!;
          if (Atomics.add(marks, slot, 1) !== 0) violations++;
          if ((i + task) % 4 === 0) await null;
          if (Atomics.sub(marks, slot, 1) !== 1) violations++;
          lease.release();
          leases++;
        }
      }),
    );
    post({ violations, leases });
    break;
  }
  case 'until-destroyed': {
    const pool = StreamPool.attach(data.shared!);
    const errors: Array<{ name: string; resource?: string; method?: string; message: string }> = [];
    let rounds = 0;
    let announced = false;
    const note = (error: unknown) => {
      const e = error as DestroyedError;
      errors.push({ name: e.name, resource: e.resource, method: e.method, message: e.message });
    };
    const loops = [
      async () => {
        for (;;) {
          pool.getStream().query();
          pool.getStream(rounds).query();
          if (++rounds === 50 && !announced) {
            announced = true;
            post('running');
          }
          await new Promise((resolve) => setImmediate(resolve));
        }
      },
      async () => {
        for (;;) {
          const lease = await pool.acquire();
          lease.stream.query();
          await new Promise((resolve) => setImmediate(resolve));
          lease.release();
        }
      },
      async () => {
        for (;;) {
          await pool.run(async (stream) => {
            stream.query();
            await new Promise((resolve) => setImmediate(resolve));
          });
        }
      },
    ];
    await Promise.all(loops.map((loop) => loop().catch(note)));
    post({ errors });
    break;
  }
  case 'hold-exit':
  case 'hold-stay': {
    const pool = StreamPool.attach(data.shared!);
    const held = [];
    for (let i = 0; i < (data.hold ?? 1); i++) held.push(await pool.acquire());
    post({ held: held.map((lease) => String(lease.stream.id)) });
    if (data.mode === 'hold-stay') setInterval(() => {}, 1000);
    break;
  }
  case 'default': {
    const pool = StreamPool.default();
    post({ size: pool.size, ids: Array.from({ length: pool.size }, (_, i) => String(pool.getStream(i).id)) });
    break;
  }
  default:
    throw new Error(`unknown mode ${data.mode}`);
}
