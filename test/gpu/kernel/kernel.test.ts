// Kernels: launches with checked arguments, grids, shared memory, attributes, launch failures, workers. The argument
// checks run everywhere (they are plain TS over a signature); the rest needs a GPU and NVRTC (Program.compile).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';

import fc from 'fast-check';

import { CudaError, cuda, DestroyedError, DeviceBuffer, Module, Program, Stream, UnsupportedError, withStream, type Device, type Kernel } from 'cuda-stream-pool';
import { ArgumentPacker } from '#library/kernel/argument-packer.js';
import { readDims, readLaunchAttributes } from '#library/kernel/kernel.js';
import { checkParamSizes, validateSignature, type ParamType } from '#library/kernel/signature.js';
import { asKernelPointer } from '#library/kernel/kernel-argument.js';
import { generator } from '#bench/reference.js';
import { gpu, gpuNotSimulated, testKernels } from '../../support/gpu.js';

// ---------------------------------------------------------------------------------------------------------------
// Argument checks without a GPU: the same ArgumentPacker every launch uses.

const fakeStream = {} as Stream;

/** A stand-in for a DeviceBuffer: hands out `ptr` (a bigint, or a number as a buffer that knows its address as one
 * does) and counts how often it was asked (a use on a stream). */
function fakeBuffer(ptr: bigint | number) {
  const buffer = {
    asked: 0,
    [asKernelPointer](_stream: Stream): bigint | number {
      buffer.asked++;
      return ptr;
    },
  };
  return buffer;
}

test('a u32 argument given -1 or 2**32 is a RangeError naming its position and type', () => {
  const packer = new ArgumentPacker(['ptr', 'u32', 'u32'], 'fill_u32');
  for (const bad of [-1, 2 ** 32]) {
    assert.throws(() => packer.pack([0n, 7, bad]), (e: NodeJS.ErrnoException) => {
      assert.ok(e instanceof RangeError);
      assert.equal(e.code, 'ERR_OUT_OF_RANGE');
      assert.match(e.message, /^"args\[2\]" must be a u32: an integer from 0 to 4294967295; received /);
      assert.ok(e.message.includes(`received ${bad} (number)`), e.message);
      assert.match(e.message, /Kernel "fill_u32" takes \(ptr, u32, u32\)\.$/);
      return true;
    });
  }
});

test('a wrong argument count is ERR_INVALID_ARG_VALUE naming the expected count and signature', () => {
  const packer = new ArgumentPacker(['ptr', 'f32'], 'scale');
  assert.throws(() => packer.pack([0n]), {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_VALUE',
    message: '"args" must be 2 argument(s) for kernel "scale" (ptr, f32); received 1.',
  });
  assert.throws(() => packer.pack([0n, 1, 2]), { code: 'ERR_INVALID_ARG_VALUE', message: /received 3\.$/ });
  const wide = new ArgumentPacker(Array.from({ length: 500 }, (): ParamType => 'u32'), 'wide');
  assert.throws(() => wide.pack([1]), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: `"args" must be 500 argument(s) for kernel "wide" (${Array(16).fill('u32').join(', ')}, ... 484 more); received 1.`,
  });
});

test('a wrong argument type is ERR_INVALID_ARG_TYPE naming its position, type and what was received', () => {
  const packer = new ArgumentPacker(['ptr', 'i32', 'i64', 'f64'], 'k');
  assert.throws(() => packer.pack([5, 1, 1n, 1]), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: /^"args\[0\]" must be a ptr: a DeviceBuffer, a ManagedBuffer or a bigint device address; received 5 \(number\)/ });
  assert.throws(() => packer.pack([0n, 1n, 1n, 1]), { code: 'ERR_INVALID_ARG_TYPE', message: /^"args\[1\]" must be an i32 .*received 1n \(bigint\)/ });
  assert.throws(() => packer.pack([0n, 1, '1', 1]), { code: 'ERR_INVALID_ARG_TYPE', message: /^"args\[2\]" must be an i64 \(a bigint or a safe integer\); received "1" \(string\)/ });
  assert.throws(() => packer.pack([0n, 1, 1n, null]), { code: 'ERR_INVALID_ARG_TYPE', message: /^"args\[3\]" must be an f64 \(a number\); received null/ });
  const unsigned = new ArgumentPacker(['u64'], 'k');
  assert.throws(() => unsigned.pack(['1']), { code: 'ERR_INVALID_ARG_TYPE', message: /^"args\[0\]" must be a u64 \(a bigint or a safe integer\); received "1"/ });
  assert.throws(() => unsigned.pack([-1n]), { code: 'ERR_OUT_OF_RANGE', message: /^"args\[0\]" must be a u64: an integer from 0 to 18446744073709551615; received -1n/ });
});

test('integer arguments outside their type are ERR_OUT_OF_RANGE, non-integers too', () => {
  const cases: [ParamType, unknown][] = [
    ['i32', 2 ** 31], ['i32', -(2 ** 31) - 1], ['i32', 1.5], ['u32', 0.5], ['u32', NaN],
    ['i64', 2n ** 63n], ['i64', -(2n ** 63n) - 1n], ['u64', -1n], ['u64', 2n ** 64n], ['u64', 2 ** 53], ['i64', 0.5],
    ['ptr', -1n], ['ptr', 2n ** 64n], ['f32', 1e39], ['f32', -1e39],
  ];
  for (const [type, value] of cases) {
    const packer = new ArgumentPacker([type], 'k');
    assert.throws(() => packer.pack([value]), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE', message: new RegExp(`^"args\\[0\\]" must be an? ${type}`) }, `${type} ${String(value)}`);
  }
});

test('every in-range value is packed little-endian into its 8-byte slot exactly', () => {
  const signature: ParamType[] = ['ptr', 'i32', 'u32', 'i64', 'u64', 'f32', 'f64'];
  const packer = new ArgumentPacker(signature, 'k');
  fc.assert(
    fc.property(
      fc.bigInt(0n, 2n ** 64n - 1n),
      fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
      fc.integer({ min: 0, max: 2 ** 32 - 1 }),
      fc.oneof(fc.bigInt(-(2n ** 63n), 2n ** 63n - 1n), fc.maxSafeInteger()),
      fc.oneof(fc.bigInt(0n, 2n ** 64n - 1n), fc.maxSafeNat()),
      fc.float({ noDefaultInfinity: false }),
      fc.double(),
      (ptr, i32, u32, i64, u64, f32, f64) => {
        packer.pack([ptr, i32, u32, i64, u64, f32, f64]);
        const view = new DataView(packer.bytes.buffer);
        assert.equal(view.getBigUint64(0, true), ptr);
        assert.equal(view.getInt32(8, true), i32);
        assert.equal(view.getUint32(16, true), u32);
        assert.equal(view.getBigInt64(24, true), BigInt(i64));
        assert.equal(view.getBigUint64(32, true), BigInt(u64));
        assert.ok(Object.is(view.getFloat32(40, true), Math.fround(f32)) || (Number.isNaN(f32) && Number.isNaN(view.getFloat32(40, true))));
        assert.ok(Object.is(view.getFloat64(48, true), f64) || (Number.isNaN(f64) && Number.isNaN(view.getFloat64(48, true))));
      },
    ),
  );
});

test('a pointer handed out as a number fills its slot with the same 8 bytes as the bigint', () => {
  const packer = new ArgumentPacker(['ptr', 'u32', 'ptr', 'ptr'], 'k');
  const addresses = [0x7f12_3456_789an, 2n ** 53n - 1n, 0xffff_ffffn];
  const args = [fakeBuffer(Number(addresses[0])), 3, fakeBuffer(Number(addresses[1])), fakeBuffer(addresses[2]!)];
  packer.pack(args);
  packer.bindPointers(args, fakeStream);
  const view = new DataView(packer.bytes.buffer);
  assert.deepEqual([view.getBigUint64(0, true), view.getBigUint64(16, true), view.getBigUint64(24, true)], addresses);
  assert.equal(view.getUint32(8, true), 3);
});

test('a DeviceBuffer argument is asked for its pointer only after every argument passed its check', () => {
  const packer = new ArgumentPacker(['ptr', 'u32'], 'fill');
  const buffer = fakeBuffer(0x7000_0000_0000n);
  assert.throws(() => packer.pack([buffer, -1]), { code: 'ERR_OUT_OF_RANGE' });
  assert.equal(buffer.asked, 0, 'a failed check must not mark the buffer as used on the stream');
  packer.pack([buffer, 9]);
  assert.equal(buffer.asked, 0);
  packer.bindPointers([buffer, 9], fakeStream);
  assert.equal(buffer.asked, 1);
  const view = new DataView(packer.bytes.buffer);
  assert.equal(view.getBigUint64(0, true), 0x7000_0000_0000n);
  assert.equal(view.getUint32(8, true), 9);
});

test('a signature lists at most 8,192 parameter types, as many slots as a launch passes', () => {
  assert.equal(validateSignature(Array<ParamType>(8192).fill('u32')).length, 8192);
  assert.throws(() => validateSignature(Array<ParamType>(8193).fill('u32')), {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_VALUE',
    message: '"signature" lists 8193 parameter types; a kernel takes at most 8192 (the driver passes at most 32,764 bytes of parameters).',
  });
});

test('a signature accepts only the seven parameter types', () => {
  assert.deepEqual(validateSignature(['ptr', 'u32']), ['ptr', 'u32']);
  assert.throws(() => validateSignature('ptr'), { code: 'ERR_INVALID_ARG_TYPE', message: /^"signature" must be an array of parameter types/ });
  assert.throws(() => validateSignature(['ptr', 'float']), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: `"signature[1]" must be one of 'ptr', 'i32', 'u32', 'i64', 'u64', 'f32', 'f64'; received "float".`,
  });
});

test('a signature is checked against the parameter sizes the driver reports', () => {
  checkParamSizes([8, 4, 4], ['ptr', 'u32', 'u32'], 'fill_u32');
  checkParamSizes([1, 2, 8], ['u32', 'i32', 'i64'], 'narrow'); // bool and short parameters take 32-bit integers
  checkParamSizes([], [], 'empty');
  assert.throws(() => checkParamSizes([8, 4, 4], ['ptr', 'u32'], 'fill_u32'), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: /^"signature" does not match kernel "fill_u32": it lists 2 parameter type\(s\) \[ptr, u32\], but the kernel takes 3 parameter\(s\) of 8, 4, 4 bytes\.$/,
  });
  assert.throws(() => checkParamSizes([8, 8], ['ptr', 'f32'], 'k'), { code: 'ERR_INVALID_ARG_VALUE', message: /parameter 1 is 8 bytes, which does not fit 'f32'/ });
  assert.throws(() => checkParamSizes([4], ['ptr'], 'k'), { code: 'ERR_INVALID_ARG_VALUE', message: /parameter 0 is 4 bytes/ });
});

test('grid and block dimensions are positive integers, given as a number or 1 to 3 numbers', () => {
  const out = [0, 0, 0];
  readDims(7, 'options.grid', out, 0);
  assert.deepEqual(out, [7, 1, 1]);
  readDims([4, 5], 'options.grid', out, 0);
  assert.deepEqual(out, [4, 5, 1]);
  assert.throws(() => readDims(0, 'options.block', out, 0), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE', message: /^"options.block" must be an integer from 1 to 4294967295; received 0/ });
  assert.throws(() => readDims([1, 2 ** 32], 'options.grid', out, 0), { code: 'ERR_OUT_OF_RANGE', message: /^"options.grid\[1\]"/ });
  assert.throws(() => readDims([1, 1, 1, 1], 'options.grid', out, 0), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => readDims('8', 'options.grid', out, 0), { code: 'ERR_INVALID_ARG_TYPE' });
});

test('launch attributes are checked against their types, the grid and the device before anything is queued', () => {
  const hopper = { ordinal: 0, computeCapability: { major: 9, minor: 0 }, clusterLaunch: true, cooperativeLaunch: true } as Device;
  const ampere = { ordinal: 1, computeCapability: { major: 8, minor: 6 }, clusterLaunch: false, cooperativeLaunch: true } as Device;
  const noCooperative = { ...hopper, ordinal: 2, cooperativeLaunch: false } as Device;
  const out = [9, 9, 9];
  assert.equal(readLaunchAttributes({}, hopper, [8, 1, 1], out), 0);
  assert.deepEqual(out, [0, 0, 0]);
  assert.equal(readLaunchAttributes({ cluster: [2, 4], cooperative: true, programmaticDependentLaunch: true }, hopper, [8, 4, 1], out), 3);
  assert.deepEqual(out, [2, 4, 1]);
  assert.equal(readLaunchAttributes({ programmaticDependentLaunch: true, cooperative: false }, hopper, [8, 1, 1], out), 2);
  assert.throws(() => readLaunchAttributes({ cooperative: 1 as never }, hopper, [8, 1, 1], out), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: /^"options.cooperative" must be a boolean; received 1 \(number\)/ });
  assert.throws(() => readLaunchAttributes({ programmaticDependentLaunch: 'yes' as never }, hopper, [8, 1, 1], out), { code: 'ERR_INVALID_ARG_TYPE', message: /^"options.programmaticDependentLaunch" must be a boolean/ });
  assert.throws(() => readLaunchAttributes({ cluster: 0 }, hopper, [8, 1, 1], out), { name: 'RangeError', message: /^"options.cluster" must be an integer from 1/ });
  assert.throws(() => readLaunchAttributes({ cluster: 16 }, hopper, [16, 1, 1], out), {
    name: 'RangeError',
    code: 'ERR_OUT_OF_RANGE',
    message: '"options.cluster" must be at most 8 blocks in all (the portable cluster size); received an array [16, 1, 1].',
  });
  // The dimensions read, also where they came from getters.
  const fromGetters: [number, number] = [0, 0];
  for (const i of [0, 1]) Object.defineProperty(fromGetters, i, { get: () => 4 });
  assert.throws(() => readLaunchAttributes({ cluster: fromGetters }, hopper, [16, 16, 1], out), {
    message: '"options.cluster" must be at most 8 blocks in all (the portable cluster size); received an array [4, 4, 1].',
  });
  assert.throws(() => readLaunchAttributes({ cluster: [2, 2] }, hopper, [6, 3, 1], out), {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_VALUE',
    message: '"options.grid" must be a multiple of "options.cluster" in each dimension; grid [6, 3, 1] and cluster [2, 2, 1] differ in dimension y.',
  });
  // Shape errors come first, then the device's support, so a program that is wrong everywhere learns it everywhere.
  assert.throws(() => readLaunchAttributes({ cluster: 2 }, ampere, [4, 1, 1], out), (e: unknown) => {
    assert.ok(e instanceof UnsupportedError);
    assert.equal(e.code, 'ERR_CUDA_UNSUPPORTED');
    assert.equal(e.feature, 'thread-block clusters');
    assert.equal(e.device, 1);
    assert.equal(e.message, 'thread-block clusters is not supported on device 1: it has compute capability 8.6; clusters need 9.0 or later (CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH is 0).');
    return true;
  });
  assert.throws(() => readLaunchAttributes({ programmaticDependentLaunch: true }, ampere, [4, 1, 1], out), { name: 'UnsupportedError', message: /^programmatic dependent launch is not supported on device 1: it has compute capability 8\.6/ });
  assert.equal(readLaunchAttributes({ cooperative: true }, ampere, [4, 1, 1], out), 1);
  assert.throws(() => readLaunchAttributes({ cooperative: true }, noCooperative, [4, 1, 1], out), { name: 'UnsupportedError', message: 'cooperative launch is not supported on device 2: CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH is 0.' });
});

// ---------------------------------------------------------------------------------------------------------------
// On the GPU.

const SOURCE = String.raw`
extern "C" __global__ void saxpy(unsigned int n, float a, const float* x, float* y) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// Every thread inside width x height writes its linear index once and counts the write.
extern "C" __global__ void index_2d(unsigned int* out, unsigned int* writes, unsigned int width, unsigned int height) {
  unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= width || y >= height) return;
  unsigned int i = y * width + x;
  out[i] = i;
  atomicAdd(&writes[i], 1u);
}

// Fills 'bytes' of dynamic shared memory, then thread 0 sums it: every byte must have been there.
extern "C" __global__ void shared_sum(unsigned int bytes, unsigned long long* sum) {
  extern __shared__ unsigned char scratch[];
  for (unsigned int i = threadIdx.x; i < bytes; i += blockDim.x) scratch[i] = (unsigned char)(i % 251);
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long total = 0;
    for (unsigned int i = 0; i < bytes; i++) total += scratch[i];
    *sum = total;
  }
}

extern "C" __global__ void __launch_bounds__(128) bounded(unsigned int* out) {
  out[threadIdx.x] = threadIdx.x;
}

extern "C" __global__ void fill_u32(unsigned int* out, unsigned int value, unsigned int n) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}
`;

let compiled: Promise<Module> | undefined;
async function kernels(): Promise<Record<'saxpy' | 'index2d' | 'sharedSum' | 'bounded' | 'fill', Kernel>> {
  compiled ??= Program.compile(SOURCE, { name: 'kernel-test.cu' });
  const module = await compiled;
  return {
    saxpy: module.getFunction('saxpy', ['u32', 'f32', 'ptr', 'ptr']),
    index2d: module.getFunction('index_2d', ['ptr', 'ptr', 'u32', 'u32']),
    sharedSum: module.getFunction('shared_sum', ['u32', 'ptr']),
    bounded: module.getFunction('bounded', ['ptr']),
    fill: module.getFunction('fill_u32', ['ptr', 'u32', 'u32']),
  };
}

/** A small deterministic generator (the benchmark's mulberry32) of floats in [-1, 1). */
function random(seed: number): () => number {
  const next = generator(seed);
  return () => next() * 2 - 1;
}

async function readBack<T extends Float32Array | Uint32Array | BigUint64Array>(stream: Stream, buffer: DeviceBuffer, out: T): Promise<T> {
  stream.copy(out, buffer, { byteLength: out.byteLength });
  await stream.synchronize();
  return out;
}

const POISON = 0x5eadbeef; // below 2**31, whatever integer type a fill value is read as

test('SAXPY on random data matches a CPU reference within float32 tolerance', gpuNotSimulated('nvrtc'), async () => {
  const { saxpy } = await kernels();
  using stream = Stream.create();
  const n = (1 << 20) + 123; // not a multiple of the block
  const next = random(12345);
  const x = Float32Array.from({ length: n }, next);
  const y = Float32Array.from({ length: n }, next);
  const a = Math.fround(2.5);
  using dx = DeviceBuffer.alloc(x.byteLength, { stream });
  using dy = DeviceBuffer.alloc(y.byteLength, { stream });
  stream.copy(dx, x, { byteLength: x.byteLength });
  stream.copy(dy, y, { byteLength: y.byteLength });
  saxpy.launch({ grid: Math.ceil(n / 256), block: 256, stream }, n, a, dx, dy);
  const out = await readBack(stream, dy, new Float32Array(n));
  let worst = 0;
  for (let i = 0; i < n; i++) {
    const reference = Math.fround(a * x[i]! + y[i]!);
    const error = Math.abs(out[i]! - reference) / Math.max(1, Math.abs(reference));
    if (!(error <= worst)) worst = error; // NaN counts as the worst
  }
  // fmaf rounds once, a separate multiply and add twice: either stays within a few float32 ulps (2**-23 each).
  assert.ok(worst <= 1e-6, `largest relative error ${worst} exceeds 1e-6 (about 8 float32 ulps)`);
  assert.notDeepEqual(out.subarray(0, 16), y.subarray(0, 16));
});

test('a 2D grid writes every element of a width x height array exactly once', gpuNotSimulated('nvrtc'), async () => {
  const { index2d } = await kernels();
  using stream = Stream.create();
  const width = 1000;
  const height = 333; // neither is a multiple of the 16 x 16 block
  const bytes = width * height * 4;
  using out = DeviceBuffer.alloc(bytes, { stream });
  using writes = DeviceBuffer.alloc(bytes, { stream });
  stream.fill(out, POISON, { byteLength: bytes, elementSize: 4 });
  stream.fill(writes, 0, { byteLength: bytes, elementSize: 4 });
  index2d.launch({ grid: [Math.ceil(width / 16), Math.ceil(height / 16)], block: [16, 16], stream }, out, writes, width, height);
  const values = await readBack(stream, out, new Uint32Array(width * height));
  const counts = await readBack(stream, writes, new Uint32Array(width * height));
  for (let i = 0; i < width * height; i++) {
    if (counts[i] !== 1) assert.fail(`element ${i} (x ${i % width}, y ${Math.floor(i / width)}) was written ${counts[i]} times`);
    if (values[i] !== i) assert.fail(`element ${i} holds ${values[i]}`);
  }
});

test('wrong argument count, type or range throws before launch, and the stream stays usable', gpuNotSimulated('nvrtc'), async () => {
  const { fill } = await kernels();
  using stream = Stream.create();
  const n = 4096;
  using out = DeviceBuffer.alloc(n * 4, { stream });
  stream.fill(out, POISON, { byteLength: n * 4, elementSize: 4 });
  const options = { grid: n / 256, block: 256, stream };
  assert.throws(() => fill.launch(options, out, 7), { code: 'ERR_INVALID_ARG_VALUE', message: /"args" must be 3 argument/ });
  assert.throws(() => fill.launch(options, out, 7, -1), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE', message: /"args\[2\]" must be a u32/ });
  assert.throws(() => fill.launch(options, out, 7, 2 ** 32), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE', message: /"args\[2\]" must be a u32/ });
  assert.throws(() => fill.launch(options, 12345, 7, n), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: /"args\[0\]" must be a ptr/ });
  assert.throws(() => fill.launch({ ...options, grid: 0 }, out, 7, n), { code: 'ERR_OUT_OF_RANGE', message: /"options.grid"/ });
  assert.throws(() => fill.launch({ ...options, blok: 256 } as never, out, 7, n), { code: 'ERR_INVALID_ARG_VALUE', message: /did you mean "block"\?/ });
  // Nothing ran: the poison is intact.
  const before = await readBack(stream, out, new Uint32Array(n));
  assert.ok(before.every((v) => v === POISON));
  assert.equal(stream.query(), true);
  fill.launch(options, out, 7, n);
  const after = await readBack(stream, out, new Uint32Array(n));
  assert.ok(after.every((v) => v === 7));
});

test('100 KiB of dynamic shared memory fails clearly before setMaxDynamicSharedMemBytes and works after', gpuNotSimulated('nvrtc'), async () => {
  const { sharedSum } = await kernels();
  using stream = Stream.create();
  const bytes = 100 * 1024;
  using sum = DeviceBuffer.alloc(8, { stream });
  assert.ok(sharedSum.attributes.maxDynamicSharedMemBytes < bytes);
  assert.throws(
    () => sharedSum.launch({ grid: 1, block: 256, dynamicSharedMemBytes: bytes, stream }, bytes, sum),
    (e: unknown) => {
      assert.ok(e instanceof CudaError, String(e));
      assert.equal(e.call, 'cuLaunchKernel');
      assert.equal(e.sticky, false);
      assert.match(e.message, /kernel "shared_sum" with grid \[1, 1, 1\], block \[256, 1, 1\] \(256 threads\) and 102400 bytes of dynamic shared memory/);
      assert.match(e.message, /setMaxDynamicSharedMemBytes/);
      return true;
    },
  );
  sharedSum.setMaxDynamicSharedMemBytes(bytes);
  assert.equal(sharedSum.attributes.maxDynamicSharedMemBytes, bytes);
  sharedSum.launch({ grid: 1, block: 256, dynamicSharedMemBytes: bytes, stream }, bytes, sum);
  const [total] = await readBack(stream, sum, new BigUint64Array(1));
  let expected = 0n;
  for (let i = 0; i < bytes; i++) expected += BigInt(i % 251);
  assert.equal(total, expected);
});

test('more dynamic shared memory than the device allows is a CudaError naming the limit', gpuNotSimulated('nvrtc'), async () => {
  const { sharedSum } = await kernels();
  assert.throws(() => sharedSum.setMaxDynamicSharedMemBytes(16 * 1024 * 1024), (e: unknown) => {
    assert.ok(e instanceof CudaError, String(e));
    assert.equal(e.code, 'CUDA_ERROR_INVALID_VALUE');
    assert.equal(e.call, 'cuFuncSetAttribute');
    assert.match(e.message, /kernel "shared_sum".*16777216 bytes of dynamic shared memory \(the device allows \d+ bytes/);
    return true;
  });
});

test('too many threads per block is a CudaError naming the kernel, the launch shape and its limit', gpuNotSimulated('nvrtc'), async () => {
  const { bounded, fill } = await kernels();
  using stream = Stream.create();
  using out = DeviceBuffer.alloc(4096 * 4, { stream });
  assert.ok(bounded.attributes.maxThreadsPerBlock <= 128);
  assert.throws(() => bounded.launch({ grid: 1, block: 256, stream }, out), (e: unknown) => {
    assert.ok(e instanceof CudaError, String(e));
    assert.equal(e.call, 'cuLaunchKernel');
    assert.match(e.message, /kernel "bounded" with grid \[1, 1, 1\], block \[256, 1, 1\] \(256 threads\)/);
    assert.match(e.message, /at most \d+ threads per block/);
    assert.match(e.message, new RegExp(`stream ${stream.id}`));
    return true;
  });
  assert.throws(() => fill.launch({ grid: 1, block: [64, 32], stream }, out, 1, 2048), { name: 'CudaError', code: 'CUDA_ERROR_INVALID_VALUE', message: /block \[64, 32, 1\] \(2048 threads\)/ });
  // The stream is still fine.
  fill.launch({ grid: 16, block: 256, stream }, out, 3, 4096);
  const values = await readBack(stream, out, new Uint32Array(4096));
  assert.ok(values.every((v) => v === 3));
});

test('attributes and maxPotentialBlockSize() report what the driver says about the kernel', gpuNotSimulated('nvrtc'), async () => {
  const { saxpy } = await kernels();
  const a = saxpy.attributes;
  assert.ok(a.registers > 0 && a.registers <= 255, `registers ${a.registers}`);
  assert.ok(a.maxThreadsPerBlock >= 256 && a.maxThreadsPerBlock <= 1024);
  assert.equal(a.staticSharedMemBytes, 0);
  assert.equal(a.localMemBytes, 0);
  const best = saxpy.maxPotentialBlockSize();
  assert.ok(best.blockSize >= 32 && best.blockSize <= a.maxThreadsPerBlock && best.blockSize % 32 === 0, JSON.stringify(best));
  assert.ok(best.minGridSize >= 1);
  assert.ok(saxpy.maxPotentialBlockSize({ blockSizeLimit: 64 }).blockSize <= 64);
  assert.throws(() => saxpy.maxPotentialBlockSize({ dynamicSharedMemBytes: -1 }), { code: 'ERR_OUT_OF_RANGE' });
});

test('a signature that does not match the kernel\'s parameters is refused by getFunction()', gpuNotSimulated('nvrtc'), async () => {
  const { module } = (await kernels()).saxpy;
  assert.throws(() => module.getFunction('saxpy', ['u32', 'f32', 'ptr']), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: /"signature" does not match kernel "saxpy": .* takes 4 parameter\(s\) of 4, 4, 8, 8 bytes/,
  });
  assert.throws(() => module.getFunction('saxpy', ['u32', 'f64', 'ptr', 'ptr']), { code: 'ERR_INVALID_ARG_VALUE', message: /parameter 1 is 4 bytes/ });
});

/** PTX of `store_u32_arguments_<count>(out, count u32 values)`, which writes its values to out[0..count): a kernel of
 * more arguments than most, written out so that it needs no compiler (the simulated driver knows it by its name). */
function storeArgumentsPtx(count: number): string {
  const parameters = ['.param .u64 out', ...Array.from({ length: count }, (_, i) => `.param .u32 a${i}`)];
  const stores = Array.from({ length: count }, (_, i) => `ld.param.u32 %r1, [a${i}];\nst.global.u32 [%rd2+${4 * i}], %r1;`);
  return [
    '.version 7.0', '.target sm_50', '.address_size 64',
    `.visible .entry store_u32_arguments_${count}(${parameters.join(', ')})`,
    '{', '.reg .b32 %r<2>;', '.reg .b64 %rd<3>;', 'ld.param.u64 %rd1, [out];', 'cvta.to.global.u64 %rd2, %rd1;',
    ...stores, 'ret;', '}', '',
  ].join('\n');
}

test('kernels of 3, 40 and 100 arguments launched in turn each get their own values, also several queued at once', gpu, async () => {
  const { fillU32 } = await testKernels();
  using stream = Stream.create();
  const modules = [40, 100].map((count) => Module.load(storeArgumentsPtx(count)));
  try {
    const [wide, wider] = await Promise.all(modules);
    const kernel40 = wide!.getFunction('store_u32_arguments_40', ['ptr', ...Array<'u32'>(40).fill('u32')]);
    const kernel100 = wider!.getFunction('store_u32_arguments_100', ['ptr', ...Array<'u32'>(100).fill('u32')]);
    const values = (count: number, seed: number) => Array.from({ length: count }, (_, i) => (seed * 1000 + i * 7 + 1) >>> 0);
    // Queued before any wait: each launch must keep the arguments it was given, not the next launch's.
    const outputs: Array<{ buffer: DeviceBuffer; expected: number[] }> = [];
    for (let round = 0; round < 3; round++) {
      const small = DeviceBuffer.alloc(64 * 4, { stream });
      fillU32.launch({ grid: 1, block: 64, stream }, small, 11 + round, 64);
      outputs.push({ buffer: small, expected: Array<number>(64).fill(11 + round) });
      for (const [kernel, count] of [[kernel40, 40], [kernel100, 100]] as const) {
        const buffer = DeviceBuffer.alloc(count * 4, { stream });
        const expected = values(count, round * 2 + (count === 40 ? 0 : 1));
        (kernel as Kernel).launch({ grid: 1, block: 1, stream }, buffer, ...expected);
        outputs.push({ buffer, expected });
      }
    }
    for (const { buffer, expected } of outputs) {
      assert.deepEqual([...(await buffer.toArray(Uint32Array, { stream }))], expected);
      buffer.free();
    }
  } finally {
    for (const module of await Promise.allSettled(modules)) if (module.status === 'fulfilled') module.value.unload();
  }
});

test('launch without options.stream queues on currentStream()', gpu, async () => {
  const { spin } = await testKernels();
  using stream = Stream.create();
  withStream(stream, () => spin.launch({ grid: 1, block: 1 }, 300_000_000n, 0n));
  assert.equal(stream.query(), false, 'the 300 ms spin should be running on the scoped stream');
  await stream.synchronize();
  assert.equal(stream.query(), true);
});

test('after unload(), every kernel method throws DestroyedError and the module count drops', gpuNotSimulated('nvrtc'), async () => {
  const before = cuda.liveObjects().modules;
  const module = await Program.compile('extern "C" __global__ void nothing() {}');
  assert.equal(cuda.liveObjects().modules, before + 1);
  const kernel = module.getFunction('nothing', []);
  using stream = Stream.create();
  kernel.launch({ grid: 1, block: 1, stream });
  await stream.synchronize();
  module.unload();
  module.unload();
  assert.equal(cuda.liveObjects().modules, before);
  for (const call of [() => kernel.launch({ grid: 1, block: 1, stream }), () => kernel.attributes, () => kernel.maxPotentialBlockSize(), () => kernel.setMaxDynamicSharedMemBytes(0), () => module.getFunction('nothing', [])]) {
    assert.throws(call, (e: unknown) => e instanceof DestroyedError && e.resource === 'Module');
  }
});

// StreamPool (packages/cuda-stream-pool/src/pool/pool.ts) has not landed yet: the worker borrows a stream the main thread created, by its handle,
// which is what a pool stream shared with a worker is. Switch to pool.share() / pool.getStream(i) once it lands.
test('a worker compiles a kernel and launches it on a stream the main thread created', gpuNotSimulated('nvrtc'), async () => {
  using stream = Stream.create();
  const worker = new Worker(new URL('../../workers/kernel-worker.js', import.meta.url), { workerData: { handle: stream.handle } });
  const result = await new Promise<{ ok: boolean; values?: number[]; streamId?: string; error?: string }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  const exit = await new Promise<number>((resolve) => worker.once('exit', resolve));
  assert.equal(result.ok, true, result.error);
  assert.equal(exit, 0);
  assert.deepEqual(result.values, [42, 42, 42, 42]);
  assert.equal(result.streamId, String(stream.id), 'the worker launched on the main thread\'s stream');
  assert.equal(stream.query(), true);
});
