// The layout says where a concept lives: in the library, a native source sits in the concept folder of the TypeScript
// file with its stem (stream/stream.cc beside stream/stream.ts), or in internal/ when no TypeScript file owns it; and
// the addon builds every native source there is. Plain file reading, no GPU.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { libraryRoot, repositoryRoot } from '../support/paths.js';

const source = path.join(libraryRoot, 'src');
const sources: { skip: string | false } = {
  skip: existsSync(path.join(repositoryRoot, 'scripts', 'simulated-driver.cc')) ? false : 'needs the repository\'s sources (this run tests an installed copy)',
};

/** Every file under the library's src/, as paths relative to it. */
function libraryFiles(): string[] {
  return readdirSync(source, { recursive: true, encoding: 'utf8' }).sort();
}

test('every native source of the library has a TypeScript file of its stem in its concept folder, or is internal', sources, () => {
  const files = new Set(libraryFiles());
  const native = [...files].filter((file) => /\.(cc|h)$/.test(file));
  assert.ok(native.length > 20, `found only ${native.length} native files`);
  const strays = native.filter((file) => {
    const [folder] = file.split(path.sep);
    if (folder === 'internal') return false;
    return !files.has(file.replace(/\.(cc|h)$/, '.ts'));
  });
  assert.deepEqual(strays, [], 'each of these needs a TypeScript file of its stem beside it, or belongs in internal/');
});

test('the library\'s files sit in its concept folders, and names use hyphens', sources, () => {
  const folders = ['binding', 'device', 'stream', 'memory', 'kernel', 'graph', 'pool', 'internal'];
  const misplaced = libraryFiles().filter((file) => {
    const parts = file.split(path.sep);
    if (parts.length === 1) return file !== 'index.ts' && !existsSync(path.join(source, file, '.'));
    return !folders.includes(parts[0]!) || parts.length > 2;
  });
  assert.deepEqual(misplaced.filter((file) => !folders.includes(file)), []);
  assert.deepEqual(libraryFiles().filter((file) => path.basename(file).includes('_')), [], 'file names use hyphens');
});

test('the addon builds every native source of the library, and nothing else', sources, () => {
  const gyp = JSON.parse(readFileSync(path.join(libraryRoot, 'binding.gyp'), 'utf8')) as { targets: Array<{ sources: string[] }> };
  assert.equal(gyp.targets.length, 1, 'the library package builds one addon');
  const built = gyp.targets[0]!.sources.map((file) => path.relative('src', file)).sort();
  const present = libraryFiles().filter((file) => file.endsWith('.cc'));
  assert.deepEqual(built, present);
});
