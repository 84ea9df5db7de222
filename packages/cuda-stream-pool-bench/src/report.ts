// The text report of `cuda-stream-pool bench`: the environment and every parameter, the phases measured alone, and a
// row per mode (cli-table3). `--json` prints the same BenchResult as JSON instead.
import Table from 'cli-table3';

import { environmentRows } from './environment.js';
import { MODE_DESCRIPTIONS } from './modes.js';
import type { BenchResult } from './schema.js';

/** Tables without colour codes, so that piped output and logs stay plain text. */
function table(options: ConstructorParameters<typeof Table>[0] = {}): InstanceType<typeof Table> {
  return new Table({ ...options, style: { head: [], border: [], ...options.style } });
}

function fixed(value: number, digits: number): string {
  return Number.isFinite(value) ? value.toFixed(digits) : '-';
}

/** Two decimals below 10, one below 100, none above: enough to compare, never a wall of digits. */
function figure(value: number): string {
  return !Number.isFinite(value) ? '-' : value < 10 ? value.toFixed(2) : value < 100 ? value.toFixed(1) : value.toFixed(0);
}

/** A rate per task: three decimals, or two significant digits and "one in N tasks" where that would read 0.00x. */
function perTask(value: number): string {
  if (!Number.isFinite(value)) return '-';
  if (value === 0 || value >= 0.01) return value.toFixed(3);
  // Two significant digits without an exponent: 0.00039, 0.00000012.
  return `${value.toFixed(1 - Math.floor(Math.log10(value)))} (one in ${Math.round(1 / value).toLocaleString('en-US')} tasks)`;
}

/** A speedup as "1.23×", or a dash when its baseline mode did not run. */
function speedup(ratio: number | null): string {
  return ratio === null ? '-' : `${ratio.toFixed(2)}×`;
}

/** The whole report as text. */
export function formatReport(result: BenchResult): string {
  const p = result.parameters;
  const setup = table();
  for (const row of environmentRows(result.environment)) setup.push(row);
  const several = (result.devices?.length ?? 0) > 1;
  const processCount = p.devices?.length ?? 1;
  if (several)
    setup.push([
      'devices',
      `the tasks are spread over ${result.devices!.length}: ${result.devices!.map((d) => `${d.ordinal} (${d.name})`).join(', ')}; each has its own slots, pool, pinned inputs and threads`,
    ]);
  setup.push(
    ['tasks', `${p.tasks} per run, ${p.runs} run(s) per mode after ${p.warmupTasks} warm-up tasks`],
    ['concurrency', `${p.concurrency} tasks in flight${several ? ' per device' : ''}${p.workers ? `, split among ${p.workers} worker threads sharing one pool` : ' on the main thread'}`],
    ['partition', `${p.elements} float32 (${(p.partitionBytes / 2 ** 20).toFixed(2)} MiB) in pinned memory, ${p.partitions} distinct, reused round-robin`],
    ['kernel', `${p.intensity} steps of v = fmaf(v, ${p.fma.a.toPrecision(6)}, ${p.fma.b.toPrecision(6)})${p.intensityCalibrated ? ' (calibrated: about one copy long)' : ' (--intensity)'}`],
    ['verified', `${p.sampleSize} elements per task, within ${p.ulpTolerance} float32 ulps of the CPU reference`],
    ['modes', p.modes.join(', ')],
    ['pool size', String(p.poolSize)],
    ['phase times', p.phaseTimes ? 'on: each task also records 4 timing events, read after it completes' : 'off'],
    ['processes', p.processes ? `one-process rows, then each mode again with one executor process per device (${processCount})` : 'one (this process drives every device)'],
  );

  const ms = result.phasesAloneMs;
  const gbps = (phaseMs: number) => fixed(p.partitionBytes / (phaseMs / 1000) / 1e9, 1);
  const phases = table({ head: ['phase, measured alone', 'ms (median)', 'GB/s'], colAligns: ['left', 'right', 'right'] });
  phases.push(['copy-in (host to device)', fixed(ms.copyIn, 4), gbps(ms.copyIn)]);
  phases.push(['kernel', fixed(ms.kernel, 4), '']);
  phases.push(['copy-out (device to host)', fixed(ms.copyOut, 4), gbps(ms.copyOut)]);
  phases.push(['overlap bound: tasks × the longest', fixed(result.overlapBoundMs, 2), '']);

  const modes = table({
    head: ['mode', 'tasks/s', 'p10-p90', 'GB/s', 'p50 ms', 'p99 ms', 'vs legacy', 'vs native', 'of bound', 'streams', 'verified'],
    colAligns: ['left', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'right'],
  });
  const rows = [...result.modes.map((m) => ({ m, label: m.mode, part: 'device' })), ...(result.processModes ?? []).map((m) => ({ m, label: `${m.mode}, ${processCount} process${processCount > 1 ? 'es' : ''}`, part: 'process of device' }))];
  for (const { m, label, part } of rows) {
    modes.push([
      label,
      figure(m.tasksPerSecond.median),
      `${figure(m.tasksPerSecond.p10)}-${figure(m.tasksPerSecond.p90)}`,
      figure(m.gigabytesPerSecond.median),
      fixed(m.latencyMs.p50, 3),
      fixed(m.latencyMs.p99, 3),
      speedup(m.speedupOverLegacy),
      speedup(m.speedupOverNative),
      fixed(m.overlapFraction.median, 2),
      String(m.streams),
      String(m.verifiedTasks),
    ]);
    for (const d of m.perDevice ?? [])
      modes.push([
        `  ${part} ${d.device}`,
        figure(d.tasksPerSecond.median),
        `${figure(d.tasksPerSecond.p10)}-${figure(d.tasksPerSecond.p90)}`,
        figure(d.gigabytesPerSecond.median),
        fixed(d.latencyMs.p50, 3),
        fixed(d.latencyMs.p99, 3),
        '',
        '',
        fixed(d.overlapFraction.median, 2),
        String(d.streams),
        String(d.verifiedTasks),
      ]);
  }
  const notes = [
    ...result.modes.map((m) => `  ${m.mode}: ${MODE_DESCRIPTIONS[m.mode]}`),
    '  tasks/s, GB/s and "of bound" are medians over the runs; p10-p90 is the spread of tasks/s; "vs legacy" and',
    '  "vs native" are median tasks/s over that mode\'s (a dash when it did not run); latency is per task',
    '  (stream taken to output complete) over all runs. "of bound" = tasks × the longest phase alone / wall time:',
    '  1.00 means the busiest engine never idled (above 1: phases overlapped with themselves, e.g. small kernels).',
    ...(several
      ? [
          '  With several devices a mode\'s row is the total over them (its bound: the busiest device\'s tasks × the',
          '  longest phase), and a "device N" row below it is that device\'s share, timed on its own.',
        ]
      : []),
    ...(result.environment.submission?.mode === 'deferred' && rows.some(({ m }) => m.orderWaits)
      ? [
          '  Order waits (deferred submission: an operation held back until another thread issued the one before it on its',
          '  stream), per mode:',
          ...rows.filter(({ m }) => m.orderWaits).map(({ m, label }) => `    ${label}: ${perTask(m.orderWaits!.perTask)} per task, ${fixed(m.orderWaits!.msPerRun, 1)} ms per run`),
        ]
      : []),
    ...(result.processModes
      ? [
          `  "<mode>, N process(es)": the same tasks, each device's share run by an executor process of its own (its own`,
          '  CUDA context, pool and threads), all at once; its "vs" columns compare with that layout\'s rows.',
        ]
      : []),
  ];
  return `cuda-stream-pool bench: the executor benchmark\n${setup.toString()}\n${phases.toString()}\n${modes.toString()}\n${notes.join('\n')}\n`;
}
