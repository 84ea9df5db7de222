// The CPU reference of the executor benchmark's kernel: float32 fmaf emulated exactly in JS, and the distance in
// float32 ulps that verification allows. See kernels/bench.cu (fma_steps compiles to fma.rn.f32).

// Note [exact fmaf]: the GPU computes fmaf(v, a, b) as the exact value v*a + b rounded once to float32 (fma.rn.f32,
// round to nearest, ties to even, subnormals kept). JS has no float32 arithmetic, only float64 and Math.fround.
//
// 1. p = v * a in float64 is exact: float32 significands have 24 bits, so the product has at most 48 bits (< 53),
//    and its exponent (at worst 2**-298 for two subnormals, 2**256 at the top) is well inside float64's range.
// 2. s = p + b in float64 is NOT exact: p can have 48 significant bits and b sits at another exponent, so the exact
//    sum may need many more than 53 bits. Rounding it to float64 and then Math.fround to float32 rounds twice, and
//    double rounding differs from one rounding exactly when the first rounding lands on a float32 midpoint (the
//    halfway point between two neighbouring float32 values) that the exact sum was not on. Example: v = 1 + 2**-23,
//    a = (1 - 2**-23) * 2**-24, b = 1 + 2**-23: the exact sum is 1 + 2**-23 + 2**-24 - 2**-70, just below the
//    midpoint, so fmaf gives 1 + 2**-23; float64 rounds the sum onto the midpoint, and Math.fround's ties-to-even
//    then gives 1 + 2**-22, one ulp off. So Math.fround(v * a + b) is not fmaf.
// 3. The fix: Knuth's TwoSum gives the float64 sum s and its exact error e (p + b === s + e exactly, e a float64).
//    Every float32 value and every float32 midpoint is a float64 value, and float64 rounding is monotonic, so if s is
//    not a midpoint it lies on the same side of every midpoint as the exact sum, and Math.fround(s) is the correctly
//    rounded result. If s is a midpoint, the sign of e says on which side the exact sum lies (e === 0: a true tie,
//    where Math.fround's ties-to-even is right). That case picks the neighbour toward e by hand.

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The float32 value next to the float32 `r` in the direction of `toward` (`toward !== r`, `r` finite). */
function nextFloat32(r: number, toward: number): number {
  if (r === 0) return toward > 0 ? 2 ** -149 : -(2 ** -149);
  f32[0] = r;
  // Sign and magnitude: one step away from zero is +1 on the bits of either sign.
  if (toward > r === r > 0) u32[0]! += 1;
  else u32[0]! -= 1;
  return f32[0]!;
}

/** `fmaf(v, a, b)` exactly as the GPU computes it (fma.rn.f32): `v * a + b` rounded once to float32.
 * `v`, `a` and `b` must be float32 values (results of Math.fround or reads of a Float32Array).
 * See Note [exact fmaf]. */
export function fmaf(v: number, a: number, b: number): number {
  const p = v * a; // exact (Note [exact fmaf] 1)
  const s = p + b;
  const r = Math.fround(s);
  if (r === s || !Number.isFinite(r)) return r;
  // TwoSum: e is the exact error of s, so p + b === s + e.
  const bv = s - p;
  const e = p - (s - bv) + (b - bv);
  if (e === 0) return r;
  const other = nextFloat32(r, s);
  // r and other are neighbouring float32 values: their sum and its half are exact in float64.
  if ((r + other) / 2 !== s) return r;
  return e > 0 ? Math.max(r, other) : Math.min(r, other);
}

/** `steps` steps of `v = fmaf(v, a, b)` from the float32 `v`, as kernels/bench.cu's fma_steps does per element. */
export function fmaSteps(v: number, steps: number, a: number, b: number): number {
  let x = v;
  for (let s = 0; s < steps; s++) x = fmaf(x, a, b);
  return x;
}

/** The float32 `x` as an integer that orders like the value: adjacent float32 values differ by 1, and +0 and -0 map
 * to the same integer. NaN maps to NaN. */
function orderedBits(x: number): number {
  if (Number.isNaN(x)) return Number.NaN;
  f32[0] = x;
  const bits = u32[0]!;
  return bits >= 0x80000000 ? -(bits - 0x80000000) : bits;
}

/** The distance in float32 ulps between two float32 values (the number of float32 values between them, plus one);
 * Infinity when either is NaN. */
export function ulpDistance(x: number, y: number): number {
  const d = Math.abs(orderedBits(x) - orderedBits(y));
  return Number.isNaN(d) ? Number.POSITIVE_INFINITY : d;
}
