// The native addons are never unloaded. A worker that alone loaded the library unloads its addons when it exits
// (Node closes a worker's addons at teardown), while native threads and shared memory of the library still run or
// point into that code: the process then crashes. Both binaries are linked with -z nodelete, so that never happens.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { runChild } from '../support/child.js';
import { benchRoot, libraryDist, libraryRoot } from '../support/paths.js';
import { addonPath } from '#library/binding/binding.js';

test('a worker that alone loaded the library, made pool memory and exited leaves the process running', async () => {
  const outcomes: (number | string | null)[] = [];
  for (let run = 0; run < 3; run++) {
    const result = await runChild(`
      import { Worker } from 'node:worker_threads';
      const worker = new Worker(\`(async () => {
        const { native } = await import(${JSON.stringify(path.join(libraryDist, 'binding', 'binding.js'))});
        const { poolLayout } = await import(${JSON.stringify(path.join(libraryDist, 'pool', 'pool-words.js'))});
        const description = native.poolCreateShared(4, poolLayout(4));
        native.poolDestroy(description.handle);
        process.exit(0);
      })();\`, { eval: true });
      const code = await new Promise((resolve) => worker.on('exit', resolve));
      // A collection sweeps the worker's last array buffers while this thread still runs.
      await new Promise((resolve) => setTimeout(resolve, 50));
      console.log(JSON.stringify({ code }));
    `);
    outcomes.push(result.signal ?? result.code);
    assert.equal(result.signal, null, `run ${run}: the process died with ${result.signal}; ${result.stderr}`);
    assert.deepEqual(JSON.parse(result.stdout), { code: 0 });
  }
  assert.deepEqual(outcomes, [0, 0, 0]);
});

test('both binaries are marked never to be unloaded (DT_FLAGS_1 NODELETE)', { skip: spawnSync('readelf', ['--version']).status === 0 ? false : 'needs readelf (binutils)' }, () => {
  let checked = 0;
  for (const [root, name] of [[libraryRoot, 'cuda_stream_pool'], [benchRoot, 'cuda_stream_pool_bench']] as const) {
    const file = addonPath(name, root);
    assert.ok(file !== undefined && existsSync(file), `${name}.node is built or prebuilt`);
    checked++;
    const dynamic = spawnSync('readelf', ['-d', file], { encoding: 'utf8' });
    assert.equal(dynamic.status, 0, dynamic.stderr);
    assert.match(dynamic.stdout, /FLAGS_1.*NODELETE/, `${name}.node lacks NODELETE`);
  }
  assert.equal(checked, 2);
});
