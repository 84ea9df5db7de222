// The --timeline page: a self-contained HTML file with a section per mode, a row per stream and a bar per task phase
// from event timings, so a reader sees which copies and kernels overlapped. See issue 6, "Output".
//
// Why plain SVG and no chart library: the chart is a Gantt chart of rectangles on a shared time axis, which SVG draws
// directly; a library (and inlining its dist file so the page opens without network) would add more bytes and more
// code to own than the chart itself, and none is a dependency of this package. The SVG is generated here, at write time,
// so the page needs no script to draw; <title> elements give each bar its tooltip. The data is also embedded as JSON
// (`<script type="application/json" id="timeline-data">`, schema in results.ts and README.md) for tools and tests.
import { writeFileSync } from 'node:fs';

import { PHASES, type BenchResult, type TimelineData, type TimelineMode } from './results.js';
import { MODE_DESCRIPTIONS } from './modes.js';

const PHASE_COLORS: Record<(typeof PHASES)[number], string> = {
  'copy-in': '#4c78a8',
  kernel: '#f58518',
  'copy-out': '#54a24b',
};

const CHART_WIDTH = 1100; // px of time axis
const LABEL_WIDTH = 260; // px of row labels
const AXIS_HEIGHT = 28;

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A "nice" tick step (1, 2 or 5 × 10^k) giving about `count` ticks over `span`. */
function tickStep(span: number, count: number): number {
  const raw = span / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const factor = raw / power;
  return (factor < 1.5 ? 1 : factor < 3.5 ? 2 : factor < 7.5 ? 5 : 10) * power;
}

function formatMs(ms: number): string {
  return ms >= 10 ? ms.toFixed(1) : ms >= 1 ? ms.toFixed(2) : ms.toFixed(3);
}

/** One mode's chart: rows of bars on a time axis from 0 to `spanMs` (shared by every section). */
function modeSvg(mode: TimelineMode, spanMs: number): string {
  const rows = mode.rows.length;
  const rowHeight = rows <= 40 ? 16 : Math.max(3, Math.floor(640 / rows));
  const showLabels = rowHeight >= 10;
  const height = AXIS_HEIGHT + rows * rowHeight + 4;
  const width = LABEL_WIDTH + CHART_WIDTH + 20;
  const x = (ms: number) => LABEL_WIDTH + (ms / spanMs) * CHART_WIDTH;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img">`);
  const step = tickStep(spanMs, 10);
  for (let t = 0; t <= spanMs + step / 1000; t += step) {
    const at = x(t).toFixed(1);
    out.push(`<line x1="${at}" x2="${at}" y1="${AXIS_HEIGHT - 6}" y2="${height}" class="grid"/>`);
    out.push(`<text x="${at}" y="${AXIS_HEIGHT - 10}" class="tick">${escapeHtml(formatMs(t))} ms</text>`);
  }
  if (!showLabels) out.push(`<text x="4" y="${AXIS_HEIGHT + 12}" class="label">${rows} streams, one row each</text>`);
  mode.rows.forEach((row, r) => {
    const y = AXIS_HEIGHT + r * rowHeight;
    if (showLabels) out.push(`<text x="4" y="${(y + rowHeight * 0.75).toFixed(1)}" class="label">${escapeHtml(row.label)}</text>`);
    for (const task of row.tasks) {
      for (const bar of task.bars) {
        const x0 = x(bar.startMs);
        const w = Math.max(0.5, x(bar.endMs) - x0);
        const tip = `task ${task.task}${task.thread ? ` (worker ${task.thread})` : ''}: ${bar.phase} ${formatMs(bar.endMs - bar.startMs)} ms, from ${formatMs(bar.startMs)} to ${formatMs(bar.endMs)} ms; ${row.label}`;
        out.push(
          `<rect x="${x0.toFixed(2)}" y="${(y + 1).toFixed(1)}" width="${w.toFixed(2)}" height="${Math.max(1, rowHeight - 2)}" ` +
            `fill="${PHASE_COLORS[bar.phase]}"><title>${escapeHtml(tip)}</title></rect>`,
        );
      }
    }
  });
  out.push('</svg>');
  return out.join('\n');
}

/** JSON that is safe inside a <script> element: no "<" can end it early. */
function embeddedJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c');
}

/** The whole page: a header with the device and parameters, a legend, then a section per mode. */
export function timelineHtml(data: TimelineData, result: BenchResult): string {
  const spanMs = Math.max(1e-3, ...data.modes.flatMap((m) => m.rows.flatMap((r) => r.tasks.flatMap((t) => t.bars.map((b) => b.endMs)))));
  const p = result.parameters;
  const e = result.environment;
  const legend = PHASES.map((phase) => `<span class="key"><span class="swatch" style="background:${PHASE_COLORS[phase]}"></span>${phase}</span>`).join(' ');
  const sections = data.modes
    .map((mode) => {
      const summary = result.modes.find((m) => m.mode === mode.mode);
      const facts = summary
        ? `${summary.tasksPerSecond.median.toFixed(0)} tasks/s, ${(summary.overlapFraction.median * 100).toFixed(0)}% of the overlap bound`
        : '';
      return (
        `<section><h2>${escapeHtml(mode.mode)}</h2>\n<p>${escapeHtml(MODE_DESCRIPTIONS[mode.mode])}. Last run: ${formatMs(mode.wallMs)} ms wall, ` +
        `${mode.rows.length} stream(s)${facts ? `, ${escapeHtml(facts)}` : ''}.</p>\n${modeSvg(mode, spanMs)}\n</section>`
      );
    })
    .join('\n');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>cuda-stream-pool bench timeline: ${escapeHtml(e.device.name)}</title>
<style>
body { font: 13px system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; } h2 { font-size: 15px; margin: 20px 0 4px; }
.grid { stroke: #e4e4e4; stroke-width: 1; } .tick { font-size: 10px; fill: #666; text-anchor: middle; }
.label { font-size: 11px; fill: #333; } .key { margin-right: 14px; }
.swatch { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -2px; }
section { overflow-x: auto; } code { font-size: 12px; }
</style>
</head>
<body>
<h1>cuda-stream-pool bench: timeline</h1>
<p>${escapeHtml(`${e.device.name} (compute ${e.device.computeCapability}), CUDA driver ${e.driverVersion ?? 'unknown'}, Node.js ${e.node}, ${e.date}`)}<br>
${escapeHtml(`${p.tasks} tasks × ${p.elements} float32 (${(p.partitionBytes / 2 ** 20).toFixed(2)} MiB), intensity ${p.intensity}, concurrency ${p.concurrency}, workers ${p.workers}, pool size ${p.poolSize}`)}</p>
<p>Each row is a stream; each task is three bars, its phases in order: ${legend}. Times come from CUDA events recorded between
the phases, on one axis for every mode (${formatMs(spanMs)} ms wide). Bars in one column overlapped on the GPU. Hover a bar
for its task and times. Only the last run of each mode is shown.</p>
${sections}
<script type="application/json" id="timeline-data">${embeddedJson(data)}</script>
</body>
</html>
`;
}

/** Writes the timeline page to `file`. @throws the file system's error when it cannot be written. */
export function writeTimeline(file: string, data: TimelineData, result: BenchResult): void {
  writeFileSync(file, timelineHtml(data, result));
}
