// Which skips `npm run test:gpu` and `npm run test:sim` accept: a multi-device test's "needs N GPUs"
// (test/support/gpu.ts) while fewer than N devices are visible, so single-GPU runs stay green; a test of what happens
// without any driver (NO_DRIVER_SKIP) wherever a GPU is visible, since a driver is then installed; and, in the simulated
// tier alone, a test that cannot run under the simulated driver (its reason starts with SIMULATOR_SKIP_PREFIX). Every
// other skip fails those runs. No imports of the library here: the runner loads it only once it has picked the driver.

/** The skip reason of a test that needs a machine with no CUDA driver installed: accepted wherever a GPU is visible. */
export const NO_DRIVER_SKIP = 'needs a machine without a CUDA driver library, and this one has one installed';

/** The start of a skip reason that `--sim` accepts; test/support/gpu.ts builds those reasons from it. */
export const SIMULATOR_SKIP_PREFIX = 'not under the simulated driver: ';

/** The skipped tests' lines of a TAP report (`ok 3 - name # SKIP reason`), trimmed. Lines inside a failure's YAML
 * block (from `---` to `...` at the same indentation) are left out: a message can quote a child run's TAP, skips and
 * all. */
export function tapSkipLines(report: string): string[] {
  let blockEnd: string | undefined;
  return report
    .split('\n')
    .filter((line) => {
      if (blockEnd !== undefined) {
        if (line === blockEnd) blockEnd = undefined;
        return false;
      }
      const opener = /^(\s*)---$/.exec(line);
      if (opener) blockEnd = `${opener[1]}...`;
      return !opener && /# SKIP/.test(line);
    })
    .map((line) => line.trim());
}

/** The skips of one run, sorted by what the runner makes of them. */
export interface SortedSkips {
  /** "needs N GPUs" with fewer than N visible: accepted. */
  tooFewDevices: string[];
  /** {@link NO_DRIVER_SKIP} with a GPU visible: accepted. */
  driverInstalled: string[];
  /** Tests that cannot run under the simulated driver, by reason (without the prefix): accepted when `simulated`. */
  simulator: Map<string, string[]>;
  /** Every other skip: fails `--gpu` and `--sim`. */
  other: string[];
}

/** Splits TAP skip lines (`ok 3 - name # SKIP reason`) into those accepted with `visible` GPUs (too few devices, a
 * driver installed), those of tests the
 * simulated driver cannot run (only when `simulated`: elsewhere they are `other`), and the others. No GPU at all
 * accepts none: the machine cannot run the GPU suite. */
export function sortSkips(lines: readonly string[], visible: number, simulated = false): SortedSkips {
  const sorted: SortedSkips = { tooFewDevices: [], driverInstalled: [], simulator: new Map(), other: [] };
  for (const line of lines) {
    const skip = /^(?:not )?ok \d+ - (.*) # SKIP (.*)$/.exec(line.trim());
    const reason = skip?.[2] ?? '';
    const needed = /^needs (\d+) GPUs$/.exec(reason)?.[1];
    if (visible > 0 && needed !== undefined && visible < Number(needed)) sorted.tooFewDevices.push(line);
    else if (visible > 0 && reason === NO_DRIVER_SKIP) sorted.driverInstalled.push(line);
    else if (simulated && visible > 0 && reason.startsWith(SIMULATOR_SKIP_PREFIX)) {
      const key = reason.slice(SIMULATOR_SKIP_PREFIX.length);
      sorted.simulator.set(key, [...(sorted.simulator.get(key) ?? []), skip![1]!]);
    } else sorted.other.push(line);
  }
  return sorted;
}
