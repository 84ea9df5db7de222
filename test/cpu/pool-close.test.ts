// pool.close() called again returns the very same promise, on an owner and on an attached object. On the CPU through
// the null driver (scripts/null-driver.cc) in a child process.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { runChild } from '../support/child.js';
import { nativeCheck, needsCompiler } from '../support/native-check.js';

const driver = nativeCheck('libcuda.so.1', { source: 'scripts/null-driver.cc', shared: true, level: '-O2' });

test('a second close() returns the first call\'s promise, before and after it settles', needsCompiler, async () => {
  const result = await runChild(
    `import { StreamPool } from 'cuda-stream-pool';
     const pool = new StreamPool({ size: 2 });
     const first = pool.close();
     const second = pool.close();
     const asyncDispose = pool[Symbol.asyncDispose]();
     await first;
     const third = pool.close();
     const owned = [first === second, first === asyncDispose, first === third, pool.destroyed];
     const other = new StreamPool({ size: 2 });
     const attached = StreamPool.default();
     const a = attached.close();
     const attachedSame = a === attached.close();
     await a;
     other.destroy();
     console.log(JSON.stringify({ owned, attachedSame }));`,
    { CUDA_STREAM_POOL_LIBCUDA: driver() },
  );
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout.trim()), { owned: [true, true, true, true], attachedSame: true });
});
