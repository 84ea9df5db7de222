// The native layer's lock order checker (src/native/lock_order.h), compiled into a small program of its own: with
// CUDA_STREAM_POOL_CHECK_LOCK_ORDER=1 it aborts on the first mutex taken out of order, naming both; in order, or
// without the variable, it stays out of the way.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { repositoryRoot } from './support/gpu.js';

const compiler = process.env.CXX ?? 'g++';
const hasCompiler = spawnSync(compiler, ['--version']).status === 0;
const needsCompiler = { skip: hasCompiler ? false : `needs a C++ compiler (${compiler}), which node-gyp needs too` };
let scratch = '';
let program = '';

before(() => {
  if (!hasCompiler) return;
  scratch = mkdtempSync(path.join(os.tmpdir(), 'csp-lock-order-'));
  program = path.join(scratch, 'lock-order-check');
  const source = path.join(repositoryRoot, 'test', 'native', 'lock-order-check.cc');
  const build = spawnSync(compiler, ['-std=c++17', '-Wall', '-Werror', '-I', path.join(repositoryRoot, 'src', 'native'), source, '-o', program], { encoding: 'utf8' });
  assert.equal(build.status, 0, build.stderr);
});
after(() => scratch && rmSync(scratch, { recursive: true, force: true }));

function run(mode: string, check: boolean) {
  const env = { ...process.env };
  if (check) env.CUDA_STREAM_POOL_CHECK_LOCK_ORDER = '1';
  else delete env.CUDA_STREAM_POOL_CHECK_LOCK_ORDER;
  return spawnSync(program, [mode], { encoding: 'utf8', env });
}

test('mutexes taken outermost first, or one at a time, pass the check', needsCompiler, () => {
  for (const mode of ['in-order', 'released-first']) {
    const result = run(mode, true);
    assert.equal(result.status, 0, `${mode}: ${result.stderr}`);
    assert.equal(result.stdout.trim(), 'done');
  }
});

test('a mutex taken while one of the same or a lower level is held aborts, naming both', needsCompiler, () => {
  const reversed = run('reversed', true);
  assert.equal(reversed.signal, 'SIGABRT');
  assert.match(reversed.stderr, /lock order violated: taking "outer registry" \(level 1\) while holding "inner leaf" \(level 6\)/);
  const sameLevel = run('same-level', true);
  assert.equal(sameLevel.signal, 'SIGABRT');
  assert.match(sameLevel.stderr, /taking "another leaf" \(level 6\) while holding "inner leaf" \(level 6\)/);
});

test('without CUDA_STREAM_POOL_CHECK_LOCK_ORDER=1 nothing is checked', needsCompiler, () => {
  const result = run('reversed', false);
  assert.equal(result.status, 0, result.stderr);
  assert.equal(result.stdout.trim(), 'done');
});
