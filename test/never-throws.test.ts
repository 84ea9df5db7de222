// never_throws (src/native/never_throws.h), compiled into a small program of its own: an exception thrown inside a
// callback body is caught, counted and its message kept (which cuda.callbackFailures() reports), from any thread.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { cuda } from 'cuda-stream-pool';
import { repositoryRoot } from './support/gpu.js';

const compiler = process.env.CXX ?? 'g++';
const hasCompiler = spawnSync(compiler, ['--version']).status === 0;
const needsCompiler = { skip: hasCompiler ? false : `needs a C++ compiler (${compiler}), which node-gyp needs too` };
let scratch = '';
let program = '';

before(() => {
  if (!hasCompiler) return;
  scratch = mkdtempSync(path.join(os.tmpdir(), 'csp-never-throws-'));
  program = path.join(scratch, 'never-throws-check');
  const source = path.join(repositoryRoot, 'test', 'native', 'never-throws-check.cc');
  const build = spawnSync(compiler, ['-std=c++17', '-Wall', '-Werror', '-pthread', '-I', path.join(repositoryRoot, 'src', 'native'), source, '-o', program], { encoding: 'utf8' });
  assert.equal(build.status, 0, build.stderr);
});
after(() => scratch && rmSync(scratch, { recursive: true, force: true }));

function run(mode: string): { count: number; last: string } {
  const result = spawnSync(program, [mode], { encoding: 'utf8' });
  assert.equal(result.status, 0, `${mode}: ${result.stderr}`);
  const [count, ...last] = result.stdout.trimEnd().split('|');
  return { count: Number(count), last: last.join('|') };
}

test('an exception inside never_throws is counted with the callback and its message, and goes no further', needsCompiler, () => {
  assert.deepEqual(run('standard'), { count: 1, last: 'a finalizer: out of handles' });
  assert.deepEqual(run('other'), { count: 1, last: 'a cleanup hook: an exception that is not a std::exception' });
  assert.deepEqual(run('quiet'), { count: 0, last: '' });
});

test('a long message is cut to 255 characters; failures on 8 threads at once are all counted', needsCompiler, () => {
  const long = run('long');
  assert.equal(long.count, 1);
  assert.equal(long.last.length, 255);
  assert.ok(long.last.startsWith('a finalizer: xxx'));
  assert.deepEqual(run('threads'), { count: 8000, last: "a thread's body: failed" });
});

test('cuda.callbackFailures() reports none in a healthy process, GPU or not', () => {
  assert.deepEqual(cuda.callbackFailures(), { count: 0, last: undefined });
});
