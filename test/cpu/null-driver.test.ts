// The library's multi-device bookkeeping on any machine: the null driver (scripts/null-driver.cc, a driver whose calls
// all succeed at once) built here and loaded in a child process through CUDA_STREAM_POOL_LIBCUDA, showing two devices.
// It runs no kernels and copies nothing between devices, so these tests check contexts and lifetimes, never bytes.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import { repositoryRoot } from '../support/gpu.js';
import { runChild } from '../support/child.js';
import { nativeCheck, needsCompiler } from '../support/native-check.js';

const driver = nativeCheck('libcuda.so.1', { source: 'scripts/null-driver.cc', shared: true, level: '-O2' });

test('a free of a buffer used on another device\'s stream leaves its own device\'s context current', needsCompiler, async () => {
  const result = await runChild(
    `import { Device, DeviceBuffer, Stream } from 'cuda-stream-pool';
     import { native } from '#library/binding/binding.js';
     const [a, b] = [Stream.create({ device: 0 }), Stream.create({ device: 1 })];
     const seen = [];
     for (const [d, o] of [[0, 1], [1, 0]]) {
       const streams = [a, b];
       const mine = DeviceBuffer.alloc(64, { stream: streams[d] });
       const theirs = DeviceBuffer.alloc(64, { stream: streams[o] });
       streams[o].copy(theirs, mine); // a use of mine on a stream of the other device
       mine.free();
       seen.push(native.currentDevice());
       theirs.free();
       seen.push(native.currentDevice());
     }
     console.log(JSON.stringify({ count: Device.count(), seen }));`,
    { CUDA_STREAM_POOL_LIBCUDA: driver(), NULL_DRIVER_DEVICES: '2' },
  );
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout.trim()), { count: 2, seen: [0, 1, 1, 0] });
});

test('bench --device N micro: a --device written before micro is the one micro checks against the visible devices', needsCompiler, () => {
  const micro = (device: number, devices: number) =>
    spawnSync(process.execPath, ['packages/cuda-stream-pool-bench/dist/cli/main.js', 'bench', '--device', String(device), 'micro'], {
      cwd: repositoryRoot,
      encoding: 'utf8',
      env: { ...process.env, CUDA_STREAM_POOL_LIBCUDA: driver(), NULL_DRIVER_DEVICES: String(devices) },
      timeout: 60_000,
    });
  const run = micro(1, 1);
  assert.equal(run.status, 64, run.stderr);
  assert.match(run.stderr, /option '--device <ordinal>' argument '1' is invalid\. Accepted: 0 \(the one visible device\)\./);
  const two = micro(3, 2);
  assert.equal(two.status, 64, two.stderr);
  assert.match(two.stderr, /argument '3' is invalid\. Accepted: an integer from 0 to 1 \(the visible devices\)\./);
});

test('bench micro\'s partition group skips, saying why, on the device asked for, where the driver splits the device but refuses a stream on a partition', needsCompiler, async () => {
  const result = await runChild(
    `import { partitionSkipReason } from '#bench/partition-latency.js';
     console.log(JSON.stringify([partitionSkipReason(0), partitionSkipReason(1)]));`,
    { CUDA_STREAM_POOL_LIBCUDA: driver(), NULL_DRIVER_DEVICES: '2' },
  );
  assert.equal(result.code, 0, result.stderr);
  const reasons = JSON.parse(result.stdout.trim()) as string[];
  for (const reason of reasons) assert.match(reason, /cuGreenCtxStreamCreate failed/);
});
