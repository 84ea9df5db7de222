// Worker for test/cpu/pool.test.ts: runs the pool policy with fake streams over native shared words (poolCreateShared), so
// the cross-thread machinery (one backing store, attach, the cleanup hook) is tested without a GPU.
// workerData: { id, mode, marks?, iterations?, tasks?, hold?, memoryBytes? }. Every lease asks for `memoryBytes` as
// its budget (default none). Modes:
//   'stress'     `tasks` concurrent loops of acquire/release, `iterations` in all; counts a stream held twice at once
//                through `marks` (one Int32 per stream, shared with every worker); posts { violations, leases }
//   'hold-exit'  leases `hold` streams, posts 'held', then ends without releasing them (the thread exits)
//   'hold-stay'  leases `hold` streams, posts 'held', then stays alive until terminated
//   'wait'       posts 'waiting', waits in acquire(), posts 'got' with the stream index, releases, ends
//   'wait-destroyed' posts 'waiting', waits in acquire() and posts how it settled
//   'hand-out'   calls getStream() `iterations` times, posts the stream indices it got
//   'churn'      `tasks` endless loops of acquire/release until terminated; `marks` holds one word per stream (the
//                holder's environment id, set on acquire and put back to 0 on release: a release that finds another
//                id there means two holders at once), then the violation count and the lease count
import { parentPort, workerData } from 'node:worker_threads';

import { native } from '#library/binding/binding.js';
import { PoolCore, type PoolStreams } from '#library/pool/pool-policy.js';

interface Data {
  id: number;
  mode: string;
  marks?: SharedArrayBuffer;
  iterations?: number;
  tasks?: number;
  hold?: number;
  memoryBytes?: number;
}
interface Fake {
  streamIndex: number;
  retired?: string;
}

const data = workerData as Data;
const description = native.poolAttach(data.id)!;
const size = description.size;
const poolStreams: PoolStreams<Fake> = {
  streams: Array.from({ length: size }, (_, streamIndex) => ({ streamIndex })),
  leaseView: (streamIndex) => ({ streamIndex }),
  retire: (view, why) => {
    view.retired ??= why;
  },
  isIdle: () => true,
  used: () => true,
  scope: (view, fn) => fn(view),
  drain: async () => {},
};
const core = new PoolCore(new Int32Array(description.memory), size, native.environmentId, poolStreams);
const post = (message: unknown) => parentPort!.postMessage(message);
const kept: unknown[] = [];
const options = data.memoryBytes === undefined ? undefined : { memoryBytes: data.memoryBytes };

switch (data.mode) {
  case 'stress': {
    const marks = new Int32Array(data.marks!);
    const tasks = data.tasks ?? 1;
    const perTask = Math.ceil((data.iterations ?? 1000) / tasks);
    let violations = 0;
    let leases = 0;
    await Promise.all(
      Array.from({ length: tasks }, async (_, task) => {
        for (let i = 0; i < perTask; i++) {
          const lease = await core.acquire(options);
          const streamIndex = lease.stream.streamIndex;
          if (Atomics.add(marks, streamIndex, 1) !== 0) violations++;
          if ((i + task) % 3 === 0) await null; // hold across a turn of the loop now and then
          if (Atomics.sub(marks, streamIndex, 1) !== 1) violations++;
          lease.release();
          leases++;
        }
      }),
    );
    post({ violations, leases });
    break;
  }
  case 'hold-exit':
  case 'hold-stay': {
    const held = [];
    for (let i = 0; i < (data.hold ?? 1); i++) held.push(await core.acquire(options));
    post({ held: held.map((lease) => lease.stream.streamIndex) });
    kept.push(held); // held on purpose: a collected lease would be reclaimed (Note [lease reclaim])
    if (data.mode === 'hold-stay') setInterval(() => {}, 1000);
    break;
  }
  case 'wait': {
    const pending = core.acquire(options);
    post('waiting');
    const lease = await pending;
    post({ got: lease.stream.streamIndex });
    lease.release();
    break;
  }
  case 'wait-destroyed': {
    const pending = core.acquire(options);
    post('waiting');
    try {
      await pending;
      post({ settled: 'resolved' });
    } catch (error) {
      const e = error as { name: string; resource?: string; message: string };
      post({ settled: 'rejected', name: e.name, resource: e.resource, message: e.message });
    }
    break;
  }
  case 'hand-out': {
    const got: number[] = [];
    for (let i = 0; i < (data.iterations ?? 100); i++) got.push(core.getStream().streamIndex);
    post({ got });
    break;
  }
  case 'churn': {
    const marks = new Int32Array(data.marks!);
    const me = native.environmentId;
    post('started');
    await Promise.all(
      Array.from({ length: data.tasks ?? 1 }, async (_, task) => {
        for (let i = 0; ; i++) {
          const lease = await core.acquire(options);
          const streamIndex = lease.stream.streamIndex;
          Atomics.store(marks, streamIndex, me);
          if ((i + task) % 2 === 0) await null; // hold across a turn of the loop now and then
          if (Atomics.compareExchange(marks, streamIndex, me, 0) !== me) Atomics.add(marks, size, 1);
          Atomics.add(marks, size + 1, 1);
          lease.release();
        }
      }),
    );
    break;
  }
  default:
    throw new Error(`unknown mode ${data.mode}`);
}
