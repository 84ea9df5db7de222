// Staged device-to-host copies into JS arrays on the simulated driver, whose streams run their work later on threads
// of their own: the bytes must be in the array when any wait made afterwards on the owning thread reports the work
// done, and a copy that failed must leave the array as it was.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { needsCompiler, simulatedJson } from '../support/simulated-driver.js';

// Fills a device buffer with a known pattern, queues a copy of it into a fresh array, waits by `wait`, and reports
// whether the array held the pattern right after the wait, over several trials.
const landingAfter = (wait: string, bytes = 4096) => `
  import { Device, DeviceBuffer, Event, Stream } from 'cuda-stream-pool';
  const stream = Stream.create();
  const device = Device.get(0);
  const buffer = DeviceBuffer.alloc(${bytes}, { stream });
  const landed = [];
  for (let trial = 0; trial < 10; trial++) {
    stream.fill(buffer, 0x01010101 * (trial + 1), { elementSize: 4 });
    const destination = new Uint8Array(${bytes});
    stream.copy(destination, buffer);
    const event = Event.create();
    event.record(stream);
    ${wait};
    landed.push(destination.every((b) => b === trial + 1));
    event.destroy();
  }
  buffer.free();
  stream.destroy();
  console.log(JSON.stringify(landed));`;

for (const [name, wait] of [
  ['stream.synchronizeSync()', 'stream.synchronizeSync()'],
  ['event.synchronizeSync()', 'event.synchronizeSync()'],
  ['device.synchronizeSync()', 'device.synchronizeSync()'],
  ['await device.synchronize()', 'await device.synchronize()'],
  ['await stream.synchronize()', 'await stream.synchronize()'],
  ['await event.synchronize()', 'await event.synchronize()'],
  ['stream.query() polled until true', 'while (!stream.query());'],
  ['event.query() polled until true', 'while (!event.query());'],
]) {
  test(`a staged device-to-host copy has landed when ${name} reports the work done`, needsCompiler, async () => {
    const landed = await simulatedJson<boolean[]>(landingAfter(wait), { operationDelayUs: 300 });
    assert.deepEqual(landed, Array(10).fill(true));
  });
  // 5 MiB: three device copies, each with its own marker, landed part by part.
  test(`a staged device-to-host copy in parts has landed when ${name} reports the work done`, needsCompiler, async () => {
    const landed = await simulatedJson<boolean[]>(landingAfter(wait, 5 << 20), { env: { SIMULATED_DRIVER_COPY_BYTES_PER_US: '2000' } });
    assert.deepEqual(landed, Array(10).fill(true));
  });
}

test('a large device-to-host copy lands in parts while the rest of it is still copying', needsCompiler, async () => {
  // At 250 MB/s each 2 MiB part takes about 8 ms on the copy engine: the first parts are landed before the last is
  // done, even on a loaded machine.
  const result = await simulatedJson<{ right: boolean; parts: number; pending: number }>(
    `import { DeviceBuffer, Stream, completionStats } from 'cuda-stream-pool';
     const stream = Stream.create();
     const n = 16 << 20;
     const buffer = DeviceBuffer.alloc(n, { stream });
     stream.fill(buffer, 0x5a);
     const destination = new Uint8Array(n);
     stream.copy(destination, buffer);
     await stream.synchronize();
     const stats = completionStats();
     console.log(JSON.stringify({ right: destination.every((v) => v === 0x5a), parts: stats.partLandings, pending: stats.landingsPending }));`,
    { env: { SIMULATED_DRIVER_COPY_BYTES_PER_US: '250' } },
  );
  assert.equal(result.right, true);
  assert.equal(result.pending, 0);
  assert.ok(result.parts >= 2, `${result.parts} part landings`);
});

test('a copy in parts whose third part faults: the wait rejects, the destination holds a landed prefix and nothing else', needsCompiler, async () => {
  const result = await simulatedJson<{ error: string; prefix: number; rest: number[]; head: number[] }>(
    `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const n = 8 << 20;
     const b = DeviceBuffer.alloc(n, { stream });
     stream.fill(b, 0x22);
     const destination = new Uint8Array(n).fill(0x33);
     let error;
     try { stream.copy(destination, b); } catch (e) { error = e.code; }
     error ??= await stream.synchronize().then(() => 'resolved', (e) => e.code);
     const prefix = destination.indexOf(0x33) < 0 ? n : destination.indexOf(0x33);
     console.log(JSON.stringify({ error, prefix, rest: [...new Set(destination.subarray(prefix))], head: [...new Set(destination.subarray(0, prefix))] }));`,
    { fail: 'cuMemcpyDtoHAsync:3=fault:CUDA_ERROR_ILLEGAL_ADDRESS', env: { SIMULATED_DRIVER_COPY_BYTES_PER_US: '1000' } },
  );
  assert.equal(result.error, 'CUDA_ERROR_ILLEGAL_ADDRESS');
  assert.ok(result.prefix % (2 << 20) === 0 && result.prefix <= 4 << 20, `landed prefix ${result.prefix}`);
  assert.deepEqual(result.rest, [0x33]);
  assert.deepEqual(result.head, result.prefix ? [0x22] : []);
});

test('a destination transferred after its first parts landed keeps them; the rest never arrives; the wait settles', needsCompiler, async () => {
  const result = await simulatedJson<{ settled: string; prefix: number; rest: number[]; head: number[] }>(
    `import { DeviceBuffer, Stream, completionStats } from 'cuda-stream-pool';
     const stream = Stream.create();
     const n = 16 << 20;
     const b = DeviceBuffer.alloc(n, { stream });
     stream.fill(b, 0x22);
     await stream.synchronize();
     const destination = new Uint8Array(n).fill(0x33);
     stream.copy(destination, b);
     while (completionStats().partLandings === 0) await new Promise((resolve) => setImmediate(resolve));
     const moved = new Uint8Array(structuredClone(destination.buffer, { transfer: [destination.buffer] }));
     const settled = await stream.synchronize().then(() => 'resolved', (e) => e.code);
     const prefix = moved.indexOf(0x33) < 0 ? n : moved.indexOf(0x33);
     console.log(JSON.stringify({ settled, prefix, rest: [...new Set(moved.subarray(prefix))], head: [...new Set(moved.subarray(0, prefix))] }));`,
    // 16 MiB at 64 bytes per microsecond: 260 ms, so a loaded machine's JS thread still moves the array midway.
    { env: { SIMULATED_DRIVER_COPY_BYTES_PER_US: '64' } },
  );
  assert.equal(result.settled, 'resolved');
  assert.ok(result.prefix > 0 && result.prefix < 16 << 20 && result.prefix % (2 << 20) === 0, `landed prefix ${result.prefix}`);
  assert.deepEqual(result.head, [0x22]);
  assert.deepEqual(result.rest, [0x33]);
});

test('a staged device-to-host copy whose copy faulted leaves the destination as it was, not stale staging bytes', needsCompiler, async () => {
  // The first copy fills a staging chunk with 0x11s; the second reuses that chunk and its copy faults.
  const result = await simulatedJson<{ first: number; error: string; second: number[] }>(
    `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const a = DeviceBuffer.alloc(4096, { stream });
     const b = DeviceBuffer.alloc(4096, { stream });
     stream.fill(a, 0x11);
     stream.fill(b, 0x22);
     const first = new Uint8Array(4096);
     stream.copy(first, a);
     await stream.synchronize();
     const second = new Uint8Array(4096).fill(0x33);
     // The fault surfaces in the wait, or already in the copy's own completion marker when the stream's thread ran
     // the faulting copy first: the destination must be untouched either way.
     let error;
     try { stream.copy(second, b); } catch (e) { error = e.code; }
     error ??= await stream.synchronize().then(() => 'resolved', (e) => e.code);
     console.log(JSON.stringify({ first: first[0], error, second: [...new Set(second)] }));`,
    { fail: 'cuMemcpyDtoHAsync:2=fault:CUDA_ERROR_ILLEGAL_ADDRESS' },
  );
  assert.deepEqual(result, { first: 0x11, error: 'CUDA_ERROR_ILLEGAL_ADDRESS', second: [0x33] });
});

test('a streamed device-to-host copy (larger than the staging cap) whose copy faulted leaves the destination as it was', needsCompiler, async () => {
  const result = await simulatedJson<{ error: string; values: number[] }>(
    `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const b = DeviceBuffer.alloc(4 << 20, { stream });
     stream.fill(b, 0x22);
     const destination = new Uint8Array(4 << 20).fill(0x33);
     let error;
     try { stream.copy(destination, b); } catch (e) { error = e.code; }
     error ??= await stream.synchronize().then(() => 'resolved', (e) => e.code);
     console.log(JSON.stringify({ error, values: [...new Set(destination)] }));`,
    { fail: 'cuMemcpyDtoHAsync:3=fault:CUDA_ERROR_ILLEGAL_ADDRESS', env: { CUDA_STREAM_POOL_STAGING_BYTES: String(1 << 20) } },
  );
  assert.deepEqual(result, { error: 'CUDA_ERROR_ILLEGAL_ADDRESS', values: [0x33] });
});

test('a staged copy on a stream that waited on another device has landed when a blocking wait or a query reports the work done', needsCompiler, async () => {
  const result = await simulatedJson<Record<string, number>>(
    `import { Device, DeviceBuffer, Event, Stream } from 'cuda-stream-pool';
     const s0 = Stream.create({ device: 0 }), s1 = Stream.create({ device: 1 });
     const buffer = DeviceBuffer.alloc(65536, { stream: s0 });
     const missed = { 'stream.synchronizeSync()': 0, 'stream.query()': 0, 'device.synchronizeSync()': 0, 'await device.synchronize()': 0 };
     for (let trial = 0; trial < 40; trial++) {
       const how = Object.keys(missed)[trial % 4];
       s0.fill(buffer, trial + 1);
       const event = Event.create({ device: 1 });
       event.record(s1);
       s0.waitEvent(event); // the copy's stream now depends on device 1
       const array = new Uint8Array(65536);
       s0.copy(array, buffer);
       if (how === 'stream.synchronizeSync()') s0.synchronizeSync();
       else if (how === 'stream.query()') while (!s0.query());
       else if (how === 'device.synchronizeSync()') Device.get(0).synchronizeSync();
       else await Device.get(0).synchronize();
       if (array[0] !== trial + 1 || array[65535] !== trial + 1) missed[how]++;
       event.destroy();
     }
     console.log(JSON.stringify(missed));`,
    { devices: 2, operationDelayUs: 300 },
  );
  assert.deepEqual(result, { 'stream.synchronizeSync()': 0, 'stream.query()': 0, 'device.synchronizeSync()': 0, 'await device.synchronize()': 0 });
});

// With every completion ticket lost (a driver that drops the writes), the markers of the copies never report done;
// a wait that finds the stream, the device or an event recorded after the copies done by itself (a blocking
// synchronize, a query, the poller's query of the event) knows the copies queued before it are in staging, and lands
// them before it reports the work done.
for (const [name, wait] of [
  ['stream.synchronizeSync()', 'stream.synchronizeSync()'],
  ['device.synchronizeSync()', 'device.synchronizeSync()'],
  ['stream.query() polled until true', 'while (!stream.query());'],
  ['event.synchronizeSync()', 'event.synchronizeSync()'],
  ['event.query() polled until true', 'while (!event.query());'],
  ['await event.synchronize()', 'await event.synchronize()'],
]) {
  for (const bytes of [4096, 5 << 20]) {
    test(`with its completion tickets lost, a staged device-to-host copy of ${bytes} bytes has landed when ${name} returns`, needsCompiler, async () => {
      const landed = await simulatedJson<boolean[]>(landingAfter(wait, bytes), {
        fail: 'cuStreamWriteValue64@any:1+=lost',
        env: { SIMULATED_DRIVER_COPY_BYTES_PER_US: '2000' },
      });
      assert.deepEqual(landed, Array(10).fill(true));
    });
  }
}

// An event found done tells only the copies ahead of its last record on that record's stream: not a copy queued after
// the record, nor one on a stream the event was recorded on before a later record elsewhere. With the tickets lost,
// such a copy lands only once its own stream is found idle; landed early, it would carry staging the device had not
// written yet (another trial's bytes).
for (const [name, order] of [
  ['a copy queued after the record', 'event.record(slow); slow.copy(destination, buffer);'],
  ['a copy on a stream the event was recorded on before a record on an idle stream', 'slow.copy(destination, buffer); event.record(slow); event.record(idle);'],
  ['a copy on a stream the event was recorded on before a record on a stream that never copied into an array', 'slow.copy(destination, buffer); event.record(slow); event.record(fresh);'],
]) {
  for (const wait of ['event.synchronizeSync()', 'while (!event.query());', 'await event.synchronize()']) {
    test(`with its completion tickets lost, ${name} does not land when ${wait} finds the event done`, needsCompiler, async () => {
      const result = await simulatedJson<{ early: number; late: number }>(
        `import { DeviceBuffer, Event, Stream } from 'cuda-stream-pool';
         const slow = Stream.create(), idle = Stream.create(), fresh = Stream.create();
         const buffer = DeviceBuffer.alloc(4096, { stream: slow });
         const other = DeviceBuffer.alloc(4096, { stream: idle });
         for (let i = 0; i < 8; i++) idle.copy(new Uint8Array(4096), other); // counts more copies than the slow stream's
         idle.synchronizeSync();
         const event = Event.create();
         let early = 0, late = 0;
         for (let trial = 1; trial <= 6; trial++) {
           slow.fill(buffer, trial);
           const destination = new Uint8Array(4096).fill(0xaa);
           ${order}
           ${wait};
           // Right after the wait: untouched, or copied (on a slow machine the poller may have found the copy done).
           if (!destination.every((v) => v === 0xaa) && !destination.every((v) => v === trial)) early++;
           slow.synchronizeSync();
           if (!destination.every((v) => v === trial)) late++;
         }
         console.log(JSON.stringify({ early, late }));`,
        { fail: 'cuStreamWriteValue64@any:1+=lost', operationDelayUs: 20000 },
      );
      assert.deepEqual(result, { early: 0, late: 0 });
    });
  }
}

// The poller finds an event done by itself and reads its cover's number without a lock: when a direct record of the
// event on an idle stream is done before its call returns, the cover of the record before it (after a copy on a busy
// stream) must no longer hold, or an awaited wait pending on that record lands the copy before the device wrote it.
// The record returns late (`late:`, the call's work done first); which cuEventRecord call of the main thread it is
// comes from a first run that stops right after it. In deferred mode a borrowed wrapper's record takes the direct path.
test('a record of an event on an idle stream that returns late does not land a copy ahead of the record before it', needsCompiler, async () => {
  const program = (stopAfterRecord: boolean) => `
    import { DeviceBuffer, Event, Stream } from 'cuda-stream-pool';
    const slow = Stream.create(), created = Stream.create();
    const idle = process.env.CUDA_STREAM_POOL_SUBMISSION === 'deferred' ? Stream.fromHandle(created.handle) : created;
    const buffer = DeviceBuffer.alloc(4096, { stream: slow });
    const event = Event.create();
    await Promise.all([slow.synchronize(), created.synchronize()]);
    for (let i = 0; i < 10; i++) slow.fill(buffer, 9); // the slow stream is busy for 10 operations
    const destination = new Uint8Array(4096).fill(0xaa);
    slow.copy(destination, buffer);
    event.record(slow);
    const waited = event.synchronize();
    event.record(idle); // done on the idle stream long before it returns
    ${stopAfterRecord ? 'console.log("{}"); process.exit(0);' : ''}
    await waited;
    const state = () => (destination.every((v) => v === 9) ? 'copied' : destination.every((v) => v === 0xaa) ? 'untouched' : 'other bytes');
    const early = state();
    slow.synchronizeSync();
    console.log(JSON.stringify({ early, late: state() }));
    process.exit(0);`;
  const folder = mkdtempSync(path.join(os.tmpdir(), 'csp-counts-'));
  try {
    const file = path.join(folder, 'counts.json');
    await simulatedJson(program(true), { operationDelayUs: 20000, env: { SIMULATED_DRIVER_COUNTS: file } });
    const records = (JSON.parse(readFileSync(file, 'utf8')) as Record<string, Record<string, number>>)['main/1']!.cuEventRecord!;
    const result = await simulatedJson<{ early: string; late: string }>(program(false), {
      operationDelayUs: 20000,
      fail: `cuEventRecord@main:${records}=late:100`,
    });
    assert.notEqual(result.early, 'other bytes');
    assert.equal(result.late, 'copied');
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
});

// A capture begun through another wrapper of the same driver stream (the per-thread default stream, here) goes unseen
// by a record through the first: such a stream's records cover no copy, or a query after the capture, answering about
// the record before it, would land a copy still queued.
test('a record during a capture begun through another wrapper of the stream does not land a copy queued before it', needsCompiler, async () => {
  const result = await simulatedJson<{ early: number; late: number }>(
    `import { DeviceBuffer, Event, Stream } from 'cuda-stream-pool';
     const a = Stream.perThread(), b = Stream.fromHandle(2n);
     const buffer = DeviceBuffer.alloc(4096, { stream: a });
     const event = Event.create();
     let early = 0, late = 0;
     for (let trial = 1; trial <= 4; trial++) {
       for (let i = 0; i < 5; i++) a.fill(buffer, trial);
       const destination = new Uint8Array(4096).fill(0xaa);
       a.copy(destination, buffer);
       b.beginCapture({ mode: 'relaxed' });
       event.record(a);
       b.endCapture().destroy();
       event.query();
       if (!destination.every((v) => v === 0xaa) && !destination.every((v) => v === trial)) early++;
       a.synchronizeSync();
       if (!destination.every((v) => v === trial)) late++;
     }
     console.log(JSON.stringify({ early, late }));`,
    { operationDelayUs: 20000 },
  );
  assert.deepEqual(result, { early: 0, late: 0 });
});

// A streamed device-to-host copy that takes a staging chunk still in use by another stream's copy must not write it
// before that copy is done, even when queueing the streamed copy fails part way (its second gate wait is refused):
// the gates of what was queued then open only once the chunk is free. They used to open at once, so the streamed
// copy's first piece overwrote the other stream's bytes before they were uploaded.
test('a streamed copy whose queueing fails leaves the busy staging chunk it took to the copy still using it', needsCompiler, async () => {
  const result = await simulatedJson<{ call: string; wrong: number }>(
    `import { DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
     const chunk = 256 << 10;
     const first = Stream.create(), second = Stream.create();
     const pinned = PinnedBuffer.alloc(8 << 20);
     const hold = DeviceBuffer.alloc(8 << 20, { stream: first });
     const x = DeviceBuffer.alloc(chunk, { stream: first });
     const y = DeviceBuffer.alloc(2 * chunk, { stream: second });
     second.fill(y, 0x5a);
     first.synchronizeSync();
     second.synchronizeSync();
     first.copy(hold, pinned); // keeps the first stream busy for a while
     first.copy(x, new Uint8Array(chunk).fill(0x77)); // staged through the only chunk, busy until the stream gets there
     let call = 'no error';
     try {
       second.copy(new Uint8Array(2 * chunk), y); // streamed through that chunk; its second gate wait is refused
     } catch (e) {
       call = e.code;
     }
     first.synchronizeSync();
     second.synchronizeSync();
     const back = new Uint8Array(chunk);
     first.copy(back, x);
     await first.synchronize();
     console.log(JSON.stringify({ call, wrong: back.reduce((count, value) => count + (value !== 0x77), 0) }));`,
    {
      fail: 'cuStreamWaitValue64:2=CUDA_ERROR_INVALID_VALUE',
      env: { CUDA_STREAM_POOL_STAGING_BYTES: String(256 << 10), SIMULATED_DRIVER_COPY_BYTES_PER_US: '100' },
    },
  );
  assert.deepEqual(result, { call: 'CUDA_ERROR_INVALID_VALUE', wrong: 0 });
});
