// Kernel signatures: the parameter types a kernel is launched with, the argument types they give `launch`, and the
// checks of a signature given to Module.getFunction.
import type { DeviceBuffer } from '../memory/device-buffer.js';
import type { ManagedBuffer } from '../memory/managed-buffer.js';
import { KERNEL_ARG_SLOT_BYTES, launchArguments } from '../binding/binding.js';
import { invalidType, invalidValue } from '../internal/validate.js';

/** The most parameters a signature lists: as many 8-byte slots as the launch's argument scratch holds (8,192), more
 * than any kernel the driver launches has (at most 32,764 bytes of parameters). */
const MAX_PARAMETERS = launchArguments.length / KERNEL_ARG_SLOT_BYTES;

/** A kernel parameter type, as the kernel's `extern "C"` signature declares it: `'ptr'` for any pointer
 * (a `DeviceBuffer`, a `ManagedBuffer` or a bigint device address), `'i32'`/`'u32'` for 32-bit integers (`int`, `unsigned int`, and
 * narrower integers and `bool`), `'i64'`/`'u64'` for 64-bit integers (a bigint or a safe integer), `'f32'`/`'f64'`
 * for `float`/`double`. */
export type ParamType = 'ptr' | 'i32' | 'u32' | 'i64' | 'u64' | 'f32' | 'f64';
const PARAM_TYPES: readonly ParamType[] = ['ptr', 'i32', 'u32', 'i64', 'u64', 'f32', 'f64'];

/** The JavaScript value a kernel parameter of type `T` takes: a `DeviceBuffer`, `ManagedBuffer` or bigint device
 * address for `'ptr'`; a bigint or a safe integer for `'i64'`/`'u64'`; a number otherwise. */
export type KernelArgument<T extends ParamType> = T extends 'ptr'
  ? DeviceBuffer | ManagedBuffer | bigint
  : T extends 'i64' | 'u64'
    ? bigint | number
    : number;

/** The argument list of a kernel whose signature is `S`, one {@link KernelArgument} per entry, so that
 * `module.getFunction('scale', ['ptr', 'f32', 'u32'])` gives a kernel whose `launch` takes
 * `(options, DeviceBuffer | ManagedBuffer | bigint, number, number)` and a wrong argument fails in the compiler. */
export type KernelArguments<S extends readonly ParamType[]> = { -readonly [K in keyof S]: KernelArgument<S[K]> } extends infer A extends unknown[] ? A : never;

/** Checks a kernel signature; returns a frozen copy. @internal */
export function validateSignature(signature: unknown): readonly ParamType[] {
  const allowed = PARAM_TYPES.map((t) => `'${t}'`).join(', ');
  if (!Array.isArray(signature)) throw invalidType('signature', `an array of parameter types (${allowed})`, signature);
  if (signature.length > MAX_PARAMETERS)
    throw invalidValue('signature', `lists ${signature.length} parameter types; a kernel takes at most ${MAX_PARAMETERS} (the driver passes at most 32,764 bytes of parameters).`);
  signature.forEach((type, i) => {
    if (!PARAM_TYPES.includes(type as ParamType))
      throw invalidValue(`signature[${i}]`, `must be one of ${allowed}; received ${typeof type === 'string' ? JSON.stringify(type) : String(type)}.`);
  });
  return Object.freeze([...(signature as ParamType[])]);
}

const PARAM_BYTES: Record<ParamType, number> = { ptr: 8, i32: 4, u32: 4, i64: 8, u64: 8, f32: 4, f64: 8 };

/** Checks `signature` against the parameter sizes the driver reports for kernel `name` (cuFuncGetParamInfo):
 * the same count; `'ptr'`, `'f32'`, `'f64'` exactly their size; integer types at least as wide as the parameter
 * (a `bool` or `short` parameter takes `'i32'`/`'u32'`, whose low bytes the driver copies). @internal */
export function checkParamSizes(sizes: readonly number[], signature: readonly ParamType[], name: string): void {
  const fits = (type: ParamType, bytes: number) =>
    type === 'ptr' || type === 'f32' || type === 'f64' ? bytes === PARAM_BYTES[type] : bytes <= PARAM_BYTES[type];
  const bad = sizes.length === signature.length ? signature.findIndex((type, i) => !fits(type, sizes[i]!)) : -2;
  if (bad === -1) return;
  const theirs = sizes.length ? `${sizes.length} parameter(s) of ${sizes.join(', ')} bytes` : 'no parameters';
  const where = bad >= 0 ? ` (parameter ${bad} is ${sizes[bad]} bytes, which does not fit '${signature[bad]}')` : '';
  throw invalidValue(
    'signature',
    `does not match kernel "${name}": it lists ${signature.length} parameter type(s) [${signature.join(', ')}], but the kernel takes ${theirs}${where}.`,
  );
}
