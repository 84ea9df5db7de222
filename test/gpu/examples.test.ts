// The README's example runs and computes the right values.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { cuda } from 'cuda-stream-pool';
import { PartitionScaler } from '../../examples/scale-partitions.js';
import { gpuNotSimulated, repositoryRoot } from '../support/gpu.js';

test('the README example scales 64 partitions of different sizes on pool streams, twice with one scaler', gpuNotSimulated('nvrtc'), async () => {
  const before = cuda.liveObjects();
  const partitions = Array.from({ length: 64 }, (_, p) => Float32Array.from({ length: 1000 + 997 * p }, (_, i) => (i % 113) - p));
  {
    using scaler = await PartitionScaler.create();
    for (const factor of [2.5, -0.75]) {
      const outputs = await scaler.scale(partitions, factor);
      assert.equal(outputs.length, 64);
      outputs.forEach((output, p) => {
        assert.ok(output instanceof Float32Array);
        assert.equal(output.length, partitions[p]!.length);
        for (let i = 0; i < output.length; i++) assert.equal(output[i], Math.fround(partitions[p]![i]! * factor), `factor ${factor}, partition ${p}, element ${i}`);
      });
    }
    assert.equal(cuda.liveObjects().modules, before.modules + 1, 'one compiled module serves both calls');
  }
  const after = cuda.liveObjects();
  assert.equal(after.streams, before.streams, 'the pool destroyed its streams');
  assert.equal(after.modules, before.modules, 'the module was unloaded');
  assert.equal(after.deviceBytes, before.deviceBytes, 'every device buffer was freed');
});

test('the README shows the example file as it is, without its first comment line', {
  skip: existsSync(path.join(repositoryRoot, 'examples')) ? false : 'needs the repository\'s sources (this run tests an installed copy)',
}, () => {
  const file = readFileSync(path.join(repositoryRoot, 'examples', 'scale-partitions.ts'), 'utf8');
  const readme = readFileSync(path.join(repositoryRoot, 'README.md'), 'utf8');
  const shown = /From \[?`examples\/scale-partitions.ts`[^\n]*\n\n```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  assert.equal(shown, file.slice(file.indexOf('\n') + 1));
});
