// Micro-benchmarks of kernels: the cost of kernel.launch() beside the same cuLaunchKernel in a C++ loop of the same run
// (the benchmark addon's launchLoop), a producer-consumer chain with programmatic dependent launch beside the same
// chain without it, and the time Program.compile() takes, first in a process and with NVRTC already loaded, beside
// loading the cached CUBIN.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

import { cuda, Device, DeviceBuffer, Module, Program, Stream, type Kernel } from 'cuda-stream-pool';
import { ArgumentPacker, nvrtcInfo } from 'cuda-stream-pool/internal';
import { benchAddon } from './bench-addon.js';
import { libraryUrl } from './package.js';
import { nativeSample, steadySync, summarize, targetRatio, targetUnlessRecorded, timeAsync } from './harness.js';
import { printable } from './printable.js';
import type { MicroResult, Sample } from './schema.js';
import { benchKernels, benchPtx } from './kernels.js';

/** Options of {@link kernelMicroBenchmarks}. */
export interface KernelMicroOptions {
  /** The device, as an ordinal. @defaultValue 0 */
  device?: number;
}

/** Launches per timed run: few enough that the stream's queue never fills (a full queue would time the GPU). */
const LAUNCHES = 500;
const RUNS = 15;
/** The launch-overhead target: kernel.launch() at most this many times the C++ loop's cost. */
const LAUNCH_TARGET = 1.15;
/** Deferred submission's issue-rate target: launches recorded and issued by a submission thread at most this many
 * times the C++ loop's cost per launch. */
const ISSUE_TARGET = 1.1;

/** The small program whose compile is timed. */
const SMALL_PROGRAM = `
extern "C" __global__ void saxpy(unsigned int n, float a, const float* x, float* y) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}`;

function micro(sample: Sample): Sample {
  return { ...sample, median: sample.median / 1000, p10: sample.p10 / 1000, p90: sample.p90 / 1000 };
}

/** ns per launch through kernel.launch() and through the C++ loop (the same kernel of kernels/bench.ptx, loaded by
 * the benchmark addon, on the same stream, with the arguments packed as kernel.launch() packs them), runs alternating
 * so that drift (clocks, other load) affects both alike. Each run synchronizes the stream before and after, outside
 * the timed part. `issued`: each library run ends with `cuda.flush()`, so that it times launches until a submission
 * thread has issued them all (deferred submission), not only their recording. */
function launchSamples(kernel: Kernel, stream: Stream, args: unknown[], issued = false): { library: Sample; native: Sample } {
  const packer = new ArgumentPacker(kernel.signature, kernel.name);
  packer.pack(args);
  packer.bindPointers(args, stream);
  const slotBytes = kernel.signature.length === 0 ? 0 : packer.bytes.byteLength / kernel.signature.length;
  const addon = benchAddon();
  const ptx = benchPtx();
  // Steady state (Note [steady state] in harness.ts), at most LAUNCHES per run so that the queue never fills; the
  // stream is idle before every run of either loop.
  const library = steadySync((calls) => {
    for (let i = 0; i < calls; i++) kernel.launch({ grid: 1, block: 1, stream }, ...args);
    if (issued) cuda.flush();
  }, {
    minCalls: LAUNCHES,
    maxCalls: LAUNCHES,
    runs: RUNS,
    between: () => {
      stream.synchronizeSync();
      // The submission thread parks once idle: one launch issued just before the run keeps it awake for the run's
      // start, so that the row times its issue rate rather than its wake-up.
      if (issued) {
        kernel.launch({ grid: 1, block: 1, stream }, ...args);
        cuda.flush();
      }
    },
  });
  stream.synchronizeSync();
  const native = nativeSample(() => {
    stream.synchronizeSync();
    return addon.launchLoop(kernel.module.device.ordinal, LAUNCHES, ptx, kernel.name, stream.handle, packer.bytes, slotBytes);
  }, RUNS, LAUNCHES);
  stream.synchronizeSync();
  return { library, native };
}

/** A launch row in µs from {@link launchSamples}, the library's loop beside the C++ loop named `baselineName`. */
function launchRow(name: string, baselineName: string, samples: { library: Sample; native: Sample }): MicroResult {
  const { library, native } = samples;
  return { name, unit: 'µs', value: micro(library), baselineName, baseline: micro(native), ratio: library.median / native.median, better: 'lower' };
}

/** A producer and a consumer of 64 Ki floats: the consumer waits for the producer's memory (griddepcontrol.wait),
 * and the producer lets its dependent start at once (griddepcontrol.launch_dependents). */
const CHAIN_PROGRAM = `
extern "C" __global__ void produce(float* data, unsigned int n) {
  asm volatile("griddepcontrol.launch_dependents;");
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i] * 1.0001f + 0.5f;
}
extern "C" __global__ void consume(const float* data, float* out, unsigned int n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = data[i] + 1.0f;
}`;
const CHAIN_ELEMENTS = 1 << 16;
const CHAIN_PAIRS = 100;

/** µs per producer-consumer pair, 100 pairs back to back on one stream until the last is done: the consumer launched
 * with programmatic dependent launch against without. */
async function chainRow(device: Device): Promise<MicroResult> {
  const module = await Program.compile(CHAIN_PROGRAM, { device });
  const stream = Stream.create({ device });
  const data = DeviceBuffer.alloc(CHAIN_ELEMENTS * 4, { stream });
  const out = DeviceBuffer.alloc(CHAIN_ELEMENTS * 4, { stream });
  try {
    stream.fill(data, 0);
    const produce = module.getFunction('produce', ['ptr', 'u32']);
    const consume = module.getFunction('consume', ['ptr', 'ptr', 'u32']);
    const shape = { grid: CHAIN_ELEMENTS / 256, block: 256, stream };
    const chain = (programmaticDependentLaunch: boolean) => (rounds: number) => {
      for (let r = 0; r < rounds; r++) {
        for (let p = 0; p < CHAIN_PAIRS; p++) {
          produce.launch(shape, data, CHAIN_ELEMENTS);
          consume.launch({ ...shape, programmaticDependentLaunch }, data, out, CHAIN_ELEMENTS);
        }
        stream.synchronizeSync();
      }
    };
    const options = { minCalls: 5, maxCalls: 50, runs: RUNS };
    const plain = steadySync(chain(false), options);
    const overlapped = steadySync(chain(true), options);
    const perPair = (s: Sample): Sample => micro({ ...s, median: s.median / CHAIN_PAIRS, p10: s.p10 / CHAIN_PAIRS, p90: s.p90 / CHAIN_PAIRS });
    return {
      name: `a two-kernel chain with programmatic dependent launch (${CHAIN_PAIRS} producer-consumer pairs, 64 Ki floats), per pair`,
      unit: 'µs',
      value: perPair(overlapped),
      baselineName: 'the same chain without it',
      baseline: perPair(plain),
      ratio: overlapped.median / plain.median,
      better: 'lower',
      target: '< 1× the chain without it',
      met: overlapped.median < plain.median,
    };
  } finally {
    data.free();
    out.free();
    await stream.synchronize();
    stream.destroy();
    module.unload();
  }
}

const run = promisify(execFile);

/** Time of the first Program.compile() in a fresh process (NVRTC opened and initialised), over `runs` processes.
 * The driver and the device are set up before the timed part. */
async function firstCompileSample(device: number, runs: number): Promise<Sample> {
  const index = libraryUrl();
  const script = `
    const { Device, Program } = await import(${JSON.stringify(index)});
    const device = Device.get(${device});
    const start = process.hrtime.bigint();
    const module = await Program.compile(${JSON.stringify(SMALL_PROGRAM)}, { device, cache: false });
    const ns = Number(process.hrtime.bigint() - start);
    module.unload();
    console.log(JSON.stringify({ ns }));`;
  const values: number[] = [];
  for (let r = 0; r < runs; r++) {
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { timeout: 120_000 });
    values.push((JSON.parse(stdout.trim().split('\n').pop()!) as { ns: number }).ns);
  }
  return summarize(values);
}

/** Measures kernel launch overhead (beside the C++ loop, target ≤ 1.3×) and compile times. The compile rows need
 * NVRTC; without it they are left out and a line on stderr says why. Needs a GPU.
 * @throws {@link CudaUnavailableError} without a GPU; {@link CudaError} when the driver fails. */
export async function kernelMicroBenchmarks(options: KernelMicroOptions = {}): Promise<MicroResult[]> {
  const device = Device.get(options.device ?? 0);
  const results: MicroResult[] = [];
  const { empty, fmaSteps } = await benchKernels(device);
  const stream = Stream.create({ device });
  try {
    const bare = launchSamples(empty, stream, []);
    results.push(
      targetUnlessRecorded(launchRow('kernel.launch() of an empty kernel (grid 1, block 1)', 'cuLaunchKernel (C++ loop)', bare), (result) =>
        targetRatio(result, LAUNCH_TARGET, 'the C++ loop'),
      ),
    );
    if (cuda.submission().mode === 'deferred') {
      // The submission thread's issue rate: the JS thread records faster than one thread issues, so the run ends
      // when the last launch was issued, and its time per launch is the issuing thread's.
      const issued = launchSamples(empty, stream, [], true);
      const name = `kernel.launch() of an empty kernel, ${LAUNCHES} until cuda.flush() returns: the submission thread's issue rate`;
      results.push(targetRatio(launchRow(name, 'cuLaunchKernel (C++ loop)', issued), ISSUE_TARGET, 'the C++ loop'));
    }
    // fma_steps with n = 0 returns at once: the cost of checking and packing five arguments (ptr, u32, u32, f32, f32).
    const withArgs = launchSamples(fmaSteps, stream, [0n, 0, 1, 1.5, 0.5]);
    results.push(launchRow('kernel.launch() with 5 arguments (ptr, u32, u32, f32, f32)', 'cuLaunchKernel with the same arguments (C++ loop)', withArgs));
  } finally {
    stream.destroy();
  }

  const compiler = await nvrtcInfo();
  if (!compiler.available) {
    process.stderr.write(printable(`kernel benchmarks: compile times and programmatic dependent launch not measured: ${compiler.reason}\n`));
    return results;
  }
  if (device.computeCapability.major >= 9) results.push(await chainRow(device));
  else process.stderr.write(`kernel benchmarks: programmatic dependent launch not measured: device ${device.ordinal} has compute capability ${device.computeCapability.major}.${device.computeCapability.minor}, below 9.0\n`);
  const first = await firstCompileSample(device.ordinal, 5);
  const warm = await timeAsync(async () => (await Program.compile(SMALL_PROGRAM, { device, cache: false })).unload(), 1, 9);
  // The first call fills the in-memory compile cache; the timed calls hit it.
  const hits = await timeAsync(async () => (await Program.compile(SMALL_PROGRAM, { device })).unload(), 1, 9);
  const compiled = await Program.compile(SMALL_PROGRAM, { device, cache: false });
  const cubin = compiled.cubin!;
  compiled.unload();
  const cached = await timeAsync(async () => (await Module.load(cubin, { device })).unload(), 1, 9);
  results.push({
    name: `Program.compile() of a small program, first in a process (NVRTC ${compiler.major}.${compiler.minor} opened)`,
    unit: 'µs',
    value: micro(first),
    baselineName: 'Program.compile() again, NVRTC loaded',
    baseline: micro(warm),
    ratio: first.median / warm.median,
    better: 'lower',
  });
  results.push({
    name: 'Program.compile() of the same program again: a compile-cache hit (in memory)',
    unit: 'µs',
    value: micro(hits),
    baselineName: 'Program.compile() again, NVRTC loaded',
    baseline: micro(warm),
    ratio: hits.median / warm.median,
    better: 'lower',
  });
  results.push({
    name: 'Module.load(module.cubin): the cached compile',
    unit: 'µs',
    value: micro(cached),
    baselineName: 'Program.compile() again, NVRTC loaded',
    baseline: micro(warm),
    ratio: cached.median / warm.median,
    better: 'lower',
  });
  return results;
}
