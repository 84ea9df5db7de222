// Program.compile (NVRTC at run time) and Module.load: outputs kept for caching, compile errors with line numbers,
// the options NVRTC gets, and what happens without NVRTC or a driver (in child processes, so it runs everywhere).
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';

import { CompileError, CudaError, DeviceBuffer, Module, Program, Stream, type Kernel } from 'cuda-stream-pool';
import { compilerOptions } from '#library/kernel/program.js';
import { runChild } from '../../support/child.js';
import { gpuNotSimulated, repositoryRoot } from '../../support/gpu.js';
import { libraryDist } from '../../support/paths.js';

// ---------------------------------------------------------------------------------------------------------------
// Everywhere: argument checks, option selection, no NVRTC, no driver.

test('Program.compile() rejects a source that is not a string with ERR_INVALID_ARG_TYPE', async () => {
  await assert.rejects(Program.compile(42 as unknown as string), {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_TYPE',
    message: '"source" must be CUDA C++ source text (a string); received 42 (number).',
  });
  await assert.rejects(Program.compile('a\0b'), { code: 'ERR_INVALID_ARG_VALUE', message: /^"source" must not contain NUL characters/ });
});

test('Program.compile() rejects an unknown option and suggests the near miss', async () => {
  await assert.rejects(Program.compile('', { option: ['-G'] } as never), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: '"options.option" is not a Program.compile option; did you mean "options"?',
  });
});

test('Program.compile() rejects NVRTC options that are not non-empty strings, naming their position', async () => {
  await assert.rejects(Program.compile('', { options: ['-std=c++17', 3 as unknown as string] }), {
    code: 'ERR_INVALID_ARG_TYPE',
    message: /^"options.options\[1\]" must be an NVRTC option string such as "-std=c\+\+17"; received 3 \(number\)/,
  });
  await assert.rejects(Program.compile('', { options: '-G' as unknown as string[] }), { code: 'ERR_INVALID_ARG_TYPE', message: /^"options.options" must be an array/ });
  await assert.rejects(Program.compile('', { name: '' }), { code: 'ERR_INVALID_ARG_VALUE', message: /^"options.name" must not be empty/ });
  await assert.rejects(Program.compile('', { device: '0' as unknown as number }), { code: 'ERR_INVALID_ARG_TYPE', message: /^"options.device"/ });
});

test('without an architecture option, the program is compiled for the device\'s own sm_XY to a CUBIN', () => {
  assert.deepEqual(compilerOptions([], { major: 9, minor: 0 }, [75, 80, 86, 89, 90, 100]), { options: ['--gpu-architecture=sm_90'], output: 'cubin' });
  assert.deepEqual(compilerOptions(['-std=c++17', '-DN=4'], { major: 8, minor: 6 }, []), {
    options: ['-std=c++17', '-DN=4', '--gpu-architecture=sm_86'],
    output: 'cubin',
  });
});

test('the caller\'s own architecture option is respected: compute_XY gives PTX, sm_XY a CUBIN', () => {
  assert.deepEqual(compilerOptions(['-arch=compute_80'], { major: 9, minor: 0 }, [90]), { options: ['-arch=compute_80'], output: 'ptx' });
  assert.deepEqual(compilerOptions(['--gpu-architecture=compute_90'], { major: 9, minor: 0 }, []), { options: ['--gpu-architecture=compute_90'], output: 'ptx' });
  assert.deepEqual(compilerOptions(['--gpu-architecture', 'sm_80'], { major: 9, minor: 0 }, []), { options: ['--gpu-architecture', 'sm_80'], output: 'cubin' });
  assert.deepEqual(compilerOptions(['-arch=sm_90a'], { major: 9, minor: 0 }, []), { options: ['-arch=sm_90a'], output: 'cubin' });
});

test('a device newer than every architecture NVRTC knows gets PTX for NVRTC\'s newest, for the driver to finish', () => {
  assert.deepEqual(compilerOptions([], { major: 12, minor: 0 }, [75, 80, 90]), { options: ['--gpu-architecture=compute_90'], output: 'ptx' });
});

test('without NVRTC, Program.compile() rejects with CudaUnavailableError naming the library and where it looked', async () => {
  const result = await runChild(
    `
    import { Program, CudaUnavailableError } from 'cuda-stream-pool';
    try { await Program.compile('extern "C" __global__ void k() {}'); console.log('compiled'); }
    catch (e) { console.log(JSON.stringify({ unavailable: e instanceof CudaUnavailableError, message: e.message })); }
    `,
    { CUDA_STREAM_POOL_LIBNVRTC: '/nonexistent/libnvrtc.so.13' },
  );
  assert.equal(result.code, 0, result.stderr);
  const out = JSON.parse(result.stdout);
  assert.equal(out.unavailable, true, out.message);
  assert.match(out.message, /NVRTC \(the CUDA runtime compiler, needed by Program\.compile\) could not be opened/);
  assert.match(out.message, /looked for \/nonexistent\/libnvrtc\.so\.13 \(from CUDA_STREAM_POOL_LIBNVRTC\)/);
  assert.match(out.message, /Module\.load/);
});

test('NVRTC is looked for on the loader path and under CUDA_PATH, CUDA_HOME and /usr/local/cuda', async () => {
  const result = await runChild(
    `
    import { nvrtcInfo } from '#library/kernel/program.js';
    console.log(JSON.stringify(await nvrtcInfo()));
    `,
    { CUDA_PATH: '/nonexistent/csp-cuda-path', CUDA_HOME: '/nonexistent/csp-cuda-home' },
  );
  assert.equal(result.code, 0, result.stderr);
  const info = JSON.parse(result.stdout);
  if (info.available) {
    // Found (on the loader path or under /usr/local/cuda): it is a real NVRTC of CUDA 12 or newer.
    assert.match(info.path, /libnvrtc\.so/);
    assert.ok(info.major >= 12, `NVRTC ${info.major}.${info.minor}`);
  } else {
    for (const place of [
      'libnvrtc.so.13, libnvrtc.so.12 and libnvrtc.so',
      "the dynamic loader's search path",
      '/nonexistent/csp-cuda-path/lib64/ (from $CUDA_PATH)',
      '/nonexistent/csp-cuda-home/lib64/ (from $CUDA_HOME)',
      '/usr/local/cuda/lib64/',
      'CUDA_STREAM_POOL_LIBNVRTC',
    ])
      assert.ok(info.reason.includes(place), `the reason should name ${place}: ${info.reason}`);
  }
});

test('with neither the driver nor NVRTC, Program.compile() names the driver first, then NVRTC', async () => {
  const result = await runChild(
    `
    import { Program } from 'cuda-stream-pool';
    try { await Program.compile('extern "C" __global__ void k() {}'); console.log('compiled'); }
    catch (e) { console.log(JSON.stringify({ name: e.name, code: e.code, message: e.message })); }
    `,
    { CUDA_STREAM_POOL_LIBCUDA: '/nonexistent/libcuda.so.1', CUDA_STREAM_POOL_LIBNVRTC: '/nonexistent/libnvrtc.so.13' },
  );
  assert.equal(result.code, 0, result.stderr);
  const out = JSON.parse(result.stdout);
  assert.equal(out.name, 'CudaUnavailableError');
  assert.equal(out.code, 'ERR_CUDA_UNAVAILABLE');
  assert.match(out.message, /^CUDA is not available: tried to open the CUDA driver library \/nonexistent\/libcuda\.so\.1/);
  const driverAt = out.message.indexOf('libcuda');
  const nvrtcAt = out.message.indexOf('/nonexistent/libnvrtc.so.13');
  assert.ok(driverAt >= 0 && nvrtcAt > driverAt, out.message);
});

test('without a driver, Program.compile() and Module.load() reject with CudaUnavailableError', async () => {
  const result = await runChild(
    `
    import { Module, Program, CudaUnavailableError } from 'cuda-stream-pool';
    const out = [];
    for (const call of [() => Program.compile('extern "C" __global__ void k() {}'), () => Module.load('.version 8.0')]) {
      try { await call(); out.push('no error'); } catch (e) { out.push(e instanceof CudaUnavailableError ? 'unavailable' : 'wrong: ' + e); }
    }
    console.log(JSON.stringify(out));
    `,
    { CUDA_STREAM_POOL_LIBCUDA: '/nonexistent/libcuda.so.1' },
  );
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout), ['unavailable', 'unavailable']);
});

test('Module.load() rejects an image that is neither a string nor a Uint8Array, or is empty', async () => {
  await assert.rejects(Module.load(42 as unknown as string), { code: 'ERR_INVALID_ARG_TYPE', message: /^"image" must be a string \(PTX\) or a Uint8Array/ });
  await assert.rejects(Module.load(''), { code: 'ERR_INVALID_ARG_VALUE' });
  await assert.rejects(Module.load(new Uint8Array(0)), { code: 'ERR_INVALID_ARG_VALUE' });
  await assert.rejects(Module.load('x', { devise: 0 } as never), { code: 'ERR_INVALID_ARG_VALUE', message: /did you mean "device"\?/ });
});

test('Module.load() refuses a truncated CUBIN or fatbin before the driver could read past its end', async () => {
  const elf = new Uint8Array(64);
  elf.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]);
  const view = new DataView(elf.buffer);
  view.setBigUint64(0x28, 4096n, true); // section table at byte 4096 ...
  view.setUint16(0x3a, 64, true);
  view.setUint16(0x3c, 3, true); // ... of 3 entries: far past the 64 bytes there are
  await assert.rejects(Module.load(elf), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: /^"image" is a truncated CUBIN: its ELF tables end at byte 4288, but the image has 64 bytes\./,
  });
  await assert.rejects(Module.load(elf.subarray(0, 8)), { code: 'ERR_INVALID_ARG_VALUE', message: /not a 64-bit little-endian ELF image/ });
  const fatbin = new Uint8Array(16);
  fatbin.set([0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0]);
  new DataView(fatbin.buffer).setBigUint64(8, 1000n, true);
  await assert.rejects(Module.load(fatbin), { code: 'ERR_INVALID_ARG_VALUE', message: /truncated fatbin: its header says 1016 bytes, but the image has 16/ });
});

// ---------------------------------------------------------------------------------------------------------------
// On the GPU, with NVRTC.

const WRITE_VALUE = 'extern "C" __global__ void write_value(unsigned int* out) { out[threadIdx.x] = VALUE; }';

/** Launches write_value on 8 threads and returns what they wrote. */
async function run(kernel: Kernel): Promise<number[]> {
  using stream = Stream.create();
  using out = DeviceBuffer.alloc(32, { stream });
  kernel.launch({ grid: 1, block: 8, stream }, out);
  const values = new Uint32Array(8);
  stream.copy(values, out, { byteLength: 32 });
  await stream.synchronize();
  return [...values];
}

test('compiles for the device to a CUBIN that Module.load() loads again without NVRTC', gpuNotSimulated('nvrtc'), async () => {
  using module = await Program.compile(WRITE_VALUE, { options: ['-DVALUE=42'] });
  assert.ok(module.cubin instanceof Uint8Array);
  assert.deepEqual([...module.cubin.subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46], 'a CUBIN is an ELF image');
  assert.deepEqual(await run(module.getFunction('write_value', ['ptr'])), Array(8).fill(42));
  using again = await Module.load(module.cubin);
  assert.deepEqual(again.cubin, module.cubin);
  assert.equal(again.ptx, undefined);
  assert.deepEqual(await run(again.getFunction('write_value', ['ptr'])), Array(8).fill(42));
});

test('an explicit compute_XY architecture gives PTX and no CUBIN, and the driver compiles it', gpuNotSimulated('nvrtc'), async () => {
  using module = await Program.compile(WRITE_VALUE, { options: ['-DVALUE=7', '--gpu-architecture=compute_80'] });
  assert.equal(module.cubin, undefined);
  assert.match(module.ptx ?? '', /\.target\s+sm_80/);
  assert.match(module.ptx ?? '', /\.entry\s+write_value/);
  assert.deepEqual(await run(module.getFunction('write_value', ['ptr'])), Array(8).fill(7));
  using again = await Module.load(new TextEncoder().encode(module.ptx!));
  assert.equal(again.ptx, module.ptx);
  assert.deepEqual(await run(again.getFunction('write_value', ['ptr'])), Array(8).fill(7));
});

test('a mistake on line 7 rejects with CompileError whose log names that line', gpuNotSimulated('nvrtc'), async () => {
  const lines = [
    '// line 1',
    'extern "C" __global__ void broken(float* out) {', // line 2
    '  unsigned int i = threadIdx.x;', // line 3
    '  float a = 1.0f;', // line 4
    '  float b = 2.0f;', // line 5
    '  out[i] = a + b;', // line 6
    '  out[i] += undeclared_value;', // line 7: the mistake
    '}', // line 8
  ];
  for (const name of [undefined, 'saxpy-broken.cu']) {
    await assert.rejects(Program.compile(lines.join('\n'), name ? { name } : {}), (e: unknown) => {
      assert.ok(e instanceof CompileError, String(e));
      const shown = name ?? 'program.cu';
      assert.match(e.log, new RegExp(`^${shown.replace('.', '\\.')}\\(7\\): error: .*undeclared_value`, 'm'));
      assert.ok(!/\(\d+\): error/.test(e.log.replace(/\(7\): error/g, '')), `only line 7 should be in error:\n${e.log}`);
      assert.ok(e.message.startsWith(`NVRTC could not compile ${shown}:\n`), e.message);
      assert.ok(e.message.includes(e.log));
      return true;
    });
  }
});

test('an option NVRTC does not know rejects with CompileError', gpuNotSimulated('nvrtc'), async () => {
  await assert.rejects(Program.compile(WRITE_VALUE, { options: ['-DVALUE=1', '--no-such-nvrtc-option'] }), (e: unknown) => {
    assert.ok(e instanceof CompileError, String(e));
    assert.match(e.log, /no-such-nvrtc-option|NVRTC_ERROR_INVALID_OPTION/);
    return true;
  });
});

test('kernels are found by their extern "C" names; an unknown name lists the module\'s kernels', gpuNotSimulated('nvrtc'), async () => {
  using module = await Program.compile(`${WRITE_VALUE}\nextern "C" __global__ void other() {}`, { options: ['-DVALUE=1'] });
  assert.equal(module.getFunction('other', []).name, 'other');
  assert.throws(() => module.getFunction('writeValue', ['ptr']), (e: unknown) => {
    assert.ok(e instanceof CudaError, String(e));
    assert.equal(e.code, 'CUDA_ERROR_NOT_FOUND');
    assert.equal(e.call, 'cuModuleGetFunction');
    assert.match(e.message, /kernel "writeValue"/);
    assert.match(e.message, /"write_value"/);
    assert.match(e.message, /"other"/);
    return true;
  });
});

test('Module.load() reads PTX given as bytes, and rejects an image the driver cannot use with CudaError', gpuNotSimulated('ptxJit'), async () => {
  const bytes = readFileSync(path.join(repositoryRoot, 'test', 'kernels', 'test-kernels.ptx'));
  using module = await Module.load(bytes);
  assert.equal(module.cubin, undefined);
  assert.match(module.ptx ?? '', /\.entry\s+fill_u32/);
  module.getFunction('fill_u32', ['ptr', 'u32', 'u32']);
  await assert.rejects(Module.load('.version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k() { not_an_instruction; }'), (e: unknown) => {
    assert.ok(e instanceof CudaError, String(e));
    assert.equal(e.call, 'cuModuleLoadDataEx');
    assert.match(e.message, /JIT log: \S/);
    assert.equal(e.sticky, false);
    return true;
  });
});

/** The kernels a PTX file declares, with their parameter types: { name: ['.u64', '.u32', ...] }. */
function entries(ptx: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [, name, params] of ptx.matchAll(/\.entry\s+(\w+)\s*\(([^)]*)\)/g)) out[name!] = [...params!.matchAll(/\.param\s+(\.\w+)/g)].map((m) => m[1]!);
  return out;
}

test('every committed PTX file declares the same kernels and parameters as its .cu source compiled by NVRTC', gpuNotSimulated('nvrtc'), async () => {
  const pairs = [path.join(repositoryRoot, 'test', 'kernels'), path.join(repositoryRoot, 'packages', 'cuda-stream-pool-bench', 'kernels')]
    .filter((dir) => existsSync(dir))
    .flatMap((dir) => readdirSync(dir).filter((f) => f.endsWith('.cu')).map((f) => path.join(dir, f)))
    .filter((cu) => existsSync(cu.replace(/\.cu$/, '.ptx')));
  assert.ok(pairs.length >= 1, 'test/kernels/test-kernels.cu and its PTX should be there');
  for (const cu of pairs) {
    const committed = entries(readFileSync(cu.replace(/\.cu$/, '.ptx'), 'utf8'));
    using module = await Program.compile(readFileSync(cu, 'utf8'), { name: path.basename(cu), options: ['--gpu-architecture=compute_80'] });
    assert.ok(Object.keys(committed).length > 0, `${cu}: no kernels in the committed PTX`);
    assert.deepEqual(entries(module.ptx!), committed, `${path.relative(repositoryRoot, cu)} changed without regenerating its PTX (see the command at its top)`);
  }
});

test('compiles in flight at the same time each give their own module', gpuNotSimulated('nvrtc'), async () => {
  const modules = await Promise.all([1, 2, 3, 4].map((value) => Program.compile(WRITE_VALUE, { name: `value-${value}.cu`, options: [`-DVALUE=${value}`] })));
  try {
    for (const [i, module] of modules.entries()) assert.deepEqual(await run(module.getFunction('write_value', ['ptr'])), Array(8).fill(i + 1));
  } finally {
    for (const module of modules) module.unload();
  }
});

test('a worker terminated while its compile runs leaves the process working', gpuNotSimulated('nvrtc'), async () => {
  const index = pathToFileURL(path.join(libraryDist, 'index.js')).href;
  const result = await runChild(`
    import { Worker } from 'node:worker_threads';
    import { Program } from 'cuda-stream-pool';
    const source = ${JSON.stringify(WRITE_VALUE)};
    // Dynamic imports only: an eval worker is CommonJS or ESM depending on the parent's --input-type.
    const worker = new Worker(\`
      Promise.all([import('node:worker_threads'), import(${JSON.stringify(index)})]).then(([{ parentPort }, { Program }]) => {
        Program.compile(\${JSON.stringify(source)}, { options: ['-DVALUE=1'] }).catch(() => {});
        parentPort.postMessage('compiling');
      });
    \`, { eval: true });
    await new Promise((resolve) => worker.once('message', resolve));
    await worker.terminate();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const module = await Program.compile(source, { options: ['-DVALUE=2'] });
    console.log(module.getFunction('write_value', ['ptr']).name);
    module.unload();
  `);
  assert.equal(result.signal, null, result.stderr);
  assert.equal(result.code, 0, result.stderr);
  assert.equal(result.stdout.trim(), 'write_value');
});
