import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { gpu, repositoryRoot } from './support/gpu.js';

const MODES = ['legacy', 'per-thread', 'per-task', 'pool', 'lease'];
const PHASES = ['copy-in', 'kernel', 'copy-out'];

/** Runs the CLI as a user would (`node dist/src/cli/main.js ...`) from the repository root. `noGpu`: hide the driver
 * (CUDA_STREAM_POOL_LIBCUDA), so a check that happens before the GPU is touched is what answers. */
function cli(args: string[], options: { env?: Record<string, string>; noGpu?: boolean; timeoutMs?: number } = {}) {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.CUDA_STREAM_POOL_BENCH_CORRUPT;
  Object.assign(env, options.env);
  if (options.noGpu) env.CUDA_STREAM_POOL_LIBCUDA = '/nonexistent/libcuda.so.1';
  const result = spawnSync(process.execPath, [path.join('dist', 'src', 'cli', 'main.js'), ...args], {
    cwd: repositoryRoot,
    env,
    encoding: 'utf8',
    timeout: options.timeoutMs ?? 60_000,
  });
  return { status: result.status, signal: result.signal, stdout: result.stdout, stderr: result.stderr };
}

function scratchDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'csp-cli-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// Usage errors: exit 64 before the GPU is touched (the driver is hidden, so a later check would exit 2 instead).

test('bench --tasks 0 exits 64 naming --tasks and its accepted range', () => {
  const r = cli(['bench', '--tasks', '0'], { noGpu: true });
  assert.equal(r.status, 64, r.stderr);
  assert.match(r.stderr, /--tasks/);
  assert.match(r.stderr, /an integer from 1 to 10000000/);
  assert.match(r.stderr, /argument '0' is invalid/);
});

test('bench --elements 1.5 exits 64: integer options refuse fractions and other half-numbers', () => {
  for (const value of ['1.5', '1e3', '0x10', '12abc', '-1']) {
    const r = cli(['bench', '--elements', value], { noGpu: true });
    assert.equal(r.status, 64, `${value}: ${r.stderr}`);
    assert.match(r.stderr, /--elements/);
    assert.match(r.stderr, /an integer from 1 to 268435456/);
  }
});

test('bench --mode with an unknown name exits 64 listing every mode', () => {
  const r = cli(['bench', '--mode', 'pool,streams'], { noGpu: true });
  assert.equal(r.status, 64, r.stderr);
  assert.match(r.stderr, /--mode/);
  assert.match(r.stderr, /"streams" is not a mode/);
  for (const mode of MODES) assert.ok(r.stderr.includes(mode), `missing ${mode} in: ${r.stderr}`);
});

test('bench with an unknown option exits 64 naming it and suggesting the near miss', () => {
  const r = cli(['bench', '--taks', '8'], { noGpu: true });
  assert.equal(r.status, 64, r.stderr);
  assert.match(r.stderr, /unknown option '--taks'/);
  assert.match(r.stderr, /--tasks/);
});

test('bench micro with an option of bench exits 64 and says that bench takes it', () => {
  const r = cli(['bench', 'micro', '--tasks', '8'], { noGpu: true });
  assert.equal(r.status, 64, r.stderr);
  assert.match(r.stderr, /unknown option '--tasks'/);
  assert.match(r.stderr, /'--tasks' is an option of 'cuda-stream-pool bench' only/);
});

test('bench with an unknown benchmark name exits 64 naming the accepted ones', () => {
  const r = cli(['bench', 'macro'], { noGpu: true });
  assert.equal(r.status, 64, r.stderr);
  assert.match(r.stderr, /unknown benchmark 'macro'/);
  assert.match(r.stderr, /'micro'/);
});

test('bench --concurrency below --workers exits 64 naming both options', () => {
  const r = cli(['bench', '--workers', '4', '--concurrency', '2'], { noGpu: true });
  assert.equal(r.status, 64, r.stderr);
  assert.match(r.stderr, /--concurrency/);
  assert.match(r.stderr, /--workers/);
  assert.match(r.stderr, /at least/);
});

test('bench --timeline needs an .html file in an existing directory, else exits 64', () => {
  let r = cli(['bench', '--timeline', 'timeline.svg'], { noGpu: true });
  assert.equal(r.status, 64, r.stderr);
  assert.match(r.stderr, /--timeline/);
  assert.match(r.stderr, /\.html/);
  r = cli(['bench', '--timeline', path.join('no-such-directory', 'timeline.html')], { noGpu: true });
  assert.equal(r.status, 64, r.stderr);
  assert.match(r.stderr, /existing directory/);
});

test('a malformed corruption hook exits 64 naming the variable and the accepted form', () => {
  const r = cli(['bench', '--tasks', '8'], { noGpu: true, env: { CUDA_STREAM_POOL_BENCH_CORRUPT: '8:0' } });
  assert.equal(r.status, 64, r.stderr);
  assert.match(r.stderr, /CUDA_STREAM_POOL_BENCH_CORRUPT/);
  assert.match(r.stderr, /task from 0 to 7/);
});

test('bench --help exits 0 and lists every option, the modes and the exit codes', () => {
  const r = cli(['bench', '--help'], { noGpu: true });
  assert.equal(r.status, 0, r.stderr);
  for (const option of ['--tasks', '--concurrency', '--workers', '--elements', '--intensity', '--mode', '--pool-size', '--runs', '--device', '--json', '--timeline', '--quiet'])
    assert.ok(r.stdout.includes(option), `missing ${option}`);
  for (const mode of MODES) assert.ok(r.stdout.includes(mode), `missing ${mode}`);
  assert.match(r.stdout, /Exit codes/);
});

// Without a GPU: exit 2 with the reason (what the README's quick start and CI rely on).

test('bench without a usable driver exits 2 and prints why', () => {
  const r = cli(['bench'], { noGpu: true });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /cuda-stream-pool bench needs a CUDA GPU and cannot run here/);
  assert.match(r.stderr, /\/nonexistent\/libcuda\.so\.1/);
  assert.equal(r.stdout, '');
});

test('bench micro without a usable driver exits 2 and prints why', () => {
  const r = cli(['bench', 'micro'], { noGpu: true });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /bench micro needs a CUDA GPU/);
  assert.match(r.stderr, /\/nonexistent\/libcuda\.so\.1/);
});

// On the GPU.

/** Every number in `value` (recursively), with its path. */
function numbers(value: unknown, at = ''): [string, number][] {
  if (typeof value === 'number') return [[at, value]];
  if (Array.isArray(value)) return value.flatMap((v, i) => numbers(v, `${at}[${i}]`));
  if (value && typeof value === 'object') return Object.entries(value).flatMap(([k, v]) => numbers(v, `${at}.${k}`));
  return [];
}

test('bench --tasks 8 --json prints results whose values are finite and positive in every mode', gpu, () => {
  const r = cli(['bench', '--tasks', '8', '--runs', '2', '--json'], { timeoutMs: 300_000 });
  assert.equal(r.status, 0, r.stderr);
  const result = JSON.parse(r.stdout);
  assert.equal(result.schema, 'cuda-stream-pool/bench/1');
  assert.match(result.environment.device.name, /\S/);
  assert.equal(result.environment.node, process.version);
  assert.deepEqual(result.modes.map((m: { mode: string }) => m.mode), MODES);
  for (const [at, value] of [...numbers(result.modes, 'modes'), ...numbers(result.phasesAloneMs, 'phasesAloneMs'), ['overlapBoundMs', result.overlapBoundMs] as [string, number]])
    assert.ok(Number.isFinite(value) && value > 0, `${at} is ${value}`);
  for (const m of result.modes) {
    assert.equal(m.verifiedTasks, 16, `${m.mode} verified ${m.verifiedTasks} tasks`);
    assert.equal(typeof m.speedupOverLegacy, 'number');
  }
  assert.equal(result.parameters.tasks, 8);
  assert.equal(result.parameters.intensityCalibrated, true);
  assert.ok(Number.isInteger(result.parameters.intensity) && result.parameters.intensity >= 1);
});

test('bench --workers 4 shares one pool among workers and every task verifies', gpu, () => {
  const r = cli(['bench', '--tasks', '16', '--workers', '4', '--concurrency', '8', '--runs', '1', '--elements', '65536', '--json'], { timeoutMs: 300_000 });
  assert.equal(r.status, 0, r.stderr);
  const result = JSON.parse(r.stdout);
  for (const m of result.modes) assert.equal(m.verifiedTasks, 16, `${m.mode} verified ${m.verifiedTasks} tasks`);
});

test('a corrupted output element makes bench exit 1 naming that task and element', gpu, () => {
  const r = cli(['bench', '--tasks', '8', '--runs', '1', '--mode', 'pool', '--elements', '65536'], {
    env: { CUDA_STREAM_POOL_BENCH_CORRUPT: '5:4321' },
    timeoutMs: 300_000,
  });
  assert.equal(r.status, 1, `exit ${r.status}; stderr: ${r.stderr}`);
  assert.match(r.stderr, /verification failed: task 5 \(mode pool\) element 4321 is \S+, expected \S+/);
});

test('a corrupted output element in a worker also exits 1 naming that task and element', gpu, () => {
  const r = cli(['bench', '--tasks', '8', '--runs', '1', '--mode', 'lease', '--workers', '2', '--elements', '65536'], {
    env: { CUDA_STREAM_POOL_BENCH_CORRUPT: '6:17' },
    timeoutMs: 300_000,
  });
  assert.equal(r.status, 1, `exit ${r.status}; stderr: ${r.stderr}`);
  assert.match(r.stderr, /task 6 \(mode lease\) element 17 is/);
});

test('bench --timeline writes a self-contained page with a positive bar per phase of every task, in phase order', gpu, (t) => {
  const dir = scratchDir(t);
  const file = path.join(dir, 'timeline.html');
  const r = cli(['bench', '--tasks', '8', '--runs', '1', '--elements', '262144', '--quiet', '--timeline', file], { timeoutMs: 300_000 });
  assert.equal(r.status, 0, r.stderr);
  const html = readFileSync(file, 'utf8');
  assert.doesNotMatch(html, /<script[^>]+src=|<link[^>]+href=|@import|url\(http/i, 'the page loads nothing from the network');
  const json = /<script type="application\/json" id="timeline-data">([\s\S]*?)<\/script>/.exec(html);
  assert.ok(json, 'the page embeds its data');
  const data = JSON.parse(json[1]!);
  assert.deepEqual(data.phases, PHASES);
  assert.deepEqual(data.modes.map((m: { mode: string }) => m.mode), MODES);
  for (const mode of data.modes) {
    assert.ok(mode.rows.length >= 1, `${mode.mode} has rows`);
    const tasks = mode.rows.flatMap((row: { tasks: unknown[] }) => row.tasks);
    assert.deepEqual(tasks.map((task: { task: number }) => task.task).sort((a: number, b: number) => a - b), [0, 1, 2, 3, 4, 5, 6, 7], `${mode.mode}: every task once`);
    for (const task of tasks) {
      assert.deepEqual(task.bars.map((bar: { phase: string }) => bar.phase), PHASES, `${mode.mode} task ${task.task}`);
      task.bars.forEach((bar: { startMs: number; endMs: number; phase: string }, i: number) => {
        assert.ok(bar.endMs > bar.startMs, `${mode.mode} task ${task.task} ${bar.phase}: ${bar.startMs} to ${bar.endMs}`);
        if (i > 0) assert.ok(task.bars[i - 1].endMs <= bar.startMs, `${mode.mode} task ${task.task}: ${bar.phase} starts before the previous phase ends`);
      });
    }
    assert.ok(html.includes(`<h2>${mode.mode}</h2>`), `a section for ${mode.mode}`);
  }
  assert.match(r.stdout, /timeline written to/);
});

test('--version and -v print the package version and exit 0', () => {
  const { version } = JSON.parse(readFileSync(path.join(repositoryRoot, 'package.json'), 'utf8')) as { version: string };
  for (const flag of ['--version', '-v']) {
    const result = cli([flag], { noGpu: true });
    assert.equal(result.status, 0, `${flag}: ${result.stderr}`);
    assert.equal(result.stdout.trim(), version, flag);
  }
});
