// The soak's seeded random choices: the benchmark's mulberry32 generator behind a few helpers, so that a seed
// replays the same sequence of choices.
import { generator } from '#bench/reference.js';

/** Seeded random choices; the same seed gives the same sequence on every run and machine. */
export class Random {
  readonly seed: number;
  readonly #next: () => number;

  /** @param seed - an integer from 0 to 2**32 - 1. */
  constructor(seed: number) {
    this.seed = seed >>> 0;
    this.#next = generator(this.seed);
  }

  /** A number in [0, 1). */
  next(): number {
    return this.#next();
  }

  /** An integer from `min` to `max`, both inclusive. */
  int(min: number, max: number): number {
    return min + Math.floor(this.#next() * (max - min + 1));
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.#next() < p;
  }

  /** One of `items` (which must not be empty). */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('Random.pick() of an empty list');
    return items[Math.floor(this.#next() * items.length)]!;
  }

  /** One of `items`, each as likely as its `weight` (non-negative; at least one positive). */
  weighted<T extends { readonly weight: number }>(items: readonly T[]): T {
    const total = items.reduce((sum, item) => sum + item.weight, 0);
    if (!(total > 0)) throw new RangeError('Random.weighted() needs a positive total weight');
    let at = this.#next() * total;
    for (const item of items) {
      at -= item.weight;
      if (at < 0) return item;
    }
    return items[items.length - 1]!;
  }

  /** A byte count from 1 to `max`, small sizes more likely (a size class first, then a size in it). */
  size(max: number): number {
    const bits = this.int(0, Math.max(0, Math.floor(Math.log2(max))));
    return Math.min(max, this.int(2 ** bits, 2 ** (bits + 1) - 1));
  }

  /** `length` random bytes. */
  bytes(length: number): Uint8Array {
    const out = new Uint8Array(length);
    for (let i = 0; i < length; i += 4) {
      const word = Math.floor(this.#next() * 2 ** 32);
      for (let k = 0; k < 4 && i + k < length; k++) out[i + k] = (word >>> (8 * k)) & 0xff;
    }
    return out;
  }

  /** An independent generator for a numbered part of the run (a worker), derived from this seed and `label`. */
  derive(label: number): Random {
    return new Random(Math.imul(this.seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(label + 1, 0xc2b2ae35));
  }
}
