// Where this package and the library it measures are on disk.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The root of the cuda-stream-pool-bench package: one level above dist/. */
export const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** This package's version from its package.json; 'unknown' when it cannot be read. */
export function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/** The version of cuda-stream-pool, the library this package runs: the copy it imports, from the package.json that
 * the library exports; 'unknown' when it cannot be read. */
export function libraryVersion(): string {
  try {
    return (createRequire(import.meta.url)('cuda-stream-pool/package.json') as { version?: string }).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/** The file URL of the library's entry point as this package resolves it, for scripts that worker threads evaluate
 * (they import the same copy of the library as this thread). */
export function libraryUrl(): string {
  return pathToFileURL(createRequire(import.meta.url).resolve('cuda-stream-pool')).href;
}
