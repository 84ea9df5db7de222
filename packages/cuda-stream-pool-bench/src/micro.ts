// `cuda-stream-pool bench micro`: runs the micro-benchmark modules of every concept in one process and prints each
// row beside its native baseline from the same run, as a ratio. See harness.ts.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import Table from 'cli-table3';

import { Device } from 'cuda-stream-pool';
import { describeEnvironment, environmentRows } from './environment.js';
import { MICRO_SCHEMA, type MicroGroupResult, type MicroReport, type MicroResult, type Sample } from './schema.js';
import { streamMicroBenchmarks } from './stream.js';
import { peerMicroBenchmarks, peerSkipReason } from './peer.js';
import { partitionMicroBenchmarks, partitionSkipReason } from './partition-latency.js';

type MicroFunction = (options: { device: number }) => Promise<MicroResult[]>;

/** A group of micro-benchmarks: one concept's module, loaded dynamically unless `run` is given. */
interface Group {
  name: string;
  /** The module, relative to this file (compiled: dist/). */
  file: string;
  /** Its export: `(): Promise<MicroResult[]>` (called with `{ device }`). */
  exportName: string;
  /** The function itself, for this package's own group. */
  run?: MicroFunction;
  /** Why the group cannot run on the device of that ordinal (two GPUs needed, one visible), or undefined when it can. */
  skipReason?: (device: number) => string | undefined;
}

/** The concepts' modules, in print order. The stream group is this package's own; the others come from the pool,
 * memory and kernel work and are loaded dynamically, so a missing one is reported, not fatal. */
const GROUPS: Group[] = [
  { name: 'pool', file: './pool.js', exportName: 'poolMicroBenchmarks' },
  { name: 'stream', file: './stream.js', exportName: 'streamMicroBenchmarks', run: streamMicroBenchmarks },
  { name: 'memory', file: './memory.js', exportName: 'memoryMicroBenchmarks' },
  { name: 'kernel', file: './kernel.js', exportName: 'kernelMicroBenchmarks' },
  { name: 'graph', file: './graph.js', exportName: 'graphMicroBenchmarks' },
  { name: 'peer', file: './peer.js', exportName: 'peerMicroBenchmarks', run: peerMicroBenchmarks, skipReason: peerSkipReason },
  { name: 'partition', file: './partition-latency.js', exportName: 'partitionMicroBenchmarks', run: partitionMicroBenchmarks, skipReason: partitionSkipReason },
];

async function loadGroup(group: Group, device: number): Promise<MicroGroupResult> {
  const url = new URL(group.file, import.meta.url);
  const source = `src/${group.file.slice(2).replace(/\.js$/, '.ts')}`;
  const skip = group.skipReason?.(device);
  if (skip !== undefined) return { name: group.name, status: 'skipped', message: skip, results: [] };
  if (!group.run && !existsSync(fileURLToPath(url)))
    return { name: group.name, status: 'missing', message: `${source} is not in this build, so its benchmarks did not run`, results: [] };
  try {
    const run = group.run ?? ((await import(url.href)) as Record<string, unknown>)[group.exportName];
    if (typeof run !== 'function')
      return { name: group.name, status: 'missing', message: `${source} does not export ${group.exportName}(), so its benchmarks did not run`, results: [] };
    const results = (await (run as MicroFunction)({ device })) ?? [];
    return { name: group.name, status: 'ok', results };
  } catch (error) {
    const e = error instanceof Error ? error : new Error(String(error));
    return { name: group.name, status: 'failed', message: `${e.name}: ${e.message}`, results: [] };
  }
}

/** Runs every group on `device`, one after another (a group's timing must not compete with another's), calling
 * `onGroup` as each starts; the report lists them in the order of GROUPS. The pool group runs last: its `pool.run`
 * rows put AsyncLocalStorage in use, which on Node 20 and 22 makes every later `await` of the process dearer (its
 * promise hooks; the pool group reports by how much), and the other groups measure the library's calls without
 * that tax. */
export async function runMicroBenchmarks(device: number, onGroup: (name: string) => void = () => {}): Promise<MicroReport> {
  const environment = describeEnvironment(Device.get(device));
  const results = new Map<Group, MicroGroupResult>();
  const order = [...GROUPS.filter((g) => g.name !== 'pool'), ...GROUPS.filter((g) => g.name === 'pool')];
  for (const group of order) {
    onGroup(group.name);
    results.set(group, await loadGroup(group, device));
  }
  return { schema: MICRO_SCHEMA, environment, groups: GROUPS.map((g) => results.get(g)!) };
}

function figure(value: number): string {
  if (!Number.isFinite(value)) return '-';
  const abs = Math.abs(value);
  return abs >= 100 ? value.toFixed(0) : abs >= 10 ? value.toFixed(1) : abs >= 1 ? value.toFixed(2) : value.toPrecision(3);
}

function withUnit(sample: Sample | undefined, unit: string): string {
  return sample ? `${figure(sample.median)} ${unit}` : '-';
}

function spread(sample: Sample): string {
  return `${figure(sample.p10)}-${figure(sample.p90)}`;
}

function ratioOf(r: MicroResult): number | undefined {
  if (r.ratio !== undefined) return r.ratio;
  if (!r.baseline) return undefined;
  return r.better === 'higher' ? r.baseline.median / r.value.median : r.value.median / r.baseline.median;
}

/** The report as text: the environment, then a row per benchmark beside its baseline, then a line per group that
 * did not run. */
export function formatMicroReport(report: MicroReport): string {
  const plain = { head: [], border: [] };
  const setup = new Table({ style: plain });
  for (const row of environmentRows(report.environment)) setup.push(row);
  const rows = new Table({
    head: ['group', 'benchmark', 'median', 'p10-p90', 'calls/run', 'native baseline', 'baseline', 'ratio', 'target', 'met'],
    colAligns: ['left', 'left', 'right', 'right', 'right', 'left', 'right', 'right', 'left', 'left'],
    style: plain,
  });
  for (const group of report.groups) {
    for (const r of group.results) {
      const ratio = ratioOf(r);
      rows.push([
        group.name,
        r.name,
        withUnit(r.value, r.unit),
        spread(r.value),
        r.value.callsPerRun === undefined ? '-' : String(r.value.callsPerRun),
        r.baselineName ?? '-',
        withUnit(r.baseline, r.unit),
        ratio === undefined ? '-' : `${figure(ratio)}×`,
        r.target ?? '',
        r.met === undefined ? '' : r.met ? 'yes' : 'NO',
      ]);
    }
  }
  const notes = report.groups
    .filter((g) => g.status !== 'ok')
    .map((g) => `  ${g.name}: ${g.status === 'missing' ? 'not run' : g.status === 'skipped' ? 'skipped' : 'FAILED'}: ${g.message}`);
  return (
    `cuda-stream-pool bench micro: per-call costs beside native baselines from the same run\n${setup.toString()}\n${rows.toString()}\n` +
    '  median and p10-p90 over runs of many calls, each loop warmed until V8 has optimized it (calls/run: the calls\n' +
    '  of one measured run); ratio = library / native for costs (lower is better),\n' +
    '  native / library for throughput (higher is better)\n' +
    (notes.length ? `${notes.join('\n')}\n` : '')
  );
}
