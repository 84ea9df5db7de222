import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { Device } from 'cuda-stream-pool';
import { RECORDING_TARGET_NS } from '#bench/harness.js';
import { gpu, gpuNotSimulated, onSimulatedDriver, repositoryRoot } from '../support/gpu.js';
import { benchFixture } from './support/fixture.js';
import { syntheticResults } from './support/synthetic-results.js';
import { benchCli, benchRoot } from '../support/paths.js';

const fixture = benchFixture();

const MODES = ['native', 'legacy', 'per-thread', 'per-task', 'pool', 'lease', 'graph'];

/** Runs the CLI as a user would (`node packages/cuda-stream-pool-bench/dist/cli/main.js ...`) from the repository root. `noGpu`: hide the driver
 * (CUDA_STREAM_POOL_LIBCUDA), so a check that happens before the GPU is touched is what answers; `stdout`: a file
 * descriptor to write to instead of the returned text. */
function cli(args: string[], options: { env?: Record<string, string>; noGpu?: boolean; timeoutMs?: number; stdout?: number } = {}) {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.CUDA_STREAM_POOL_BENCH_CORRUPT;
  Object.assign(env, options.env);
  if (options.noGpu) env.CUDA_STREAM_POOL_LIBCUDA = '/nonexistent/libcuda.so.1';
  const result = spawnSync(process.execPath, [benchCli, ...args], {
    cwd: repositoryRoot,
    env,
    encoding: 'utf8',
    timeout: options.timeoutMs ?? 60_000,
    stdio: ['pipe', options.stdout ?? 'pipe', 'pipe'],
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
  for (const value of ['1.5', '1e3', '0x10', '12abc', '-1', '+12', ' 12', '12 ', '012', '']) {
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

test('bench --devices exits 64 for a bad entry, a device named twice, or beside --device', () => {
  for (const [value, message] of [
    ['x', /"x" is not a device ordinal/],
    ['0,,1', /An empty entry is not a device ordinal/],
    ['1024', /"1024" is not a device ordinal/],
    ['0,1,0', /Device 0 is named twice/],
    ['01,2', /"01" is not a device ordinal/],
    ['0, 1', /" 1" is not a device ordinal/],
  ] as const) {
    const r = cli(['bench', '--devices', value], { noGpu: true });
    assert.equal(r.status, 64, `${value}: ${r.stderr}`);
    assert.match(r.stderr, /option '--devices <list\|all>' argument/);
    assert.match(r.stderr, message);
    assert.match(r.stderr, /Accepted: all, or a comma list of distinct device ordinals from 0 to 1023/);
  }
  const both = cli(['bench', '--devices', 'all', '--device', '0'], { noGpu: true });
  assert.equal(both.status, 64, both.stderr);
  assert.match(both.stderr, /'--device <ordinal>' and '--devices <list\|all>' cannot be used together/);
  const fine = cli(['bench', '--devices', 'all'], { noGpu: true });
  assert.equal(fine.status, 2, fine.stderr); // a good value reaches the GPU check
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

test('bench options written before micro: one micro lacks exits 64 naming it; without a GPU the rest reach the GPU check', () => {
  const r = cli(['bench', '--tasks', '8', 'micro'], { noGpu: true });
  assert.equal(r.status, 64, r.stderr);
  assert.match(r.stderr, /option '--tasks <count>' is an option of 'cuda-stream-pool bench' only; 'bench micro' does not take it/);
  const shared = cli(['bench', '--json', '--quiet', 'micro'], { noGpu: true });
  assert.equal(shared.status, 2, shared.stderr);
  assert.match(shared.stderr, /bench micro needs a CUDA GPU/);
});

test('help takes a command path: help bench micro prints micro\'s help, an unknown name exits 64 naming it', () => {
  const micro = cli(['help', 'bench', 'micro'], { noGpu: true });
  assert.equal(micro.status, 0, micro.stderr);
  assert.match(micro.stdout, /^Usage: cuda-stream-pool bench micro \[options\]/);
  assert.match(micro.stdout, /--json/);
  const report = cli(['help', 'report'], { noGpu: true });
  assert.equal(report.status, 0, report.stderr);
  assert.match(report.stdout, /^Usage: cuda-stream-pool report \[options\] <results\.json>/);
  for (const args of [['help', 'help'], ['help', '--help']]) {
    const program = cli(args, { noGpu: true });
    assert.equal(program.status, 0, program.stderr);
    assert.match(program.stdout, /^Usage: cuda-stream-pool \[options\] \[command\]/);
    assert.match(program.stdout, /Exit codes: 0 done; 64 a bad option or an unknown command/);
  }
  const unknown = cli(['nonsense'], { noGpu: true });
  assert.equal(unknown.status, 64, unknown.stderr);
  assert.match(unknown.stderr, /unknown command 'nonsense'\nCommands: 'bench', 'report'\./);
  for (const [args, message] of [
    [['help', 'foo'], /unknown command 'foo' for 'cuda-stream-pool'\. Commands: 'bench', 'report'\./],
    [['help', 'bench', 'macro'], /unknown command 'macro' for 'cuda-stream-pool bench'\. Commands: 'micro'\./],
    [['help', 'report', 'x'], /'cuda-stream-pool report' has no commands; 'x' is not one\./],
  ] as const) {
    const r = cli([...args], { noGpu: true });
    assert.equal(r.status, 64, r.stderr);
    assert.match(r.stderr, message);
    assert.equal(r.stdout, '', 'no help printed for an unknown command');
  }
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

test('bench --trace needs a .json file, and a path through a file exits 64 saying that file is not a directory', (t) => {
  let r = cli(['bench', '--trace', 'trace.html'], { noGpu: true });
  assert.equal(r.status, 64, r.stderr);
  assert.match(r.stderr, /--trace/);
  assert.match(r.stderr, /\.json/);
  const dir = scratchDir(t);
  const file = path.join(dir, 'a-file');
  writeFileSync(file, '');
  for (const [option, name] of [['--trace', 'trace.json'], ['--timeline', 'timeline.html']]) {
    r = cli(['bench', option!, path.join(file, 'deeper', name!)], { noGpu: true });
    assert.equal(r.status, 64, r.stderr);
    assert.ok(r.stderr.includes(option!), r.stderr);
    assert.ok(r.stderr.includes(`${file} is not a directory`), r.stderr);
  }
  if (process.platform === 'linux') {
    // No one can create files in /proc, root included: the check tries, rather than reading permission bits.
    r = cli(['bench', '--trace', '/proc/csp-trace.json'], { noGpu: true });
    assert.equal(r.status, 64, r.stderr);
    assert.match(r.stderr, /--trace.*a file in \/proc cannot be written/s);
  }
  r = cli(['bench', '--trace', dir + path.sep + '.json'], { noGpu: true });
  assert.equal(r.status, 2, `a writable path passes the check and the run stops only for the GPU: ${r.stderr}`);
});

test(`report renders a saved run without a GPU: the tables, the timeline page and the trace file (${fixture.origin} fixture)`, (t) => {
  const dir = scratchDir(t);
  const results = path.join(dir, 'results.json');
  writeFileSync(results, JSON.stringify(fixture.result));
  const r = cli(['report', results, '--html', path.join(dir, 'page.html'), '--trace', path.join(dir, 'trace.json')], { noGpu: true });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /vs legacy.*vs native/);
  for (const mode of fixture.result.modes) assert.match(r.stdout, new RegExp(`│ ${mode.mode} +│`));
  // The committed real run predates environment.libraryVersion: the report says so rather than failing.
  const { libraryVersion = 'not recorded', packageVersion } = fixture.result.environment;
  assert.match(r.stdout, new RegExp(`│ cuda-stream-pool +│ ${libraryVersion.replaceAll('.', '\\.')} +│`));
  assert.match(r.stdout, new RegExp(`│ cuda-stream-pool-bench +│ ${packageVersion.replaceAll('.', '\\.')} +│`));
  assert.match(r.stdout, /timeline written to .*page\.html\ntrace written to .*trace\.json\n$/);
  const html = readFileSync(path.join(dir, 'page.html'), 'utf8');
  const tasks = fixture.result.modes.map((m) => m.lastRunTasks?.length ?? 0);
  fixture.result.modes.forEach((mode, i) => {
    if (tasks[i]) assert.ok(html.includes(`<section data-mode="${mode.mode}" data-bars="${3 * tasks[i]!}"`), `${mode.mode}: ${3 * tasks[i]!} bars`);
  });
  const trace = JSON.parse(readFileSync(path.join(dir, 'trace.json'), 'utf8'));
  assert.equal(trace.traceEvents.filter((e: { ph: string }) => e.ph === 'X').length, 3 * tasks.reduce((a, b) => a + b, 0));
});

test('report renders a saved run over two devices with each device\'s row under its mode\'s total', (t) => {
  const dir = scratchDir(t);
  const result = syntheticResults({ tasks: 16, modes: ['pool', 'native'] });
  result.devices = [0, 1].map((ordinal) => ({ ...result.environment.device, ordinal }));
  result.parameters.devices = [0, 1];
  for (const mode of result.modes)
    mode.perDevice = [0, 1].map((device) => ({
      device,
      tasks: 8,
      wallMs: mode.wallMs,
      tasksPerSecond: mode.tasksPerSecond,
      gigabytesPerSecond: mode.gigabytesPerSecond,
      latencyMs: mode.latencyMs,
      overlapFraction: mode.overlapFraction,
      verifiedTasks: 8,
      streams: 3 + device,
    }));
  const file = path.join(dir, 'results.json');
  writeFileSync(file, JSON.stringify(result));
  const r = cli(['report', file], { noGpu: true });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /the tasks are spread over 2: 0 \(.+\), 1 \(/);
  assert.match(r.stdout, /tasks in flight per device/);
  const lines = r.stdout.split('\n');
  const rowOf = (pattern: RegExp, from = 0) => lines.findIndex((line, i) => i >= from && pattern.test(line));
  for (const mode of result.modes) {
    const total = rowOf(new RegExp(`^│ ${mode.mode} +│`));
    const next = rowOf(/^│ (pool|native) +│/, total + 1);
    for (const device of [0, 1]) {
      const row = rowOf(new RegExp(`^│ {3}device ${device} +│`), total);
      assert.ok(row > total && (next < 0 || row < next), `${mode.mode}: device ${device}'s row follows the total`);
      assert.match(lines[row]!, new RegExp(`│ +${3 + device} │ +8 │$`));
    }
  }
});

test('report exits 64 naming the file for a missing file, bad JSON, an older schema, or no phase times to draw', (t) => {
  const dir = scratchDir(t);
  const file = (name: string, content: string) => {
    writeFileSync(path.join(dir, name), content);
    return path.join(dir, name);
  };
  const noPhases = syntheticResults({ tasks: 2, modes: ['pool'] });
  noPhases.modes[0]!.lastRunTasks = null;
  const cases: [string[], RegExp][] = [
    [[path.join(dir, 'missing.json')], /cannot read the results file .*missing\.json/],
    [[file('bad.json', '{"schema": ')], /bad\.json is not a cuda-stream-pool bench results file: its JSON does not parse/],
    [[file('binary.json', '\u007fELF\u0002\u0001\u0001\u0000\u0000')], /binary\.json is not a cuda-stream-pool bench results file: it holds binary data, not JSON text \(a NUL byte at character 7\)/],
    [[file('escape.json', '{"a": \u001b[31mred}')], /escape\.json .*its JSON does not parse \(.*\\u001b/],
    [[file('old.json', '{"schema": "cuda-stream-pool/bench/1"}')], /old\.json .*schema is "cuda-stream-pool\/bench\/1", and this version reads "cuda-stream-pool\/bench\/2"/],
    [[file('marks.json', JSON.stringify({ ...noPhases, modes: [{ ...noPhases.modes[0], lastRunTasks: [{ task: 0, thread: 0, streamId: '1', marksMs: [2, 1, 3, 4] }] }] }))], /modes\[0\]\.lastRunTasks\[0\]\.marksMs is not 4 ascending numbers/],
    [[file('mode.json', JSON.stringify({ ...noPhases, modes: [{ ...noPhases.modes[0], mode: 'turbo' }] }))], /modes\[0\]\.mode is "turbo", not one of native, legacy, /],
    [[file('no-phases.json', JSON.stringify(noPhases)), '--html', path.join(dir, 'page.html')], /no-phases\.json holds no phase times.*--phases/],
  ];
  // A field of the wrong type or range anywhere the report, the timeline or the trace reads is named with its value,
  // before anything is drawn or written (--html included: the page is not blamed on its path).
  const withPhases = syntheticResults({ tasks: 2, modes: ['legacy', 'pool'] });
  const broken = (name: string, change: (result: Record<string, any>) => void) => {
    const copy = structuredClone(withPhases) as unknown as Record<string, any>;
    change(copy);
    return file(name, JSON.stringify(copy));
  };
  const fieldCases: [string[], RegExp][] = [
    [[broken('device.json', (r) => (r.environment.device = null))], /device\.json .*: environment\.device is null, not an object\.$/m],
    [[broken('date.json', (r) => (r.environment.date = 5))], /environment\.date is 5, not a string/],
    [[broken('library.json', (r) => (r.environment.libraryVersion = 2))], /environment\.libraryVersion is 2, not a string/],
    [[broken('per-device.json', (r) => (r.modes[0].perDevice = [null]))], /modes\[0\]\.perDevice\[0\] is null, not an object/],
    [[broken('speedup.json', (r) => (r.modes[1].speedupOverLegacy = 'x'))], /modes\[1\]\.speedupOverLegacy is "x", not a number/],
    [[broken('tasks.json', (r) => (r.parameters.tasks = 'many'))], /parameters\.tasks is "many", not a number/],
    [[broken('negative.json', (r) => (r.modes[0].tasksPerSecond.median = -5))], /modes\[0\]\.tasksPerSecond\.median is -5, below 0/],
    [[broken('no-runs.json', (r) => (r.modes[0].wallMs = []))], /modes\[0\]\.wallMs has 0 entries, fewer than 1/],
    [[broken('no-modes.json', (r) => (r.modes = []))], /modes has 0 entries, fewer than 1/],
    [[broken('median.json', (r) => (r.modes[1].tasksPerSecond.median = 'x')), '--html', path.join(dir, 'median.html')], /modes\[1\]\.tasksPerSecond\.median is "x", not a number/],
    [[broken('five-marks.json', (r) => (r.modes[0].lastRunTasks[0].marksMs = [1, 2, 3, 4, 5]))], /modes\[0\]\.lastRunTasks\[0\]\.marksMs has 5 entries, more than 4/],
    // Nested 8,000 deep: shown by its size, never serialized (that overflowed the stack).
    [[file('deep.json', JSON.stringify(withPhases).replace(/"wallMs":\[[^\]]*\]/, `"wallMs":${'['.repeat(8000)}${']'.repeat(8000)}`))], /modes\[0\]\.wallMs\[0\] is an array of 1, not a number/],
    [[file('huge.json', JSON.stringify(withPhases).replace(/"overlapBoundMs":[^,]+/, '"overlapBoundMs":1e400'))], /overlapBoundMs is beyond the range of a float64 \(read as Infinity\), not a finite number/],
  ];
  for (const [args, message] of [...cases, ...fieldCases]) {
    const r = cli(['report', ...args], { noGpu: true });
    assert.equal(r.status, 64, `${args[0]}: exit ${r.status}, ${r.stderr}`);
    assert.match(r.stderr, message);
    assert.doesNotMatch(r.stderr, /at .*\.js:\d+/, 'no stack trace');
    assert.doesNotMatch(r.stderr, /[\u0000-\u0008\u000b-\u001f\u007f]/, 'no raw control characters from the file');
    if (fieldCases.some(([other]) => other === args)) assert.doesNotMatch(r.stderr, /--help|writable path/);
  }
  assert.ok(!existsSync(path.join(dir, 'median.html')), 'no page was written for a broken file');
  const marked = cli(['report', file('bom.json', `\uFEFF${JSON.stringify(withPhases)}`)], { noGpu: true });
  assert.equal(marked.status, 0, `a byte-order mark, as some editors write, is not an error: ${marked.stderr}`);
  const r = cli(['report', file('ok.json', JSON.stringify(noPhases)), '--trace', path.join(dir, 'ok.json', 'trace.json')], { noGpu: true });
  assert.equal(r.status, 64, r.stderr);
  assert.match(r.stderr, /--trace.*ok\.json is not a directory/s);
});

test('no control character that a results file, a path, an option value or the environment carries reaches the terminal raw', (t) => {
  const dir = scratchDir(t);
  const raw = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
  const result = syntheticResults({ tasks: 2, modes: ['pool'] });
  result.environment.device.name = 'GPU\u001b]0;retitled\u0007\u001b[2J';
  const file = path.join(dir, 'results.json');
  writeFileSync(file, JSON.stringify(result));
  const report = cli(['report', file], { noGpu: true });
  assert.equal(report.status, 0, report.stderr);
  assert.ok(report.stdout.includes('GPU\\u001b]0;retitled\\u0007\\u001b[2J'), report.stdout);
  for (const [args, env, says] of [
    [['bench', '--mode', '\u001b[2Jpool'], {}, /argument '\\u001b\[2Jpool' is invalid/],
    [['bo\u001bgus'], {}, /unknown command 'bo\\u001bgus'/],
    [['report', path.join(dir, 'x\u001b[31m.json')], {}, /cannot read the results file .*x\\u001b\[31m\.json/],
    [['bench'], { CUDA_STREAM_POOL_LIBCUDA: '/nonexistent/x\u001b[31m.so' }, /needs a CUDA GPU and cannot run here: .*x\\u001b\[31m\.so/],
  ] as const) {
    const r = cli([...args], { env: { ...env } });
    assert.notEqual(r.status, 0, `${JSON.stringify(args)}: ${r.stderr}`);
    assert.match(r.stderr, says);
    assert.doesNotMatch(r.stderr, raw, `${JSON.stringify(args)}: a raw control character in ${JSON.stringify(r.stderr)}`);
  }
});

test('report refuses results bench cannot write (tasks above the cap, a mode twice, a stream id not in decimal) and an output over its input', (t) => {
  const dir = scratchDir(t);
  const valid = syntheticResults({ tasks: 2, modes: ['legacy', 'pool'] });
  const file = (name: string, change: (result: Record<string, any>) => void) => {
    const copy = structuredClone(valid) as unknown as Record<string, any>;
    change(copy);
    writeFileSync(path.join(dir, name), JSON.stringify(copy));
    return path.join(dir, name);
  };
  const cases: [string, (result: Record<string, any>) => void, string][] = [
    ['tasks.json', (r) => (r.parameters.tasks = 10_000_001), 'parameters.tasks is 10000001, above 10000000'],
    ['runs.json', (r) => (r.parameters.runs = 101), 'parameters.runs is 101, above 100'],
    ['workers.json', (r) => (r.parameters.workers = 65), 'parameters.workers is 65, above 64'],
    ['modes.json', (r) => (r.parameters.modes = ['pool', 'legacy', 'pool']), 'parameters.modes[2] is "pool" again (as at [0]); bench names each once'],
    ['mode-results.json', (r) => (r.modes[1].mode = 'legacy'), 'modes[1] is "legacy" again (as at [0]); bench names each once'],
    ['hex.json', (r) => (r.modes[0].lastRunTasks[1].streamId = '0x1f'), 'modes[0].lastRunTasks[1].streamId is "0x1f", not a decimal integer (the stream id cuStreamGetId gave, as digits)'],
    ['sign.json', (r) => (r.modes[0].lastRunTasks[0].streamId = '-3'), 'modes[0].lastRunTasks[0].streamId is "-3", not a decimal integer'],
    ['verified.json', (r) => (r.modes[1].verifiedTasks = 999_999), 'modes[1].verifiedTasks is 999999, more than the 2 tasks of its runs (parameters.tasks × parameters.runs)'],
  ];
  for (const [name, change, message] of cases) {
    const r = cli(['report', file(name, change)], { noGpu: true });
    assert.equal(r.status, 64, `${name}: exit ${r.status}, ${r.stderr}`);
    assert.equal(r.stderr.startsWith(`cuda-stream-pool report: ${path.join(dir, name)} is not a cuda-stream-pool bench results file: ${message}`), true, r.stderr);
  }
  const input = file('run.json', () => {});
  const before = readFileSync(input, 'utf8');
  const linked = path.join(dir, 'linked.json');
  symlinkSync(input, linked);
  for (const output of [input, path.join(dir, '.', 'run.json'), linked]) {
    const r = cli(['report', input, '--trace', output], { noGpu: true });
    assert.equal(r.status, 64, r.stderr);
    assert.ok(r.stderr.includes(`option '--trace' names ${output}, which is the results file ${input}; writing it would overwrite the input`), r.stderr);
    assert.equal(readFileSync(input, 'utf8'), before, 'the input is untouched');
  }
  const ok = cli(['report', input, '--trace', path.join(dir, 'trace.json')], { noGpu: true });
  assert.equal(ok.status, 0, ok.stderr);
});

test('report exits 1 naming the error when stdout cannot be written (a full disk)', { skip: !existsSync('/dev/full') && 'this system has no /dev/full' }, (t) => {
  const file = path.join(scratchDir(t), 'results.json');
  writeFileSync(file, JSON.stringify(syntheticResults({ tasks: 2, modes: ['pool'] })));
  const full = openSync('/dev/full', 'w');
  t.after(() => closeSync(full));
  const r = cli(['report', file], { noGpu: true, stdout: full });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /cannot write the output to stdout: ENOSPC/);
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
  for (const option of ['--tasks', '--concurrency', '--workers', '--elements', '--intensity', '--mode', '--pool-size', '--runs', '--device', '--json', '--timeline', '--trace', '--phases', '--quiet'])
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

test('bench without a usable driver still prints the warning about a library variable it ignores', () => {
  const r = cli(['bench'], { noGpu: true, env: { CUDA_STREAM_POOL_SUBMISSION: 'bogus' } });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /CUDA_STREAM_POOL_SUBMISSION="bogus" is ignored/);
  assert.match(r.stderr, /cuda-stream-pool bench needs a CUDA GPU and cannot run here/);
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
  // The default partition size on a GPU; smaller on the simulated driver, whose CPU does the kernels' work (the
  // default took 100 s of a 2-core machine there).
  const size = onSimulatedDriver ? ['--elements', '65536'] : [];
  const r = cli(['bench', ...size, '--tasks', '8', '--runs', '2', '--json'], { timeoutMs: 300_000 });
  assert.equal(r.status, 0, r.stderr);
  const result = JSON.parse(r.stdout);
  assert.equal(result.schema, 'cuda-stream-pool/bench/2');
  assert.match(result.environment.device.name, /\S/);
  assert.equal(result.environment.node, process.version);
  const version = (name: string) => JSON.parse(readFileSync(path.join(repositoryRoot, 'packages', name, 'package.json'), 'utf8')).version;
  assert.equal(result.environment.libraryVersion, version('cuda-stream-pool'));
  assert.equal(result.environment.packageVersion, version('cuda-stream-pool-bench'));
  assert.deepEqual(result.modes.map((m: { mode: string }) => m.mode), MODES);
  for (const [at, value] of [...numbers(result.modes, 'modes'), ...numbers(result.phasesAloneMs, 'phasesAloneMs'), ['overlapBoundMs', result.overlapBoundMs] as [string, number]])
    // Order waits are 0 where nothing waited (always in direct mode).
    assert.ok(Number.isFinite(value) && (value > 0 || (at.includes('.orderWaits.') && value === 0)), `${at} is ${value}`);
  for (const m of result.modes) {
    assert.equal(m.verifiedTasks, 16, `${m.mode} verified ${m.verifiedTasks} tasks`);
    assert.equal(typeof m.speedupOverLegacy, 'number');
    assert.equal(m.speedupOverNative === null, !result.modes.some((other: { mode: string }) => other.mode === 'native'));
    assert.equal(m.lastRunTasks, null, 'no phase times without --phases');
  }
  assert.equal(result.parameters.phaseTimes, false);
  assert.equal(result.parameters.tasks, 8);
  assert.equal(result.parameters.intensityCalibrated, true);
  assert.ok(Number.isInteger(result.parameters.intensity) && result.parameters.intensity >= 1);
});

test('bench --workers 4 shares one pool among workers and every task verifies', gpu, () => {
  const r = cli(['bench', '--tasks', '16', '--workers', '4', '--concurrency', '8', '--runs', '1', '--elements', '65536', '--json'], { timeoutMs: 300_000 });
  assert.equal(r.status, 0, r.stderr);
  const result = JSON.parse(r.stdout);
  assert.deepEqual(result.modes.map((m: { mode: string }) => m.mode), MODES);
  for (const m of result.modes) assert.equal(m.verifiedTasks, 16, `${m.mode} verified ${m.verifiedTasks} tasks`);
});

test('bench --mode graph replays each task as a GraphExec and every task verifies, also in workers', gpu, () => {
  for (const workers of ['0', '2']) {
    const r = cli(['bench', '--mode', 'graph', '--tasks', '16', '--workers', workers, '--runs', '1', '--elements', '65536', '--json'], { timeoutMs: 300_000 });
    assert.equal(r.status, 0, r.stderr);
    const [graph] = JSON.parse(r.stdout).modes;
    assert.equal(graph.mode, 'graph');
    assert.equal(graph.verifiedTasks, 16, `${workers} workers: graph verified ${graph.verifiedTasks} tasks`);
  }
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

/** The cells of a cli-table3 row (`│ a │ b │`), trimmed. */
function cells(line: string): string[] {
  return line.split('│').slice(1, -1).map((cell) => cell.trim());
}

test('bench --mode native,pool --tasks 64 verifies every native task and gives each mode its ratio to native', gpu, () => {
  const r = cli(['bench', '--mode', 'native,pool', '--tasks', '64', '--runs', '1', '--elements', '65536', '--json'], { timeoutMs: 300_000 });
  assert.equal(r.status, 0, r.stderr);
  const result = JSON.parse(r.stdout);
  assert.deepEqual(result.parameters.modes, ['native', 'pool']);
  assert.deepEqual(result.modes.map((m: { mode: string }) => m.mode), ['native', 'pool']);
  const [native, pool] = result.modes;
  for (const m of result.modes) {
    assert.equal(m.verifiedTasks, 64, `${m.mode} verified ${m.verifiedTasks} tasks`);
    assert.ok(m.tasksPerSecond.median > 0 && m.latencyMs.p50 > 0, `${m.mode}: ${JSON.stringify(m.tasksPerSecond)}`);
  }
  // One thread per slot, each on a stream of its own.
  assert.ok(native.streams >= 1 && native.streams <= 32, `native ran on ${native.streams} streams`);
  assert.equal(native.speedupOverNative, 1);
  assert.equal(pool.speedupOverNative, pool.tasksPerSecond.median / native.tasksPerSecond.median);
});

test('bench --mode native,legacy prints a native row and each mode\'s ratio to it in the "vs native" column', gpu, () => {
  const r = cli(['bench', '--mode', 'native,legacy', '--tasks', '64', '--runs', '1', '--elements', '65536', '--quiet'], { timeoutMs: 300_000 });
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.split('\n');
  const head = lines.map(cells).find((row) => row.includes('vs native') && row.includes('tasks/s'));
  assert.ok(head, `a mode table with a "vs native" column in:\n${r.stdout}`);
  const row = (mode: string) => lines.map(cells).find((cellsOfRow) => cellsOfRow[0] === mode);
  const native = row('native');
  const legacy = row('legacy');
  assert.ok(native && legacy, r.stdout);
  const column = head.indexOf('vs native');
  const tasks = head.indexOf('tasks/s');
  assert.equal(native[column], '1.00×');
  const expected = Number(legacy[tasks]) / Number(native[tasks]);
  assert.match(legacy[column]!, /^\d+\.\d\d×$/);
  // The printed ratio is of the unrounded medians: within the rounding of the two printed tasks/s figures and its own.
  assert.ok(Math.abs(Number.parseFloat(legacy[column]!) - expected) <= 0.01 + expected * 0.01, `${legacy[column]} vs ${expected}`);
  assert.match(r.stdout, /native: the baseline: C\+\+ threads of the benchmark addon/);
});

test('bench --mode native --workers 2 runs the native threads in each worker and every task verifies', gpu, () => {
  const r = cli(['bench', '--mode', 'native', '--tasks', '32', '--workers', '2', '--concurrency', '8', '--runs', '2', '--elements', '65536', '--json'], {
    timeoutMs: 300_000,
  });
  assert.equal(r.status, 0, r.stderr);
  const [native] = JSON.parse(r.stdout).modes;
  assert.equal(native.mode, 'native');
  assert.equal(native.verifiedTasks, 64);
  assert.ok(native.streams >= 2 && native.streams <= 8, `native ran on ${native.streams} streams`);
});

test('bench --devices all spreads the tasks over every GPU, with a row per device beside the total when there are several', gpu, () => {
  const count = Device.count();
  const r = cli(['bench', '--devices', 'all', '--mode', 'pool,native', '--tasks', '64', '--runs', '1', '--elements', '65536', '--json'], { timeoutMs: 300_000 });
  assert.equal(r.status, 0, r.stderr);
  const result = JSON.parse(r.stdout);
  assert.equal(result.schema, 'cuda-stream-pool/bench/2');
  assert.deepEqual(result.parameters.devices, Array.from({ length: count }, (_, i) => i));
  for (const mode of result.modes) {
    assert.equal(mode.verifiedTasks, 64, mode.mode);
    if (count === 1) {
      assert.equal(mode.perDevice, undefined);
      continue;
    }
    assert.deepEqual(mode.perDevice.map((d: { device: number }) => d.device), result.parameters.devices);
    const shares = mode.perDevice.map((d: { tasks: number; verifiedTasks: number }) => [d.tasks, d.verifiedTasks]);
    assert.equal(shares.reduce((sum: number, [tasks]: number[]) => sum + tasks!, 0), 64);
    for (const [tasks, verified] of shares) assert.equal(verified, tasks, `${mode.mode}: each device verified its own tasks`);
  }
  if (count > 1) {
    assert.equal(result.devices.length, count);
    const table = cli(['bench', '--devices', '0,1', '--mode', 'pool', '--tasks', '32', '--runs', '1', '--elements', '65536'], { timeoutMs: 300_000 });
    assert.equal(table.status, 0, table.stderr);
    assert.match(table.stdout, /^│ {3}device 0 /m);
    assert.match(table.stdout, /^│ {3}device 1 /m);
    assert.match(table.stdout, /the tasks are spread over 2: 0 \(/);
  }
});

test('bench --processes runs every mode again in one executor process per device, each verifying its own tasks', gpu, () => {
  const count = Device.count();
  const r = cli(['bench', '--devices', 'all', '--processes', '--workers', '2', '--mode', 'native,pool,lease', '--tasks', '64', '--runs', '1', '--elements', '65536', '--json'], { timeoutMs: 300_000 });
  assert.equal(r.status, 0, r.stderr);
  const result = JSON.parse(r.stdout);
  assert.equal(result.parameters.processes, true);
  assert.deepEqual(result.processModes.map((m: { mode: string }) => m.mode), ['native', 'pool', 'lease']);
  for (const mode of result.processModes) {
    assert.equal(mode.verifiedTasks, 64, mode.mode);
    assert.ok(mode.tasksPerSecond.median > 0);
    if (count === 1) continue;
    assert.deepEqual(mode.perDevice.map((d: { tasks: number; verifiedTasks: number }) => d.verifiedTasks), mode.perDevice.map((d: { tasks: number }) => d.tasks));
    assert.equal(mode.streams, mode.perDevice.reduce((sum: number, d: { streams: number }) => sum + d.streams, 0), 'each process\'s streams count');
  }
  assert.equal(result.processModes[0].speedupOverNative, 1, 'the process rows compare with the process layout\'s native row');
  const table = cli(['bench', '--processes', '--mode', 'pool', '--tasks', '16', '--runs', '1', '--elements', '65536'], { timeoutMs: 300_000 });
  assert.equal(table.status, 0, table.stderr);
  assert.match(table.stdout, /^│ pool, 1 process /m);
  assert.match(table.stdout, /each mode again with one executor process per device \(1\)/);
});

test('a corrupted output element in native mode makes bench exit 1 naming that task and element', gpu, () => {
  const r = cli(['bench', '--tasks', '8', '--runs', '1', '--mode', 'native', '--elements', '65536'], {
    env: { CUDA_STREAM_POOL_BENCH_CORRUPT: '5:4321' },
    timeoutMs: 300_000,
  });
  assert.equal(r.status, 1, `exit ${r.status}; stderr: ${r.stderr}`);
  assert.match(r.stderr, /verification failed: task 5 \(mode native\) element 4321 is \S+, expected \S+/);
});

test('bench micro --json runs every group, with the JS and C++ baseline rows and finite ratios', gpuNotSimulated('nvrtc'), () => {
  const r = cli(['bench', 'micro', '--json', '--quiet'], { timeoutMs: 600_000 });
  assert.equal(r.status, 0, r.stderr);
  const report = JSON.parse(r.stdout);
  for (const group of report.groups) {
    // The peer group needs two GPUs; with fewer it is skipped, saying so.
    if (group.name === 'peer' && Device.count() < 2) assert.deepEqual([group.status, group.message], ['skipped', `needs 2 GPUs; ${Device.count()} visible`]);
    else assert.equal(group.status, 'ok', `${group.name}: ${group.message}`);
  }
  type Row = { name: string; unit: string; value: { median: number }; baseline?: { median: number }; ratio?: number; target?: string; met?: boolean };
  const rows: Row[] = report.groups.flatMap((group: { results: Row[] }) => group.results);
  const named = (prefix: string): Row => {
    const found = rows.find((row) => row.name.startsWith(prefix));
    assert.ok(found, `a row named "${prefix}..." among ${rows.map((row) => row.name).join('; ')}`);
    return found;
  };
  for (const row of rows) {
    assert.ok(Number.isFinite(row.value.median) && row.value.median >= 0, `${row.name}: ${row.value.median}`);
    if (row.baseline) assert.ok(row.baseline.median > 0 && Number.isFinite(row.ratio) && row.ratio! > 0, `${row.name}: ratio ${row.ratio}`);
  }
  const pick = named('pool.getStream(), beside a plain JS pick');
  assert.equal(pick.ratio, pick.value.median / pick.baseline!.median);
  assert.equal(pick.met, pick.ratio! <= 2);
  named('pool.run(fn), empty fn, beside acquire() + release()');
  const idle = named('CPU of an idle process with live pools');
  assert.equal(idle.unit, '%');
  assert.ok(idle.value.median < 100, `${idle.value.median} % of a core while idle`);
  assert.equal(idle.met, idle.value.median <= 1);
  const awaits = named('10,000 concurrent await');
  assert.equal(awaits.unit, 'ms');
  assert.ok(awaits.value.median > 0);
  // In deferred submission a call that queues work is timed recording alone, against a fixed target.
  const recorded = report.environment.submission?.mode === 'deferred';
  const record = named('event.record(stream)');
  if (recorded) {
    assert.match(record.target!, new RegExp(`^≤ ${RECORDING_TARGET_NS} ns \\(deferred: `));
    assert.equal(record.met, record.value.median <= RECORDING_TARGET_NS);
  } else {
    assert.equal(record.target, '≤ the baseline + 100 ns');
    assert.equal(record.met, record.value.median <= record.baseline!.median + 100);
  }
  const copy = named('stream.copy() pinned → device, 4 KiB');
  assert.equal(copy.unit, 'ns');
  assert.equal(copy.met, recorded ? copy.value.median <= RECORDING_TARGET_NS : copy.value.median <= copy.baseline!.median + 100);
  if (Device.count() >= 2) {
    assert.equal(named('stream.copy() device 0 → device 1, no peer access').unit, 'GB/s');
    const direct = named('stream.copy() device 0 → device 1, peer access enabled');
    assert.equal(direct.ratio, direct.value.median / direct.baseline!.median);
    named('stream.copy() device 1 → device 0, peer access enabled');
  }
});

test('bench --timeline --trace --json writes the page and the trace from the phase times it prints', gpu, (t) => {
  const dir = scratchDir(t);
  const page = path.join(dir, 'timeline.html');
  const traceFile = path.join(dir, 'trace.json');
  const r = cli(['bench', '--tasks', '8', '--runs', '1', '--elements', '262144', '--json', '--timeline', page, '--trace', traceFile], {
    timeoutMs: 300_000,
  });
  assert.equal(r.status, 0, r.stderr);
  const result = JSON.parse(r.stdout);
  assert.equal(result.parameters.phaseTimes, true);
  for (const mode of result.modes) {
    const tasks = mode.lastRunTasks;
    assert.deepEqual(tasks.map((task: { task: number }) => task.task), [0, 1, 2, 3, 4, 5, 6, 7], `${mode.mode}: every task once, in order`);
    for (const task of tasks) {
      const m = task.marksMs;
      assert.ok(m[0] >= 0 && m[0] < m[1] && m[1] < m[2] && m[2] < m[3], `${mode.mode} task ${task.task}: marks ${m}`);
      assert.match(task.streamId, /^\d+$/);
    }
  }
  const html = readFileSync(page, 'utf8');
  assert.doesNotMatch(html, /<script[^>]+src=|<link[^>]+href=|@import|url\(http/i, 'the page loads nothing from the network');
  for (const mode of result.modes) assert.ok(html.includes(`<section data-mode="${mode.mode}" data-bars="24"`), `a section of 24 bars for ${mode.mode}`);
  const trace = JSON.parse(readFileSync(traceFile, 'utf8'));
  assert.equal(trace.traceEvents.filter((e: { ph: string }) => e.ph === 'X').length, MODES.length * 8 * 3);
  assert.match(r.stderr, /timeline written to .*\ntrace written to/);
});

test('bench --phases alone adds the phase times to --json and writes no file', gpu, () => {
  const r = cli(['bench', '--tasks', '4', '--runs', '1', '--elements', '65536', '--mode', 'pool', '--quiet', '--json', '--phases'], { timeoutMs: 300_000 });
  assert.equal(r.status, 0, r.stderr);
  const result = JSON.parse(r.stdout);
  assert.equal(result.parameters.phaseTimes, true);
  assert.equal(result.modes[0].lastRunTasks.length, 4);
  assert.equal(r.stderr, '');
});

test('--version and -v print the package version and exit 0', () => {
  const { version } = JSON.parse(readFileSync(path.join(benchRoot, 'package.json'), 'utf8')) as { version: string };
  for (const flag of ['--version', '-v']) {
    const result = cli([flag], { noGpu: true });
    assert.equal(result.status, 0, `${flag}: ${result.stderr}`);
    assert.equal(result.stdout.trim(), version, flag);
  }
});
