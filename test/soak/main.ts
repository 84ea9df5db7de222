// `npm run soak`: runs each seed of the soak in its own child process (test/soak/seed.ts) and prints a tally per seed
// and in all; exits 1 when any seed failed (a broken invariant, a hang, a killed or stuck process), 64 for bad
// options, 2 without a GPU. See the README's "Soak testing".
import { fork } from 'node:child_process';

import { CommanderError } from 'commander';

import { cuda } from 'cuda-stream-pool';

import { parseSoakOptions, type SoakOptions } from './options.js';
import type { SeedResult, SeedRun } from './report.js';

const seedScript = new URL('./seed.js', import.meta.url);
/** How long a seed's process may take to exit after it reported its checks. */
const EXIT_GRACE_MS = 20_000;

interface Outcome {
  seed: number;
  result: SeedResult | undefined;
  /** Why the seed failed beyond its own report (a signal, a timeout, a process that would not exit). */
  problem: string | undefined;
}

function runSeed(options: SoakOptions, seed: number): Promise<Outcome> {
  const run: SeedRun = {
    seed,
    seconds: options.seconds,
    workers: options.workers,
    steps: options.steps,
    verbose: options.verbose,
    stepTimeoutMs: options.stepTimeoutMs,
    watchdogSeconds: options.watchdogSeconds,
    history: options.history,
  };
  // Generous: the steps, the teardown (a few step timeouts), worker stops, the watchdog's own limit.
  const limitMs = (options.steps !== undefined ? 600 : options.seconds) * 1000 + 10 * options.stepTimeoutMs + options.watchdogSeconds * 1000;
  return new Promise((resolve) => {
    // Each seed's process checks the native layer's lock order and aborts, with both locks named, on a violation.
    const env = { ...process.env, CUDA_STREAM_POOL_CHECK_LOCK_ORDER: process.env.CUDA_STREAM_POOL_CHECK_LOCK_ORDER ?? '1' };
    const child = fork(seedScript, [JSON.stringify(run)], { execArgv: ['--expose-gc'], env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    let result: SeedResult | undefined;
    let problem: string | undefined;
    let grace: NodeJS.Timeout | undefined;
    const limit = setTimeout(() => {
      problem = `the seed's process did not finish within ${(limitMs / 1000).toFixed(0)} s (killed)`;
      child.kill('SIGKILL');
    }, limitMs);
    child.on('message', (message: SeedResult) => {
      result = message;
      grace = setTimeout(() => {
        problem = `the process did not exit within ${EXIT_GRACE_MS / 1000} s after its checks passed: something keeps its event loop alive (killed)`;
        child.kill('SIGKILL');
      }, EXIT_GRACE_MS);
    });
    child.on('exit', (code, signal) => {
      clearTimeout(limit);
      clearTimeout(grace);
      if (!problem && signal) problem = `the process was killed by ${signal}${signal === 'SIGKILL' ? ' (the watchdog: see its report above)' : ''}`;
      else if (!problem && code !== 0 && (result === undefined || result.ok)) problem = `the process exited with code ${code}`;
      else if (!problem && result === undefined) problem = 'the process exited without reporting';
      resolve({ seed, result, problem });
    });
  });
}

function summary(outcome: Outcome): string {
  const { seed, result, problem } = outcome;
  if (result && !result.ok) return `seed ${seed}: FAILED at step ${result.step}: ${result.message.split('\n')[0]}${problem ? `; ${problem}` : ''}`;
  if (problem || !result) return `seed ${seed}: FAILED: ${problem}`;
  return (
    `seed ${seed}: ok  ${result.steps} + ${result.workerSteps} worker steps, ${result.workersStarted} workers (${result.workersTerminated} terminated), ` +
    `${result.invalidCalls} typed refusals, ${result.roundTrips} round trips, ${result.seconds.toFixed(1)} s`
  );
}

let options: SoakOptions;
try {
  options = parseSoakOptions(process.argv.slice(2));
} catch (error) {
  if (error instanceof CommanderError) {
    // Commander prints its own errors and the help; the combination checks are ours to print.
    if (error.code === 'cuda-stream-pool.soak.usage') console.error(error.message);
    process.exit(error.exitCode === 0 ? 0 : 64);
  }
  throw error;
}
if (!cuda.available) {
  console.error(`soak: needs a CUDA GPU: ${cuda.unavailableReason}`);
  process.exit(2);
}

console.log(
  `soak: seeds ${options.seeds.join(', ')}; ${options.steps !== undefined ? `${options.steps} steps` : `${options.seconds} s`} each; ` +
    `${options.workers} workers; step timeout ${options.stepTimeoutMs} ms; watchdog ${options.watchdogSeconds} s`,
);
// Loaded only now: the operations' modules open the driver, which the option checks above must not need.
const { notSimulated } = await import('../support/gpu.js');
const { leftOut } = await import('./operations/index.js');
const reasons = [...new Set(leftOut.map((op) => op.notSimulated!))];
for (const reason of reasons)
  console.log(`left out on the simulated driver, ${notSimulated[reason]}: ${leftOut.filter((op) => op.notSimulated === reason).map((op) => op.name).join(', ')}`);
const outcomes: Outcome[] = [];
for (const seed of options.seeds) {
  const outcome = await runSeed(options, seed);
  outcomes.push(outcome);
  console.log(summary(outcome));
}
const clean = outcomes.filter((o) => o.result?.ok && !o.problem);
const total = (pick: (r: Extract<SeedResult, { ok: true }>) => number) =>
  clean.reduce((sum, o) => sum + pick(o.result as Extract<SeedResult, { ok: true }>), 0);
console.log(
  `\nsoak: ${clean.length} of ${outcomes.length} seeds clean; in the clean seeds ${total((r) => r.steps)} main-thread and ${total((r) => r.workerSteps)} worker steps, ` +
    `${total((r) => r.workersTerminated)} workers terminated mid-work, ${total((r) => r.invalidCalls)} invalid calls refused with typed errors, ` +
    `${total((r) => r.roundTrips)} round trips checked, ${total((r) => r.seconds).toFixed(0)} s`,
);
const drawn = new Map<string, number>();
for (const o of clean) for (const [name, count] of Object.entries((o.result as Extract<SeedResult, { ok: true }>).tally)) drawn.set(name, (drawn.get(name) ?? 0) + count);
if (drawn.size > 0)
  console.log(`steps per operation (all threads, clean seeds): ${[...drawn].sort(([a], [b]) => a.localeCompare(b)).map(([name, count]) => `${name} ${count}`).join(', ')}`);
for (const o of outcomes.filter((o) => !clean.includes(o))) console.log(`  ${summary(o)}`);
process.exit(clean.length === outcomes.length ? 0 : 1);
