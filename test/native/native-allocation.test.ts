// make_native (packages/cuda-stream-pool/src/internal/native-allocation.h), compiled into a small program of its own:
// every native object is allocated from one plain malloc and aligned to a cache line inside it; the object dies with
// its last shared_ptr and its memory goes back with the last weak_ptr, from any thread, and after a constructor that
// throws.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import { nativeCheck, needsCompiler } from '../support/native-check.js';

const program = nativeCheck('native-allocation-check', { level: '-O2' });

function run(mode: string): number[] {
  const result = spawnSync(program(), [mode], { encoding: 'utf8' });
  assert.equal(result.status, 0, `${mode}: ${result.stderr}`);
  return result.stdout.trim().split('|').map(Number);
}

test('9,000 objects of three sizes, alive together, each start a cache line; all are destroyed once released', needsCompiler, () => {
  assert.deepEqual(run('align'), [0, 9000, 0]); // misaligned, alive while kept, alive after
});

test('an object dies with its last shared_ptr while a weak_ptr still holds its memory', needsCompiler, () => {
  assert.deepEqual(run('weak'), [1, 1]); // expired, destroyed once
});

test('objects made on 8 threads and released on others are aligned and destroyed once each', needsCompiler, () => {
  assert.deepEqual(run('threads'), [0, 160000, 160000]);
});

test('20,000 constructors that throw give every block back', needsCompiler, () => {
  assert.deepEqual(run('throws'), [20000, 1]);
});
