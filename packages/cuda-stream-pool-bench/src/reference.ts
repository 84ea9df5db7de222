// The CPU side of the executor benchmark's inputs: the distinct, deterministically generated partitions (their values,
// the same in every thread and run), the sample of elements every task verifies, and the reference results of that
// sample, computed once. Plain computation, no GPU. See Note [exact fmaf] in fmaf.ts.
import { fmaSteps } from './fmaf.js';

/** Distinct partitions at most; tasks reuse them round-robin (task t reads partition t % count). Enough that tasks
 * in flight read different memory, few enough that the pinned inputs stay small (8 × 4 MiB at the default size). */
export const MAX_PARTITIONS = 8;

/** Elements of each task's output compared with the reference (spread evenly, the first and last included). */
export const SAMPLE_SIZE = 256;

/** The kernel's constants: v = fmaf(v, A, B). Inputs lie in [-1, 1); the fixed point B / (1 - A) is 0.5, approached
 * slowly (A^n), so after thousands of steps the values still differ per element and rounding differs per step. */
export const FMA_A = Math.fround(0.99971);
/** See {@link FMA_A}. */
export const FMA_B = Math.fround(0.000145);

/** The parameters that define the inputs and their references; the same in every thread. */
export interface InputSpec {
  elements: number;
  intensity: number;
  partitions: number;
  /** Output elements every task verifies, ascending. */
  sample: number[];
}

/** The sample of `elements` elements that every task verifies: SAMPLE_SIZE indices spread evenly from the first to
 * the last, plus `extra` (the element of the corruption test hook, which must be checked to be caught). */
export function sampleIndices(elements: number, extra?: number): number[] {
  const count = Math.min(elements, SAMPLE_SIZE);
  const set = new Set<number>();
  for (let k = 0; k < count; k++) set.add(count === 1 ? 0 : Math.round((k * (elements - 1)) / (count - 1)));
  if (extra !== undefined) set.add(extra);
  return [...set].sort((a, b) => a - b);
}

/** A small, fast, seedable generator (mulberry32) of numbers in [0, 1): the same partitions in every thread and
 * every run. */
export function generator(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** Fills `out` with partition `index`'s values: float32 numbers in [-1, 1). */
export function fillPartition(out: Float32Array, index: number): void {
  const next = generator(0x9e3779b9 ^ Math.imul(index + 1, 0x85ebca6b));
  for (let i = 0; i < out.length; i++) out[i] = next() * 2 - 1;
}

/** The expected outputs of the sample of every partition: `references[p][k]` is fma_steps of partition p's element
 * `spec.sample[k]`. Computed on the CPU, once, before timing; cost `partitions × sample × intensity` fmaf calls. */
export function computeReferences(spec: InputSpec): Float32Array[] {
  const references: Float32Array[] = [];
  const values = new Float32Array(spec.elements);
  for (let p = 0; p < spec.partitions; p++) {
    fillPartition(values, p);
    references.push(Float32Array.from(spec.sample, (i) => fmaSteps(values[i]!, spec.intensity, FMA_A, FMA_B)));
  }
  return references;
}

