// Where the repository is, for test helpers that must not load the library: test/support/run-tests.ts picks the
// driver (the simulated one with --sim) before anything reads cuda.available.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root, from dist/test/support. */
export const repositoryRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
