// The timeline page (--timeline, `report --html`): one self-contained HTML file that loads nothing. Per mode, first
// an engine lane per phase kind (how many copy-ins, kernels, copy-outs were in flight, how busy each engine was and
// where it idled), then a row per stream with a bar per task phase, on one time axis shared by every mode that the
// wheel zooms and a drag pans. The bars are drawn on canvases by the page's script (timeline-script.ts): a run has
// up to tens of thousands of bars, too many for one DOM node each. The numbers (occupancy per phase) are also in
// plain HTML tables, with data- attributes for tools and tests.
import { MODE_DESCRIPTIONS } from './modes.js';
import { modeTimeline, type ModeTimeline, type PhaseOccupancy } from './phase-timeline.js';
import { PHASES } from './results.js';
import type { BenchResult, ModeResult } from './schema.js';
import { LAYOUT, PHASE_STYLE, TIMELINE_SCRIPT } from './timeline-script.js';

/** The `schema` of the data the page embeds in `<script type="application/json" id="timeline-data">`. */
export const TIMELINE_SCHEMA = 'cuda-stream-pool/timeline/2';

/** One stream row as the page embeds it: the tasks in start order, with 4 marks each (flat, to keep large runs small
 * and quick to parse). */
interface PageRow {
  streamId: string;
  label: string;
  busyFraction: number;
  tasks: number[];
  threads: number[];
  /** 4 per task: copy-in start, kernel start, copy-out start, copy-out end, ms. */
  marksMs: number[];
}

/** One mode as the page embeds it; `rows` and the rest are absent when the mode holds no phase times. */
interface PageMode {
  mode: string;
  spanStartMs?: number;
  spanEndMs?: number;
  occupancy?: PhaseOccupancy[];
  steps?: ModeTimeline['steps'];
  rows?: PageRow[];
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** JSON that is safe inside a <script> element: no "<" can end it early. */
function embeddedJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c');
}

function formatMs(ms: number): string {
  return ms >= 10 ? ms.toFixed(1) : ms >= 1 ? ms.toFixed(2) : ms.toFixed(3);
}

function percent(fraction: number): string {
  return `${(fraction * 100).toFixed(1)}%`;
}

function pageMode(result: ModeResult, timeline: ModeTimeline | undefined): PageMode {
  if (!timeline) return { mode: result.mode };
  return {
    mode: result.mode,
    spanStartMs: timeline.spanStartMs,
    spanEndMs: timeline.spanEndMs,
    occupancy: timeline.occupancy,
    steps: timeline.steps,
    rows: timeline.rows.map((row) => ({
      streamId: row.streamId,
      label: row.label,
      busyFraction: row.busyFraction,
      tasks: row.tasks.map((t) => t.task),
      threads: row.tasks.map((t) => t.thread),
      marksMs: row.tasks.flatMap((t) => t.marksMs),
    })),
  };
}

/** The occupancy table of one mode: a row per phase kind, its values also as data- attributes. */
function occupancyTable(mode: string, occupancy: PhaseOccupancy[]): string {
  const rows = occupancy.map(
    (o) =>
      `<tr data-phase="${o.phase}" data-busy-fraction="${o.busyFraction}" data-busy-ms="${o.busyMs}" data-mean-in-flight="${o.meanInFlight}" ` +
      `data-peak-in-flight="${o.peakInFlight}" data-gaps="${o.gaps}" data-idle-ms="${o.idleMs}">` +
      `<th><span class="swatch ${o.phase}"></span>${o.phase}</th><td>${percent(o.busyFraction)}</td><td>${o.meanInFlight.toFixed(2)}</td>` +
      `<td>${o.peakInFlight}</td><td>${o.gaps}</td><td>${formatMs(o.idleMs)} ms</td></tr>`,
  );
  return (
    `<table class="occupancy" data-mode="${escapeHtml(mode)}"><thead><tr><th>engine</th><th>busy</th><th>mean in flight</th>` +
    `<th>peak in flight</th><th>idle gaps</th><th>idle time</th></tr></thead><tbody>${rows.join('')}</tbody></table>`
  );
}

function section(result: ModeResult, timeline: ModeTimeline | undefined, index: number, legacyRan: boolean, nativeRan: boolean): string {
  const facts = [
    `${result.tasksPerSecond.median.toFixed(0)} tasks/s (median of ${result.tasksPerSecond.runs} runs)`,
    `${result.overlapFraction.median.toFixed(2)} of the overlap bound`,
    ...(legacyRan && result.speedupOverLegacy !== null ? [`${result.speedupOverLegacy.toFixed(2)}× legacy`] : []),
    ...(nativeRan && result.speedupOverNative !== null ? [`${result.speedupOverNative.toFixed(2)}× native`] : []),
  ];
  const head = `<h2>${escapeHtml(result.mode)}</h2>\n<p>${escapeHtml(MODE_DESCRIPTIONS[result.mode] ?? '')}. ${escapeHtml(facts.join(', '))}.</p>`;
  if (!timeline) return `<section data-mode="${escapeHtml(result.mode)}">${head}\n<p class="none">No phase times were recorded for this mode.</p></section>`;
  const bars = timeline.rows.reduce((sum, row) => sum + row.tasks.length * PHASES.length, 0);
  const spanMs = timeline.spanEndMs - timeline.spanStartMs;
  const last = `Last run: ${result.lastRunTasks!.length} tasks on ${timeline.rows.length} stream(s), ${formatMs(spanMs)} ms from the first copy-in to the last copy-out.`;
  const toggle =
    timeline.rows.length > LAYOUT.collapsedRows
      ? `<p><button id="toggle-${index}" type="button">Show all ${timeline.rows.length} stream rows</button> (the first ${LAYOUT.collapsedRows}, in start order, are shown)</p>`
      : '';
  return (
    `<section data-mode="${escapeHtml(result.mode)}" data-bars="${bars}" data-rows="${timeline.rows.length}">${head}\n<p>${escapeHtml(last)}</p>\n` +
    `${occupancyTable(result.mode, timeline.occupancy)}\n<div class="chart"><canvas id="canvas-${index}" role="img" aria-label="${escapeHtml(`${result.mode}: engine lanes and ${timeline.rows.length} stream rows`)}"></canvas></div>\n${toggle}</section>`
  );
}

/** The whole page for `result`: a header with the device and parameters, the zoom controls and legend, then a
 * section per mode (a mode without phase times gets its figures and a note). */
export function timelineHtml(result: BenchResult): string {
  const timelines = result.modes.map((m) => (m.lastRunTasks?.length ? modeTimeline(m) : undefined));
  const data = { schema: TIMELINE_SCHEMA, phases: PHASES, modes: result.modes.map((m, i) => pageMode(m, timelines[i])) };
  const legacyRan = result.modes.some((m) => m.mode === 'legacy');
  const nativeRan = result.modes.some((m) => m.mode === 'native');
  const p = result.parameters;
  const e = result.environment;
  const legend = PHASE_STYLE.map((s) => `<span class="key"><span class="swatch ${s.phase}"></span>${s.phase}</span>`).join(' ');
  const swatches = PHASE_STYLE.map((s) => {
    const stripes = s.pattern === 'plain' ? s.color : `repeating-linear-gradient(${s.pattern === 'rising' ? '-45deg' : '45deg'}, ${s.color} 0 4px, ${s.stripe} 4px 6px)`;
    return `.swatch.${s.phase} { background: ${stripes}; }`;
  }).join('\n');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>cuda-stream-pool bench timeline: ${escapeHtml(e.device.name)}</title>
<style>
body { font: 13px system-ui, sans-serif; margin: 0 16px 24px; color: #222; }
h1 { font-size: 18px; margin: 12px 0 4px; } h2 { font-size: 15px; margin: 22px 0 4px; }
p { margin: 4px 0; max-width: 110ch; }
.toolbar { position: sticky; top: 0; z-index: 2; background: #fff; border-bottom: 1px solid #ddd; padding: 6px 0; }
.toolbar button, section button { font: inherit; padding: 2px 10px; margin-right: 4px; }
.key { margin-right: 14px; white-space: nowrap; }
.swatch { display: inline-block; width: 14px; height: 12px; margin-right: 4px; vertical-align: -2px; border-radius: 2px; }
${swatches}
table.occupancy { border-collapse: collapse; margin: 6px 0; font-size: 12px; }
table.occupancy th, table.occupancy td { padding: 2px 10px; text-align: right; border-bottom: 1px solid #eee; }
table.occupancy th:first-child { text-align: left; }
.chart { width: 100%; cursor: crosshair; }
canvas { display: block; }
#tooltip { position: absolute; z-index: 3; background: #222; color: #fff; padding: 6px 8px; border-radius: 4px;
  font-size: 12px; white-space: pre; pointer-events: none; }
.none { color: #666; font-style: italic; }
</style>
</head>
<body>
<h1>cuda-stream-pool bench: timeline</h1>
<p>${escapeHtml(`${e.device.name} (compute ${e.device.computeCapability}), CUDA driver ${e.driverVersion ?? 'unknown'}, Node.js ${e.node}, ${e.date}`)}<br>
${escapeHtml(`${p.tasks} tasks × ${p.elements} float32 (${(p.partitionBytes / 2 ** 20).toFixed(2)} MiB), intensity ${p.intensity}, concurrency ${p.concurrency}, workers ${p.workers}, pool size ${p.poolSize}`)}</p>
<p>Each mode shows its last run. First an engine lane per phase kind: how many copy-ins, kernels and copy-outs were in
flight at each moment (the height, up to the lane's peak) and the time that engine idled (tinted red). Then a row
per stream, each task three bars in phase order, placed by CUDA events recorded between the phases. Every mode starts at
its own run's first event, on one time axis.</p>
<div class="toolbar"><button id="zoom-fit" type="button">Zoom to fit</button><button id="zoom-readable" type="button">Readable bars</button><button id="zoom-in" type="button">Zoom in</button><button id="zoom-out" type="button">Zoom out</button>
<span id="view-range"></span> Wheel: zoom at the pointer; drag: pan; hover: a bar's task and times. ${legend}</div>
${result.modes.map((m, i) => section(m, timelines[i], i, legacyRan, nativeRan)).join('\n')}
<noscript><p>The charts need JavaScript; the tables above hold the occupancy figures.</p></noscript>
<div id="tooltip" hidden></div>
<script type="application/json" id="timeline-data">${embeddedJson(data)}</script>
<script type="application/json" id="timeline-layout">${embeddedJson(LAYOUT)}</script>
<script type="application/json" id="timeline-style">${embeddedJson(PHASE_STYLE)}</script>
<script>${TIMELINE_SCRIPT}</script>
</body>
</html>
`;
}
