// The results file the timeline, trace and report tests render: test/bench/fixtures/bench-results.json, a real run of
// `cuda-stream-pool bench --json --phases` on a GPU, when it is there; until then a synthetic one of the same schema
// (synthetic-results.ts), and the tests say which they used.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

import { parseBenchResults } from '#bench/results.js';
import type { BenchResult } from '#bench/schema.js';
import { repositoryRoot } from '../../support/gpu.js';
import { syntheticResults } from './synthetic-results.js';

/** Where the real fixture lives. */
export const FIXTURE_PATH = path.join(repositoryRoot, 'test', 'bench', 'fixtures', 'bench-results.json');

/** The fixture's results, and what they are ('real': the committed file; 'synthetic': made for this run). */
export function benchFixture(): { result: BenchResult; origin: 'real' | 'synthetic' } {
  if (existsSync(FIXTURE_PATH)) return { result: parseBenchResults(readFileSync(FIXTURE_PATH, 'utf8'), FIXTURE_PATH), origin: 'real' };
  return { result: syntheticResults({ tasks: 64 }), origin: 'synthetic' };
}
