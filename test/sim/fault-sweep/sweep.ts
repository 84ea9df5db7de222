// The fault sweep: fails the driver calls of each workload (workloads/) one at a time on the simulated driver.
// `npm run fault-sweep`; `--help` for its options. Exit 0: no finding; 1: findings (listed, each with the command
// that replays it); 2: a usage error. It counts each thread's calls of each entry point in one run of a workload
// (SIMULATED_DRIVER_COUNTS), then fails a spread of them, each in a process of its own that runs the workload twice
// (child.ts). Each such process must: end by itself (no signal, no hang); meet the failure with a typed error of the
// library or finish; leave cuda.liveObjects() as it started; count no cuda.callbackFailures(); draw no complaint from
// the simulated driver; never hand back wrong results without an error (a lost operation may); and run the workload
// cleanly the second time, or after a sticky fault fail it with that fault, with the device unhealthy.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { repositoryRoot } from '../../support/gpu.js';
import { simulatedDriver } from '../../support/simulated-driver.js';
import type { ChildReport, RunOutcome } from './child.js';
import type { Workload } from './workload.js';
import { workloads } from './workloads/index.js';

const childScript = path.join(path.dirname(fileURLToPath(import.meta.url)), 'child.js');

/** Each thread's calls of each entry point, as SIMULATED_DRIVER_COUNTS writes them. */
type Counts = Record<string, Record<string, number>>;

/** What an injected call does: fail at once with a result that is not sticky, queue work that faults the device,
 * or queue work that never happens. */
type Action = 'fail' | 'fault' | 'lost';

const FAIL_RESULT = 'CUDA_ERROR_OUT_OF_MEMORY';
const FAULT_RESULT = 'CUDA_ERROR_ILLEGAL_ADDRESS';

// Entry points the loader calls while opening the driver: failing one leaves CUDA unavailable for the process (a
// documented outcome: cuda.available false, the reason said), so the second run cannot succeed there; failing the
// lookup of an optional entry point leaves its feature unsupported (an UnsupportedError in both runs).
const LOADER = new Set(['cuInit', 'cuDeviceGetCount', 'cuDriverGetVersion', 'cuGetProcAddress_v2']);

// The simulated driver's calls that queue work (its queues_work()): only those can fault or be lost.
const QUEUES_WORK = new Set([
  'cuGraphLaunch', 'cuStreamWriteValue64', 'cuStreamWaitValue64', 'cuEventRecord', 'cuStreamWaitEvent', 'cuLaunchKernel',
  'cuLaunchKernelEx', 'cuMemFreeAsync', 'cuMemPrefetchAsync', 'cuMemcpyAsync', 'cuMemcpyHtoDAsync', 'cuMemcpyDtoHAsync',
  'cuMemcpyDtoDAsync', 'cuMemcpyPeerAsync', 'cuMemsetD8Async', 'cuMemsetD32Async', 'cuMemcpyBatchAsync', 'cuMemcpy2DAsync',
]);

// Cases left out, each with why: a workload (or '*'), an entry point, a thread key (or '*'), an action (or '*'), and
// a call number (or every call).
const EXCLUDED: readonly { workload: string; entry: string; thread: string; action: Action | '*'; call?: number; why: string }[] = [];

// Whether EXCLUDED leaves out these cases: every call when `call` is not given, else that call.
function excluded(workload: Workload, entry: string, thread: string, action: Action, call?: number): boolean {
  return EXCLUDED.some(
    (x) =>
      x.call === call &&
      (x.workload === '*' || x.workload === workload.name) &&
      x.entry === entry &&
      (x.thread === '*' || x.thread === thread) &&
      (x.action === '*' || x.action === action),
  );
}

/** One injected run: which call of which workload fails, and how. */
interface Case {
  workload: Workload;
  entry: string;
  /** The thread as the counts name it: `main/1`, `csp-poller/1`, ... */
  thread: string;
  call: number;
  action: Action;
}

/** A run's verdict. */
interface Verdict {
  case: Case;
  /** False when the call was never made (a thread's calls that depend on timing). */
  reached: boolean;
  problems: string[];
  ms: number;
}

interface ChildRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
  ms: number;
}

/** The rule that fails `c`, in SIMULATED_DRIVER_FAIL's syntax. */
function rule(c: Case): string {
  const thread = c.thread === 'main/1' ? '' : `@${c.thread}`;
  const action = c.action === 'fail' ? FAIL_RESULT : c.action === 'fault' ? `fault:${FAULT_RESULT}` : 'lost';
  return `${c.entry}${thread}:${c.call}=${action}`;
}

function environment(workload: Workload, driver: string, extra: Record<string, string>): Record<string, string> {
  return {
    ...process.env,
    CUDA_STREAM_POOL_LIBCUDA: driver,
    // The library's own check of its lock order, as in the test runner: an inversion aborts the child.
    CUDA_STREAM_POOL_CHECK_LOCK_ORDER: '1',
    SIMULATED_DRIVER_DEVICES: String(workload.devices ?? 1),
    // Long enough that waits go through the poller and tickets, short enough for the budget.
    SIMULATED_DRIVER_OPERATION_DELAY_US: '100',
    ...workload.env,
    ...extra,
  } as Record<string, string>;
}

/** The command that replays a case by hand, from the repository root after `npx tsc -b`. */
function replay(c: Case): string {
  const vars = { SIMULATED_DRIVER_DEVICES: String(c.workload.devices ?? 1), SIMULATED_DRIVER_OPERATION_DELAY_US: '100', ...c.workload.env };
  const env = Object.entries(vars).map(([k, v]) => `${k}=${v}`).join(' ');
  return `CUDA_STREAM_POOL_LIBCUDA=<simulated libcuda.so.1> ${env} SIMULATED_DRIVER_FAIL=${rule(c)} SIMULATED_DRIVER_TRACE=1 node dist/test/sim/fault-sweep/child.js ${c.workload.name}`;
}

function runChild(workload: Workload, env: Record<string, string>, timeoutMs: number): Promise<ChildRun> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, [childScript, workload.name], { cwd: repositoryRoot, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, timedOut, stdout, stderr, ms: performance.now() - started });
    });
  });
}

function lastJson(stdout: string): ChildReport | undefined {
  const lines = stdout.trim().split('\n');
  try {
    return JSON.parse(lines[lines.length - 1]!) as ChildReport;
  } catch {
    return undefined;
  }
}

// The simulated driver's own trace lines (SIMULATED_DRIVER_TRACE); any other line of it is a misuse it saw.
const TRACE_LINE = /^simulated driver: (injected into call |thread \S+ calls the driver)/;

function driverComplaints(stderr: string): string[] {
  return stderr.split('\n').filter((line) => line.startsWith('simulated driver:') && !TRACE_LINE.test(line));
}

const describe = (run: RunOutcome | undefined) =>
  !run ? 'did not run' : run.result === 'error' ? `${run.error!.name} ${run.error!.code ?? ''}: ${run.error!.message.split('\n')[0]}` : run.result;

/** Judges one injected run by the rules in this file's header. */
function judge(c: Case, run: ChildRun): Verdict {
  const problems: string[] = [];
  const reached = run.stderr.includes('simulated driver: injected into call');
  const report = lastJson(run.stdout);
  const verdict = { case: c, reached, problems, ms: run.ms };
  if (run.timedOut) problems.push('the process did not end (killed after the timeout)');
  else if (run.signal) problems.push(`the process ended by ${run.signal}`);
  else if (run.code !== 0 && !(run.code === 3 && report?.runs.some((r) => r.result === 'hang'))) problems.push(`the process exited ${run.code}`);
  if (!report) {
    const lines = run.stderr.trim().split('\n');
    const thrown = lines.find((line) => /^\w*Error\b/.test(line)) ?? lines.slice(-3).join(' | ');
    problems.push(`no report on stdout; stderr: ${thrown}`);
    return verdict;
  }
  for (const line of driverComplaints(run.stderr)) problems.push(`the driver saw: ${line}`);
  if (report.callbackFailures.count !== 0) problems.push(`callbackFailures ${report.callbackFailures.count}: ${report.callbackFailures.last}`);
  if (!reached) return verdict;
  if (!report.available) {
    if (!LOADER.has(c.entry)) problems.push('CUDA became unavailable');
    return verdict;
  }
  // An injected call that fell in the second run (a count that depends on timing) leaves no run to recover in.
  const injectedAt = run.stderr.indexOf('simulated driver: injected into call');
  const late = injectedAt > run.stderr.indexOf('fault sweep: run 2 begins') && run.stderr.includes('fault sweep: run 2 begins');
  // A call of a library thread at teardown (a stream released by the poller after a finalizer's wait) may come after
  // the child read the devices' health: that read cannot have seen its fault.
  const healthRead = run.stderr.indexOf('fault sweep: health read');
  const injectedBeforeHealthRead = healthRead < 0 || injectedAt < healthRead;
  const [first, second] = late ? [report.runs[1], undefined] : report.runs;
  const start = JSON.stringify(report.start);
  if (first?.result === 'hang') problems.push(`the first run hung (over its limit)`);
  if (second?.result === 'hang') problems.push(`the second run hung (over its limit)`);
  if (first?.result === 'error' && !first.error!.typed && first.error!.name !== 'WrongResult')
    problems.push(`the first run threw an untyped error: ${describe(first)}`);
  for (const [i, r] of report.runs.entries())
    if (r.result !== 'hang' && JSON.stringify(r.live) !== start) problems.push(`live objects after run ${i + 1}: ${JSON.stringify(r.live)}, at start ${start}`);
  if (c.action === 'fault') {
    if (first?.result === 'error' && first.error!.name === 'WrongResult') problems.push(`the first run read wrong results without an error: ${describe(first)}`);
    if (!late && (second?.result !== 'error' || second.error!.code !== FAULT_RESULT)) problems.push(`after the fault, the second run: ${describe(second)} (expected ${FAULT_RESULT})`);
    if (injectedBeforeHealthRead && !report.healthy.includes(false)) problems.push('after the fault, every device reports healthy');
  } else {
    // A lost operation may leave wrong bytes behind; a failed call must not (its error must reach the workload).
    if (c.action === 'fail' && first?.result === 'error' && first.error!.name === 'WrongResult') problems.push(`wrong results without an error: ${describe(first)}`);
    if (first?.result === 'error' && first.error!.sticky) problems.push(`a failure that is not sticky became a sticky one: ${describe(first)}`);
    // A failed lookup of an optional entry point leaves its feature unsupported for the process, as documented.
    const featureLost = LOADER.has(c.entry) && second?.result === 'error' && second.error!.name === 'UnsupportedError';
    if (!late && second?.result !== 'ok' && !featureLost) problems.push(`the second run: ${describe(second)}`);
    if (report.healthy.includes(false)) problems.push(`a device reports unhealthy: ${JSON.stringify(report.healthy)}`);
  }
  return verdict;
}

/** The call numbers to fail among `n` calls: all of them when few, else the first, the last and an even spread. */
function spread(n: number, most: number): number[] {
  if (n <= most) return Array.from({ length: n }, (_, i) => i + 1);
  const picks = new Set<number>([1, n]);
  for (let i = 1; picks.size < most; i++) picks.add(1 + Math.round((i * (n - 1)) / most));
  return [...picks].sort((a, b) => a - b);
}

/** The cases of one workload, from its counts (the calls of one run). */
function plan(workload: Workload, counts: Counts, options: Options): Case[] {
  const cases: Case[] = [];
  for (const [thread, entries] of Object.entries(counts)) {
    for (const [entry, n] of Object.entries(entries)) {
      if (entry === 'operation') continue; // each queued operation is also counted under its own entry point
      const loader = LOADER.has(entry);
      // The loader's calls fail the same way in every workload: once, in the first workload that makes them.
      if (loader && workload !== options.workloads[0]) continue;
      const actions: Action[] = ['fail'];
      if (QUEUES_WORK.has(entry)) actions.push('fault', 'lost');
      for (const action of actions) {
        if (excluded(workload, entry, thread, action)) continue;
        const most = action === 'fail' ? (loader ? 2 : options.perEntry) : options.perEntrySticky;
        for (const call of spread(n, most)) if (!excluded(workload, entry, thread, action, call)) cases.push({ workload, entry, thread, call, action });
      }
    }
  }
  return cases;
}

interface Options {
  workloads: readonly Workload[];
  jobs: number;
  perEntry: number;
  perEntrySticky: number;
  timeoutMs: number;
  json?: string;
  entry?: string;
}

function parseOptions(argv: string[]): Options {
  const options: Options = { workloads, jobs: 2, perEntry: 3, perEntrySticky: 2, timeoutMs: 60_000 };
  for (let i = 0; i < argv.length; i++) {
    const [flag, value] = [argv[i]!, argv[i + 1]];
    const number = () => {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 1) usage(`${flag} takes a whole number from 1`);
      i++;
      return n;
    };
    if (flag === '--workload') {
      const chosen = (value ?? '').split(',');
      options.workloads = workloads.filter((w) => chosen.includes(w.name));
      if (options.workloads.length !== chosen.length) usage(`--workload takes names among ${workloads.map((w) => w.name).join(', ')}`);
      i++;
    } else if (flag === '--entry') {
      // A name the simulated driver does not have would select nothing, and an empty sweep would read as a pass.
      if (!value || !simulatedEntryPoints().has(value)) usage(`--entry takes an entry point the simulated driver has (such as cuMemcpyDtoHAsync); got ${value ?? 'nothing'}`);
      options.entry = value;
      i++;
    } else if (flag === '--jobs') options.jobs = number();
    else if (flag === '--per-entry') options.perEntry = number();
    else if (flag === '--per-entry-sticky') options.perEntrySticky = number();
    else if (flag === '--json') {
      if (!value) usage('--json takes a file');
      // Written at the end; a path that cannot be written is said now, before the sweep runs.
      try {
        writeFileSync(value, '');
      } catch (error) {
        usage(`--json: cannot write ${value}: ${(error as Error).message}`);
      }
      options.json = value;
      i++;
    } else usage(flag === '--help' ? '' : `unknown option ${flag}`);
  }
  return options;
}

function usage(problem: string): never {
  if (problem) console.error(problem);
  console.error(`usage: node dist/test/sim/fault-sweep/sweep.js [--workload a,b] [--entry cuName] [--jobs 2] [--per-entry 3]
       [--per-entry-sticky 2] [--json file]
  Fails each driver call of each workload in a process of its own, on the simulated driver (FAULT_SWEEP_LIBCUDA:
  a simulated libcuda.so.1 built already, instead of building scripts/simulated-driver.cc).`);
  process.exit(problem ? 2 : 0);
}

/** Runs the sweep; returns the process's exit code. */
async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  const began = performance.now();
  const driver = process.env.FAULT_SWEEP_LIBCUDA ?? simulatedDriver();
  const folder = mkdtempSync(path.join(os.tmpdir(), 'csp-fault-sweep-'));
  const findings: string[] = [];
  const unrepeated: string[] = [];
  const covered = new Map<string, Set<string>>(); // entry point -> workloads that reach it
  let cases: Case[] = [];
  try {
    // Counting: each workload's calls in one run, twice, to see which threads' counts repeat.
    for (const workload of options.workloads) {
      const counted: Counts[] = [];
      for (const round of [1, 2]) {
        const file = path.join(folder, `${workload.name}-${round}.json`);
        const run = await runChild(workload, environment(workload, driver, { SIMULATED_DRIVER_COUNTS: file, FAULT_SWEEP_RUNS: '1' }), options.timeoutMs);
        const report = lastJson(run.stdout);
        if (run.code !== 0 || !report?.available || report.runs[0]?.result !== 'ok') {
          findings.push(`${workload.name}: fails without an injected failure: exit ${run.code} ${run.signal ?? ''} ${describe(report?.runs[0])}\n${run.stderr.trim()}`);
          break;
        }
        if (report.leakedDeviceBytes !== 0) {
          findings.push(`${workload.name}: leaks ${report.leakedDeviceBytes} bytes of device memory without an injected failure (cuda.liveObjects().leakedDeviceBytes)`);
          break;
        }
        counted.push(JSON.parse(readFileSync(file, 'utf8')) as Counts);
      }
      if (counted.length < 2) continue;
      const [a, b] = counted as [Counts, Counts];
      // A thread whose counts differ between the rounds depends on timing: its smaller counts are swept, and a
      // call it did not make this time counts as not reached.
      const counts: Counts = {};
      for (const thread of Object.keys(a)) {
        counts[thread] = {};
        for (const [entry, n] of Object.entries(a[thread]!)) {
          const m = Math.min(n, b[thread]?.[entry] ?? 0);
          if (m > 0) counts[thread]![entry] = m;
          if (entry !== 'operation') (covered.get(entry) ?? covered.set(entry, new Set()).get(entry)!).add(workload.name);
        }
      }
      cases.push(...plan(workload, counts, options));
    }
    if (options.entry) cases = cases.filter((c) => c.entry === options.entry);
    console.log(`fault sweep: ${cases.length} injected runs over ${options.workloads.length} workloads, ${options.jobs} at a time`);

    const verdicts: Verdict[] = [];
    let next = 0;
    const worker = async () => {
      while (next < cases.length) {
        const c = cases[next++]!;
        const env = environment(c.workload, driver, { SIMULATED_DRIVER_FAIL: rule(c), SIMULATED_DRIVER_TRACE: '1' });
        let verdict = judge(c, await runChild(c.workload, env, options.timeoutMs));
        // A case with problems runs once more: the calls of some threads, and a loaded machine's speed, depend on
        // timing. Problems that do not come back are listed apart and fail nothing.
        if (verdict.problems.length) {
          const again = judge(c, await runChild(c.workload, env, options.timeoutMs));
          if (!again.problems.length) {
            unrepeated.push(`${c.workload.name} ${rule(c)}: ${verdict.problems.join('; ')}`);
            verdict = again;
          }
        }
        verdicts.push(verdict);
        if (verdict.problems.length) {
          const text = `${c.workload.name} ${rule(c)}:\n    ${verdict.problems.join('\n    ')}\n    replay: ${replay(c)}`;
          findings.push(text);
          console.log(`FINDING ${text}`);
        }
        if (verdicts.length % 100 === 0) console.log(`  ${verdicts.length}/${cases.length} runs, ${Math.round((performance.now() - began) / 1000)} s`);
      }
    };
    await Promise.all(Array.from({ length: options.jobs }, worker));

    const native = nativeEntryPoints();
    const reached = new Set(verdicts.filter((v) => v.reached).map((v) => v.case.entry));
    const simulated = simulatedEntryPoints();
    const missing = native.filter((e) => simulated.has(e) && !covered.has(e));
    const unsimulated = native.filter((e) => !simulated.has(e));
    const summary = {
      seconds: Math.round((performance.now() - began) / 1000),
      runs: verdicts.length,
      reached: verdicts.filter((v) => v.reached).length,
      unrepeated,
      covered: [...covered.keys()].sort(),
      injected: [...reached].sort(),
      nativeNotCovered: missing,
      nativeNotSimulated: unsimulated,
    };
    console.log(`\nentry points the workloads call (${summary.covered.length}): ${summary.covered.join(' ')}`);
    console.log(`entry points the native layer calls that no workload reaches (${missing.length}): ${missing.join(' ') || 'none'}`);
    console.log(`entry points the native layer calls that the simulated driver lacks (optional ones, null there): ${unsimulated.join(' ') || 'none'}`);
    console.log(`${summary.runs} injected runs (${summary.reached} reached their call; the others were calls of a thread whose count depends on timing) in ${summary.seconds} s`);
    if (unrepeated.length) console.log(`problems that did not come back when run again (timing; not findings):\n  ${unrepeated.join('\n  ')}`);
    console.log(`excluded: ${EXCLUDED.map((x) => `${x.workload} ${x.entry}@${x.thread}:${x.call ?? '*'} ${x.action} (${x.why})`).join('; ') || 'nothing'}`);
    console.log(`${findings.length} findings`);
    // The JSON file: the summary, every finding's text, and every run's verdict.
    if (options.json) writeFileSync(options.json, JSON.stringify({ ...summary, findings, verdicts: verdicts.map((v) => ({ ...v, case: { ...v.case, workload: v.case.workload.name } })) }, null, 1));
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
  return findings.length ? 1 : 0;
}

// Entry points that the library's native sources call (drv().name), which a workload should reach.

function nativeEntryPoints(): string[] {
  const found = new Set<string>();
  const folder = path.join(repositoryRoot, 'packages', 'cuda-stream-pool', 'src');
  for (const file of readdirSync(folder, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.cc'))) {
    for (const match of readFileSync(path.join(folder, file), 'utf8').matchAll(/\b(?:drv\(\)|g_driver|d)\.(cu[A-Za-z0-9_]+)\(/g)) found.add(match[1]!);
  }
  return [...found].sort();
}

/** The entry points the simulated driver hands out, from its table (the others are null there and cannot fail). */
function simulatedEntryPoints(): Set<string> {
  const source = readFileSync(path.join(repositoryRoot, 'scripts', 'simulated-driver.cc'), 'utf8');
  const table = source.slice(source.indexOf('#define SIM_PROC_ENTRY_POINTS'), source.indexOf('#define SIM_ENTRY_POINTS'));
  return new Set([...table.matchAll(/X\((cu[A-Za-z0-9_]+)\)/g)].map((m) => m[1]!));
}

process.exitCode = await main();
