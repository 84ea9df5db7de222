// Argument validators: one per shape, messages in three parts (the quoted name, what is accepted, what was
// received), Node's error classes and codes.
import { types } from 'node:util';

type Coded<E extends Error> = E & { code: string };

function describe(value: unknown): string {
  if (typeof value === 'bigint') return `${value}n (bigint)`;
  if (typeof value === 'string') return `${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value)} (string)`;
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  // A Proxy reports its target's constructor, but is not the target: the library's brand checks refuse it.
  if (types.isProxy(value)) return `a Proxy (of ${typeof value === 'function' ? 'a function' : 'an object'}; pass the object itself, not a Proxy of it)`;
  if (Array.isArray(value)) return describeArray(value);
  if (typeof value === 'object') {
    if (Object.getPrototypeOf(value) === null) return 'an object with a null prototype';
    const name = ownName(dataProperty(value, 'constructor'));
    return name === undefined ? 'an object' : `an instance of ${name}`;
  }
  if (typeof value === 'function') return `function ${ownName(value) ?? '(anonymous)'}`;
  return `${String(value)} (${typeof value})`;
}

/** The object of `value`'s prototype chain (`value` included) that has `key` as an own property; null for none. Reads
 * no property, so runs no getter. */
function holderOf(value: object | null, key: string): object | null {
  let holder = value;
  while (holder !== null && !Object.hasOwn(holder, key)) holder = Object.getPrototypeOf(holder) as object | null;
  return holder;
}

/** `key` of `value` or of its prototypes when it is a data property there; undefined for an accessor (whose getter
 * is user code, which describing a bad value must not run) or no such property. */
function dataProperty(value: object, key: string): unknown {
  const holder = holderOf(value, key);
  return holder === null ? undefined : Object.getOwnPropertyDescriptor(holder, key)?.value;
}

/** A function's own `name` when it is a non-empty string data property (a class may define a static getter). */
function ownName(value: unknown): string | undefined {
  if (typeof value !== 'function') return undefined;
  const own = Object.getOwnPropertyDescriptor(value, 'name');
  return own !== undefined && typeof own.value === 'string' && own.value !== '' ? own.value : undefined;
}

/** An array by its first elements (a launch's grid or block is an array of up to three numbers, and the values are
 * what the caller needs to see): "an array [1024, 2, 0]", "an array [1, 2, 3, 4, ... 6 more]", nested values by type. */
function describeArray(value: readonly unknown[]): string {
  const shown: string[] = [];
  for (let i = 0; i < Math.min(4, value.length); i++) {
    // Read without running an element's getter: describing a bad value must not call user code.
    const own = Object.getOwnPropertyDescriptor(value, i);
    shown.push(own === undefined ? 'empty' : 'value' in own ? describeElement(own.value) : 'a getter');
  }
  const more = value.length > 4 ? `, ... ${value.length - 4} more` : '';
  return `an array [${shown.join(', ')}${more}]`;
}

function describeElement(element: unknown): string {
  if (types.isProxy(element)) return 'a Proxy'; // Array.isArray throws on a revoked one
  if (typeof element === 'number' || typeof element === 'boolean' || element === null || element === undefined) return String(element);
  if (typeof element === 'bigint') return `${element}n`;
  if (typeof element === 'string') return JSON.stringify(element.length > 20 ? `${element.slice(0, 20)}...` : element);
  return Array.isArray(element) ? 'an array' : typeof element === 'object' ? 'an object' : typeof element;
}

function coded<E extends Error>(error: E, code: string, caller: Function): Coded<E> {
  const out = error as Coded<E>;
  out.code = code;
  Object.defineProperty(out, 'name', { value: `${error.constructor.name} [${code}]`, configurable: true });
  Error.captureStackTrace(out, caller);
  // Node prints `${name}: ${message}`; keep `name` the class name afterwards, as Node's own errors do.
  void out.stack;
  Object.defineProperty(out, 'name', { value: error.constructor.name, configurable: true });
  return out;
}

/** `TypeError` ERR_INVALID_ARG_TYPE: `name` must be `expected`; received `value`. */
export function invalidType(name: string, expected: string, value: unknown, hint = '', caller: Function = invalidType) {
  return coded(new TypeError(`"${name}" must be ${expected}; received ${describe(value)}.${hint ? ` ${hint}` : ''}`), 'ERR_INVALID_ARG_TYPE', caller);
}

/** `RangeError` ERR_OUT_OF_RANGE: `name` must be `accepted`; received `value`. */
export function outOfRange(name: string, accepted: string, value: unknown, hint = '', caller: Function = outOfRange) {
  return coded(new RangeError(`"${name}" must be ${accepted}; received ${describe(value)}.${hint ? ` ${hint}` : ''}`), 'ERR_OUT_OF_RANGE', caller);
}

/** `TypeError` ERR_INVALID_ARG_VALUE: `name` `problem`. */
export function invalidValue(name: string, problem: string, caller: Function = invalidValue) {
  return coded(new TypeError(`"${name}" ${problem}`), 'ERR_INVALID_ARG_VALUE', caller);
}

/** Checks an integer in [min, max]; returns it. */
export function validateInteger(value: unknown, name: string, min: number, max: number): number {
  if (typeof value !== 'number') throw invalidType(name, 'an integer', value, typeof value === 'bigint' ? 'Pass Number(value).' : '', validateInteger);
  if (!Number.isInteger(value) || value < min || value > max)
    throw outOfRange(name, `an integer from ${min} to ${max}`, value, '', validateInteger);
  return value;
}

/** Checks that a number can be written as an f32 (fill values, kernel arguments); returns it. Infinity, -Infinity and
 * NaN are float32 values too; only a finite number that rounds to an infinity is out of range. */
export function validateFloat32(value: number, name: string, hint = ''): number {
  if (Number.isFinite(value) && !Number.isFinite(Math.fround(value)))
    throw outOfRange(name, 'an f32: a number within the float32 range (magnitude at most 3.4028234663852886e38), Infinity, -Infinity or NaN', value, hint, validateFloat32);
  return value;
}

/** Checks a boolean; returns it. */
export function validateBoolean(value: unknown, name: string): boolean {
  if (typeof value !== 'boolean') throw invalidType(name, 'a boolean', value, '', validateBoolean);
  return value;
}

/** Checks a function; returns it. */
export function validateFunction<F extends Function>(value: unknown, name: string): F {
  if (typeof value !== 'function') throw invalidType(name, 'a function', value, '', validateFunction);
  return value as F;
}

/** Checks an optional AbortSignal. */
export function validateSignal(value: unknown, name: string): AbortSignal | undefined {
  if (value === undefined) return undefined;
  if (!(value instanceof AbortSignal)) throw invalidType(name, 'an AbortSignal', value, '', validateSignal);
  return value;
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let previous = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const current = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, previous + (a[i - 1]!.toLowerCase() === b[j - 1]!.toLowerCase() ? 0 : 1));
      previous = current;
    }
  }
  return row[b.length]!;
}

/** Checks that `options` is undefined or a plain object whose enumerable keys, own or inherited, are all in `allowed`; unknown keys get
 * ERR_INVALID_ARG_VALUE with "did you mean" for a near miss. Returns the options (an empty object for undefined).
 * `name` may be a function, called only for a message, where building the name costs on a hot path. */
export function validateOptions<T extends object>(options: unknown, name: string | (() => string), owner: string, allowed: readonly string[]): Partial<T> {
  if (options === undefined) return {};
  const named = (): string => (typeof name === 'string' ? name : name());
  if (options === null || typeof options !== 'object' || Array.isArray(options))
    throw invalidType(named(), 'an object', options, '', validateOptions);
  const prototype: unknown = Object.getPrototypeOf(options);
  // A built-in object would lend its own accessors as options (a Map's size).
  if (prototype !== Object.prototype && prototype !== null && isBuiltInObject(options))
    throw invalidType(named(), 'a plain object', options, '', validateOptions);
  // for-in also sees inherited enumerable keys, which the callers read as options too; and it allocates no array.
  for (const key in options) {
    if (allowed.includes(key)) continue;
    if (!Object.hasOwn(options, key) && inheritedNonOption(options, key)) continue;
    const near = allowed.find((candidate) => editDistance(candidate, key) <= Math.max(1, Math.floor(candidate.length / 4)));
    throw invalidValue(`${named()}.${key}`, `is not ${/^[aeiou]/i.test(owner) ? 'an' : 'a'} ${owner} option; ${near ? `did you mean "${near}"?` : `the options are ${allowed.map((k) => `"${k}"`).join(', ')}.`}`, validateOptions);
  }
  return options as Partial<T>;
}

/** Whether inherited `key` of `options` is no misspelt option: a key that Object.prototype itself holds (some other
 * code's doing), or a method (constructor functions and classes compiled to ES5 put enumerable methods on the
 * prototype). */
function inheritedNonOption(options: object, key: string): boolean {
  const holder = holderOf(Object.getPrototypeOf(options) as object | null, key);
  return holder === Object.prototype || (holder !== null && typeof Object.getOwnPropertyDescriptor(holder, key)?.value === 'function');
}

/** An object with a built-in's internal slots (a Map, a Date, a typed array, ...): never an options object. */
function isBuiltInObject(value: object): boolean {
  return (
    types.isMap(value) || types.isSet(value) || types.isWeakMap(value) || types.isWeakSet(value) || types.isDate(value) ||
    types.isRegExp(value) || types.isPromise(value) || types.isBoxedPrimitive(value) || types.isAnyArrayBuffer(value) ||
    ArrayBuffer.isView(value) || types.isNativeError(value)
  );
}

/** Passed by the library's own factories to constructors users must not call. @internal */
export const internalConstruction: unique symbol = Symbol('cuda-stream-pool internal construction');

/** Throws `TypeError` ERR_ILLEGAL_CONSTRUCTOR unless `token` is {@link internalConstruction}: "`className` has no
 * public constructor; use `factory`." */
export function checkConstruction(token: unknown, className: string, factory: string): void {
  if (token === internalConstruction) return;
  throw illegalConstructor(className, factory, checkConstruction);
}

/** `TypeError` ERR_ILLEGAL_CONSTRUCTOR: "`className` has no public constructor; use `factory`." */
export function illegalConstructor(className: string, factory: string, caller: Function = illegalConstructor) {
  return coded(new TypeError(`${className} has no public constructor; use ${factory}.`), 'ERR_ILLEGAL_CONSTRUCTOR', caller);
}

/** Makes every method and accessor of `type.prototype` throw `TypeError` ERR_INVALID_THIS ("Value of "this" must be
 * of type `type.name`") when called on anything but a real instance, such as `Stream.prototype.copy.call({})`.
 * `isInstance` is the class's own brand check (`#field in value`); without this, such calls fail with V8's
 * "Cannot read private member" or deeper, internal messages. Run once per class, after its definition. */
export function guardReceivers(type: { name: string; prototype: object }, isInstance: (value: object) => boolean): void {
  const prototype = type.prototype;
  const guard = <F extends (...args: never[]) => unknown>(inner: F, name: string): F => {
    const outer = function (this: unknown, ...args: Parameters<F>) {
      if (typeof this !== 'object' || this === null || !isInstance(this))
        throw coded(new TypeError(`Value of "this" must be of type ${type.name}`), 'ERR_INVALID_THIS', outer);
      return inner.apply(this, args);
    };
    Object.defineProperty(outer, 'name', { value: name });
    Object.defineProperty(outer, 'length', { value: inner.length });
    return outer as unknown as F;
  };
  for (const key of Reflect.ownKeys(prototype)) {
    if (key === 'constructor') continue;
    const descriptor = Object.getOwnPropertyDescriptor(prototype, key)!;
    const name = typeof key === 'symbol' ? `[${key.description}]` : key;
    if (typeof descriptor.value === 'function') descriptor.value = guard(descriptor.value, name);
    if (descriptor.get) descriptor.get = guard(descriptor.get, `get ${name}`);
    if (descriptor.set) descriptor.set = guard(descriptor.set, `set ${name}`);
    Object.defineProperty(prototype, key, descriptor);
  }
}

/** Makes the named own fields of `object` read-only at run time (non-writable, non-configurable), as their
 * `readonly` declarations promise: the library reads them back (a pool's `device`, a module's `cubin`), so an
 * assignment must not change what later calls do. In strict mode an assignment then throws a TypeError. For objects
 * made a few times per device, pool or module, where own properties show in `console.log`; objects made per
 * operation (streams, device and pinned buffers, events) use getters over private fields instead, since redefining
 * properties on each instance costs about a microsecond. */
export function lockFields<T extends object>(object: T, keys: readonly (keyof T & string)[]): void {
  for (const key of keys) Object.defineProperty(object, key, { writable: false, configurable: false });
}

/** Node's ERR_INVALID_STATE, as a TypeError (as Node's own validators make it): "Invalid state: `message`". */
export function invalidState(message: string): TypeError & { code: string } {
  const error = new TypeError(`Invalid state: ${message}`) as TypeError & { code: string };
  error.code = 'ERR_INVALID_STATE';
  Object.defineProperty(error, 'name', { value: 'TypeError [ERR_INVALID_STATE]', configurable: true });
  void error.stack; // the stack's first line names the code, as Node's errors do
  Object.defineProperty(error, 'name', { value: 'TypeError', configurable: true });
  return error;
}
