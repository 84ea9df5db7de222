// The README's example runs and computes the right values.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { cuda } from 'cuda-stream-pool';
import { scalePartitions } from '../examples/scale-partitions.js';
import { gpu } from './support/gpu.js';

test('the README example scales 64 partitions of different sizes on pool streams', gpu, async () => {
  const before = cuda.liveObjects();
  const partitions = Array.from({ length: 64 }, (_, p) => Float32Array.from({ length: 1000 + 997 * p }, (_, i) => (i % 113) - p));
  const outputs = await scalePartitions(partitions, 2.5);
  assert.equal(outputs.length, 64);
  outputs.forEach((output, p) => {
    assert.equal(output.length, partitions[p]!.length);
    for (let i = 0; i < output.length; i++) assert.equal(output[i], Math.fround(partitions[p]![i]! * 2.5), `partition ${p}, element ${i}`);
  });
  const after = cuda.liveObjects();
  assert.equal(after.streams, before.streams, 'the pool destroyed its streams');
  assert.equal(after.deviceBytes, before.deviceBytes, 'every device buffer was freed');
});
