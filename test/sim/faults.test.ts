// Faults and lost completion markers on the simulated driver: a kernel that faults the device (sticky), a ticket that
// never lands, a device without 64-bit stream memory operations. Waits neither resolve falsely nor hang.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { issuer, needsCompiler, simulatedJson } from '../support/simulated-driver.js';

const ptx = `'.version 8.0\\n.target sm_80\\n.address_size 64\\n.visible .entry noop()\\n{\\n ret;\\n}\\n'`;

test('a launch that faults the device: its wait, a wait on another stream and every later wait reject with the sticky error within 100 ms, and frees stop throwing', needsCompiler, async () => {
  const result = await simulatedJson<{ codes: string[]; ms: number; healthy: boolean; freed: boolean; later: string }>(
    `import { Device, DeviceBuffer, Module, Stream } from 'cuda-stream-pool';
     const module = await Module.load(${ptx});
     const kernel = module.getFunction('noop', []);
     const [a, b] = [Stream.create(), Stream.create()];
     const buffer = DeviceBuffer.alloc(4096, { stream: b });
     for (let i = 0; i < 50; i++) b.fill(buffer, i); // b has work pending when the device faults
     const started = performance.now();
     kernel.launch({ grid: 1, block: 1, stream: a });
     const codes = await Promise.all([a.synchronize(), b.synchronize()].map((p) => p.then(() => 'resolved', (e) => e.code)));
     const ms = performance.now() - started;
     let freed = true;
     try { buffer.free(); } catch { freed = false; }
     let later = 'created';
     try { Stream.create(); } catch (e) { later = e.code; }
     console.log(JSON.stringify({ codes, ms, healthy: Device.get(0).healthy, freed, later }));`,
    { fail: `cuLaunchKernel@${issuer}:1=fault:CUDA_ERROR_ILLEGAL_ADDRESS`, operationDelayUs: 2000 },
  );
  assert.deepEqual(result.codes, ['CUDA_ERROR_ILLEGAL_ADDRESS', 'CUDA_ERROR_ILLEGAL_ADDRESS']);
  assert.ok(result.ms < 2 + 100 + 100, `the waits took ${result.ms} ms`); // the fault comes after one 2 ms operation
  assert.equal(result.healthy, false);
  assert.equal(result.freed, true);
  assert.equal(result.later, 'CUDA_ERROR_ILLEGAL_ADDRESS');
});

// The device can fault between a wait's query, which finds the work running, and the queuing of its completion marker;
// the call that meets the fault then is the library's (here the first ticket slot's cuMemHostGetDevicePointer).
test("a sticky fault met while queuing a wait's marker rejects the wait as the stream's failure, not as the library call's", needsCompiler, async () => {
  const result = await simulatedJson<{ code: string; message: string; id: string; healthy: boolean }>(
    `import { Device, DeviceBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const buffer = DeviceBuffer.alloc(4096, { stream });
     stream.fill(buffer, 1); // still running when the wait starts
     const error = await stream.synchronize().then(() => ({}), (e) => e);
     console.log(JSON.stringify({ code: error.code, message: error.message, id: String(stream.id), healthy: Device.get(0).healthy }));`,
    { fail: `cuMemHostGetDevicePointer@${issuer}:1=CUDA_ERROR_ILLEGAL_ADDRESS`, operationDelayUs: 2000 },
  );
  assert.equal(result.code, 'CUDA_ERROR_ILLEGAL_ADDRESS');
  assert.match(result.message, new RegExp(`cuStreamSynchronize failed on device 0, stream ${result.id}\\b`));
  assert.doesNotMatch(result.message, /cuMemHostGetDevicePointer/);
  assert.equal(result.healthy, false);
});

// A fault whose code the library does not know as sticky (CUDA_ERROR_UNKNOWN; a code of a newer driver): the ticket of
// the wait never lands and the stream's queries fail with that code; the wait ends with it instead of hanging.
for (const code of ['CUDA_ERROR_UNKNOWN', '1000']) {
  test(`a device fault with a code the library does not know as sticky (${code}): the wait rejects with it instead of hanging`, needsCompiler, async () => {
    const result = await simulatedJson<{ code: string; ms: number }>(
      `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
       const stream = Stream.create();
       const buffer = DeviceBuffer.alloc(4096, { stream });
       for (let i = 0; i < 5; i++) stream.fill(buffer, i); // the second fill faults the device after the wait is queued
       const started = performance.now();
       const code = await stream.synchronize().then(() => 'resolved', (e) => e.code);
       console.log(JSON.stringify({ code, ms: performance.now() - started }));`,
      { fail: `operation@${issuer}:3=fault:${code}`, operationDelayUs: 2000, timeoutMs: 20000 },
    );
    assert.equal(result.code, code === '1000' ? 'CUresult 1000' : code);
    assert.ok(result.ms < 1000, `the wait took ${result.ms} ms`);
  });
}

test('a completion ticket that never lands: the wait still settles once the stream is idle, and a staged copy lands', needsCompiler, async () => {
  const result = await simulatedJson<{ settled: string; landed: boolean; lost: number }>(
    `import { completionStats, DeviceBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const buffer = DeviceBuffer.alloc(4096, { stream });
     stream.fill(buffer, 9);
     const destination = new Uint8Array(4096);
     stream.copy(destination, buffer);
     const timeout = new Promise((resolve) => setTimeout(() => resolve('timed out'), 5000).unref());
     const settled = await Promise.race([stream.synchronize().then(() => 'resolved', (e) => e.code), timeout]);
     console.log(JSON.stringify({ settled, landed: destination.every((b) => b === 9), lost: completionStats().lostTickets }));`,
    { fail: 'cuStreamWriteValue64:1+=lost', operationDelayUs: 500 },
  );
  assert.deepEqual(result, { settled: 'resolved', landed: true, lost: 2 });
});

// With a staging cap of one chunk, a staged copy's lost marker would hold that chunk for good, and the next staged copy,
// which must wait for the chunk's previous copy, would wait forever.
const oneChunk = { CUDA_STREAM_POOL_STAGING_BYTES: String(256 << 10) };

test("a staging chunk whose marker never lands is reused once that marker's stream is idle: a copy on another stream lands", needsCompiler, async () => {
  const result = await simulatedJson<{ settled: string; landed: boolean; lost: number }>(
    `import { completionStats, DeviceBuffer, Stream } from 'cuda-stream-pool';
     const [a, b] = [Stream.create(), Stream.create()];
     const onA = DeviceBuffer.alloc(65536, { stream: a });
     a.copy(onA, new Uint8Array(65536).fill(1)); // the chunk's marker is the first ticket: lost
     a.synchronizeSync();
     const onB = DeviceBuffer.alloc(65536, { stream: b });
     b.fill(onB, 3);
     const back = new Uint8Array(65536);
     b.copy(back, onB); // streamed through that chunk, once its previous copy is done
     const timeout = new Promise((resolve) => setTimeout(() => resolve('timed out'), 5000).unref());
     const settled = await Promise.race([b.synchronize().then(() => 'resolved', (e) => e.code), timeout]);
     console.log(JSON.stringify({ settled, landed: back.every((x) => x === 3), lost: completionStats().lostTickets }));`,
    { fail: 'cuStreamWriteValue64:1=lost', operationDelayUs: 200, env: oneChunk },
  );
  assert.deepEqual(result, { settled: 'resolved', landed: true, lost: 1 });
});

test('a staging chunk whose marker never lands is reused by the next copy on the same stream, behind a new marker', needsCompiler, async () => {
  const result = await simulatedJson<{ settled: string; landed: boolean }>(
    `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const input = Uint8Array.from({ length: 65536 }, (_, i) => (i * 7 + 3) & 0xff);
     const buffer = DeviceBuffer.alloc(65536, { stream });
     stream.copy(buffer, input); // the chunk's marker is the first ticket: lost
     const back = new Uint8Array(65536);
     stream.copy(back, buffer); // the same chunk; its stream waits at this copy's gate, so it never goes idle
     const timeout = new Promise((resolve) => setTimeout(() => resolve('timed out'), 5000).unref());
     const settled = await Promise.race([stream.synchronize().then(() => 'resolved', (e) => e.code), timeout]);
     console.log(JSON.stringify({ settled, landed: back.every((x, i) => x === input[i]) }));`,
    { fail: 'cuStreamWriteValue64:1=lost', operationDelayUs: 200, env: oneChunk },
  );
  assert.deepEqual(result, { settled: 'resolved', landed: true });
});

test('a streamed copy whose completion tickets never land: the stream, held at the gate of each next piece, is not left waiting', needsCompiler, async () => {
  // 1 MiB through one chunk, in and back: four pieces each way, each behind a gate that opens once the piece before it
  // is done. Every ticket is lost, so only what the pieces' markers are made of lets the copies go on.
  const result = await simulatedJson<{ settled: string; landed: boolean }>(
    `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const input = Uint8Array.from({ length: 1 << 20 }, (_, i) => (i * 13 + 5) & 0xff);
     const buffer = DeviceBuffer.alloc(1 << 20, { stream });
     stream.copy(buffer, input);
     const back = new Uint8Array(1 << 20);
     stream.copy(back, buffer);
     const timeout = new Promise((resolve) => setTimeout(() => resolve('timed out'), 5000).unref());
     const settled = await Promise.race([stream.synchronize().then(() => 'resolved', (e) => e.code), timeout]);
     console.log(JSON.stringify({ settled, landed: back.every((x, i) => x === input[i]) }));
     process.exit(0); // a stream left waiting would keep the process alive`,
    { fail: 'cuStreamWriteValue64:1+=lost', operationDelayUs: 200, env: oneChunk },
  );
  assert.deepEqual(result, { settled: 'resolved', landed: true });
});

test("a streamed copy whose piece markers cannot be asked about: the stream is not left at a gate, and the next wait on it reports the failure", needsCompiler, async () => {
  // Every query of the poller's marker events fails (not a fault): after 100 ms the copy gives up, opens its gates
  // and errors its stream. The waits themselves use tickets, which need no query.
  const result = await simulatedJson<{ first: string; second: string; live: number }>(
    `import { cuda, DeviceBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const buffer = DeviceBuffer.alloc(1 << 20, { stream });
     stream.copy(buffer, new Uint8Array(1 << 20).fill(4));
     const timeout = () => new Promise((resolve) => setTimeout(() => resolve('timed out'), 5000).unref());
     const settle = () => Promise.race([stream.synchronize().then(() => 'resolved', (e) => e.code + ' ' + e.message), timeout()]);
     const first = await settle();
     stream.fill(buffer, 1); // work after a reported failure runs again
     const second = await settle();
     buffer.free({ stream });
     stream.destroy();
     console.log(JSON.stringify({ first, second, live: cuda.liveObjects().streams }));
     process.exit(0);`,
    { fail: 'cuEventQuery@csp-poller/1:1+=CUDA_ERROR_OUT_OF_MEMORY', operationDelayUs: 200, env: oneChunk },
  );
  assert.match(result.first, /^CUDA_ERROR_OUT_OF_MEMORY .*cuEventQuery.*1048576 bytes/);
  assert.equal(result.second, 'resolved');
  assert.equal(result.live, 0);
});

test('without 64-bit stream memory operations, waits and staged copies use event markers', needsCompiler, async () => {
  const result = await simulatedJson<{ marker: string; landed: boolean; big: boolean }>(
    `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
     import { native } from '#library/binding/binding.js';
     const stream = Stream.create();
     const buffer = DeviceBuffer.alloc(4 << 20, { stream });
     stream.fill(buffer, 5);
     const small = new Uint8Array(4096);
     stream.copy(small, buffer, { byteLength: 4096 });
     const big = new Uint8Array(4 << 20);
     stream.copy(big, buffer);
     await stream.synchronize();
     console.log(JSON.stringify({ marker: native.completionMarker(0), landed: small.every((b) => b === 5), big: big.every((b) => b === 5) }));`,
    { env: { SIMULATED_DRIVER_NO_64_BIT_MEMORY_OPERATIONS: '1', CUDA_STREAM_POOL_STAGING_BYTES: String(1 << 20) }, operationDelayUs: 200 },
  );
  assert.deepEqual(result, { marker: 'event', landed: true, big: true });
});

test('a long wait on the per-thread default stream is not taken for a lost ticket: it settles after its work', needsCompiler, async () => {
  // The poller cannot ask about another thread's per-thread stream (the handle names its own), so it must not try.
  const result = await simulatedJson<{ waitedMs: number; stamped: boolean }>(
    `import { readFileSync } from 'node:fs';
     import { DeviceBuffer, Module, Stream } from 'cuda-stream-pool';
     const tests = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
     const stream = Stream.perThread();
     const stamps = DeviceBuffer.alloc(16, { stream });
     stream.fill(stamps, 0);
     await stream.synchronize();
     const started = performance.now();
     tests.getFunction('spin', ['u64', 'ptr']).launch({ grid: 1, block: 1, stream }, 200_000_000n, stamps);
     await stream.synchronize();
     const waitedMs = performance.now() - started;
     const words = new BigUint64Array(2);
     stream.copy(words, stamps);
     await stream.synchronize();
     console.log(JSON.stringify({ waitedMs, stamped: words[1] > words[0] && words[0] > 0n }));`,
  );
  assert.ok(result.waitedMs >= 190, `the wait settled after ${result.waitedMs} ms of a 200 ms kernel`);
  assert.equal(result.stamped, true);
});
