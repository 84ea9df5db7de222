// The options of `npm run soak` (test/soak/main.ts): parsed with commander, checked before anything touches the GPU.
import { Command, CommanderError, InvalidArgumentError } from 'commander';

import { integerOption } from '#bench/cli/options.js';

/** What one soak run does. Every seed runs in its own child process (test/soak/seed.ts). */
export interface SoakOptions {
  /** The seeds to run, one after the other, each an integer from 0 to 2**32 - 1. */
  seeds: number[];
  /** Seconds of random steps per seed (the teardown and its checks come after). */
  seconds: number;
  /** Worker threads sharing the main thread's pool and buffers; 0 runs the main thread alone. */
  workers: number;
  /** Stop after this many steps of the main thread (`--steps`, or the step to replay up to). */
  steps: number | undefined;
  /** Print every step of the main thread as it starts (set by `--replay`). */
  verbose: boolean;
  /** Milliseconds any single await may take before the run fails as a hang naming the step. */
  stepTimeoutMs: number;
  /** Seconds a thread's step counter may stand still before the watchdog reports it and kills the process. */
  watchdogSeconds: number;
  /** How many of the last steps a failure prints (per thread). */
  history: number;
}

const SEED_MAX = 2 ** 32 - 1;
const seedOption = integerOption(0, SEED_MAX);

function seedList(value: string): number[] {
  const parts = value.split(',').map((part) => part.trim());
  try {
    return parts.map((part) => seedOption(part));
  } catch {
    throw new InvalidArgumentError(`Accepted: a comma list of integers from 0 to ${SEED_MAX}.`);
  }
}

function secondsOption(value: string): number {
  const seconds = Number(value.trim());
  if (value.trim() === '' || !Number.isFinite(seconds) || seconds <= 0 || seconds > 86_400)
    throw new InvalidArgumentError('Accepted: a number of seconds above 0, at most 86400.');
  return seconds;
}

/** The `soak` command line: option definitions, help text, no action. */
export function soakCommand(): Command {
  return new Command('soak')
    .description(
      'Random sequences of valid and invalid calls over the whole public API, from the main thread and worker threads ' +
        'sharing a pool and buffers, checked after every step. Needs a CUDA GPU. Each seed runs in a child process.',
    )
    .option('--seed <n>', `one seed (an integer from 0 to ${SEED_MAX})`, seedOption)
    .option('--seeds <list>', 'a comma list of seeds, run one after the other', seedList)
    .option('--seconds <s>', 'seconds of random steps per seed', secondsOption, 10)
    .option('--workers <k>', 'worker threads sharing the pool and buffers (0: main thread only)', integerOption(0, 32), 0)
    .option('--replay <seed>', 'run one seed step by step, printing each step (with --steps: up to that step)', seedOption)
    .option('--steps <n>', 'stop after this many steps of the main thread', integerOption(1, Number.MAX_SAFE_INTEGER))
    .option('--step-timeout <ms>', 'milliseconds any await may take before it counts as a hang', integerOption(100, 600_000), 10_000)
    .option('--watchdog <s>', 'seconds a blocked thread may stand still before the process is killed', integerOption(1, 3_600), 30)
    .option('--history <n>', 'last steps printed per thread on failure', integerOption(1, 64), 20)
    .allowExcessArguments(false);
}

/** Parses `argv` (the arguments after the program name). @throws CommanderError (exit code 64 for usage errors;
 * 0 for --help) with the message commander prints. */
export function parseSoakOptions(argv: readonly string[], command: Command = soakCommand()): SoakOptions {
  command.exitOverride();
  // `npm run soak -- --seed 1` passes the `--` on where npm is emulated (the GPU machine has no npm).
  command.parse(argv[0] === '--' ? argv.slice(1) : [...argv], { from: 'user' });
  const o = command.opts<{
    seed?: number;
    seeds?: number[];
    seconds: number;
    workers: number;
    replay?: number;
    steps?: number;
    stepTimeout: number;
    watchdog: number;
    history: number;
  }>();
  const given = [o.seed !== undefined && '--seed', o.seeds !== undefined && '--seeds', o.replay !== undefined && '--replay'].filter(Boolean);
  if (given.length > 1) throw usage(`error: options ${given.join(' and ')} cannot be combined; give one of them.`);
  const seeds = o.replay !== undefined ? [o.replay] : o.seeds ?? (o.seed !== undefined ? [o.seed] : [1]);
  const replaying = o.replay !== undefined;
  if (o.watchdog * 1000 <= o.stepTimeout)
    throw usage(
      `error: option '--watchdog <s>' (${o.watchdog} s) must be longer than option '--step-timeout <ms>' (${o.stepTimeout} ms): ` +
        'an await that hangs must fail with its step before the watchdog kills the process.',
    );
  return {
    seeds,
    // A replay stops at its step count, not at a time.
    seconds: replaying && o.steps !== undefined ? 86_400 : o.seconds,
    workers: o.workers,
    steps: o.steps,
    verbose: replaying,
    stepTimeoutMs: o.stepTimeout,
    watchdogSeconds: o.watchdog,
    history: o.history,
  };
}

function usage(message: string): CommanderError {
  return new CommanderError(64, 'cuda-stream-pool.soak.usage', message);
}
