// Values of the library's environment variables that it does not take are ignored, as before, and said once per
// process in a process warning naming the variable and the values it takes. Child processes, no GPU needed.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { runChild } from '../support/child.js';

const importWithWorker = `
  import { Worker } from 'node:worker_threads';
  await import('cuda-stream-pool');
  const worker = new Worker("import('cuda-stream-pool')", { eval: true });
  await new Promise((resolve) => worker.on('exit', resolve));
  console.log('done');`;

test('unknown values warn once per process, naming each variable and what it takes; the library still loads', async () => {
  const result = await runChild(importWithWorker, {
    CUDA_STREAM_POOL_COMPLETION: 'events',
    CUDA_STREAM_POOL_STAGING_BYTES: '64MiB',
    CUDA_STREAM_POOL_COPY_THREADS: '16',
    CUDA_STREAM_POOL_CHECK_LOCK_ORDER: 'yes',
    CUDA_STREAM_POOL_FAIL_THREAD_START: 'poller',
  });
  assert.equal(result.code, 0, result.stderr);
  assert.equal(result.stdout.trim(), 'done');
  const warnings = result.stderr.split('\n').filter((line) => line.includes('[CUDA_STREAM_POOL_ENVIRONMENT]'));
  assert.equal(warnings.length, 5, result.stderr);
  assert.match(warnings[0]!, /CUDA_STREAM_POOL_COMPLETION="events" is ignored: it takes `event`/);
  assert.match(warnings[1]!, /CUDA_STREAM_POOL_STAGING_BYTES="64MiB" is ignored: it takes a whole number of bytes from 262144/);
  assert.match(warnings[2]!, /CUDA_STREAM_POOL_COPY_THREADS="16" is ignored: it takes a whole number from 0 to 15/);
  assert.match(warnings[3]!, /CUDA_STREAM_POOL_CHECK_LOCK_ORDER="yes" is ignored: it takes `1`/);
  assert.match(warnings[4]!, /CUDA_STREAM_POOL_FAIL_THREAD_START="poller" is ignored: it takes the name of a library thread/);
});

test('values the library takes, and empty ones, warn about nothing', async () => {
  const result = await runChild(importWithWorker, {
    CUDA_STREAM_POOL_COMPLETION: 'event',
    CUDA_STREAM_POOL_STAGING_BYTES: '1048576',
    CUDA_STREAM_POOL_COPY_THREADS: '15',
    CUDA_STREAM_POOL_CHECK_LOCK_ORDER: '',
  });
  assert.equal(result.code, 0, result.stderr);
  assert.doesNotMatch(result.stderr, /CUDA_STREAM_POOL_ENVIRONMENT/);
});

test('a staging cap one past 2**53, which the native side refuses, is warned about too', async () => {
  const result = await runChild(importWithWorker, { CUDA_STREAM_POOL_STAGING_BYTES: '9007199254740993' });
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stderr, /CUDA_STREAM_POOL_STAGING_BYTES="9007199254740993" is ignored/);
});
