// Each soak thread's step counter and last step lines, in a SharedArrayBuffer that the watchdog thread reads while
// the stepping thread may be blocked (so the lines are written before each step runs, not after).

/** Step lines kept per thread (the most `--history` can ask for). */
export const LINES = 64;
/** Bytes kept of each step line (UTF-8; longer lines are cut). */
export const LINE_BYTES = 256;
const HEADER_WORDS = 4; // active, step, lines written, unused
const SLOT_BYTES = 4 * HEADER_WORDS + 4 * LINES + LINES * LINE_BYTES;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A buffer for `threads` slots: slot 0 is the main thread, slot i + 1 worker i (its replacements reuse it). */
export function heartbeatBuffer(threads: number): SharedArrayBuffer {
  return new SharedArrayBuffer(threads * SLOT_BYTES);
}

/** The number of slots in a heartbeat buffer. */
export function heartbeatSlots(buffer: SharedArrayBuffer): number {
  return Math.floor(buffer.byteLength / SLOT_BYTES);
}

/** What a slot shows: whether its thread is stepping, its step number and its last lines (oldest first). */
export interface SlotState {
  active: boolean;
  step: number;
  lines: string[];
}

/** One thread's slot. The stepping thread writes; any thread reads. */
export class Heartbeat {
  readonly #header: Int32Array;
  readonly #lengths: Int32Array;
  readonly #bytes: Uint8Array;

  constructor(buffer: SharedArrayBuffer, slot: number) {
    const base = slot * SLOT_BYTES;
    if (slot < 0 || base + SLOT_BYTES > buffer.byteLength) throw new RangeError(`no heartbeat slot ${slot}`);
    this.#header = new Int32Array(buffer, base, HEADER_WORDS);
    this.#lengths = new Int32Array(buffer, base + 4 * HEADER_WORDS, LINES);
    this.#bytes = new Uint8Array(buffer, base + 4 * HEADER_WORDS + 4 * LINES, LINES * LINE_BYTES);
  }

  /** Starts a thread's life in the slot: active, step 0, no lines. */
  reset(): void {
    Atomics.store(this.#header, 2, 0);
    Atomics.store(this.#header, 1, 0);
    Atomics.store(this.#header, 0, 1);
  }

  /** Marks the slot idle (its thread finished or is being terminated): the watchdog ignores it. */
  idle(): void {
    Atomics.store(this.#header, 0, 0);
  }

  /** Records that step `step` starts, described by `line`. */
  begin(step: number, line: string): void {
    const written = Atomics.load(this.#header, 2);
    const at = written % LINES;
    const target = this.#bytes.subarray(at * LINE_BYTES, (at + 1) * LINE_BYTES);
    // encodeInto cuts at a character boundary when the line is too long.
    const { written: length } = encoder.encodeInto(line, target);
    Atomics.store(this.#lengths, at, length);
    Atomics.store(this.#header, 2, written + 1);
    Atomics.store(this.#header, 1, step);
  }

  /** The slot's state, with at most `count` last lines. */
  read(count: number = LINES): SlotState {
    const written = Atomics.load(this.#header, 2);
    const lines: string[] = [];
    for (let n = Math.max(0, written - Math.min(count, LINES)); n < written; n++) {
      const at = n % LINES;
      const length = Math.min(Atomics.load(this.#lengths, at), LINE_BYTES);
      // Copied out: TextDecoder refuses views of shared memory.
      lines.push(decoder.decode(this.#bytes.slice(at * LINE_BYTES, at * LINE_BYTES + length)));
    }
    return { active: Atomics.load(this.#header, 0) === 1, step: Atomics.load(this.#header, 1), lines };
  }
}
