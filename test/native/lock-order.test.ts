// The native layer's lock order checker (packages/cuda-stream-pool/src/internal/lock-order.h), compiled into a small program of its own: with
// CUDA_STREAM_POOL_CHECK_LOCK_ORDER=1 it aborts on the first mutex taken out of order, naming both; in order, or
// without the variable, it stays out of the way.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import { nativeCheck, needsCompiler } from '../support/native-check.js';

const program = nativeCheck('lock-order-check');

function run(mode: string, check: boolean) {
  const env = { ...process.env };
  if (check) env.CUDA_STREAM_POOL_CHECK_LOCK_ORDER = '1';
  else delete env.CUDA_STREAM_POOL_CHECK_LOCK_ORDER;
  return spawnSync(program(), [mode], { encoding: 'utf8', env });
}

test('mutexes taken outermost first, or one at a time, pass the check', needsCompiler, () => {
  for (const mode of ['in-order', 'released-first']) {
    const result = run(mode, true);
    assert.equal(result.status, 0, `${mode}: ${result.stderr}`);
    assert.equal(result.stdout.trim(), 'done');
  }
});

test('a mutex taken while one of the same or a lower level is held aborts, naming both', needsCompiler, () => {
  const reversed = run('reversed', true);
  assert.equal(reversed.signal, 'SIGABRT');
  assert.match(reversed.stderr, /lock order violated: taking "outer registry" \(level 1\) while holding "inner leaf" \(level 6\)/);
  const sameLevel = run('same-level', true);
  assert.equal(sameLevel.signal, 'SIGABRT');
  assert.match(sameLevel.stderr, /taking "another leaf" \(level 6\) while holding "inner leaf" \(level 6\)/);
});

test('without CUDA_STREAM_POOL_CHECK_LOCK_ORDER=1 nothing is checked', needsCompiler, () => {
  const result = run('reversed', false);
  assert.equal(result.status, 0, result.stderr);
  assert.equal(result.stdout.trim(), 'done');
});
