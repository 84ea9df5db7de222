// The skips `npm run test:gpu` and `npm run test:sim` accept: "needs N GPUs" while fewer than N devices are visible,
// a test that needs no driver where a GPU is visible, and, under --sim alone, the tests that cannot run under the simulated driver (test/support/gpu.ts, notSimulated).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { multiDeviceSkip, notSimulated, SIMULATOR_SKIP_PREFIX, simulatorSkip, type NotSimulated } from '../support/gpu.js';
import { NO_DRIVER_SKIP, sortSkips, tapSkipLines } from '../support/skips.js';

const line = (reason: string, name = 'a test') => `ok 7 - ${name} # SKIP ${reason}`;

test('test:gpu accepts "needs 2 GPUs" on one GPU and counts it apart from every other skip', () => {
  const skips = [line(multiDeviceSkip(2)), line('needs a CUDA GPU, and this machine has none usable'), `    ${line(multiDeviceSkip(2))}`, line('runs where there is no GPU')];
  const sorted = sortSkips(skips, 1);
  assert.deepEqual(sorted.tooFewDevices, [skips[0], skips[2]]);
  assert.deepEqual(sorted.other, [skips[1], skips[3]]);
});

test('test:gpu fails a "needs N GPUs" skip once N GPUs are visible, and without any GPU', () => {
  assert.deepEqual(sortSkips([line(multiDeviceSkip(2))], 2).tooFewDevices, []);
  assert.deepEqual(sortSkips([line(multiDeviceSkip(2))], 2).other, [line('needs 2 GPUs')]);
  assert.deepEqual(sortSkips([line(multiDeviceSkip(4))], 3).tooFewDevices, [line('needs 4 GPUs')]);
  assert.deepEqual(sortSkips([line(multiDeviceSkip(2))], 0).other, [line('needs 2 GPUs')]);
});

test('test:gpu accepts a test that needs a machine without a driver wherever a GPU is visible, and fails it without one', () => {
  assert.deepEqual(sortSkips([line(NO_DRIVER_SKIP)], 1).driverInstalled, [line(NO_DRIVER_SKIP)]);
  assert.deepEqual(sortSkips([line(NO_DRIVER_SKIP)], 1).other, []);
  assert.deepEqual(sortSkips([line(NO_DRIVER_SKIP)], 0).other, [line(NO_DRIVER_SKIP)]);
  assert.deepEqual(sortSkips([line(`${NO_DRIVER_SKIP}, probably`)], 1).driverInstalled, []);
});

test('test:gpu accepts only the exact reason, not one that merely mentions GPUs', () => {
  for (const reason of ['needs 2 GPUs and NVLink', 'needs two GPUs', 'needs 2 GPU', 'it needs 2 GPUs'])
    assert.deepEqual(sortSkips([line(reason)], 1).tooFewDevices, [], reason);
});

test('test:sim accepts the simulator\'s exceptions, grouped by reason, and no other skip', () => {
  const skips = [
    line(simulatorSkip('nvrtc'), 'compiles'),
    line(simulatorSkip('ptxJit'), 'loads'),
    `    ${line(simulatorSkip('nvrtc'), 'compiles again')}`,
    line('needs a CUDA GPU, and this machine has none usable'),
    line('skipped, not under the simulated driver: it mentions the prefix too late'),
  ];
  const sorted = sortSkips(skips, 2, true);
  assert.deepEqual([...sorted.simulator], [
    [notSimulated.nvrtc, ['compiles', 'compiles again']],
    [notSimulated.ptxJit, ['loads']],
  ]);
  assert.deepEqual(sorted.other, [skips[3], skips[4]]);
});

test('test:gpu fails the simulator\'s exceptions, and so does test:sim without a device', () => {
  const skips = [line(simulatorSkip('nvrtc'))];
  assert.deepEqual(sortSkips(skips, 2).other, skips);
  assert.deepEqual(sortSkips(skips, 0, true).other, skips);
});

test('each exception\'s reason is its own and says why in words', () => {
  const reasons = Object.values(notSimulated);
  assert.equal(new Set(reasons).size, reasons.length);
  for (const key of Object.keys(notSimulated) as NotSimulated[]) {
    assert.ok(simulatorSkip(key).startsWith(SIMULATOR_SKIP_PREFIX));
    assert.ok(notSimulated[key].length > 20, key);
  }
});

test('only test lines count as skips, not a child run\'s TAP quoted in a failure\'s message', () => {
  const report = [
    'ok 1 - compiles # SKIP needs 2 GPUs',
    'not ok 2 - reruns the file',
    '  ---',
    '  error: |-',
    '    ok 14 - the rerun # SKIP this run is the event-marker run',
    '    ---',
    '    duration_ms: 3',
    '    ...',
    '    ok 15 - another # SKIP quoted after a nested block',
    '  ...',
    '    ok 3 - a subtest # SKIP runs elsewhere',
  ].join('\n');
  assert.deepEqual(tapSkipLines(report), ['ok 1 - compiles # SKIP needs 2 GPUs', 'ok 3 - a subtest # SKIP runs elsewhere']);
});
