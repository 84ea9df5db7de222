// What every benchmark prints with its results: the device, the driver, Node.js, the library and this package, so that
// a figure can be traced to the machine and the code it came from.
import os from 'node:os';

import { cuda, type Device } from 'cuda-stream-pool';
import { libraryVersion, packageVersion } from './package.js';
import type { Environment } from './schema.js';

/** The environment of `device` in this process. */
export function describeEnvironment(device: Device): Environment {
  const cpus = os.cpus();
  const { mode, threads } = cuda.submission();
  return {
    date: new Date().toISOString(),
    packageVersion: packageVersion(),
    libraryVersion: libraryVersion(),
    node: process.version,
    os: `${os.platform()} ${os.release()} ${os.arch()}`,
    cpu: `${cpus[0]?.model.trim() ?? 'unknown'} (${cpus.length} logical CPUs)`,
    driverVersion: cuda.driverVersionString ?? null,
    device: {
      ordinal: device.ordinal,
      name: device.name,
      computeCapability: `${device.computeCapability.major}.${device.computeCapability.minor}`,
      multiprocessorCount: device.multiprocessorCount,
      totalMemoryBytes: device.totalMemoryBytes,
      asyncEngineCount: device.asyncEngineCount,
    },
    submission: mode === 'direct' ? { mode, threads: 0 } : { mode, threads },
  };
}

/** The submission row's text: the mode and, when deferred, the threads per JS thread. */
function submissionText(submission: Environment['submission']): string {
  if (submission === undefined) return 'not recorded';
  if (submission.mode === 'direct') return 'direct (each JS thread calls the driver)';
  return `deferred (${submission.threads} submission thread${submission.threads === 1 ? ' per JS thread issues' : 's per JS thread issue'} what it records)`;
}

/** The environment as label/value rows, for a two-column table. */
export function environmentRows(environment: Environment): [string, string][] {
  const d = environment.device;
  return [
    ['date', environment.date],
    ['device', `${d.ordinal}: ${d.name} (compute ${d.computeCapability}, ${d.multiprocessorCount} SMs, ${(d.totalMemoryBytes / 2 ** 30).toFixed(0)} GiB, ${d.asyncEngineCount} copy engine${d.asyncEngineCount === 1 ? '' : 's'})`],
    ['driver', environment.driverVersion === null ? 'unknown' : `CUDA ${environment.driverVersion}`],
    ['node', environment.node],
    ['cuda-stream-pool', environment.libraryVersion ?? 'not recorded'],
    ['cuda-stream-pool-bench', environment.packageVersion],
    ['submission', submissionText(environment.submission)],
    ['os', environment.os],
    ['cpu', environment.cpu],
  ];
}
