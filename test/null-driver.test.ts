// The library's multi-device bookkeeping on any machine: the null driver (scripts/null-driver.cc, a driver whose calls
// all succeed at once) built here and loaded in a child process through CUDA_STREAM_POOL_LIBCUDA, showing two devices.
// It runs no kernels and copies nothing between devices, so these tests check contexts and lifetimes, never bytes.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { repositoryRoot } from './support/gpu.js';
import { runChild } from './support/child.js';

let driver: string | undefined;
let skip: string | false = false;
const folder = mkdtempSync(path.join(tmpdir(), 'csp-null-driver-'));

before(() => {
  const out = path.join(folder, 'libcuda.so.1');
  try {
    execFileSync('g++', ['-std=c++17', '-O2', '-shared', '-fPIC', '-I', 'src/native', 'scripts/null-driver.cc', '-o', out], { cwd: repositoryRoot, stdio: 'pipe' });
    driver = out;
  } catch (error) {
    skip = `the null driver could not be built with g++: ${(error as Error).message.split('\n')[0]}`;
  }
});

after(() => rmSync(folder, { recursive: true, force: true }));

test('a free of a buffer used on another device\'s stream leaves its own device\'s context current', async (t) => {
  if (skip) return t.skip(skip);
  const result = await runChild(
    `import { Device, DeviceBuffer, Stream } from 'cuda-stream-pool';
     import { native } from './dist/src/native.js';
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
    { CUDA_STREAM_POOL_LIBCUDA: driver!, NULL_DRIVER_DEVICES: '2' },
  );
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout.trim()), { count: 2, seen: [0, 1, 1, 0] });
});

test('bench --device N micro: a --device written before micro is the one micro checks against the visible devices', async (t) => {
  if (skip) return t.skip(skip);
  const run = spawnSync(process.execPath, ['dist/src/cli/main.js', 'bench', '--device', '1', 'micro'], {
    cwd: repositoryRoot,
    encoding: 'utf8',
    env: { ...process.env, CUDA_STREAM_POOL_LIBCUDA: driver!, NULL_DRIVER_DEVICES: '1' },
    timeout: 60_000,
  });
  assert.equal(run.status, 64, run.stderr);
  assert.match(run.stderr, /option '--device <ordinal>' argument '1' is invalid\. Accepted: an integer from 0 to 0/);
});
