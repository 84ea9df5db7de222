// The library's environment variables that take a fixed set of values. The native layer ignores a value it does not
// know (the default applies); this says so once per process, at the library's first import, as a process warning
// naming the variable and the values it takes.
import { native } from './binding.js';

interface Setting {
  name: string;
  accepts(value: string): boolean;
  takes: string;
}

// One staging chunk (internal/staging.cc, Note [staging]): the smallest cap it takes.
const STAGING_CHUNK_BYTES = 256 * 1024;

const settings: readonly Setting[] = [
  {
    name: 'CUDA_STREAM_POOL_COMPLETION',
    accepts: (value) => value === 'event',
    takes: '`event` (completion markers are pooled events) or nothing (tickets where the device has 64-bit stream memory operations)',
  },
  {
    name: 'CUDA_STREAM_POOL_STAGING_BYTES',
    accepts: (value) => /^\d+$/.test(value) && BigInt(value) >= BigInt(STAGING_CHUNK_BYTES) && BigInt(value) <= 2n ** 53n,
    takes: `a whole number of bytes from ${STAGING_CHUNK_BYTES} (one staging chunk) to 2**53, in digits; the cap stays 67108864 (64 MiB)`,
  },
  {
    name: 'CUDA_STREAM_POOL_COPY_THREADS',
    accepts: (value) => /^\d{1,2}$/.test(value) && Number(value) <= 15,
    takes: 'a whole number from 0 to 15: the native threads that share the memcpy of large copies of pageable memory; the default stays the hardware threads less one, at most 7',
  },
  {
    name: 'CUDA_STREAM_POOL_SUBMISSION',
    accepts: (value) => value === 'direct' || value === 'deferred',
    takes: '`deferred` (native submission threads issue the stream-ordered calls each JS thread records) or `direct` (the default: every call goes to the driver from the calling thread)',
  },
  {
    name: 'CUDA_STREAM_POOL_SUBMISSION_THREADS',
    accepts: (value) => /^[1-8]$/.test(value),
    takes: 'a whole number from 1 to 8: the submission threads of each JS thread in deferred mode; the default stays 2',
  },
  {
    name: 'CUDA_STREAM_POOL_WAIT_SPIN',
    accepts: (value) => value === 'off' || value === 'on',
    takes: '`on` (the default: a JS thread about to block with waits pending first spins briefly for a completion, where the process may use more than one CPU) or `off` (it blocks at once)',
  },
  {
    name: 'CUDA_STREAM_POOL_CHECK_LOCK_ORDER',
    accepts: (value) => value === '0' || value === '1',
    takes: '`1` (abort on a native mutex taken out of order) or `0`',
  },
  {
    name: 'CUDA_STREAM_POOL_FAIL_THREAD_START',
    accepts: (value) => ['csp-poller', 'csp-synchronize', 'csp-deferred', 'csp-submit', 'csp-copy'].includes(value),
    takes: 'the name of a library thread whose start is to fail (a test seam): csp-poller, csp-synchronize, csp-deferred, csp-submit or csp-copy',
  },
];

/** Emits one process warning (code `CUDA_STREAM_POOL_ENVIRONMENT`) per library variable set to a value the library
 * does not take, in the first thread of the process that imports the library. Empty values count as unset.
 * @internal */
export function warnAboutEnvironment(environment: NodeJS.ProcessEnv = process.env): void {
  const unknown = settings.filter((s) => {
    const value = environment[s.name];
    return value !== undefined && value !== '' && !s.accepts(value);
  });
  if (unknown.length === 0 || !native.claimEnvironmentWarning()) return;
  for (const s of unknown)
    process.emitWarning(`${s.name}=${JSON.stringify(environment[s.name])} is ignored: it takes ${s.takes}.`, { code: 'CUDA_STREAM_POOL_ENVIRONMENT' });
}
