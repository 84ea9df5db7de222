// The simulated driver (scripts/simulated-driver.cc) for tests: built once per version of its sources into the
// system's temporary folder, and run in child processes through CUDA_STREAM_POOL_LIBCUDA. Its header says what it
// models and how SIMULATED_DRIVER_FAIL injects failures.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { runChild, type ChildResult } from './child.js';
import { repositoryRoot } from './paths.js';
import { needsCompiler } from './native-check.js';

export { needsCompiler };

const sources = ['scripts/simulated-driver.cc', 'packages/cuda-stream-pool/src/internal/cuda-driver.h'].map((s) => path.join(repositoryRoot, s));
let built: string | undefined;

/** The path of the simulated libcuda.so.1, building it on first use (about 10 s). Tests that call it skip through
 * {@link needsCompiler} where there is no compiler. */
export function simulatedDriver(): string {
  if (built) return built;
  const hash = createHash('sha256');
  for (const file of sources) hash.update(readFileSync(file));
  const folder = path.join(os.tmpdir(), `csp-simulated-driver-${hash.digest('hex').slice(0, 16)}`);
  const library = path.join(folder, 'libcuda.so.1');
  if (!existsSync(library)) {
    mkdirSync(folder, { recursive: true });
    // Built under a name of its own, then renamed: test files running side by side never load a half-written file.
    const partial = `${library}.${process.pid}`;
    const compiler = process.env.CXX ?? 'g++';
    const args = ['-std=c++17', '-O2', '-Wall', '-Werror', '-pthread', '-shared', '-fPIC', '-I', path.join(repositoryRoot, 'packages', 'cuda-stream-pool', 'src'), sources[0]!, '-o', partial];
    const build = spawnSync(compiler, args, { encoding: 'utf8' });
    assert.equal(build.status, 0, build.stderr);
    renameSync(partial, library);
  }
  built = library;
  return library;
}

/** The thread a failure rule names for the stream-ordered calls that deferred submission records (launches, copies
 * and fills between device and pinned memory, event records, stream waits on events): the main thread in direct
 * mode; with `CUDA_STREAM_POOL_SUBMISSION=deferred` (which the children inherit), `any`, the calls of every thread
 * counted together, since each stream's operations go to one of several submission threads. A test using it makes
 * those calls in an order that does not depend on timing. */
export const issuer = process.env.CUDA_STREAM_POOL_SUBMISSION === 'deferred' ? 'any' : 'main';

/** Options of {@link runSimulated}. */
export interface SimulatedOptions {
  /** Visible devices. @defaultValue 1 */
  devices?: number;
  /** Each stream operation's delay, in microseconds. @defaultValue 0 */
  operationDelayUs?: number;
  /** SIMULATED_DRIVER_FAIL, the failure injection rules. */
  fail?: string;
  /** More environment variables. */
  env?: Record<string, string>;
  /** @defaultValue 60000 */
  timeoutMs?: number;
  /** A command that runs the child's Node.js (runChild's `launcher`), for example `['taskset', '-c', '0']`. */
  launcher?: string[];
}

/** The environment variables that put a child process on the simulated driver with `options`. */
export function simulatedEnv(options: SimulatedOptions = {}): Record<string, string> {
  const env: Record<string, string> = {
    CUDA_STREAM_POOL_LIBCUDA: simulatedDriver(),
    SIMULATED_DRIVER_DEVICES: String(options.devices ?? 1),
    SIMULATED_DRIVER_OPERATION_DELAY_US: String(options.operationDelayUs ?? 0),
    ...options.env,
  };
  if (options.fail) env.SIMULATED_DRIVER_FAIL = options.fail;
  return env;
}

/** Runs `source` (an ES module importing the package by name) in a child process on the simulated driver. */
export function runSimulated(source: string, options: SimulatedOptions = {}): Promise<ChildResult> {
  return runChild(source, simulatedEnv(options), options.timeoutMs, options.launcher);
}

/** Runs `source` as {@link runSimulated} does and returns the JSON its last stdout line holds, after checking that it
 * exited 0 and that the simulated driver saw nothing wrong (no line of its own on stderr: a freed handle or memory
 * touched). */
export async function simulatedJson<T = unknown>(source: string, options: SimulatedOptions = {}): Promise<T> {
  const result = await runSimulated(source, options);
  assert.equal(result.code, 0, `exit ${result.code} ${result.signal ?? ''}\n${result.stderr}`);
  assert.doesNotMatch(result.stderr, /simulated driver:/);
  const lines = result.stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]!) as T;
}

/** Runs `source` as {@link simulatedJson} does, with the simulated driver counting calls (SIMULATED_DRIVER_COUNTS):
 * returns the JSON and each entry point's calls, every thread's added together (with deferred submission,
 * submission threads issue what the JS thread recorded). */
export async function simulatedJsonWithCalls<T = unknown>(source: string, options: SimulatedOptions = {}): Promise<{ result: T; calls: Record<string, number> }> {
  const folder = mkdtempSync(path.join(os.tmpdir(), 'csp-counts-'));
  try {
    const file = path.join(folder, 'counts.json');
    const result = await simulatedJson<T>(source, { ...options, env: { ...options.env, SIMULATED_DRIVER_COUNTS: file } });
    const calls: Record<string, number> = {};
    for (const thread of Object.values(JSON.parse(readFileSync(file, 'utf8')) as Record<string, Record<string, number>>))
      for (const [entry, count] of Object.entries(thread)) calls[entry] = (calls[entry] ?? 0) + count;
    return { result, calls };
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

/** Source to put at the top of a {@link runSimulated} snippet: `gc()`, and `await collectUntil(done)`, which collects
 * garbage every 10 ms, for at most 2 s, until `done()` holds (finalizers run between the rounds). */
export const collectGarbage = `
  import v8 from 'node:v8';
  import vm from 'node:vm';
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc');
  async function collectUntil(done) {
    for (let round = 0; round < 200 && !done(); round++) {
      gc();
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }`;

/** A snippet for {@link simulatedJson} that runs `attempt` (an expression, awaited) under the failure rule, then again
 * without a failure (`retried` holds its result for `teardown`); prints the first error's name, code and call, and
 * the live objects before and after the failure. */
export const failOnce = (setup: string, attempt: string, teardown = ''): string => `
  import { cuda, DeviceBuffer, Event, Module, PinnedBuffer, Stream, StreamPool } from 'cuda-stream-pool';
  ${setup}
  const count = () => { const o = cuda.liveObjects(); return [o.streams, o.events, o.modules, o.deviceBytes, o.pinnedBytes]; };
  const before = count();
  let error;
  try { await (${attempt}); } catch (e) { error = e; }
  const afterFailure = count();
  const retried = await (${attempt});
  ${teardown}
  console.log(JSON.stringify({
    name: error?.name, code: error?.code, call: error?.call, before, afterFailure, retried: retried !== undefined,
  }));`;
