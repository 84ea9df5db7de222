// The capture guard (packages/cuda-stream-pool/src/stream/capture.cc), compiled into a small program of its own with no GPU: device-wide
// calls (a device synchronize, a managed free, a module unload) never run while a capture is open on their device,
// in any thread, and the ones deferred by a capture all run once the captures are over. Without the handshake (a
// capture that does not wait for calls in flight) the same program counts thousands of overlaps.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import { nativeCheck, needsCompiler } from '../support/native-check.js';

const program = nativeCheck('capture-guard-check', { sources: ['stream/capture.cc'], level: '-O1' });

test('device-wide calls and captures never overlap, and every deferred call runs', needsCompiler, () => {
  const run = spawnSync(program(), { encoding: 'utf8', env: { ...process.env, CUDA_STREAM_POOL_CHECK_LOCK_ORDER: '1' }, timeout: 60_000 });
  assert.equal(run.status, 0, `${run.signal ?? ''} ${run.stderr}`);
  const counts = Object.fromEntries([...run.stdout.matchAll(/(\w+)=(\d+)/g)].map(([, name, value]) => [name, Number(value)]));
  assert.equal(counts.overlaps, 0, run.stdout);
  assert.equal(counts.open, 0, run.stdout);
  assert.ok(counts.queued! > 10_000, run.stdout);
  assert.equal(counts.ran, counts.queued, `every deferred call ran once: ${run.stdout}`);
  assert.ok(counts.refused! > 0 && counts.made! > 0, `calls were both refused and made, so the race was exercised: ${run.stdout}`);
});
