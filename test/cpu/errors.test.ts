// The public error classes: each `name` is its class name, `code` a string to branch on, CudaError's `result` the
// CUresult number. Runs everywhere.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CompileError, CudaError, CudaUnavailableError, DestroyedError } from 'cuda-stream-pool';
import { makeNativeError } from '#library/binding/errors.js';

test('a CudaError from the native layer has name CudaError, the CUDA error name as code and the number as result', () => {
  const e = makeNativeError('cuda', 2, 'CUDA_ERROR_OUT_OF_MEMORY', 'out of memory', 'cuMemAllocAsync', 'device 0, 64 bytes', false);
  assert.ok(e instanceof CudaError);
  assert.ok(e instanceof Error);
  assert.equal(e.name, 'CudaError');
  assert.equal(e.code, 'CUDA_ERROR_OUT_OF_MEMORY');
  assert.equal(e.result, 2);
  assert.equal(e.call, 'cuMemAllocAsync');
  assert.equal(e.description, 'out of memory');
  assert.equal(e.sticky, false);
  assert.equal(e.message, 'CUDA_ERROR_OUT_OF_MEMORY: cuMemAllocAsync failed on device 0, 64 bytes: out of memory');
  assert.match(String(e.stack), /^CudaError: CUDA_ERROR_OUT_OF_MEMORY: cuMemAllocAsync failed/);
});

test('a sticky CudaError says so in its message', () => {
  const e = new CudaError(700, 'CUDA_ERROR_ILLEGAL_ADDRESS', 'an illegal memory access was encountered', 'cuStreamSynchronize', '', true);
  assert.equal(e.sticky, true);
  assert.equal(
    e.message,
    'CUDA_ERROR_ILLEGAL_ADDRESS: cuStreamSynchronize failed: an illegal memory access was encountered (sticky: the device is unusable in this process; restart it)',
  );
});

test('CudaUnavailableError has code ERR_CUDA_UNAVAILABLE and keeps the reason', () => {
  const e = makeNativeError('unavailable', 'no driver here');
  assert.ok(e instanceof CudaUnavailableError);
  assert.equal(e.name, 'CudaUnavailableError');
  assert.equal(e.code, 'ERR_CUDA_UNAVAILABLE');
  assert.equal(e.reason, 'no driver here');
  assert.equal(e.message, 'CUDA is not available: no driver here');
});

test('DestroyedError and CompileError are named after their classes', () => {
  const destroyed = makeNativeError('destroyed', 'Stream', 'query');
  assert.ok(destroyed instanceof DestroyedError);
  assert.equal(destroyed.name, 'DestroyedError');
  assert.equal(destroyed.message, 'Stream.query(): the Stream was destroyed');
  const compile = new CompileError('k.cu', 'k.cu(1): error: oops');
  assert.equal(compile.name, 'CompileError');
  assert.equal(compile.log, 'k.cu(1): error: oops');
});
