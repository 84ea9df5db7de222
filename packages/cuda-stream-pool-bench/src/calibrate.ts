// The phases of one task measured alone (one stream, nothing else on the GPU), and the calibration of --intensity so
// that the kernel takes about as long as one copy. The overlap bound is computed from these times (README.md,
// "Calibration").
import { DeviceBuffer, Event, PinnedBuffer, Stream, type Device, type Kernel } from 'cuda-stream-pool';
import { summarize } from './harness.js';
import { fmaGrid, FMA_BLOCK, type BenchKernels } from './kernels.js';
import { LIMITS } from './cli/options.js';
import { FMA_A, FMA_B, fillPartition } from './reference.js';
import type { PhaseTimes } from './schema.js';

/** Timed repetitions per measurement, after {@link WARMUP_REPEATS} untimed ones; the median is kept. */
const REPEATS = 7;
const WARMUP_REPEATS = 2;

/** How long the hold kernel keeps the stream busy while the host queues a repetition, ns: far longer than queueing
 * takes, so the phases then run back to back. Without it an idle GPU would start each phase as soon as the host queued
 * it, and the host's enqueue time would count into the phase (measured on an H200: a 4 MiB copy-in read 99 µs that
 * way, 84 µs back to back, as in a busy run). */
const HOLD_NS = 1_000_000;

/** A private stream, buffers and events for measuring phases alone; freed by `dispose`. */
class Bench {
  readonly stream: Stream;
  readonly events: Event[] = [];
  readonly input: PinnedBuffer;
  readonly output: PinnedBuffer;
  readonly buffer: DeviceBuffer;

  constructor(
    readonly device: Device,
    readonly kernel: Kernel,
    readonly hold: Kernel,
    readonly elements: number,
  ) {
    this.stream = Stream.create({ device });
    const made: { free(): void }[] = [];
    try {
      this.input = PinnedBuffer.alloc(elements * 4);
      made.push(this.input);
      this.output = PinnedBuffer.alloc(elements * 4);
      made.push(this.output);
      fillPartition(this.input.view(Float32Array), 0);
      for (let i = 0; i < 4; i++) this.events.push(Event.create({ device, timing: true }));
      this.buffer = DeviceBuffer.alloc(elements * 4, { stream: this.stream });
    } catch (error) {
      for (const thing of made) thing.free();
      for (const event of this.events) event.destroy();
      this.stream.destroy();
      throw error;
    }
  }

  /** Runs copy-in, kernel (`intensity` steps) and copy-out in sequence on one stream, queued behind the hold kernel:
   * each phase runs alone, back to back with the previous one.
   * `phases` false: the kernel only. Returns each phase's time in ms (0 for phases not run). */
  async once(intensity: number, phases: boolean): Promise<PhaseTimes> {
    const [a, b, c, d] = this.events as [Event, Event, Event, Event];
    const bytes = this.elements * 4;
    this.hold.launch({ grid: 1, block: 1, stream: this.stream }, HOLD_NS);
    a.record(this.stream);
    if (phases) this.stream.copy(this.buffer, this.input, { byteLength: bytes });
    b.record(this.stream);
    this.kernel.launch({ grid: fmaGrid(this.elements), block: FMA_BLOCK, stream: this.stream }, this.buffer, this.elements, intensity, FMA_A, FMA_B);
    c.record(this.stream);
    if (phases) this.stream.copy(this.output, this.buffer, { byteLength: bytes });
    d.record(this.stream);
    await d.synchronize();
    return { copyIn: Event.elapsedMs(a, b), kernel: Event.elapsedMs(b, c), copyOut: Event.elapsedMs(c, d) };
  }

  /** Medians over {@link REPEATS} timed repetitions. */
  async median(intensity: number, phases: boolean): Promise<PhaseTimes> {
    const runs: PhaseTimes[] = [];
    for (let r = -WARMUP_REPEATS; r < REPEATS; r++) {
      const times = await this.once(intensity, phases);
      if (r >= 0) runs.push(times);
    }
    const median = (key: keyof PhaseTimes) => summarize(runs.map((t) => t[key])).median;
    return { copyIn: median('copyIn'), kernel: median('kernel'), copyOut: median('copyOut') };
  }

  async dispose(): Promise<void> {
    this.buffer.free({ stream: this.stream });
    await this.stream.synchronize();
    for (const event of this.events) event.destroy();
    this.input.free();
    this.output.free();
    this.stream.destroy();
  }
}

/** The calibrated (or given) intensity and the phases measured alone with it. */
export interface Calibration {
  intensity: number;
  calibrated: boolean;
  phases: PhaseTimes;
}

/** Measures the phases alone; unless `intensity` is given, first picks the number of fmaf steps that makes the kernel
 * take about as long as one copy (the mean of copy-in and copy-out), from a linear fit of the kernel time at two step
 * counts and one proportional refinement, within the --intensity limits. */
export async function calibrate(device: Device, kernels: BenchKernels, elements: number, intensity: number | undefined): Promise<Calibration> {
  const bench = new Bench(device, kernels.fmaSteps, kernels.hold, elements);
  try {
    let chosen = intensity;
    if (chosen === undefined) {
      const [min, max] = LIMITS.intensity;
      const clamp = (n: number) => Math.min(max, Math.max(min, Math.round(n)));
      const copies = await bench.median(1, true);
      const target = (copies.copyIn + copies.copyOut) / 2;
      const low = 16;
      const high = 1024;
      const tLow = (await bench.median(low, false)).kernel;
      const tHigh = (await bench.median(high, false)).kernel;
      const slope = (tHigh - tLow) / (high - low);
      const intercept = tLow - slope * low;
      if (!(slope > 0)) {
        chosen = clamp((high * target) / Math.max(tHigh, 1e-6));
      } else {
        chosen = clamp((target - intercept) / slope);
        const measured = (await bench.median(chosen, false)).kernel;
        if (measured - intercept > 0) chosen = clamp((chosen * (target - intercept)) / (measured - intercept));
      }
    }
    const phases = await bench.median(chosen, true);
    return { intensity: chosen, calibrated: intensity === undefined, phases };
  } finally {
    await bench.dispose();
  }
}
