// stream.copyBatch() on the simulated driver: the bytes of every kind of copy land, through one cuMemcpyBatchAsync
// in either of its two forms (CUDA 13.0, CUDA 12.8) or one by one where the driver has none or the stream is the
// legacy default stream; a pageable source is read at the call; copies that would race are refused before anything
// is queued; a failed batch is a CudaError naming it that leaves nothing behind; with deferred submission the batch
// comes after what was recorded before it.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, runSimulated, simulatedJson, simulatedJsonWithCalls } from '../support/simulated-driver.js';

const setup = `
  import { cuda, DeviceBuffer, ManagedBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
  const pattern = (n, seed) => Uint8Array.from({ length: n }, (_, i) => (i * 7 + seed) & 255);
  const same = (a, b) => a.length === b.length && a.every((v, i) => v === b[i]);
  const outcome = (f) => { try { f(); return 'queued'; } catch (e) { return { name: e.name, code: e.code, message: e.message }; } };`;

/** Runs every kind of copy in one batch and returns whether each landed, and the driver calls the main thread made. */
const everyKind = (streamExpression: string) => `${setup}
  const stream = ${streamExpression};
  const device = DeviceBuffer.alloc(1 << 16, { stream });
  const other = DeviceBuffer.alloc(1 << 16, { stream });
  const pinned = PinnedBuffer.alloc(1 << 16);
  const managed = ManagedBuffer.alloc(4096);
  pinned.bytes.set(pattern(1 << 16, 1));
  const pageable = pattern(4096, 2);
  const back = new Uint8Array(4096);
  stream.copy(other, pattern(1 << 16, 3));
  stream.fill(device, 0);
  stream.copyBatch([
    { dst: device, src: pinned, byteLength: 4096 },                             // pinned to device
    { dst: device, src: pageable, dstOffset: 4096 },                            // pageable to device
    { dst: device, src: other, dstOffset: 8192, srcOffset: 100, byteLength: 4096 }, // device to device
    { dst: pinned, src: other, dstOffset: 32768, byteLength: 4096 },            // device to pinned
    { dst: back, src: other, srcOffset: 5000, byteLength: 4096 },              // device to pageable (one by one)
    { dst: managed, src: other, byteLength: 4096 },                             // to managed memory (one by one)
    { dst: device, src: pinned, dstOffset: 12288, byteLength: 0 },              // nothing
  ]);
  await stream.synchronize();
  const d = await device.toArray(Uint8Array, { stream });
  const o = pattern(1 << 16, 3);
  console.log(JSON.stringify({ landed: [
    same(d.subarray(0, 4096), pattern(1 << 16, 1).subarray(0, 4096)),
    same(d.subarray(4096, 8192), pageable),
    same(d.subarray(8192, 12288), o.subarray(100, 4196)),
    same(pinned.bytes.subarray(32768, 36864), o.subarray(0, 4096)),
    same(back, o.subarray(5000, 9096)),
    same(managed.bytes, o.subarray(0, 4096)),
    same(d.subarray(12288, 12289), new Uint8Array(1)),
  ] }));`;

for (const [version, form] of [['13000', 'the CUDA 13.0 form'], ['12080', 'the CUDA 12.8 form'], ['12060', 'none: one by one']] as const) {
  test(`a batch of every kind of copy lands byte for byte with a CUDA ${version} driver (${form})`, needsCompiler, async () => {
    // Every thread's calls together: with deferred submission the one-by-one copies are issued by submission threads.
    const { result, calls } = await simulatedJsonWithCalls<{ landed: boolean[] }>(everyKind('Stream.create()'), { env: { SIMULATED_DRIVER_VERSION: version } });
    assert.deepEqual(result.landed, [true, true, true, true, true, true, true]);
    if (version === '12060') {
      assert.equal(calls.cuMemcpyBatchAsync ?? 0, 0);
      assert.equal(calls.cuMemcpyDtoDAsync, 1, JSON.stringify(calls));
    } else {
      assert.equal(calls.cuMemcpyBatchAsync, 1, JSON.stringify(calls));
      assert.equal(calls.cuMemcpyDtoDAsync ?? 0, 0, JSON.stringify(calls));
    }
  });
}

test('on the legacy default stream a batch is queued one by one, with the same bytes', needsCompiler, async () => {
  const result = await simulatedJson<{ landed: boolean[] }>(everyKind('Stream.legacy()'));
  assert.deepEqual(result.landed, [true, true, true, true, true, true, true]);
});

test('a pageable source is read at the call: changing it afterwards, before the copy ran, changes nothing', needsCompiler, async () => {
  const result = await simulatedJson<{ first: number[] }>(
    `${setup}
     const stream = Stream.create();
     const device = DeviceBuffer.alloc(4096, { stream });
     const source = new Uint8Array(4096).fill(5);
     stream.fill(device, 0);
     stream.copyBatch([{ dst: device, src: source }]);
     source.fill(9);
     const out = await device.toArray(Uint8Array, { stream });
     console.log(JSON.stringify({ first: [...new Set(out)] }));`,
    { operationDelayUs: 20000 },
  );
  assert.deepEqual(result.first, [5]);
});

test('copies of one batch that write what another reads or writes are refused, naming both, before anything is queued', needsCompiler, async () => {
  const result = await simulatedJson<{ refused: { name: string; code: string; message: string }[]; untouched: number[] }>(
    `${setup}
     const stream = Stream.create();
     const a = DeviceBuffer.alloc(8192, { stream });
     const b = DeviceBuffer.alloc(8192, { stream });
     const pinned = PinnedBuffer.alloc(8192);
     pinned.bytes.fill(7);
     stream.fill(a, 1);
     const refused = [
       outcome(() => stream.copyBatch([{ dst: a, src: pinned, byteLength: 4096 }, { dst: a, src: pinned, dstOffset: 4000, byteLength: 100 }])),
       outcome(() => stream.copyBatch([{ dst: b, src: a, byteLength: 4096 }, { dst: a, src: pinned, dstOffset: 4095, byteLength: 10 }])),
       outcome(() => stream.copyBatch([{ dst: pinned, src: a, byteLength: 4096 }, { dst: b, src: pinned.bytes.subarray(4000), byteLength: 10 }])),
     ];
     const page = new Uint8Array(4096);
     refused.push(outcome(() => stream.copyBatch([{ dst: page, src: a, byteLength: 4096 }, { dst: b, src: page }])));
     const untouched = [...new Set(await a.toArray(Uint8Array, { stream }))];
     refused.push(outcome(() => stream.copyBatch([{ dst: a.subarray(0, 4096), src: pinned, byteLength: 4096 }, { dst: a.subarray(4096), src: pinned, byteLength: 4096 }])));
     // Out of address order: the clash is between the first and the last.
     refused.push(outcome(() => stream.copyBatch([{ dst: b, src: pinned, dstOffset: 6000, byteLength: 100 }, { dst: b, src: pinned, byteLength: 100 }, { dst: b, src: pinned, dstOffset: 6050, byteLength: 10 }])));
     refused.push(outcome(() => stream.copyBatch([{ dst: b, src: pinned, dstOffset: 6000, byteLength: 100 }, { dst: b, src: pinned, byteLength: 100 }, { dst: b, src: pinned, dstOffset: 6100, byteLength: 10 }])));
     console.log(JSON.stringify({ refused, untouched }));`,
  );
  const [writesTwice, writesRead, pinnedClash, hostClash, neighbours, unordered, unorderedApart] = result.refused;
  assert.match(hostClash!.message, /^"copies\[1\]" overlaps copies\[0\]: one writes bytes the other reads \(host bytes 0 to 4096 of the buffer\)/);
  assert.equal(writesTwice!.code, 'ERR_INVALID_ARG_VALUE');
  assert.match(writesTwice!.message, /^"copies\[1\]" overlaps copies\[0\]: both write \(device memory at 0x[0-9a-f]+ to 0x[0-9a-f]+\); the copies of a batch run in any order\./);
  assert.match(writesRead!.message, /^"copies\[1\]" overlaps copies\[0\]: one writes bytes the other reads \(device memory at 0x/);
  assert.match(pinnedClash!.message, /^"copies\[1\]" overlaps copies\[0\]: one writes bytes the other reads \(pinned bytes 4000 to 4010 of the buffer\)/);
  assert.equal(neighbours, 'queued'); // touching ranges are not overlapping ones, and two reads of one range are fine
  assert.match(unordered!.message, /^"copies\[2\]" overlaps copies\[0\]: both write \(device memory at 0x/);
  assert.equal(unorderedApart, 'queued');
  assert.deepEqual(result.untouched, [1]);
});

test('each entry is checked as stream.copy() checks it, naming the entry', needsCompiler, async () => {
  const result = await simulatedJson<{ refused: { name: string; code: string; message: string }[] }>(
    `${setup}
     const stream = Stream.create();
     const a = DeviceBuffer.alloc(4096, { stream });
     const refused = [
       outcome(() => stream.copyBatch({ dst: a, src: a })),
       outcome(() => stream.copyBatch([{ dst: a, src: new Uint8Array(16) }, null])),
       outcome(() => stream.copyBatch([{ dst: a, src: new Uint8Array(16) }, { dst: a, src: new Uint8Array(16), dstOffset: 5000 }])),
       outcome(() => stream.copyBatch([{ dst: new Uint8Array(4), src: new Uint8Array(4) }])),
       outcome(() => stream.copyBatch([{ dst: a, src: new Uint8Array(16), byteLenght: 4 }])),
     ];
     console.log(JSON.stringify({ refused }));`,
  );
  assert.deepEqual(result.refused.map((r) => r.code), ['ERR_INVALID_ARG_TYPE', 'ERR_INVALID_ARG_TYPE', 'ERR_OUT_OF_RANGE', 'ERR_INVALID_ARG_VALUE', 'ERR_INVALID_ARG_VALUE']);
  assert.match(result.refused[0]!.message, /^"copies" must be an array of/);
  assert.match(result.refused[1]!.message, /^"copies\[1\]" must be an object/);
  assert.match(result.refused[2]!.message, /^"copies\[1\].dstOffset" must be an integer from 0 to 4096 \(the destination is 4096 bytes\); received 5000/);
  assert.match(result.refused[3]!.message, /^"copies\[0\].dst" and "copies\[0\].src" are both host memory/);
  assert.match(result.refused[4]!.message, /"copies\[0\].byteLenght" is not a copy option; did you mean "byteLength"\?/);
});

test('a failed cuMemcpyBatchAsync is a CudaError naming the batch; nothing of it is left behind and a retry lands', needsCompiler, async () => {
  const result = await simulatedJson<{ error: { name: string; code: string; message: string }; before: unknown; after: unknown; retried: boolean }>(
    `${setup}
     const stream = Stream.create();
     const device = DeviceBuffer.alloc(8192, { stream });
     const pinned = PinnedBuffer.alloc(8192);
     pinned.bytes.set(pattern(8192, 4));
     await stream.synchronize();
     const copies = [{ dst: device, src: pinned, byteLength: 4096 }, { dst: device, src: pattern(4096, 5), dstOffset: 4096 }];
     const before = cuda.liveObjects();
     const error = outcome(() => stream.copyBatch(copies));
     const after = cuda.liveObjects();
     stream.copyBatch(copies);
     const out = await device.toArray(Uint8Array, { stream });
     const retried = same(out.subarray(0, 4096), pattern(8192, 4).subarray(0, 4096)) && same(out.subarray(4096), pattern(4096, 5));
     device.free();
     pinned.free();
     await stream.synchronize();
     console.log(JSON.stringify({ error, before, after, retried }));`,
    { fail: 'cuMemcpyBatchAsync:1=CUDA_ERROR_INVALID_VALUE' },
  );
  assert.equal(result.error.name, 'CudaError');
  assert.equal(result.error.code, 'CUDA_ERROR_INVALID_VALUE');
  assert.match(result.error.message, /^CUDA_ERROR_INVALID_VALUE: cuMemcpyBatchAsync failed on device 0, stream \d+, a batch of 2 copies, 8192 bytes/);
  assert.deepEqual(result.after, result.before);
  assert.equal(result.retried, true);
});

test('with deferred submission a batch comes after the work recorded before it, on the calling thread', needsCompiler, async () => {
  const result = await runSimulated(
    `${setup}
     const stream = Stream.create();
     const device = DeviceBuffer.alloc(4096, { stream });
     const pinned = PinnedBuffer.alloc(4096);
     pinned.bytes.fill(3);
     for (let round = 0; round < 20; round++) {
       stream.fill(device, 1);                     // recorded
       stream.copyBatch([{ dst: device, src: pinned, byteLength: 2048 }]);
       stream.fill(device.subarray(1024, 2048), 2); // recorded after the batch
       const out = await device.toArray(Uint8Array, { stream });
       if (out[0] !== 3 || out[1500] !== 2 || out[3000] !== 1) throw new Error('round ' + round + ': ' + [out[0], out[1500], out[3000]]);
     }
     console.log('ordered');`,
    { env: { CUDA_STREAM_POOL_SUBMISSION: 'deferred' }, operationDelayUs: 200 },
  );
  assert.equal(result.code, 0, result.stderr);
  assert.equal(result.stdout.trim(), 'ordered');
});
