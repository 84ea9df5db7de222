// Which skips `npm run test:gpu` accepts: a multi-device test's "needs N GPUs" (test/support/gpu.ts) while fewer than N
// devices are visible, so single-GPU runs stay green; every other skip fails that run.

/** Splits TAP skip lines (`ok 3 - name # SKIP reason`) into those accepted with `visible` GPUs and the others. No GPU
 * at all accepts none: the machine cannot run the GPU suite. */
export function sortSkips(lines: readonly string[], visible: number): { tooFewDevices: string[]; other: string[] } {
  const tooFewDevices: string[] = [];
  const other: string[] = [];
  for (const line of lines) {
    const needed = /# SKIP needs (\d+) GPUs$/.exec(line.trim())?.[1];
    if (visible > 0 && needed !== undefined && visible < Number(needed)) tooFewDevices.push(line);
    else other.push(line);
  }
  return { tooFewDevices, other };
}
