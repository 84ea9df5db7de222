// Where the repository is, for test helpers that must not load the library: test/support/run-tests.ts picks the
// driver (the simulated one with --sim) before anything reads cuda.available.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root, from dist/test/support. */
export const repositoryRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** The library package and its compiled output (its package.json points here). */
export const libraryRoot = path.join(repositoryRoot, 'packages', 'cuda-stream-pool');
export const libraryDist = path.join(libraryRoot, 'dist');

/** The benchmark package, its compiled output, and its command (`cuda-stream-pool`). */
export const benchRoot = path.join(repositoryRoot, 'packages', 'cuda-stream-pool-bench');
export const benchDist = path.join(benchRoot, 'dist');
export const benchCli = path.join(benchDist, 'cli', 'main.js');
