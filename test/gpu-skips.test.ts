// The one skip `npm run test:gpu` accepts: "needs N GPUs" while fewer than N devices are visible.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { multiDeviceSkip } from './support/gpu.js';
import { sortSkips } from './support/skips.js';

const line = (reason: string) => `ok 7 - a test # SKIP ${reason}`;

test('test:gpu accepts "needs 2 GPUs" on one GPU and counts it apart from every other skip', () => {
  const skips = [line(multiDeviceSkip(2)), line('needs a CUDA GPU, and this machine has none usable'), `    ${line(multiDeviceSkip(2))}`, line('runs where there is no GPU')];
  const sorted = sortSkips(skips, 1);
  assert.deepEqual(sorted.tooFewDevices, [skips[0], skips[2]]);
  assert.deepEqual(sorted.other, [skips[1], skips[3]]);
});

test('test:gpu fails a "needs N GPUs" skip once N GPUs are visible, and without any GPU', () => {
  assert.deepEqual(sortSkips([line(multiDeviceSkip(2))], 2), { tooFewDevices: [], other: [line('needs 2 GPUs')] });
  assert.deepEqual(sortSkips([line(multiDeviceSkip(4))], 3).tooFewDevices, [line('needs 4 GPUs')]);
  assert.deepEqual(sortSkips([line(multiDeviceSkip(2))], 0).other, [line('needs 2 GPUs')]);
});

test('test:gpu accepts only the exact reason, not one that merely mentions GPUs', () => {
  for (const reason of ['needs 2 GPUs and NVLink', 'needs two GPUs', 'needs 2 GPU', 'it needs 2 GPUs'])
    assert.deepEqual(sortSkips([line(reason)], 1).tooFewDevices, [], reason);
});
