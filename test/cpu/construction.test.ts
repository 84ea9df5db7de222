// Classes with a factory cannot be built with `new`, and their methods refuse a receiver that is not a real
// instance: both with Node-style typed errors, on the CPU (nothing here reaches the driver).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Device, DeviceBuffer, Event, Graph, GraphExec, Kernel, ManagedBuffer, MemoryPool, Module, PinnedBuffer, Program, Stream, StreamLease, StreamPool, StreamPoolGroup, withStream } from 'cuda-stream-pool';

const factories: Array<[string, Function, RegExp]> = [
  ['Event', Event, /use Event\.create\(\) or stream\.recordEvent\(\)/],
  ['Stream', Stream, /use Stream\.create\(\), Stream\.legacy\(\), Stream\.perThread\(\), Stream\.fromHandle\(\) or a StreamPool/],
  ['DeviceBuffer', DeviceBuffer, /use DeviceBuffer\.alloc\(\) or DeviceBuffer\.attach\(\)/],
  ['PinnedBuffer', PinnedBuffer, /use PinnedBuffer\.alloc\(\)/],
  ['Module', Module, /use Module\.load\(\) or Program\.compile\(\)/],
  ['Program', Program, /use Program\.compile\(source\)/],
  ['Kernel', Kernel, /use module\.getFunction\(name, signature\)/],
  ['Device', Device, /use Device\.get\(ordinal\)/],
  ['MemoryPool', MemoryPool, /use device\.memoryPool/],
  ['StreamLease', StreamLease, /use pool\.acquire\(\), pool\.tryAcquire\(\) or pool\.run\(\)/],
  ['StreamPoolGroup', StreamPoolGroup, /use StreamPool\.forDevices\(\)/],
  ['Graph', Graph, /use stream\.endCapture\(\) or Graph\.capture\(\)/],
  ['GraphExec', GraphExec, /use graph\.instantiate\(\)/],
  ['ManagedBuffer', ManagedBuffer, /use ManagedBuffer\.alloc\(\)/],
];

for (const [name, type, factory] of factories) {
  test(`new ${name}() throws TypeError ERR_ILLEGAL_CONSTRUCTOR naming the factory to use`, () => {
    const make = type as new (...args: unknown[]) => unknown;
    for (const args of [[], [Symbol('not the library\'s'), 1, 2]]) {
      assert.throws(() => new make(...args), (error: unknown) => {
        assert.ok(error instanceof TypeError);
        assert.equal((error as { code?: string }).code, 'ERR_ILLEGAL_CONSTRUCTOR');
        assert.equal(error.name, 'TypeError');
        assert.match(error.message, new RegExp(`^${name} has no public constructor; `));
        assert.match(error.message, factory);
        return true;
      });
    }
  });
}

const receivers: Array<[string, Function]> = [
  ['Event', Event],
  ['Stream', Stream],
  ['DeviceBuffer', DeviceBuffer],
  ['PinnedBuffer', PinnedBuffer],
  ['Module', Module],
  ['Kernel', Kernel],
  ['Device', Device],
  ['MemoryPool', MemoryPool],
  ['StreamLease', StreamLease],
  ['StreamPool', StreamPool],
  ['StreamPoolGroup', StreamPoolGroup],
  ['Graph', Graph],
  ['GraphExec', GraphExec],
  ['ManagedBuffer', ManagedBuffer],
];

for (const [name, type] of receivers) {
  test(`every ${name} method and accessor called on a foreign receiver throws TypeError ERR_INVALID_THIS`, () => {
    const prototype = type.prototype as object;
    const members = Reflect.ownKeys(prototype).filter((key) => key !== 'constructor');
    assert.ok(members.length > 0);
    const impostor = Object.create(prototype) as object; // passes instanceof, but was not made by the library
    for (const key of members) {
      const descriptor = Object.getOwnPropertyDescriptor(prototype, key)!;
      const calls = [descriptor.value, descriptor.get].filter((f): f is Function => typeof f === 'function');
      assert.ok(calls.length > 0, `${String(key)} is a method or an accessor`);
      for (const call of calls) {
        for (const receiver of [{}, impostor, undefined, 42]) {
          assert.throws(() => call.call(receiver, 1), {
            name: 'TypeError',
            code: 'ERR_INVALID_THIS',
            message: `Value of "this" must be of type ${name}`,
          }, `${name}.prototype.${String(key)}`);
        }
      }
    }
  });
}

test('Stream.prototype.copy.call({}) names the receiver, not an internal detail', () => {
  assert.throws(() => Stream.prototype.copy.call({} as Stream, new Uint8Array(1), new Uint8Array(1)), {
    name: 'TypeError',
    code: 'ERR_INVALID_THIS',
    message: 'Value of "this" must be of type Stream',
  });
});

test('an object that only inherits Stream.prototype is refused as a stream argument, naming the argument', async () => {
  const fake = Object.create(Stream.prototype) as Stream;
  const refused = (name: string) => ({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: new RegExp(`"${name.replace('.', '\\.')}"`) });
  assert.throws(() => DeviceBuffer.alloc(8, { stream: fake }), refused('options.stream'));
  assert.throws(() => withStream(fake, () => DeviceBuffer.alloc(8)), refused('stream'));
  await assert.rejects(Graph.capture(fake, () => undefined), refused('stream'));
});

test('withStream() refuses anything but a Stream the library made, one that inherits Stream.prototype included, before fn runs', () => {
  let ran = false;
  const fn = () => {
    ran = true;
  };
  for (const fake of [Object.create(Stream.prototype) as Stream, { device: 0, id: 1n }, 42])
    assert.throws(() => withStream(fake as Stream, fn), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: /^"stream" must be a Stream; received / });
  assert.equal(ran, false);
});

test('StreamPool keeps its public constructor: options are checked before anything else', () => {
  assert.throws(() => new StreamPool({ size: 0 }), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE' });
});
