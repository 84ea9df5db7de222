// The CPU checks of the native layer: a program of test/native/ compiled with the system's C++ compiler (the one
// node-gyp uses) into a scratch folder, together with sources of src/native/ where it needs them.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before } from 'node:test';

import { repositoryRoot } from './gpu.js';

const compiler = process.env.CXX ?? 'g++';
const hasCompiler = spawnSync(compiler, ['--version']).status === 0;

/** The `skip` option of a test that runs a check program: false with a compiler, else why it skips. */
export const needsCompiler = { skip: hasCompiler ? false : `needs a C++ compiler (${compiler}), which node-gyp needs too` };

/** Builds `test/native/<name>.cc` (plus `sources`, paths under src/native/) once before the file's tests, with -Wall
 * -Werror, optimization `level` and -pthread, and removes it after them; returns the program's path, to be read inside
 * a test. Without a compiler nothing is built (the tests skip through {@link needsCompiler}). */
export function nativeCheck(name: string, options: { sources?: string[]; level?: '-O0' | '-O1' | '-O2' } = {}): () => string {
  let scratch = '';
  let program = '';
  before(() => {
    if (!hasCompiler) return;
    scratch = mkdtempSync(path.join(os.tmpdir(), `csp-${name}-`));
    program = path.join(scratch, name);
    const native = path.join(repositoryRoot, 'src', 'native');
    const sources = [path.join(repositoryRoot, 'test', 'native', `${name}.cc`), ...(options.sources ?? []).map((s) => path.join(native, s))];
    const build = spawnSync(compiler, ['-std=c++17', options.level ?? '-O0', '-Wall', '-Werror', '-pthread', '-I', native, ...sources, '-o', program], { encoding: 'utf8' });
    assert.equal(build.status, 0, build.stderr);
  });
  after(() => scratch && rmSync(scratch, { recursive: true, force: true }));
  return () => program;
}
