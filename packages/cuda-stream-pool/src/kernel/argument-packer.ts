// Packing kernel arguments into the slots cuLaunchKernel reads, each checked against its parameter type
// (Kernel.launch, and kernel nodes of graphs).
import { KERNEL_ARG_SLOT_BYTES } from '../binding/binding.js';
import type { Stream } from '../stream/stream.js';
import { asKernelPointer, isKernelPointer, type KernelPointer } from './kernel-argument.js';
import type { ParamType } from './signature.js';
import { invalidType, invalidValue, outOfRange, validateFloat32 } from '../internal/validate.js';

const I32_MIN = -(2 ** 31);
const I32_MAX = 2 ** 31 - 1;
const U32_MAX = 2 ** 32 - 1;
const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;
const U64_MAX = 2n ** 64n - 1n;

/** A signature for a message: its first 16 types, then how many more, so that a message about a kernel of hundreds
 * of parameters stays readable. */
function listed(signature: readonly ParamType[]): string {
  if (signature.length <= 16) return signature.join(', ');
  return `${signature.slice(0, 16).join(', ')}, ... ${signature.length - 16} more`;
}

/** Packs kernel arguments into one 8-byte slot each, checking each against its parameter type; the slots are
 * reused by every launch of the kernel (cuLaunchKernel copies them before it returns). Two phases, so that nothing
 * is marked used on a stream unless every argument is valid: {@link ArgumentPacker.pack} checks and writes every
 * value, {@link ArgumentPacker.bindPointers} then asks each `DeviceBuffer` for its pointer (which records its use
 * on the stream). @internal */
export class ArgumentPacker {
  /** The slots, as passed to the native launch. */
  readonly bytes: Uint8Array;
  readonly #view: DataView;
  readonly #signature: readonly ParamType[];
  readonly #kernel: string;
  readonly #pending: Int32Array; // positions of arguments that are KernelPointers, found by pack()
  #pendingCount = 0;
  // Built once: the f32 check takes its name and hint on every launch, where building them would cost the hot path.
  readonly #names: readonly string[];
  readonly #hint: string;

  constructor(signature: readonly ParamType[], kernel: string) {
    this.#signature = signature;
    this.#kernel = kernel;
    this.bytes = new Uint8Array(KERNEL_ARG_SLOT_BYTES * signature.length);
    this.#view = new DataView(this.bytes.buffer);
    this.#pending = new Int32Array(signature.length);
    this.#names = signature.map((_, i) => `args[${i}]`);
    this.#hint = `Kernel "${kernel}" takes (${listed(signature)}).`;
  }

  /** Checks count, type and range of every argument and writes all but the `DeviceBuffer` pointers.
   * @throws `TypeError` ERR_INVALID_ARG_VALUE for a wrong count; `TypeError` ERR_INVALID_ARG_TYPE or `RangeError`
   * ERR_OUT_OF_RANGE naming the argument (`"args[i]"`) and its parameter type. */
  pack(args: readonly unknown[]): void {
    const signature = this.#signature;
    if (args.length !== signature.length)
      throw invalidValue('args', `must be ${signature.length} argument(s) for kernel "${this.#kernel}" (${listed(signature)}); received ${args.length}.`);
    const view = this.#view;
    this.#pendingCount = 0;
    for (let i = 0; i < signature.length; i++) {
      const type = signature[i]!;
      const value = args[i];
      const at = KERNEL_ARG_SLOT_BYTES * i;
      switch (type) {
        case 'ptr':
          if (typeof value === 'bigint') {
            if (value < 0n || value > U64_MAX) throw outOfRange(`args[${i}]`, 'a ptr: a device address from 0n to 2n ** 64n - 1n', value, this.#hint);
            view.setBigUint64(at, value, true);
          } else if (isKernelPointer(value)) {
            this.#pending[this.#pendingCount++] = i;
          } else {
            throw invalidType(`args[${i}]`, 'a ptr: a DeviceBuffer, a ManagedBuffer or a bigint device address', value, this.#hint);
          }
          break;
        case 'i32':
          if (typeof value !== 'number') throw invalidType(`args[${i}]`, 'an i32 (an integer number)', value, this.#hint);
          if (!Number.isInteger(value) || value < I32_MIN || value > I32_MAX)
            throw outOfRange(`args[${i}]`, `an i32: an integer from ${I32_MIN} to ${I32_MAX}`, value, this.#hint);
          view.setInt32(at, value, true);
          break;
        case 'u32':
          if (typeof value !== 'number') throw invalidType(`args[${i}]`, 'a u32 (an integer number)', value, this.#hint);
          if (!Number.isInteger(value) || value < 0 || value > U32_MAX)
            throw outOfRange(`args[${i}]`, `a u32: an integer from 0 to ${U32_MAX}`, value, this.#hint);
          view.setUint32(at, value, true);
          break;
        case 'i64':
        case 'u64': {
          const [min, max] = type === 'i64' ? [I64_MIN, I64_MAX] : [0n, U64_MAX];
          const named = type === 'i64' ? 'an i64' : 'a u64';
          let big: bigint;
          if (typeof value === 'bigint') big = value;
          else if (typeof value === 'number' && Number.isSafeInteger(value)) big = BigInt(value);
          else if (typeof value === 'number')
            throw outOfRange(`args[${i}]`, `${named}: a bigint or a safe integer from ${min} to ${max}`, value, `Pass a bigint for values beyond 2 ** 53. ${this.#hint}`);
          else throw invalidType(`args[${i}]`, `${named} (a bigint or a safe integer)`, value, this.#hint);
          if (big < min || big > max) throw outOfRange(`args[${i}]`, `${named}: an integer from ${min} to ${max}`, value, this.#hint);
          if (type === 'i64') view.setBigInt64(at, big, true);
          else view.setBigUint64(at, big, true);
          break;
        }
        case 'f32':
          if (typeof value !== 'number') throw invalidType(`args[${i}]`, 'an f32 (a number)', value, this.#hint);
          view.setFloat32(at, validateFloat32(value, this.#names[i]!, this.#hint), true);
          break;
        case 'f64':
          if (typeof value !== 'number') throw invalidType(`args[${i}]`, 'an f64 (a number)', value, this.#hint);
          view.setFloat64(at, value, true);
          break;
      }
    }
  }

  /** Writes the pointers of the `DeviceBuffer` arguments found by the last {@link ArgumentPacker.pack}, each of
   * which records that it is used on `stream`. Call only after everything else that can fail has been checked. */
  bindPointers(args: readonly unknown[], stream: Stream): void {
    for (let k = 0; k < this.#pendingCount; k++) {
      const i = this.#pending[k]!;
      const pointer = (args[i] as KernelPointer)[asKernelPointer](stream);
      const at = KERNEL_ARG_SLOT_BYTES * i;
      if (typeof pointer === 'bigint') this.#view.setBigUint64(at, pointer, true);
      else {
        const low = pointer >>> 0; // exact: the pointer is an integer below 2 ** 53
        this.#view.setUint32(at, low, true);
        this.#view.setUint32(at + 4, (pointer - low) / 4294967296, true);
      }
    }
    this.#pendingCount = 0;
  }
}
