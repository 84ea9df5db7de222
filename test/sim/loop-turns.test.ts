// Completions reach a busy thread at its event loop's turns, without a wake-up; a thread that waits idle is still
// woken; threads that end while waits are pending close their loop watch cleanly. On the simulated driver, whose
// streams run their work on threads of their own, so work finishes while the JS thread is busy.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { test } from 'node:test';

import { needsCompiler, simulatedJson } from '../support/simulated-driver.js';

interface Counts {
  rounds: number;
  wakeups: number;
  turnBatches: number;
  delivered: number;
}

// Each round queues a fill on 8 streams and keeps the thread busy until the fills are done and the poller has seen
// them, then awaits them all: the round's completions are ready before the thread reaches its loop again, however
// loaded the machine is.
const busyRounds = (rounds: number): string => `
  import { completionStats, DeviceBuffer, Stream } from 'cuda-stream-pool';
  const streams = Array.from({ length: 8 }, () => Stream.create());
  const buffers = streams.map((stream) => DeviceBuffer.alloc(4096, { stream }));
  const before = completionStats();
  for (let round = 0; round < ${rounds}; round++) {
    const waits = streams.map((stream, i) => { stream.fill(buffers[i], round); return stream.synchronize(); });
    // Busy until every fill is done and the poller has handed each wait to this thread (at most 2 s).
    const until = performance.now() + 2000;
    while (performance.now() < until && !(streams.every((stream) => stream.query()) && completionStats().processPending === 0));
    await Promise.all(waits);
  }
  const after = completionStats();
  const counts = { rounds: ${rounds}, wakeups: after.wakeups - before.wakeups, turnBatches: after.turnBatches - before.turnBatches, delivered: after.delivered - before.delivered };
  for (let i = 0; i < 8; i++) { buffers[i].free(); streams[i].destroy(); }`;

test('a thread busy when its waits finish takes them at its loop turns, not through wake-ups', needsCompiler, async () => {
  const counts = await simulatedJson<Counts>(`${busyRounds(100)}
    console.log(JSON.stringify(counts));`, { operationDelayUs: 200 });
  // Nearly every wait went through the engine (its fill was pending when synchronize() was called).
  assert.ok(counts.delivered >= 720, JSON.stringify(counts));
  // Woken, each round would cost one wake-up; at turns, none (a round whose fills were late may still need one).
  assert.ok(counts.wakeups <= counts.rounds / 2, JSON.stringify(counts));
  assert.ok(counts.turnBatches >= counts.rounds / 2, JSON.stringify(counts));
});

test('a thread that waits idle is woken when its work finishes', needsCompiler, async () => {
  const result = await simulatedJson<{ wakeups: number; waitedMs: number; value: number }>(
    `import { completionStats, DeviceBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const buffer = DeviceBuffer.alloc(64, { stream });
     await stream.synchronize();
     const before = completionStats().wakeups;
     stream.fill(buffer, 7, { type: 'u32' });
     const started = performance.now();
     await stream.synchronize(); // the thread has nothing else to do: only a wake-up can settle this
     const waitedMs = performance.now() - started;
     const wakeups = completionStats().wakeups - before;
     const value = (await buffer.toArray(Uint32Array, { stream }))[0];
     console.log(JSON.stringify({ wakeups, waitedMs, value }));`,
    { operationDelayUs: 30_000 },
  );
  assert.ok(result.wakeups >= 1, JSON.stringify(result));
  assert.ok(result.waitedMs >= 25 && result.waitedMs < 2000, JSON.stringify(result));
  assert.equal(result.value, 7);
});

test('workers that await at their loop turns end cleanly, also one terminated while it settles waits', needsCompiler, async () => {
  const result = await simulatedJson<{ counts: Counts; exitCodes: number[] }>(
    `import { Worker } from 'node:worker_threads';
     const busy = "import { parentPort } from 'node:worker_threads';" + ${JSON.stringify(busyRounds(20))} + "\\nparentPort.postMessage(counts);";
     // Terminated while it settles waits at a loop turn, most likely: it spends nearly all its time there.
     const endless = "import { parentPort } from 'node:worker_threads';" +
       ${JSON.stringify(busyRounds(1_000_000).replace('const before', "parentPort.postMessage('running');\nconst before"))};
     const start = (source) => new Worker(source, { eval: true });
     const first = start(busy);
     const firstExit = new Promise((resolve) => first.once('exit', resolve)); // it may end before the second starts
     const counts = await new Promise((resolve, reject) => { first.once('message', resolve); first.once('error', reject); });
     const second = start(endless);
     await new Promise((resolve, reject) => { second.once('message', resolve); second.once('error', reject); });
     await new Promise((resolve) => setTimeout(resolve, 100));
     const exitCodes = await Promise.all([firstExit, second.terminate()]);
     console.log(JSON.stringify({ counts, exitCodes }));`,
    { operationDelayUs: 2000 },
  );
  // As on the main thread: nearly every wait through the engine, taken at turns.
  assert.ok(result.counts.delivered >= 144 && result.counts.wakeups <= 10, JSON.stringify(result.counts));
  assert.deepEqual(result.exitCodes, [0, 1]);
});

// Awaits \`rounds\` fills of \`bytes\` one at a time, then prints the counters. On the simulated driver, a fill is a memset
// on the stream's thread (256 KiB: some microseconds) after the operation delay.
const oneAtATime = (rounds: number, bytes: number): string => `
  import { completionStats, DeviceBuffer, Stream } from 'cuda-stream-pool';
  const stream = Stream.create();
  const buffer = DeviceBuffer.alloc(${bytes}, { stream });
  await stream.synchronize();
  const before = completionStats();
  for (let round = 0; round < ${rounds}; round++) {
    stream.fill(buffer, round & 255);
    await stream.synchronize();
  }
  const after = completionStats();
  const value = (await buffer.toArray(Uint8Array, { stream }))[0];
  buffer.free();
  stream.destroy();
  console.log(JSON.stringify({ rounds: ${rounds}, value, delivered: after.delivered - before.delivered, wakeups: after.wakeups - before.wakeups, spins: after.spins - before.spins, spinsCompleted: after.spinsCompleted - before.spinsCompleted }));`;

interface SpinCounts {
  rounds: number;
  value: number;
  delivered: number;
  wakeups: number;
  spins: number;
  spinsCompleted: number;
}

// The library spins only where the process may use two CPUs or more (its affinity, and a cgroup v2 quota).
const quota = existsSync('/sys/fs/cgroup/cpu.max') ? readFileSync('/sys/fs/cgroup/cpu.max', 'utf8').trim().split(' ') : ['max'];
const severalCpus = os.availableParallelism() >= 2 && (quota[0] === 'max' || Number(quota[0]) / Number(quota[1]) >= 2);
const needsSeveralCpus = needsCompiler.skip || (severalCpus ? false : 'the process may use only one CPU here, where the library never spins');

test('a thread that awaits short work one piece at a time spins before it blocks, by default and with CUDA_STREAM_POOL_WAIT_SPIN=on; with off it does not', { skip: needsSeveralCpus }, async () => {
  // The first child inherits this process's environment: the default unless CUDA_STREAM_POOL_WAIT_SPIN is set here.
  const byDefault = await simulatedJson<SpinCounts>(oneAtATime(300, 256 * 1024));
  const spinning = await simulatedJson<SpinCounts>(oneAtATime(300, 256 * 1024), { env: { CUDA_STREAM_POOL_WAIT_SPIN: 'on' } });
  const blocking = await simulatedJson<SpinCounts>(oneAtATime(300, 256 * 1024), { env: { CUDA_STREAM_POOL_WAIT_SPIN: 'off' } });
  for (const counts of [byDefault, spinning, blocking]) assert.equal(counts.value, 299 & 255);
  // Off: the thread blocks at once every time (each delivery a wake-up or a turn batch).
  assert.equal(blocking.spins, 0, JSON.stringify(blocking));
  assert.equal(blocking.spinsCompleted, 0, JSON.stringify(blocking));
  // On: the thread spun before its first block (its budget starts full). How many spins see their completion depends
  // on how soon the stream's thread and the poller run; the GPU benchmark (bench micro) measures what it saves.
  for (const counts of process.env.CUDA_STREAM_POOL_WAIT_SPIN === 'off' ? [spinning] : [byDefault, spinning]) {
    if (counts.wakeups > 0) assert.ok(counts.spins >= 1, JSON.stringify(counts));
    assert.ok(counts.spinsCompleted <= counts.spins, JSON.stringify(counts));
  }
});

// taskset (util-linux) holds a process to one of the CPUs this process may use, where the system lets it.
const oneCpu = /^Cpus_allowed_list:\s*(\d+)/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? '0';
const taskset = spawnSync('taskset', ['-c', oneCpu, 'true'], { encoding: 'utf8' });
const needsTaskset = needsCompiler.skip || (taskset.status === 0 ? false : `needs taskset (Debian: util-linux) allowed to hold a process to CPU ${oneCpu}`);

test('a process held to one CPU never spins before it blocks, even with CUDA_STREAM_POOL_WAIT_SPIN=on', { skip: needsTaskset }, async () => {
  // A spin there would only keep the poller, and the stream's own thread, from the one CPU. Each fill takes 200 µs,
  // so that the waits go through the engine (on two CPUs the same workload spins some 30 times).
  const counts = await simulatedJson<SpinCounts>(oneAtATime(200, 64 * 1024), {
    launcher: ['taskset', '-c', oneCpu],
    operationDelayUs: 200,
    env: { CUDA_STREAM_POOL_WAIT_SPIN: 'on' },
  });
  assert.equal(counts.value, 199 & 255);
  assert.equal(counts.spins, 0, JSON.stringify(counts));
  assert.ok(counts.delivered >= 100, JSON.stringify(counts));
});

test('a thread whose waits take long soon stops spinning before it blocks', { skip: needsSeveralCpus }, async () => {
  // Each fill takes 3 ms: no spin (40 µs at most) sees one end, so the budget halves at each and is gone within 7.
  const counts = await simulatedJson<SpinCounts>(oneAtATime(40, 64), { operationDelayUs: 3000, env: { CUDA_STREAM_POOL_WAIT_SPIN: 'on' } });
  assert.equal(counts.value, 39);
  assert.equal(counts.spinsCompleted, 0, JSON.stringify(counts));
  assert.ok(counts.spins >= 1 && counts.spins <= 8, JSON.stringify(counts));
  assert.ok(counts.wakeups >= 35, JSON.stringify(counts));
});

// Each round fills device memory, copies it into pinned memory and awaits, after keeping the thread busy until the
// stream's work is done: at its next loop turn the thread finds the stream's ticket written, most often before the
// poller thread has reported it.
const ticketRounds = (rounds: number): string => `
  import { completionStats, cuda, DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
  const pinned = PinnedBuffer.alloc(4096);
  const before = cuda.liveObjects().streams;
  const statsBefore = completionStats();
  let wrong = 0, held = 0;
  for (let round = 0; round < ${rounds}; round++) {
    const stream = Stream.create();
    const buffer = DeviceBuffer.alloc(4096, { stream });
    stream.fill(buffer, round & 255);
    stream.copy(pinned, buffer);
    const done = stream.synchronize();
    const until = performance.now() + 2000;
    while (performance.now() < until && !stream.query());
    await done;
    if (pinned.bytes[0] !== (round & 255) || pinned.bytes[4095] !== (round & 255)) wrong++;
    buffer.free();
    stream.destroy();
    // Whoever reported the wait let go of the stream first: destroy() released its handle at once.
    if (cuda.liveObjects().streams !== before) held++;
  }
  const stats = completionStats();
  pinned.free();
  console.log(JSON.stringify({ wrong, held, ticketsRead: stats.ticketsRead - statsBefore.ticketsRead, delivered: stats.delivered - statsBefore.delivered }));`;

test("a thread reads its streams' tickets at its loop turns: its waits settle without the poller, with the bytes in place and the stream let go", needsCompiler, async () => {
  const result = await simulatedJson<{ wrong: number; held: number; ticketsRead: number; delivered: number }>(ticketRounds(300), { operationDelayUs: 20 });
  assert.equal(result.wrong, 0, JSON.stringify(result));
  assert.equal(result.held, 0, JSON.stringify(result));
  // Which thread sees a ticket first is a race; over 300 rounds this one takes some.
  assert.ok(result.ticketsRead >= 1 && result.ticketsRead <= result.delivered, JSON.stringify(result));
});
