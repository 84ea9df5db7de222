// Opens a timeline page (bench --timeline, report --html) in the system's headless Chromium, prints the time from
// the start of navigation until the page had drawn, and saves a full-page screenshot at the default zoom.
//   node scripts/timeline-load-time.mjs timeline.html [screenshot.png]     (CHROMIUM_PATH overrides /usr/bin/chromium)
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { chromium } from 'playwright-core';

const [page, screenshot] = process.argv.slice(2);
if (!page) {
  console.error('usage: node scripts/timeline-load-time.mjs timeline.html [screenshot.png]');
  process.exit(64);
}
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: ['--no-sandbox'] });
try {
  const tab = await browser.newPage({ viewport: { width: 1400, height: 900 }, deviceScaleFactor: 1 });
  const errors = [];
  tab.on('pageerror', (error) => errors.push(error.message));
  tab.on('console', (message) => message.type() === 'error' && errors.push(message.text()));
  await tab.goto(pathToFileURL(path.resolve(page)).href);
  await tab.waitForFunction(() => document.body.dataset.ready === 'true');
  const loadMs = await tab.evaluate(() => window.cspTimeline.loadMs);
  console.log(`${page}: drawn ${loadMs.toFixed(0)} ms after navigation started; ${errors.length} console error(s)${errors.length ? `: ${errors.join('; ')}` : ''}`);
  if (screenshot) {
    await tab.screenshot({ path: screenshot, fullPage: true });
    console.log(`screenshot written to ${screenshot}`);
  }
} finally {
  await browser.close();
}
