// Without a driver (CUDA_STREAM_POOL_LIBCUDA pointing at a missing file) the package imports, reports why, and
// every GPU call throws CudaUnavailableError. Runs everywhere, in a child process.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { runChild } from './support/child.js';

test('without a driver, importing works, Device.count() is 0 and GPU calls throw CudaUnavailableError', async () => {
  const result = await runChild(
    `
    import { cuda, Device, Stream, Event, CudaUnavailableError } from 'cuda-stream-pool';
    const out = { available: cuda.available, reason: cuda.unavailableReason, version: cuda.driverVersion,
                  versionString: cuda.driverVersionString, codes: [],
                  count: Device.count(), live: cuda.liveObjects(), errors: [] };
    for (const call of [() => Device.get(0), () => Stream.create(), () => Event.create(), () => Stream.perThread()]) {
      try { call(); out.errors.push('no error'); }
      catch (e) { out.errors.push(e instanceof CudaUnavailableError ? e.name + ': ' + e.message : 'wrong: ' + e); out.codes.push(e.code); }
    }
    console.log(JSON.stringify(out));
  `,
    { CUDA_STREAM_POOL_LIBCUDA: '/nonexistent/libcuda.so.1' },
  );
  assert.equal(result.code, 0, result.stderr);
  const out = JSON.parse(result.stdout);
  assert.equal(out.available, false);
  assert.match(out.reason, /\/nonexistent\/libcuda\.so\.1 \(from CUDA_STREAM_POOL_LIBCUDA\)/);
  assert.match(out.reason, /Install the NVIDIA driver/);
  assert.equal(out.version, undefined);
  assert.equal(out.versionString, undefined);
  assert.deepEqual(out.codes, ['ERR_CUDA_UNAVAILABLE', 'ERR_CUDA_UNAVAILABLE', 'ERR_CUDA_UNAVAILABLE', 'ERR_CUDA_UNAVAILABLE']);
  assert.equal(out.count, 0);
  assert.deepEqual(out.live, { streams: 0, events: 0, modules: 0, deviceBytes: 0, pinnedBytes: 0, managedBytes: 0 });
  assert.equal(out.errors.length, 4);
  for (const line of out.errors) assert.match(line, /^CudaUnavailableError: CUDA is not available: tried to open/);
});
