// The timeline page in a real browser: headless Chromium (the system's, e.g. Debian's `chromium` package) driven by
// playwright-core. In CI (CI=true) a missing browser fails these tests; elsewhere they skip and say why.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';

import { chromium, type Browser, type Page } from 'playwright-core';

import { MODES } from '#bench/modes.js';
import { PHASES } from '#bench/results.js';
import type { ModeResult, TaskPhaseTimes } from '#bench/schema.js';
import { timelineHtml } from '#bench/timeline.js';
import { PHASE_STYLE } from '#bench/timeline-script.js';
import { benchFixture } from './support/fixture.js';
import { syntheticResults } from './support/synthetic-results.js';

// The page's globals as the callbacks given to page.evaluate() use them there (this project compiles without the DOM
// library, which would declare them for every file).
interface PageElement {
  dataset: Record<string, string | undefined>;
  textContent: string | null;
  getBoundingClientRect(): { left: number; top: number };
  getContext(kind: '2d'): { getImageData(x: number, y: number, width: number, height: number): { data: Uint8ClampedArray } };
}
declare const document: { body: PageElement; getElementById(id: string): PageElement | null };
declare function requestAnimationFrame(callback: () => void): number;
declare const window: {
  scrollBy(x: number, y: number): void;
  /** loadMs: performance.now() when the page had drawn, ms from the start of navigation. */
  cspTimeline: { loadMs: number; setView(startMs: number, endMs: number): void };
};

const CANDIDATES = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];
const executable = CANDIDATES.find((file): file is string => !!file && existsSync(file));
const MISSING =
  'no Chromium found (looked for $CHROMIUM_PATH, /usr/bin/chromium, /usr/bin/chromium-browser, /usr/bin/google-chrome); ' +
  'install Debian\'s "chromium" package (apt-get install -y chromium), as .ci/run does';

// CI must run these tests, so there a missing browser is a failure of its own; elsewhere the suite skips with the reason.
if (process.env.CI)
  test('CI has headless Chromium for the timeline page tests', () => {
    assert.ok(executable, `CI=${process.env.CI}: ${MISSING}`);
  });

const fixture = benchFixture();
const scratch = mkdtempSync(path.join(os.tmpdir(), 'csp-timeline-'));
let browser: Browser;

/** Opens `html` in a fresh page of 1400×900 CSS px at device scale 1, and collects console errors and page errors;
 * `loadMs` is the time from the start of navigation until the page had drawn. */
async function open(html: string): Promise<{ page: Page; errors: string[]; loadMs: number }> {
  const file = path.join(scratch, `page-${Math.random().toString(36).slice(2)}.html`);
  writeFileSync(file, html);
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 }, deviceScaleFactor: 1 });
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(error.message));
  // Anything but the page itself would be a load from outside.
  await page.route('**/*', (route) => (route.request().url() === pathToFileURL(file).href ? route.continue() : route.abort()));
  page.on('requestfailed', (request) => errors.push(`request to ${request.url()} (the page must load nothing)`));
  await page.goto(pathToFileURL(file).href);
  await page.waitForFunction(() => document.body.dataset.ready === 'true');
  // The page's own clock: from the start of navigation to the end of its first drawing.
  const loadMs = await page.evaluate(() => window.cspTimeline.loadMs);
  return { page, errors, loadMs };
}

/** Union length, gap count, mean and peak in flight of one phase kind over the run's span, worked out here from the
 * raw phase times by merging sorted intervals (the page's code keeps a step function instead). */
function expectedOccupancy(tasks: TaskPhaseTimes[], p: number) {
  const spanStart = Math.min(...tasks.map((t) => t.marksMs[0]));
  const spanEnd = Math.max(...tasks.map((t) => t.marksMs[3]));
  const intervals = tasks.map((t) => [t.marksMs[p]!, t.marksMs[p + 1]!] as const).sort((a, b) => a[0] - b[0]);
  let busy = 0;
  let gaps = 0;
  let covered = spanStart;
  let current: [number, number] | undefined;
  for (const [s, e] of intervals) {
    if (current && s <= current[1]) current[1] = Math.max(current[1], e);
    else {
      if (current) busy += current[1] - current[0];
      if (s > covered) gaps++;
      current = [s, e];
    }
    covered = Math.max(covered, e);
  }
  busy += current![1] - current![0];
  if (spanEnd > covered) gaps++;
  const total = intervals.reduce((sum, [s, e]) => sum + (e - s), 0);
  const peak = Math.max(...intervals.map(([at]) => intervals.filter(([s, e]) => s <= at && at < e).length));
  const span = spanEnd - spanStart;
  return { busyFraction: busy / span, meanInFlight: total / span, peakInFlight: peak, gaps, span };
}

/** The mode, its earliest task and the next task on the same stream, where the two are apart: the earliest task's
 * bars are on the first row, the gap after it is idle on that row. */
function taskWithGap(): { index: number; mode: ModeResult; first: TaskPhaseTimes; next: TaskPhaseTimes } {
  for (const [index, mode] of fixture.result.modes.entries()) {
    const tasks = mode.lastRunTasks;
    if (!tasks?.length) continue;
    const first = tasks.reduce((a, b) => (b.marksMs[0] < a.marksMs[0] ? b : a));
    const sameRow = (t: TaskPhaseTimes) => t.streamId === first.streamId && (mode.mode !== 'per-thread' || t.thread === first.thread);
    const later = tasks.filter((t) => sameRow(t) && t.marksMs[0] > first.marksMs[0]).sort((a, b) => a.marksMs[0] - b.marksMs[0]);
    if (later[0] && later[0].marksMs[0] - first.marksMs[3] >= 0.001) return { index, mode, first, next: later[0] };
  }
  throw new Error('the fixture has no mode whose first task is followed by an idle gap on its stream');
}

interface Geometry {
  left: number;
  top: number;
  plotLeft: number;
  plotWidth: number;
  rowsTop: number;
  barTop: number;
  barHeight: number;
}

/** Scrolls mode `index`'s canvas to 100 px below the top of the window (clear of the sticky toolbar) and reads its
 * layout from its data- attributes. */
async function geometry(page: Page, index: number): Promise<Geometry> {
  return page.evaluate((i) => {
    const canvas = document.getElementById(`canvas-${i}`)!;
    window.scrollBy(0, canvas.getBoundingClientRect().top - 100);
    const rect = canvas.getBoundingClientRect();
    const d = canvas.dataset;
    return {
      left: rect.left,
      top: rect.top,
      plotLeft: Number(d.plotLeft),
      plotWidth: Number(d.plotWidth),
      rowsTop: Number(d.rowsTop),
      barTop: Number(d.barTop),
      barHeight: Number(d.barHeight),
    };
  }, index);
}

async function setView(page: Page, startMs: number, endMs: number): Promise<[number, number]> {
  return page.evaluate(([s, e]) => {
    window.cspTimeline.setView(s!, e!);
    const range = document.getElementById('view-range')!.dataset;
    return [Number(range.startMs), Number(range.endMs)] as [number, number];
  }, [startMs, endMs]);
}

/** Resolves once the page has drawn every frame requested so far (a frame requested now runs after them). */
async function framesDrawn(page: Page): Promise<void> {
  await page.evaluate(() => new Promise<void>((resolve) => requestAnimationFrame(() => requestAnimationFrame(() => resolve()))));
}

async function pixel(page: Page, index: number, x: number, y: number): Promise<number[]> {
  return page.evaluate(
    ([i, px, py]) => {
      const canvas = document.getElementById(`canvas-${i}`)!;
      return [...canvas.getContext('2d')!.getImageData(Math.floor(px!), Math.floor(py!), 1, 1).data];
    },
    [index, x, y],
  );
}

function rgb(hex: string): number[] {
  return [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
}

/** Whether `color` is the fill or the pattern colour of phase `p` (within 2 per channel). */
function isPhaseColor(color: number[], p: number): boolean {
  const style = PHASE_STYLE[p]!;
  return [style.color, style.stripe].some((hex) => rgb(hex).every((c, k) => Math.abs(c - color[k]!) <= 2));
}

describe(`the timeline page in headless Chromium (${fixture.origin} fixture)`, { skip: executable ? false : MISSING }, () => {
  before(async () => {
    // Not the sanitizer runtime that .ci/sanitizers.sh preloads into the suite's processes: Chromium hangs under it.
    const { LD_PRELOAD: _preloaded, ...env } = process.env;
    browser = await chromium.launch({ executablePath: executable, args: ['--no-sandbox'], env: env as Record<string, string> });
  });
  after(async () => {
    await browser?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  test('the page loads with no console errors and draws three bars per task of every mode', async () => {
    const { page, errors } = await open(timelineHtml(fixture.result));
    await page.click('#zoom-fit');
    for (const toggle of await page.$$('button[id^="toggle-"]')) await toggle.click();
    for (const [index, mode] of fixture.result.modes.entries()) {
      const expected = (mode.lastRunTasks?.length ?? 0) * PHASES.length;
      if (expected === 0) continue;
      assert.equal(Number(await page.getAttribute(`section[data-mode="${mode.mode}"]`, 'data-bars')), expected, mode.mode);
      const drawn = await page.waitForFunction(
        ([i, n]) => Number(document.getElementById(`canvas-${i}`)!.dataset.barsDrawn) === n,
        [index, expected] as const,
        { timeout: 5000 },
      );
      assert.ok(await drawn.jsonValue(), `${mode.mode}: ${expected} bars drawn at zoom to fit with every row shown`);
    }
    assert.deepEqual(errors, []);
    await page.close();
  });

  test('the occupancy of each engine equals the one worked out from the raw phase times', async () => {
    const { page } = await open(timelineHtml(fixture.result));
    for (const mode of fixture.result.modes) {
      if (!mode.lastRunTasks?.length) continue;
      for (const [p, phase] of PHASES.entries()) {
        const expected = expectedOccupancy(mode.lastRunTasks, p);
        const row = `section[data-mode="${mode.mode}"] table.occupancy tr[data-phase="${phase}"]`;
        const read = async (name: string) => Number(await page.getAttribute(row, `data-${name}`));
        const where = `${mode.mode} ${phase}`;
        assert.ok(Math.abs((await read('busy-fraction')) - expected.busyFraction) < 1e-9, `${where} busy fraction`);
        assert.ok(Math.abs((await read('mean-in-flight')) - expected.meanInFlight) < 1e-9, `${where} mean in flight`);
        assert.ok(Math.abs((await read('idle-ms')) - (1 - expected.busyFraction) * expected.span) < 1e-9, `${where} idle ms`);
        assert.equal(await read('peak-in-flight'), expected.peakInFlight, `${where} peak in flight`);
        assert.equal(await read('gaps'), expected.gaps, `${where} gaps`);
      }
    }
    await page.close();
  });

  test("a known bar's pixels have its phase's colour, the gap after it on its row has none", async () => {
    const { page } = await open(timelineHtml(fixture.result));
    const { index, mode, first, next } = taskWithGap();
    const g = await geometry(page, index);
    const y = g.rowsTop + g.barTop + g.barHeight / 2;
    for (const [p, phase] of PHASES.entries()) {
      // Each phase in a view of its own, so a short one is as wide as a long one.
      const phaseMs = first.marksMs[p + 1]! - first.marksMs[p]!;
      const [start, end] = await setView(page, first.marksMs[p]! - phaseMs * 0.1, first.marksMs[p + 1]! + phaseMs * 0.1);
      const x = (ms: number) => g.plotLeft + ((ms - start) / (end - start)) * g.plotWidth;
      const left = x(first.marksMs[p]!);
      const right = x(first.marksMs[p + 1]!);
      assert.ok(right - left >= 6, `${mode.mode} task ${first.task} ${phase}: ${right - left} px wide`);
      for (const at of [left + 3, (left + right) / 2, right - 3]) {
        const color = await pixel(page, index, at, y);
        assert.ok(isPhaseColor(color, p), `${mode.mode} task ${first.task} ${phase} at x ${at.toFixed(1)}: rgba ${color}`);
      }
    }
    const gapMs = next.marksMs[0] - first.marksMs[3];
    const [gapStart, gapEnd] = await setView(page, first.marksMs[3] - gapMs * 0.2, next.marksMs[0] + gapMs * 0.2);
    const gx = (ms: number) => g.plotLeft + ((ms - gapStart) / (gapEnd - gapStart)) * g.plotWidth;
    for (const fraction of [0.25, 0.5, 0.75]) {
      const at = gx(first.marksMs[3] + gapMs * fraction);
      const color = await pixel(page, index, at, y);
      assert.ok(PHASES.every((_, p) => !isPhaseColor(color, p)), `${mode.mode}: the gap after task ${first.task} at x ${at.toFixed(1)} is rgba ${color}`);
    }
    await page.close();
  });

  test('hovering a known bar shows its task, phase, start and duration', async () => {
    const { page } = await open(timelineHtml(fixture.result));
    const { index, first } = taskWithGap();
    const g = await geometry(page, index);
    const kernelMs = first.marksMs[2] - first.marksMs[1];
    const [start, end] = await setView(page, first.marksMs[1] - kernelMs * 0.2, first.marksMs[2] + kernelMs * 0.2);
    const kernelMiddle = (first.marksMs[1] + first.marksMs[2]) / 2;
    const x = g.plotLeft + ((kernelMiddle - start) / (end - start)) * g.plotWidth;
    await page.mouse.move(g.left + x, g.top + g.rowsTop + g.barTop + g.barHeight / 2);
    const text = await page.textContent('#tooltip');
    assert.ok(await page.isVisible('#tooltip'));
    assert.match(text!, new RegExp(`^task ${first.task}\\b.*: kernel\\n`));
    assert.ok(text!.includes(`start ${first.marksMs[1].toFixed(3)} ms, duration ${(first.marksMs[2] - first.marksMs[1]).toFixed(3)} ms`), text!);
    await page.close();
  });

  test('the wheel zooms in on the time axis around the pointer, and zoom to fit shows the whole run', async () => {
    const { page } = await open(timelineHtml(fixture.result));
    const { index } = taskWithGap();
    const g = await geometry(page, index);
    await page.click('#zoom-fit');
    const range = () => page.evaluate(() => ['startMs', 'endMs'].map((k) => Number(document.getElementById('view-range')!.dataset[k])));
    await framesDrawn(page); // the click's redraw runs in an animation frame; the range shown before it is the default view
    const [fitStart, fitEnd] = await range();
    const tasks = fixture.result.modes.flatMap((m) => m.lastRunTasks ?? []);
    assert.ok(fitStart! <= Math.min(...tasks.map((t) => t.marksMs[0])) && fitEnd! >= Math.max(...tasks.map((t) => t.marksMs[3])), 'fit covers every task');
    await page.mouse.move(g.left + g.plotLeft + g.plotWidth / 2, g.top + g.rowsTop + 5);
    await page.mouse.wheel(0, -400);
    await page.waitForFunction((before) => Number(document.getElementById('view-range')!.dataset.endMs) !== before, fitEnd);
    const [zoomStart, zoomEnd] = await range();
    assert.ok(zoomEnd! - zoomStart! < (fitEnd! - fitStart!) * 0.9, `zoomed from ${fitStart}-${fitEnd} to ${zoomStart}-${zoomEnd}`);
    assert.ok(zoomStart! > fitStart! && zoomEnd! < fitEnd!, 'zoomed around the pointer, inside the previous range');
    await page.close();
  });

  test('a run of 50,000 bars loads in under 2 s', async (t) => {
    const result = syntheticResults({ tasks: Math.ceil(50_000 / (PHASES.length * MODES.length)) });
    const bars = result.modes.reduce((n, m) => n + m.lastRunTasks!.length * PHASES.length, 0);
    assert.ok(bars >= 50_000);
    const { page, errors, loadMs } = await open(timelineHtml(result));
    t.diagnostic(`${bars} bars: loaded and drawn ${loadMs.toFixed(0)} ms after navigation started`);
    assert.deepEqual(errors, []);
    assert.ok(loadMs < 2000, `${loadMs.toFixed(0)} ms`);
    await page.close();
  });
});
