// The native layer's timed waits (the completion poller's sleeps) run on the monotonic clock, so a step of the wall
// clock neither stalls nor hurries them: test/native/condition-clock-check.cc waits 50 ms while the wall clock reads
// an hour ahead, which a wait on the wall clock would take for an hour-long wait.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import { nativeCheck, needsCompiler } from '../support/native-check.js';

const program = nativeCheck('condition-clock-check');

test('a 50 ms timed wait takes about 50 ms while the wall clock is an hour off', needsCompiler, () => {
  const run = spawnSync(program(), { encoding: 'utf8', timeout: 10_000 });
  assert.equal(run.status, 0, `${run.signal ?? ''} ${run.stderr}`);
  const elapsedMs = Number(run.stdout.trim());
  assert.ok(elapsedMs >= 45 && elapsedMs < 1000, `the wait took ${elapsedMs} ms`);
});
