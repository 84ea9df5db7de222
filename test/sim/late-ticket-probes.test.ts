// The poller asks a stream whether it is idle when a wait's ticket is late (a lost ticket is found that way), and a
// thread whether its per-thread default stream is, which only that thread can ask. With thousands of waits pending
// behind one long operation it asked once per wait every round, so each round cost thousands of driver queries (or
// questions to the thread) and every other wait of the process waited behind them. Now once a round.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { needsCompiler, runSimulated, simulatedJson } from '../support/simulated-driver.js';

const WAITS = 2000;

for (const [kind, make, asker, most] of [
  // The library's own stream: the poller queries it.
  ['a created stream', 'Stream.create()', 'csp-poller/1', WAITS / 4],
  // The per-thread default stream: its thread queries it, once when each synchronize() is called and once per question.
  ['the per-thread default stream', 'Stream.perThread()', 'main/1', 2 * WAITS],
] as const) {
  test(`${WAITS} waits pending on ${kind} behind a 350 ms copy: it is asked whether it is idle once a round, not once per wait`, needsCompiler, async (t) => {
    const directory = mkdtempSync(path.join(os.tmpdir(), 'csp-late-probes-'));
    t.after(() => rmSync(directory, { recursive: true, force: true }));
    const file = path.join(directory, 'counts.json');
    const run = await runSimulated(
      `import { DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
       const stream = ${make};
       const big = 1 << 20;
       const source = PinnedBuffer.alloc(big), target = DeviceBuffer.alloc(big, { stream });
       const small = DeviceBuffer.alloc(4 * ${WAITS}, { stream });
       await stream.synchronize();
       const start = performance.now();
       stream.copy(target, source);
       const waits = [];
       for (let i = 0; i < ${WAITS}; i++) {
         stream.fill(small, i & 0xff, { offset: 4 * i, byteLength: 4 });
         waits.push(stream.synchronize());
       }
       await Promise.all(waits);
       const ms = performance.now() - start;
       const bytes = await small.toArray(Uint8Array, { stream });
       const wrong = bytes.reduce((count, value, index) => count + (value !== ((index >> 2) & 0xff)), 0);
       for (const buffer of [source, target, small]) buffer.free();
       stream.destroy();
       console.log(JSON.stringify({ ms, wrong }));`,
      // 1 MiB from pinned memory at 3 bytes per microsecond: the copy takes about 350 ms, some 35 rounds of probes.
      { env: { SIMULATED_DRIVER_COPY_BYTES_PER_US: '3', SIMULATED_DRIVER_COUNTS: file } },
    );
    assert.equal(run.code, 0, run.stderr);
    const { ms, wrong } = JSON.parse(run.stdout.trim()) as { ms: number; wrong: number };
    assert.equal(wrong, 0, 'every fill landed');
    assert.ok(ms >= 300, `the waits were pending for the copy's ${ms.toFixed(0)} ms, long enough for the probes to ask`);
    const counts = JSON.parse(readFileSync(file, 'utf8')) as Record<string, Record<string, number>>;
    const queries = counts[asker]?.cuStreamQuery ?? 0;
    // Here 68 by the poller, and 2,034 by the thread; once per wait per round from the second on, they were 62,438
    // and 65,489.
    assert.ok(queries >= 1, `the late tickets were asked about (${queries} queries)`);
    assert.ok(queries < most, `${queries} stream queries by ${asker} for ${WAITS} waits over ${ms.toFixed(0)} ms`);
  });
}

test('1,000 waits that share one lost ticket count one lost ticket', needsCompiler, async () => {
  const result = await simulatedJson<{ settled: number; lostTickets: number; markersEnqueued: number }>(
    `import { completionStats, DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const source = PinnedBuffer.alloc(1 << 20), target = DeviceBuffer.alloc(1 << 20, { stream });
     const before = completionStats();
     stream.copy(target, source);
     const waits = [];
     for (let i = 0; i < 1000; i++) waits.push(stream.synchronize());
     const settled = (await Promise.allSettled(waits)).filter((outcome) => outcome.status === 'fulfilled').length;
     const after = completionStats();
     target.free();
     stream.destroy();
     console.log(JSON.stringify({ settled, lostTickets: after.lostTickets - before.lostTickets, markersEnqueued: after.markersEnqueued - before.markersEnqueued }));`,
    { fail: 'cuStreamWriteValue64@any:1+=lost', env: { SIMULATED_DRIVER_COPY_BYTES_PER_US: '3' } },
  );
  assert.deepEqual(result, { settled: 1000, lostTickets: 1, markersEnqueued: 1 });
});

// Only a thread can ask whether its per-thread default stream is idle, so each question about a late ticket wakes
// it; for long work the questions come at growing intervals instead of every round.
test('a wait on the per-thread default stream behind a 1 s copy wakes its thread a few times, not every 10 ms', needsCompiler, async () => {
  const result = await simulatedJson<{ ms: number; wakeups: number }>(
    `import { completionStats, DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.perThread();
     const bytes = 3 << 20;
     const source = PinnedBuffer.alloc(bytes), target = DeviceBuffer.alloc(bytes, { stream });
     await stream.synchronize();
     const before = completionStats().wakeups;
     const start = performance.now();
     stream.copy(target, source);
     await stream.synchronize();
     const ms = performance.now() - start;
     const wakeups = completionStats().wakeups - before;
     target.free();
     console.log(JSON.stringify({ ms, wakeups }));`,
    { env: { SIMULATED_DRIVER_COPY_BYTES_PER_US: '3' } },
  );
  assert.ok(result.ms >= 900, `the copy took ${result.ms.toFixed(0)} ms`);
  // Questions at about 20, 40, 80, 160, 320 and 640 ms, and the completion: 7. Every round was about 100.
  assert.ok(result.wakeups <= 12, `${result.wakeups} wake-ups of the thread over ${result.ms.toFixed(0)} ms`);
});
