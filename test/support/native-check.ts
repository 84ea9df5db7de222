// The CPU checks of the native layer: a program of test/native/ (or the null driver of scripts/) compiled with the
// system's C++ compiler (the one node-gyp uses) into a scratch folder, with sources of the library (packages/cuda-stream-pool/src/) where it needs them.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before } from 'node:test';

import { repositoryRoot } from './paths.js';

const compiler = process.env.CXX ?? 'g++';
const hasCompiler = spawnSync(compiler, ['--version']).status === 0;

/** The `skip` option of a test that runs a check program: false with a compiler, else why it skips. */
export const needsCompiler = { skip: hasCompiler ? false : `needs a C++ compiler (${compiler}), which node-gyp needs too` };

/** Options of {@link nativeCheck}. */
interface NativeCheckOptions {
  /** Further sources, paths under packages/cuda-stream-pool/src/. */
  sources?: string[];
  /** @defaultValue '-O0' */
  level?: '-O0' | '-O1' | '-O2';
  /** The main source, a path from the repository root. @defaultValue `test/native/<name>.cc` */
  source?: string;
  /** Build a shared library (-shared -fPIC) named `<name>` rather than a program. @defaultValue false */
  shared?: boolean;
}

/** Builds `test/native/<name>.cc` (see {@link NativeCheckOptions}) once before the file's tests, with -Wall -Werror
 * and -pthread, and removes it after them; returns the output's path, to be read inside a test. Without a compiler
 * nothing is built (the tests skip through {@link needsCompiler}). */
export function nativeCheck(name: string, options: NativeCheckOptions = {}): () => string {
  let scratch = '';
  let program = '';
  before(() => {
    if (!hasCompiler) return;
    scratch = mkdtempSync(path.join(os.tmpdir(), `csp-${name}-`));
    program = path.join(scratch, name);
    const native = path.join(repositoryRoot, 'packages', 'cuda-stream-pool', 'src');
    const main = path.join(repositoryRoot, options.source ?? path.join('test', 'native', `${name}.cc`));
    const sources = [main, ...(options.sources ?? []).map((s) => path.join(native, s))];
    const kind = options.shared ? ['-shared', '-fPIC'] : [];
    const build = spawnSync(compiler, ['-std=c++17', options.level ?? '-O0', '-Wall', '-Werror', '-pthread', ...kind, '-I', native, ...sources, '-o', program], { encoding: 'utf8' });
    assert.equal(build.status, 0, build.stderr);
  });
  after(() => scratch && rmSync(scratch, { recursive: true, force: true }));
  return () => program;
}
