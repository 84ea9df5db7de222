// Without a driver (CUDA_STREAM_POOL_LIBCUDA pointing at a missing file), or without a loadable native addon, the
// package imports, reports why, and every GPU call throws CudaUnavailableError. Runs everywhere, in child processes.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';

import { runChild } from '../support/child.js';
import { NO_DRIVER_SKIP } from '../support/skips.js';
import { benchRoot, libraryDist, libraryRoot } from '../support/paths.js';

test('without a driver, importing works, Device.count() is 0 and GPU calls throw CudaUnavailableError', async () => {
  const result = await runChild(
    `
    import { cuda, Device, Stream, Event, CudaUnavailableError } from 'cuda-stream-pool';
    const out = { available: cuda.available, reason: cuda.unavailableReason, version: cuda.driverVersion,
                  versionString: cuda.driverVersionString, codes: [],
                  count: Device.count(), live: cuda.liveObjects(), errors: [] };
    for (const call of [() => Device.get(0), () => Stream.create(), () => Event.create(), () => Stream.perThread()]) {
      try { call(); out.errors.push('no error'); }
      catch (e) { out.errors.push(e instanceof CudaUnavailableError ? e.name + ': ' + e.message : 'wrong: ' + e); out.codes.push(e.code); }
    }
    console.log(JSON.stringify(out));
  `,
    { CUDA_STREAM_POOL_LIBCUDA: '/nonexistent/libcuda.so.1' },
  );
  assert.equal(result.code, 0, result.stderr);
  const out = JSON.parse(result.stdout);
  assert.equal(out.available, false);
  assert.match(out.reason, /\/nonexistent\/libcuda\.so\.1 \(from CUDA_STREAM_POOL_LIBCUDA\)/);
  // The variable named a file that does not load: the advice is to fix or unset it, not to set it.
  assert.match(out.reason, /No such file or directory\. Set CUDA_STREAM_POOL_LIBCUDA to the path of a CUDA driver library \(libcuda\.so\.1, CUDA 12\.0 or newer\), or unset it/);
  assert.doesNotMatch(out.reason, /Install the NVIDIA driver/);
  assert.equal(out.version, undefined);
  assert.equal(out.versionString, undefined);
  assert.deepEqual(out.codes, ['ERR_CUDA_UNAVAILABLE', 'ERR_CUDA_UNAVAILABLE', 'ERR_CUDA_UNAVAILABLE', 'ERR_CUDA_UNAVAILABLE']);
  assert.equal(out.count, 0);
  assert.deepEqual(out.live, { streams: 0, events: 0, modules: 0, deviceBytes: 0, leakedDeviceBytes: 0, pinnedBytes: 0, managedBytes: 0, registeredBytes: 0, graphs: 0, graphExecs: 0, contexts: [] });
  assert.equal(out.errors.length, 4);
  for (const line of out.errors) assert.match(line, /^CudaUnavailableError: CUDA is not available: tried to open/);
});

/** cuda.available and cuda.unavailableReason in a child process with `libcuda` as CUDA_STREAM_POOL_LIBCUDA. */
async function driverState(libcuda: string): Promise<{ available: boolean; reason: string }> {
  const result = await runChild(
    `import { cuda } from 'cuda-stream-pool';
     console.log(JSON.stringify({ available: cuda.available, reason: cuda.unavailableReason }));`,
    { CUDA_STREAM_POOL_LIBCUDA: libcuda },
  );
  assert.equal(result.code, 0, result.stderr);
  return JSON.parse(result.stdout);
}

test('a CUDA_STREAM_POOL_LIBCUDA that loads but is no CUDA driver library is named, with the advice to fix or unset it', async () => {
  const out = await driverState('libc.so.6');
  assert.equal(out.available, false);
  assert.equal(
    out.reason,
    'opened libc.so.6 (from CUDA_STREAM_POOL_LIBCUDA) but it has no working cuDriverGetVersion; it is not a CUDA driver library. ' +
      'Set CUDA_STREAM_POOL_LIBCUDA to the path of a CUDA driver library (libcuda.so.1, CUDA 12.0 or newer), or unset it to use the installed NVIDIA driver.',
  );
});

test('a CUDA_STREAM_POOL_LIBCUDA without a \'/\' naming a file of the current folder is told to give its path; a bare name found nowhere is not', async () => {
  // The child runs in the repository's root, where package.json is.
  const there = await driverState('package.json');
  assert.equal(there.available, false);
  assert.match(there.reason, /package\.json \(from CUDA_STREAM_POOL_LIBCUDA\).*or unset it to use the installed NVIDIA driver\. A name without a '\/' is looked up in the system's library folders, not in the current folder, where package\.json is: give its path, such as \.\/package\.json\.$/);
  const nowhere = await driverState('libcuda-nowhere.so.1');
  assert.equal(nowhere.available, false);
  assert.match(nowhere.reason, /libcuda-nowhere\.so\.1 \(from CUDA_STREAM_POOL_LIBCUDA\).*or unset it to use the installed NVIDIA driver\.$/);
});

test('without CUDA_STREAM_POOL_LIBCUDA and without an installed driver, the reason says to install one or to set the variable', async (t) => {
  const out = await driverState(''); // empty: as if unset
  if (out.available || !/tried to open the CUDA driver library libcuda\.so\.1,/.test(out.reason)) {
    t.skip(NO_DRIVER_SKIP);
    return;
  }
  assert.match(out.reason, /\. Install the NVIDIA driver \(CUDA 12\.0 or newer\), run on a machine with an NVIDIA GPU, or set CUDA_STREAM_POOL_LIBCUDA to the path of libcuda\.so\.1\.$/);
  assert.doesNotMatch(out.reason, /from CUDA_STREAM_POOL_LIBCUDA/);
});

/** The node_modules folder that holds the packages' dependencies: the repository's, or the one the package was
 * installed into when the suite runs against an installed copy. */
let dependencies = createRequire(realpathSync(path.join(libraryDist, 'index.js'))).resolve('node-gyp-build');
while (path.basename(dependencies) !== 'node_modules') dependencies = path.dirname(dependencies);

/** A node_modules folder with copies of the two packages (package.json and dist; the benchmark's kernels too) and
 * every other dependency linked, where the library has no native addon. `broken`: a file that is not a shared
 * library stands where the library's local build would be. Returns the library's folder and the command's file. */
function packageWithoutAddon(t: { after(fn: () => void): void }, broken = false): { library: string; cli: string } {
  const root = mkdtempSync(path.join(os.tmpdir(), 'csp-no-addon-'));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const modules = path.join(root, 'node_modules');
  mkdirSync(modules);
  for (const name of readdirSync(dependencies))
    if (!name.startsWith('cuda-stream-pool') && !name.startsWith('.')) symlinkSync(path.join(dependencies, name), path.join(modules, name));
  const library = path.join(modules, 'cuda-stream-pool');
  const bench = path.join(modules, 'cuda-stream-pool-bench');
  for (const [from, to, parts] of [[libraryRoot, library, ['package.json', 'dist']], [benchRoot, bench, ['package.json', 'dist', 'kernels']]] as const)
    for (const part of parts) cpSync(path.join(from, part), path.join(to, part), { recursive: true, dereference: true });
  if (broken) {
    mkdirSync(path.join(library, 'build', 'Release'), { recursive: true });
    writeFileSync(path.join(library, 'build', 'Release', 'cuda_stream_pool.node'), 'not a shared library');
  }
  return { library, cli: path.join(bench, 'dist', 'cli', 'main.js') };
}

for (const broken of [false, true]) {
  const what = broken ? 'with a broken native addon' : 'without its native addon';
  test(`${what}, importing works and every GPU call throws CudaUnavailableError saying what to do`, async (t) => {
    const { library } = packageWithoutAddon(t, broken);
    const result = await runChild(`
      const { cuda, Device, Stream, StreamPool, PinnedBuffer, CudaUnavailableError } =
        await import(${JSON.stringify(pathToFileURL(path.join(library, 'dist', 'index.js')).href)});
      const out = { available: cuda.available, reason: cuda.unavailableReason, version: cuda.driverVersion,
                    count: Device.count(), live: cuda.liveObjects(), errors: [] };
      for (const call of [() => Device.get(0), () => Stream.create(), () => new StreamPool({ size: 2 }),
                          () => PinnedBuffer.alloc(16)]) {
        try { call(); out.errors.push('no error'); }
        catch (e) { out.errors.push(e instanceof CudaUnavailableError ? e.message : 'wrong: ' + e); }
      }
      console.log(JSON.stringify(out));
    `);
    assert.equal(result.code, 0, result.stderr);
    const out = JSON.parse(result.stdout);
    assert.equal(out.available, false);
    if (broken) {
      assert.match(out.reason, /build\/Release\/cuda_stream_pool\.node failed to load: .*(invalid ELF header|file too short)/);
      assert.match(out.reason, /npm rebuild cuda-stream-pool --build-from-source/);
    } else {
      assert.match(out.reason, /native addon of cuda-stream-pool is missing/);
      assert.match(out.reason, new RegExp(`prebuilt binary for ${process.platform}-${process.arch}`));
      assert.match(out.reason, /npm rebuild cuda-stream-pool/);
    }
    assert.equal(out.version, undefined);
    assert.equal(out.count, 0);
    assert.deepEqual(out.live, { streams: 0, events: 0, modules: 0, deviceBytes: 0, leakedDeviceBytes: 0, pinnedBytes: 0, managedBytes: 0, registeredBytes: 0, graphs: 0, graphExecs: 0, contexts: [] });
    assert.deepEqual(out.errors, Array(4).fill(`CUDA is not available: ${out.reason}`));
  });

  test(`${what}, the CLI prints its version, and bench exits 2 with the reason`, (t) => {
    const { cli: main } = packageWithoutAddon(t, broken);
    const version = spawnSync(process.execPath, [main, '--version'], { encoding: 'utf8' });
    assert.equal(version.status, 0, version.stderr);
    assert.match(version.stdout, /^\d+\.\d+\.\d+/);
    const bench = spawnSync(process.execPath, [main, 'bench', '--runs', '1'], { encoding: 'utf8' });
    assert.equal(bench.status, 2, bench.stderr);
    assert.match(bench.stderr, /bench needs a CUDA GPU and cannot run here: the native addon of cuda-stream-pool/);
    assert.match(bench.stderr, /npm rebuild cuda-stream-pool/);
    assert.doesNotMatch(bench.stderr, /\n\s+at /, 'no stack trace');
  });
}
