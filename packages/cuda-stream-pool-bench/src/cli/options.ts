// The options of `cuda-stream-pool bench`: parsers that commander calls per option, and the checks of option
// combinations. All of it runs before the GPU is touched; a bad value is a usage error (exit 64) that names the
// option and what it accepts.
import { closeSync, existsSync, openSync, statSync, unlinkSync } from 'node:fs';
import path from 'node:path';

import { InvalidArgumentError } from 'commander';

import { MODES, type Mode } from '../modes.js';

/** The exit code of a usage error (EX_USAGE in sysexits.h): a bad option, value or combination. */
export const EXIT_USAGE = 64;
/** The exit code when there is no usable GPU; the message is `cuda.unavailableReason`. */
export const EXIT_NO_GPU = 2;
/** The exit code when the run failed: a task's output did not verify, or the driver failed. */
export const EXIT_FAILED = 1;

/** The environment variable of the test hook that corrupts one output element: `task:element`. */
export const CORRUPT_VARIABLE = 'CUDA_STREAM_POOL_BENCH_CORRUPT';

/** Inclusive limits of the integer options, shown in `--help` and in every error message. */
export const LIMITS = {
  tasks: [1, 10_000_000],
  concurrency: [1, 1024],
  workers: [0, 64],
  elements: [1, 2 ** 28],
  intensity: [1, 100_000],
  poolSize: [1, 1024],
  runs: [1, 100],
  device: [0, 1023],
} as const;

/** The options of `bench`, as commander hands them to the action once every value has been parsed. */
export interface BenchCliOptions {
  tasks: number;
  concurrency: number;
  workers: number;
  elements: number;
  /** Absent: calibrate at start. */
  intensity?: number;
  /** Absent: every mode. */
  mode?: Mode[];
  poolSize: number;
  runs: number;
  device: number;
  /** Absent: `device` alone. `'all'`: every visible device. */
  devices?: number[] | 'all';
  json: boolean;
  quiet: boolean;
  /** Absent: no timeline. */
  timeline?: string;
  /** Absent: no trace file. */
  trace?: string;
  /** Record phase times (also implied by --timeline and --trace). */
  phases: boolean;
  /** Also run every mode with one executor process per device. */
  processes: boolean;
}

/** A commander argument parser for an integer option from `min` to `max` inclusive: decimal digits only, without a
 * sign, spaces or a leading zero, so "1e3", "0x10", "12abc", "+12", " 12" and "012" (octal to some) are refused rather
 * than half-read. */
export function integerOption(min: number, max: number): (value: string) => number {
  return (value) => {
    const parsed = /^(0|[1-9]\d*)$/.test(value) ? Number(value) : Number.NaN;
    if (!Number.isSafeInteger(parsed) || parsed < min || parsed > max)
      throw new InvalidArgumentError(`Accepted: an integer from ${min} to ${max}.`);
    return parsed;
  };
}

/** The commander argument parser of `--mode`: a comma list, and the option may repeat; the modes accumulate in the
 * order given, without duplicates. */
export function modeOption(value: string, previous: Mode[] | undefined): Mode[] {
  const out = [...(previous ?? [])];
  const names = value.split(',').map((name) => name.trim());
  for (const name of names) {
    if (!(MODES as readonly string[]).includes(name)) {
      const shown = name === '' ? 'An empty name' : `"${name}"`;
      throw new InvalidArgumentError(`${shown} is not a mode. Accepted: a comma list of ${MODES.join(', ')} (the option may repeat).`);
    }
    if (!out.includes(name as Mode)) out.push(name as Mode);
  }
  return out;
}

/** The commander argument parser of `--devices`: `all`, or a comma list of distinct device ordinals (each from
 * LIMITS.device, plain decimal digits as for the integer options; checked against the visible devices once the driver
 * is open). */
export function devicesOption(value: string): number[] | 'all' {
  if (value === 'all') return 'all';
  const [min, max] = LIMITS.device;
  const accepted = `Accepted: all, or a comma list of distinct device ordinals from ${min} to ${max} (for example 0,1).`;
  const ordinals = value.split(',').map((text) => {
    const ordinal = /^(0|[1-9]\d*)$/.test(text) ? Number(text) : Number.NaN;
    if (!Number.isSafeInteger(ordinal) || ordinal < min || ordinal > max)
      throw new InvalidArgumentError(`${text === '' ? 'An empty entry' : `"${text}"`} is not a device ordinal. ${accepted}`);
    return ordinal;
  });
  const twice = ordinals.find((ordinal, i) => ordinals.indexOf(ordinal) !== i);
  if (twice !== undefined) throw new InvalidArgumentError(`Device ${twice} is named twice. ${accepted}`);
  return ordinals;
}

/** Why `file` cannot be written, or undefined when it can: its directory must exist and be a directory (the nearest
 * existing part of the path is named when it is a file), `file` must not be a directory, and opening it for writing
 * must succeed (a new file is created and removed again). */
export function unwritableReason(file: string): string | undefined {
  const resolved = path.resolve(file);
  if (existsSync(resolved) && statSync(resolved).isDirectory()) return `${file} is a directory`;
  const directory = path.dirname(resolved);
  let existing = directory;
  while (!existsSync(existing)) existing = path.dirname(existing);
  if (!statSync(existing).isDirectory()) return `${existing} is not a directory`;
  if (existing !== directory) return `the directory ${directory} does not exist`;
  // A real attempt, not only the permission bits (root passes those even on a read-only file system): open the
  // existing file for appending, or create the new one and remove it again.
  const exists = existsSync(resolved);
  try {
    closeSync(openSync(resolved, exists ? 'a' : 'wx'));
    if (!exists) unlinkSync(resolved);
  } catch (error) {
    return `${exists ? resolved : `a file in ${directory}`} cannot be written (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`;
  }
  return undefined;
}

/** A commander argument parser for an output file whose name matches `extension`, checked writable before anything
 * runs (see {@link unwritableReason}). `what`: the kind of file, for the message. */
export function outputFileOption(extension: RegExp, what: string): (value: string) => string {
  return (value) => {
    if (!extension.test(value)) throw new InvalidArgumentError(`Accepted: ${what}.`);
    const reason = unwritableReason(value);
    if (reason) throw new InvalidArgumentError(`Accepted: a writable file in an existing directory; ${reason}.`);
    return value;
  };
}

/** The commander argument parser of `--timeline` (and `report --html`): a writable .html file. */
export const timelineOption = outputFileOption(/\.html?$/i, 'a file name ending in .html or .htm (the timeline is an HTML page)');

/** The commander argument parser of `--trace`: a writable .json file. */
export const traceOption = outputFileOption(/\.json$/i, 'a file name ending in .json (the trace is JSON)');

/** Where the corruption test hook points: the task (0-based, over the whole run) and the element of its output. */
export interface CorruptHook {
  task: number;
  element: number;
}

/** Checks option combinations that no single parser can see, and the test hook; returns a usage message naming the
 * options and what they accept, or the parsed hook. */
export function checkCombinations(options: BenchCliOptions, env: NodeJS.ProcessEnv): { error: string } | { corrupt: CorruptHook | undefined } {
  if (options.workers > 0 && options.concurrency < options.workers)
    return {
      error:
        `error: option '--concurrency <count>' (${options.concurrency}) must be at least option '--workers <count>' ` +
        `(${options.workers}): tasks in flight are split among the workers, and each needs at least one.`,
    };
  const raw = env[CORRUPT_VARIABLE];
  if (raw === undefined || raw === '') return { corrupt: undefined };
  const match = /^\s*(\d+)\s*:\s*(\d+)\s*$/.exec(raw);
  const task = match ? Number(match[1]) : Number.NaN;
  const element = match ? Number(match[2]) : Number.NaN;
  if (!(task < options.tasks) || !(element < options.elements))
    return {
      error:
        `error: ${CORRUPT_VARIABLE} must be "task:element" with task from 0 to ${options.tasks - 1} (--tasks) and element ` +
        `from 0 to ${options.elements - 1} (--elements); received ${JSON.stringify(raw)}.`,
    };
  return { corrupt: { task, element } };
}
