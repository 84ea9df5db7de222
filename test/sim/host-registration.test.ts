// HostRegistration on the simulated driver, which reads and writes registered memory when a copy runs and reports a
// copy that runs after the pages were unregistered: copies with a registered buffer are pinned copies (stream-ordered,
// not snapshots), the pages stay registered until the copies queued with them are done, the memory outlives a
// transfer of its ArrayBuffer, what cannot be registered is refused with a reason, and a failed cuMemHostRegister is
// a CudaError that leaves nothing behind.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { collectGarbage, issuer, needsCompiler, simulatedJson } from '../support/simulated-driver.js';

const setup = `
  import { cuda, DeviceBuffer, HostRegistration, PinnedBuffer, Stream } from 'cuda-stream-pool';
  const outcome = (f) => { try { const v = f(); return v === undefined ? 'done' : v; } catch (e) { return { name: e.name, code: e.code, message: e.message }; } };
  const registered = () => cuda.liveObjects().registeredBytes;`;

for (const submission of ['direct', 'deferred'] as const) {
  test(`with ${submission} submission, copies with a registered buffer are pinned copies, and its pages outlive the copies queued with them`, needsCompiler, async () => {
    const result = await simulatedJson<{ lateWrite: number[]; back: number[]; during: number; afterUnregister: number; afterCopies: number; sizes: number[] }>(
      `${setup}
       const stream = Stream.create();
       const device = DeviceBuffer.alloc(1 << 20, { stream });
       const source = new Uint8Array(1 << 20).fill(1);
       const registration = HostRegistration.register(source);
       const during = registered();
       // Queued behind slow work: a pinned copy reads its source when it runs, so a later write is what lands.
       for (let i = 0; i < 10; i++) stream.fill(device, 0);
       stream.copy(device, source);
       source.fill(2);
       const lateWrite = [...new Set(await device.toArray(Uint8Array, { stream }))];
       // Into a registered view, then unregistered while the copy is still queued.
       const back = new Uint32Array(new ArrayBuffer(1 << 20));
       const into = HostRegistration.register(back);
       for (let i = 0; i < 10; i++) stream.fill(device, 7);
       stream.copy(back, device);
       into.unregister();
       registration.unregister();
       registration.unregister(); // a second call does nothing
       const afterUnregister = registered();
       await stream.synchronize();
       PinnedBuffer.cacheInfo(); // the cache unregisters pages whose copies are done when it is next used
       const afterCopies = registered();
       device.free();
       console.log(JSON.stringify({ lateWrite, back: [...new Set(back)], during, afterUnregister, afterCopies, sizes: [registration.byteLength, registration.registeredBytes % 4096, registration.registered ? 1 : 0] }));`,
      { operationDelayUs: 2000, env: { CUDA_STREAM_POOL_SUBMISSION: submission } },
    );
    assert.deepEqual(result.lateWrite, [2]);
    assert.deepEqual(result.back, [0x07070707]);
    assert.ok(result.during >= 1 << 20, `${result.during} bytes registered`);
    // The pages are unlocked only once the copies are done: the simulated driver reports any copy that ran after
    // cuMemHostUnregister, which simulatedJson() refuses.
    assert.equal(result.afterUnregister, 0);
    assert.equal(result.afterCopies, 0);
    assert.deepEqual(result.sizes, [1 << 20, 0, 0]);
  });
}

test('a transferred or detached registered buffer keeps its memory; copies with it are refused until it is unregistered', needsCompiler, async () => {
  const result = await simulatedJson<{ refused: { code: string; message: string }; kept: number; after: number }>(
    `${setup}
     const stream = Stream.create();
     const device = DeviceBuffer.alloc(65536, { stream });
     const memory = new ArrayBuffer(65536);
     const registration = HostRegistration.register(new Float32Array(memory));
     const moved = structuredClone(memory, { transfer: [memory] });
     const refused = outcome(() => stream.copy(device, memory));
     const kept = registered();
     registration.unregister();
     await stream.synchronize();
     PinnedBuffer.cacheInfo();
     stream.copy(device, moved); // the moved buffer is ordinary memory: staged
     await stream.synchronize();
     device.free();
     console.log(JSON.stringify({ refused, kept, after: registered() }));`,
  );
  assert.equal(result.refused.code, 'ERR_INVALID_ARG_VALUE');
  assert.match(result.refused.message, /^"src" is an ArrayBuffer that is detached/);
  assert.ok(result.kept >= 65536, 'the registration stands while its buffer is transferred');
  assert.equal(result.after, 0);
});

test('what cannot be registered is refused with its reason; the same buffer twice shares one registration', needsCompiler, async () => {
  const result = await simulatedJson<{ refused: { name: string; code: string; message: string }[]; twice: number[]; overlap: string | undefined; buffer: string }>(
    `${setup}
     const pinned = PinnedBuffer.alloc(4096);
     const detached = new ArrayBuffer(8);
     structuredClone(detached, { transfer: [detached] });
     const refused = [
       outcome(() => HostRegistration.register('bytes')),
       outcome(() => HostRegistration.register(new ArrayBuffer(0))),
       outcome(() => HostRegistration.register(detached)),
       outcome(() => HostRegistration.register(new ArrayBuffer(64, { maxByteLength: 128 }))),
       outcome(() => HostRegistration.register(Buffer.from('a small string, from the pool'))),
       outcome(() => HostRegistration.register(pinned.bytes)),
       outcome(() => new HostRegistration(Symbol(), 0, new ArrayBuffer(8), 0)),
     ];
     const memory = new ArrayBuffer(100000);
     const a = HostRegistration.register(memory);
     const b = HostRegistration.register(new Uint8Array(memory, 5000, 10));
     const twice = [registered()];
     a.unregister();
     twice.push(registered());
     b.unregister();
     PinnedBuffer.cacheInfo();
     twice.push(registered());
     // Small ArrayBuffers share pages: one of these meets an earlier one's page.
     const held = [];
     let overlap;
     for (let i = 0; i < 64 && overlap === undefined; i++) {
       const r = outcome(() => HostRegistration.register(new ArrayBuffer(64)));
       if (r instanceof HostRegistration) held.push(r); else overlap = r.message;
     }
     for (const r of held) r.unregister();
     const own = HostRegistration.register(Buffer.alloc(100));
     own.unregister();
     pinned.free();
     console.log(JSON.stringify({ refused, twice, overlap, buffer: own.byteLength === 100 ? 'Buffer.alloc registered' : 'no' }));`,
  );
  const codes = result.refused.map((r) => r.code);
  assert.deepEqual(codes, ['ERR_INVALID_ARG_TYPE', 'ERR_INVALID_ARG_VALUE', 'ERR_INVALID_ARG_VALUE', 'ERR_INVALID_ARG_VALUE', 'ERR_INVALID_ARG_VALUE', 'ERR_INVALID_ARG_VALUE', 'ERR_ILLEGAL_CONSTRUCTOR']);
  assert.match(result.refused[1]!.message, /is empty: there are no pages to lock/);
  assert.match(result.refused[2]!.message, /is an ArrayBuffer that is detached/);
  assert.match(result.refused[3]!.message, /resizable or growable buffer/);
  // Node.js 20 and 22 pool small Buffers in 8 KiB, later releases in 64 KiB; the child runs this same Node.js.
  assert.ok(
    result.refused[4]!.message.startsWith(`"memory" is a Buffer of 29 bytes in a shared ArrayBuffer of ${Buffer.poolSize} bytes (as Node's pool of small Buffers gives out)`),
    result.refused[4]!.message,
  );
  assert.match(result.refused[5]!.message, /is the memory of a PinnedBuffer/);
  assert.ok(result.twice[0]! >= 100000 && result.twice[1] === result.twice[0], JSON.stringify(result.twice));
  assert.equal(result.twice[2], 0);
  assert.match(result.overlap ?? '', /^"memory" shares a memory page with another registered buffer \(its pages at 0x[0-9a-f]+ to 0x[0-9a-f]+\); two registrations cannot lock one page/);
  assert.equal(result.buffer, 'Buffer.alloc registered');
});

test('a failed cuMemHostRegister is a CudaError naming it; nothing is registered, and a retry succeeds; a forgotten registration ends when collected', needsCompiler, async () => {
  const result = await simulatedJson<{ error: { name: string; code: string; message: string }; afterFailure: number; retried: number; collected: number }>(
    `${setup}
     ${collectGarbage}
     const memory = new ArrayBuffer(1 << 16);
     const error = outcome(() => HostRegistration.register(memory));
     const afterFailure = registered();
     let registration = HostRegistration.register(memory);
     const retried = registered();
     registration = undefined;
     await collectUntil(() => (PinnedBuffer.cacheInfo(), registered() === 0));
     console.log(JSON.stringify({ error, afterFailure, retried, collected: registered() }));`,
    { fail: 'cuMemHostRegister:1=CUDA_ERROR_OUT_OF_MEMORY' },
  );
  assert.equal(result.error.name, 'CudaError');
  assert.match(result.error.message, /^CUDA_ERROR_OUT_OF_MEMORY: cuMemHostRegister failed on device 0/);
  assert.equal(result.afterFailure, 0);
  assert.ok(result.retried >= 1 << 16);
  assert.equal(result.collected, 0);
});

test('a copy with registered memory whose fence fails is reported, and its pages are never unregistered under it', needsCompiler, async () => {
  const result = await simulatedJson<{ code: string | undefined; kept: number }>(
    `${setup}
     const stream = Stream.create();
     const device = DeviceBuffer.alloc(65536, { stream });
     const memory = new Uint8Array(65536).fill(3);
     const registration = HostRegistration.register(memory);
     let code;
     try { stream.copy(device, memory); } catch (e) { code = e.code; }
     await stream.synchronize().catch((e) => { code ??= e.code; });
     registration.unregister();
     PinnedBuffer.cacheInfo();
     console.log(JSON.stringify({ code, kept: registered() }));`,
    { fail: `cuEventRecord@${issuer}:1=CUDA_ERROR_UNKNOWN` },
  );
  assert.equal(result.code, 'CUDA_ERROR_UNKNOWN');
  assert.equal(result.kept, 0); // the registration ended; its pages stay locked, since the copy may still run
});

test('a second registration of a buffer keeps its copies pinned after the first ends; a capture refuses registered memory', needsCompiler, async () => {
  const result = await simulatedJson<{ lateWrite: number[]; stillRegistered: boolean; capture: { name: string; message: string } }>(
    `${setup}
     import { Graph } from 'cuda-stream-pool';
     const stream = Stream.create();
     const device = DeviceBuffer.alloc(65536, { stream });
     const source = new Uint8Array(65536).fill(1);
     const first = HostRegistration.register(source);
     const second = HostRegistration.register(source);
     first.unregister();
     // Still a pinned copy through the second registration: it reads the source when it runs.
     for (let i = 0; i < 10; i++) stream.fill(device, 0);
     stream.copy(device, source);
     source.fill(2);
     const lateWrite = [...new Set(await device.toArray(Uint8Array, { stream }))];
     const capture = await Graph.capture(stream, (s) => s.copy(device, source)).then(() => 'captured', (e) => ({ name: e.name, message: e.message }));
     const stillRegistered = second.registered;
     second.unregister();
     device.free();
     console.log(JSON.stringify({ lateWrite, stillRegistered, capture }));`,
    { operationDelayUs: 2000 },
  );
  assert.deepEqual(result.lateWrite, [2]);
  assert.equal(result.stillRegistered, true);
  assert.equal(result.capture.name, 'CaptureError');
  assert.match(result.capture.message, /^stream\.copy\(\) of registered host memory \(a graph would outlive the registration; copy a PinnedBuffer instead\)/);
});

test('a worker that exits without unregistering ends its registrations', needsCompiler, async () => {
  const result = await simulatedJson<{ during: number; after: number }>(
    `${setup}
     import { Worker } from 'node:worker_threads';
     Stream.create().destroy(); // this thread's driver state, which liveObjects() reads
     const shared = new SharedArrayBuffer(1 << 20);
     const worker = new Worker(\`
       import { parentPort, workerData } from 'node:worker_threads';
       import { HostRegistration } from 'cuda-stream-pool';
       HostRegistration.register(workerData); // forgotten
       parentPort.postMessage('registered');
       parentPort.once('message', () => parentPort.close()); // then the worker ends\`, { eval: true, workerData: shared });
     await new Promise((resolve) => worker.once('message', resolve));
     const during = registered();
     worker.postMessage('end');
     await new Promise((resolve) => worker.once('exit', resolve));
     console.log(JSON.stringify({ during, after: registered() }));`,
  );
  assert.ok(result.during >= 1 << 20, `${result.during}`);
  assert.equal(result.after, 0);
});

test('a failed query of a copy\'s fence keeps the pages registered until the copy is done', needsCompiler, async () => {
  const result = await simulatedJson<{ back: number[]; after: number }>(
    `${setup}
     const stream = Stream.create();
     const device = DeviceBuffer.alloc(65536, { stream });
     stream.fill(device, 4);
     const back = new Uint8Array(65536);
     const registration = HostRegistration.register(back);
     for (let i = 0; i < 10; i++) stream.fill(device, 5);
     stream.copy(back, device);
     registration.unregister();
     PinnedBuffer.cacheInfo(); // the cache asks the fence, and the query fails: not taken for done
     await stream.synchronize();
     PinnedBuffer.cacheInfo();
     device.free();
     console.log(JSON.stringify({ back: [...new Set(back)], after: registered() }));`,
    { operationDelayUs: 2000, fail: 'cuEventQuery:1=CUDA_ERROR_OUT_OF_MEMORY' },
  );
  assert.deepEqual(result.back, [5]);
  assert.equal(result.after, 0);
});
