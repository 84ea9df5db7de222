// Deferred submission where membarrier(2) is missing or fails (test/native/membarrier-shim.cc, preloaded into the
// child): the wake-ups between the JS thread and its submission threads (parking, cuda.flush(), waits for room, the
// exit handler) must still all arrive, with full fences when membarrier is absent and with timed waits when it fails
// after registration. Each run records bursts with pauses long enough for the submission threads to park, flushes
// under a slow stream, fills the queue, and checks every byte and that nothing is left.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { nativeCheck } from '../support/native-check.js';
import { needsCompiler, runSimulated } from '../support/simulated-driver.js';

const shim = nativeCheck('membarrier-shim', { shared: true, level: '-O2' });
// After what is preloaded already: a sanitizer's runtime must stay first.
const preload = (): string => [process.env.LD_PRELOAD, shim()].filter(Boolean).join(' ');

const workload = `
  import { readFileSync } from 'node:fs';
  import { setTimeout as sleep } from 'node:timers/promises';
  import { cuda, DeviceBuffer, Event, Module, PinnedBuffer, Stream } from 'cuda-stream-pool';
  const bench = await Module.load(readFileSync('packages/cuda-stream-pool-bench/kernels/bench.ptx', 'utf8'));
  const fma = bench.getFunction('fma_steps', ['ptr', 'u32', 'u32', 'f32', 'f32']);
  const elements = 256, rounds = 150;
  const streams = [Stream.create(), Stream.create()];
  const buffers = streams.map((stream) => DeviceBuffer.alloc(elements * 4, { stream }));
  const input = PinnedBuffer.alloc(elements * 4), output = PinnedBuffer.alloc(rounds * elements * 4);
  const inView = input.view(Float32Array), outView = output.view(Float32Array);
  inView.forEach((_, e) => (inView[e] = e));
  let wrong = 0;
  for (let r = 0; r < rounds; r++) {
    const s = r % 2, stream = streams[s];
    stream.copy(buffers[s], input);
    fma.launch({ grid: 1, block: elements, stream }, buffers[s], elements, 1, 1, r); // x * 1 + r
    stream.copy(output, buffers[s], { dstOffset: r * elements * 4 });
    if (r % 3 === 0) cuda.flush();
    if (r % 5 === 0) await stream.synchronize();
    if (r % 10 === 0) await sleep(2); // the submission threads park
  }
  await Promise.all(streams.map((stream) => stream.synchronize()));
  for (let r = 0; r < rounds; r++) for (let e = 0; e < elements; e++) if (outView[r * elements + e] !== e + r) wrong++;
  // Ten times what the queue holds (event records issue slower than they record), so the JS thread waits for room.
  const event = Event.create();
  for (let i = 0; i < 20_000; i++) event.record(streams[0]);
  await streams[0].synchronize();
  event.destroy();
  const { parks, flushWaits, waitsForRoom, recorded, issued } = cuda.submission();
  buffers.forEach((buffer) => buffer.free());
  input.free();
  output.free();
  streams.forEach((stream) => stream.destroy());
  const live = cuda.liveObjects();
  console.log(JSON.stringify({ wrong, parks, flushWaits, waitsForRoom, recorded, issued, streams: live.streams, events: live.events, deviceBytes: live.deviceBytes }));
  // Recorded and never waited for: the exit handler stops the submission threads, perhaps mid-queue.
  const last = Stream.create(), scratch = DeviceBuffer.alloc(elements * 4, { stream: last });
  for (let i = 0; i < 500; i++) fma.launch({ grid: 1, block: elements, stream: last }, scratch, elements, 1, 1, 1);
  process.exit(0);
`;

for (const mode of ['absent', 'failing'] as const) {
  test(`deferred submission with membarrier ${mode === 'absent' ? 'missing (full fences)' : 'failing after registration (timed waits)'}: every wake-up arrives, every byte is right`, needsCompiler, async () => {
    const result = await runSimulated(workload, {
      operationDelayUs: 2,
      env: { CUDA_STREAM_POOL_SUBMISSION: 'deferred', LD_PRELOAD: preload(), MEMBARRIER_SHIM: mode },
      timeoutMs: 120_000,
    });
    assert.equal(result.code, 0, `exit ${result.code} ${result.signal ?? ''}\n${result.stderr}`);
    assert.doesNotMatch(result.stderr, /simulated driver:/);
    const refused = Number(/membarrier shim: (\d+) refused/.exec(result.stderr)?.[1]);
    assert.ok(refused > 0, `the shim refused ${refused} membarrier calls: ${result.stderr}`);
    const lines = result.stdout.trim().split('\n');
    const run = JSON.parse(lines[lines.length - 1]!) as Record<string, number>;
    assert.equal(run.wrong, 0);
    assert.ok(run.parks! > 0, `${run.parks} parks`);
    assert.ok(run.flushWaits! > 0, `${run.flushWaits} flush waits`);
    assert.ok(run.waitsForRoom! > 0, `${run.waitsForRoom} waits for room`);
    assert.equal(run.issued, run.recorded);
    assert.deepEqual({ streams: run.streams, events: run.events, deviceBytes: run.deviceBytes }, { streams: 0, events: 0, deviceBytes: 0 });
  });
}
