// never_throws (packages/cuda-stream-pool/src/internal/never-throws.h), compiled into a small program of its own: an exception thrown inside a
// callback body is caught, counted and its message kept (which cuda.callbackFailures() reports), from any thread.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import { cuda } from 'cuda-stream-pool';
import { nativeCheck, needsCompiler } from '../support/native-check.js';

const program = nativeCheck('never-throws-check');

function run(mode: string): { count: number; last: string } {
  const result = spawnSync(program(), [mode], { encoding: 'utf8' });
  assert.equal(result.status, 0, `${mode}: ${result.stderr}`);
  const [count, ...last] = result.stdout.trimEnd().split('|');
  return { count: Number(count), last: last.join('|') };
}

test('an exception inside never_throws is counted with the callback and its message, and goes no further', needsCompiler, () => {
  assert.deepEqual(run('standard'), { count: 1, last: 'a finalizer: out of handles' });
  assert.deepEqual(run('other'), { count: 1, last: 'a cleanup hook: an exception that is not a std::exception' });
  assert.deepEqual(run('quiet'), { count: 0, last: '' });
});

test('a long message is cut to 255 characters; failures on 8 threads at once are all counted', needsCompiler, () => {
  const long = run('long');
  assert.equal(long.count, 1);
  assert.equal(long.last.length, 255);
  assert.ok(long.last.startsWith('a finalizer: xxx'));
  assert.deepEqual(run('threads'), { count: 8000, last: "a thread's body: failed" });
});

test('cuda.callbackFailures() reports none in a healthy process, GPU or not', () => {
  assert.deepEqual(cuda.callbackFailures(), { count: 0, last: undefined });
});
