// The compile cache of Program.compile: keys, the on-disk entry format (corrupt entries ignored and rewritten), and on
// the GPU, hits in memory and on disk, and compiles that are never cached.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { cuda, Device, DeviceBuffer, Program, Stream } from 'cuda-stream-pool';
import {
  clearMemoryCache,
  compileKey,
  decodeEntry,
  encodeEntry,
  lookupCompiled,
  namesIncludes,
  storeCompiled,
  type CompileKey,
} from '#library/kernel/compile-cache.js';
import { nvrtcInfo } from '#library/kernel/program.js';
import { gpuNotSimulated } from '../../support/gpu.js';

function scratchDirectory(t: { after: (fn: () => void) => void }): string {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'csp-compile-cache-'));
  t.after(() => rmSync(directory, { recursive: true, force: true }));
  return directory;
}

const BASE_KEY: CompileKey = {
  source: 'extern "C" __global__ void k() {}',
  name: 'program.cu',
  options: ['-std=c++17'],
  computeCapability: { major: 9, minor: 0 },
  nvrtcVersion: '13.0',
  driverVersion: 13000,
};

// ---------------------------------------------------------------------------------------------------------------
// Everywhere: keys and entries.

test('the key changes with each of source, name, options, architecture, NVRTC and driver version', () => {
  const base = compileKey(BASE_KEY);
  assert.match(base, /^[0-9a-f]{64}$/);
  assert.equal(compileKey({ ...BASE_KEY, options: ['-std=c++17'] }), base, 'equal inputs give the same key');
  const variants: Partial<CompileKey>[] = [
    { source: `${BASE_KEY.source} ` },
    { name: 'other.cu' },
    { options: ['-std=c++20'] },
    { options: [] },
    { computeCapability: { major: 8, minor: 0 } },
    { computeCapability: { major: 9, minor: 1 } },
    { nvrtcVersion: '12.8' },
    { driverVersion: 12080 },
  ];
  const keys = variants.map((v) => compileKey({ ...BASE_KEY, ...v }));
  for (const [i, key] of keys.entries()) assert.notEqual(key, base, `variant ${JSON.stringify(variants[i])}`);
  assert.equal(new Set(keys).size, keys.length);
});

test('options that name include paths or files make a compile uncacheable; others do not', () => {
  for (const options of [['-I/usr/include'], ['-I', '/x'], ['--include-path=/x'], ['-include', 'a.h'], ['-include=a.h'], ['--pre-include=a.h']])
    assert.equal(namesIncludes(options), true, options.join(' '));
  for (const options of [[], ['-std=c++17', '-DN=4'], ['--gpu-architecture=sm_90'], ['-lineinfo', '--use_fast_math']])
    assert.equal(namesIncludes(options), false, options.join(' '));
});

test('an entry decodes to the image it encodes, CUBIN bytes or PTX text', () => {
  const cubin = Uint8Array.from({ length: 300 }, (_, i) => (i * 7) & 0xff);
  assert.deepEqual(decodeEntry(encodeEntry({ cubin }))?.cubin, cubin);
  assert.equal(decodeEntry(encodeEntry({ ptx: '.version 8.0\n// é' }))?.ptx, '.version 8.0\n// é');
});

test('a truncated, altered, empty or foreign entry decodes to nothing', () => {
  const entry = encodeEntry({ cubin: Uint8Array.from({ length: 64 }, (_, i) => i) });
  assert.equal(decodeEntry(entry.subarray(0, entry.byteLength - 1)), undefined, 'truncated');
  const altered = Buffer.from(entry);
  altered[altered.byteLength - 1]! ^= 1;
  assert.equal(decodeEntry(altered), undefined, 'one payload bit flipped');
  const longer = Buffer.concat([entry, Buffer.from([0])]);
  assert.equal(decodeEntry(longer), undefined, 'trailing byte');
  assert.equal(decodeEntry(new Uint8Array(0)), undefined, 'empty');
  assert.equal(decodeEntry(Buffer.from('\x7fELF this is not an entry, but long enough to hold a header of 48 bytes')), undefined, 'foreign');
});

test('stored entries are found in memory and, from a directory, by a lookup that starts empty', async (t) => {
  const directory = scratchDirectory(t);
  const key = compileKey({ ...BASE_KEY, source: `// ${directory}` });
  clearMemoryCache();
  assert.equal(await lookupCompiled(key, directory), undefined);
  await storeCompiled(key, { ptx: 'ptx text' }, directory);
  assert.deepEqual(readdirSync(directory), [`${key}.cubin-cache`], 'one file per entry, no temporary left');
  assert.equal((await lookupCompiled(key, undefined))?.ptx, 'ptx text', 'memory hit');
  clearMemoryCache();
  assert.equal(await lookupCompiled(key, undefined), undefined, 'memory cleared');
  assert.equal((await lookupCompiled(key, directory))?.ptx, 'ptx text', 'disk hit');
});

test('a corrupt entry on disk is ignored, and storing again rewrites it', async (t) => {
  const directory = scratchDirectory(t);
  const key = compileKey({ ...BASE_KEY, source: `// corrupt ${directory}` });
  const file = path.join(directory, `${key}.cubin-cache`);
  clearMemoryCache();
  writeFileSync(file, 'garbage');
  assert.equal(await lookupCompiled(key, directory), undefined);
  const cubin = Uint8Array.from([1, 2, 3, 4]);
  await storeCompiled(key, { cubin }, directory);
  assert.deepEqual(decodeEntry(readFileSync(file))?.cubin, cubin);
});

test('a directory that cannot be written warns once and keeps the entry in memory', async (t) => {
  const directory = scratchDirectory(t);
  const blocked = path.join(directory, 'a-file');
  writeFileSync(blocked, ''); // a file where the cache directory should be
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(w.message);
  process.on('warning', onWarning);
  t.after(() => process.off('warning', onWarning));
  clearMemoryCache();
  const key = compileKey({ ...BASE_KEY, source: '// blocked' });
  await storeCompiled(key, { ptx: 'a' }, blocked);
  await storeCompiled(compileKey({ ...BASE_KEY, source: '// blocked 2' }), { ptx: 'b' }, blocked);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(warnings.filter((w) => w.includes(blocked)).length, 1, warnings.join('\n'));
  assert.equal((await lookupCompiled(key, blocked))?.ptx, 'a');
});

test('Program.compile() rejects bad cache options before compiling', async () => {
  await assert.rejects(Program.compile('', { cache: 'yes' as unknown as boolean }), { code: 'ERR_INVALID_ARG_TYPE', message: /^"options.cache"/ });
  await assert.rejects(Program.compile('', { cacheDirectory: '' }), { code: 'ERR_INVALID_ARG_VALUE', message: /^"options.cacheDirectory" must not be empty/ });
  await assert.rejects(Program.compile('', { cacheDirectory: 3 as unknown as string }), { code: 'ERR_INVALID_ARG_TYPE', message: /^"options.cacheDirectory"/ });
});

// ---------------------------------------------------------------------------------------------------------------
// GPU: real compiles.

const WRITE = (value: number) => `extern "C" __global__ void write_value(unsigned int* out) { out[threadIdx.x] = ${value}u; }`;

async function written(module: Awaited<ReturnType<typeof Program.compile>>): Promise<number[]> {
  using stream = Stream.create();
  using out = DeviceBuffer.alloc(16, { stream });
  module.getFunction('write_value', ['ptr']).launch({ grid: 1, block: 4, stream }, out);
  return [...(await out.toArray(Uint32Array, { stream }))];
}

test('a compile writes one disk entry that a second compile of the same program reuses', gpuNotSimulated('nvrtc'), async (t) => {
  const directory = scratchDirectory(t);
  const source = `${WRITE(11)} // ${directory}`;
  using first = await Program.compile(source, { cacheDirectory: directory });
  assert.deepEqual(await written(first), [11, 11, 11, 11]);
  const files = readdirSync(directory);
  assert.equal(files.length, 1);
  const entry = decodeEntry(readFileSync(path.join(directory, files[0]!)));
  assert.deepEqual(entry?.cubin, first.cubin, 'the entry holds the CUBIN the module was loaded from');
  using second = await Program.compile(source, { cacheDirectory: directory });
  assert.notEqual(second, first, 'each call returns its own module');
  assert.deepEqual(await written(second), [11, 11, 11, 11]);
  assert.deepEqual(readdirSync(directory), files);
});

test('a disk entry under a compile\'s key is loaded instead of compiling, from a fresh memory cache', gpuNotSimulated('nvrtc'), async (t) => {
  const directory = scratchDirectory(t);
  const device = Device.get(0);
  const compiler = await nvrtcInfo();
  assert.ok(compiler.available, 'NVRTC is needed on the GPU machine');
  // The image of a program that writes 22, stored under the key of a program that writes 33: a hit shows 22.
  using other = await Program.compile(WRITE(22), { cache: false });
  const source = `${WRITE(33)} // ${directory}`;
  const key = compileKey({
    source,
    name: 'program.cu',
    options: [],
    computeCapability: device.computeCapability,
    nvrtcVersion: `${compiler.major}.${compiler.minor}`,
    driverVersion: cuda.driverVersion!,
  });
  writeFileSync(path.join(directory, `${key}.cubin-cache`), encodeEntry({ cubin: other.cubin! }));
  clearMemoryCache();
  using hit = await Program.compile(source, { cacheDirectory: directory });
  assert.deepEqual(await written(hit), [22, 22, 22, 22]);
  using bypass = await Program.compile(source, { cacheDirectory: directory, cache: false });
  assert.deepEqual(await written(bypass), [33, 33, 33, 33], 'cache: false compiles');
});

test('a corrupt disk entry is ignored: the program compiles and the entry is rewritten', gpuNotSimulated('nvrtc'), async (t) => {
  const directory = scratchDirectory(t);
  const source = `${WRITE(44)} // ${directory}`;
  (await Program.compile(source, { cacheDirectory: directory })).unload();
  const file = path.join(directory, readdirSync(directory)[0]!);
  const good = readFileSync(file);
  writeFileSync(file, good.subarray(0, good.byteLength >> 1));
  clearMemoryCache();
  using module = await Program.compile(source, { cacheDirectory: directory });
  assert.deepEqual(await written(module), [44, 44, 44, 44]);
  assert.ok(decodeEntry(readFileSync(file)), 'the entry was rewritten whole');
});

test('CUDA_STREAM_POOL_CACHE_DIR names the directory; a compile naming include paths writes nothing', gpuNotSimulated('nvrtc'), async (t) => {
  const directory = scratchDirectory(t);
  const saved = process.env.CUDA_STREAM_POOL_CACHE_DIR;
  process.env.CUDA_STREAM_POOL_CACHE_DIR = directory;
  t.after(() => {
    if (saved === undefined) delete process.env.CUDA_STREAM_POOL_CACHE_DIR;
    else process.env.CUDA_STREAM_POOL_CACHE_DIR = saved;
  });
  (await Program.compile(`${WRITE(55)} // env`)).unload();
  assert.equal(readdirSync(directory).length, 1);
  (await Program.compile(`${WRITE(66)} // include`, { options: [`-I${directory}`] })).unload();
  assert.equal(readdirSync(directory).length, 1, 'the -I compile was not cached');
});
