// The boundary between TypeScript and C++ is written on both sides; this keeps the two halves equal. Exports: each
// concept file's Export table (src/binding/binding.h) against the NativeBinding interface (src/binding/binding.ts),
// and each table row's argument kinds against how its C++ function reads `info`. Constants: each value shared by the
// two sides is compared with the other side's, CUDA enum values with src/internal/cuda-driver.h; a return convention
// that a TS type cannot state (streamWait's negated capture status) is checked on both sides. Plain file reading
// (the TypeScript compiler's parser for the .ts side), no GPU; the loaded addon's exports are compared too.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import type TypeScript from 'typescript';

import { addonFailure, native } from '#library/binding/binding.js';
import { libraryRoot } from '../support/paths.js';

const source = path.join(libraryRoot, 'src');
// The compiler is a development dependency: a copy installed without them still runs the other suites. Any other
// failure to load it fails the file.
const compiler: typeof TypeScript | undefined = await import('typescript').then(
  (loaded) => loaded.default,
  (error: unknown) => {
    if ((error as { code?: unknown }).code === 'ERR_MODULE_NOT_FOUND') return undefined;
    throw error;
  },
);
// Only the tests that skip without it (sources.skip) use it.
const ts = compiler as typeof TypeScript;
const sources: { skip: string | false } = {
  skip: !existsSync(path.join(source, 'binding', 'binding.ts'))
    ? 'needs the repository\'s sources (this run tests an installed copy)'
    : compiler === undefined
      ? 'needs the typescript package to parse the sources (a development dependency: npm ci installs it)'
      : false,
};

const read = (file: string): string => readFileSync(path.join(source, file), 'utf8');

// ---- the TypeScript side ----

function parseTs(file: string): TypeScript.SourceFile {
  return ts.createSourceFile(file, read(file), ts.ScriptTarget.Latest, true);
}

function findNode<T extends TypeScript.Node>(root: TypeScript.Node, match: (node: TypeScript.Node) => node is T): T | undefined {
  let found: T | undefined;
  const visit = (node: TypeScript.Node): void => {
    if (found) return;
    if (match(node)) found = node;
    else ts.forEachChild(node, visit);
  };
  visit(root);
  return found;
}

/** The kind of one parameter type, in the vocabulary of the C++ tables. */
function kindOfType(type: TypeScript.TypeNode, where: string): string {
  if (ts.isUnionTypeNode(type)) {
    const rest = type.types.filter((t) => t.kind !== ts.SyntaxKind.UndefinedKeyword);
    const optional = rest.length < type.types.length ? '?' : '';
    const kinds = new Set(rest.map((t) => kindOfType(t, where)));
    assert.equal(kinds.size, 1, `${where}: a union of different kinds (${[...kinds].join(', ')}) has no C++ reading`);
    return [...kinds][0] + optional;
  }
  if (ts.isLiteralTypeNode(type)) {
    if (ts.isNumericLiteral(type.literal)) return 'number';
    if (ts.isStringLiteral(type.literal)) return 'string';
  }
  if (ts.isFunctionTypeNode(type)) return 'function';
  if (ts.isArrayTypeNode(type)) return 'array';
  if (ts.isTypeReferenceNode(type)) {
    const name = type.typeName.getText();
    return name === 'NativeRef' ? 'ref' : name === 'Uint8Array' || name === 'ArrayBuffer' ? name : 'object';
  }
  switch (type.kind) {
    case ts.SyntaxKind.NumberKeyword: return 'number';
    case ts.SyntaxKind.BigIntKeyword: return 'bigint';
    case ts.SyntaxKind.BooleanKeyword: return 'boolean';
    case ts.SyntaxKind.StringKeyword: return 'string';
  }
  assert.fail(`${where}: no argument kind for the type ${type.getText()}`);
}

/** NativeBinding's members: functions with their argument kinds, and plain values (null). */
function tsExports(): Map<string, string[] | null> {
  const file = parseTs('binding/binding.ts');
  const binding = findNode(file, (n): n is TypeScript.InterfaceDeclaration => ts.isInterfaceDeclaration(n) && n.name.text === 'NativeBinding');
  assert.ok(binding, 'src/binding/binding.ts declares no NativeBinding interface');
  const members = new Map<string, string[] | null>();
  for (const member of binding.members) {
    const name = member.name!.getText();
    if (ts.isMethodSignature(member)) {
      members.set(name, member.parameters.map((p) => {
        assert.ok(p.type && !p.questionToken && !p.dotDotDotToken, `NativeBinding.${name}: parameter ${p.name.getText()} needs a plain type (no ?, no ...)`);
        return kindOfType(p.type, `NativeBinding.${name}(${p.name.getText()})`);
      }));
    } else if (ts.isPropertySignature(member)) {
      assert.ok(member.type && !ts.isFunctionTypeNode(member.type), `NativeBinding.${name}: declare a function as a method`);
      members.set(name, null);
    }
  }
  return members;
}

/** The initializer of a top-level `const name = ...` in a .ts file, `as const` removed. */
function tsConstant(file: string, name: string): TypeScript.Expression {
  const declaration = findNode(parseTs(file), (n): n is TypeScript.VariableDeclaration => ts.isVariableDeclaration(n) && n.name.getText() === name);
  assert.ok(declaration?.initializer, `${file} defines no constant ${name}`);
  let value = declaration.initializer;
  while (ts.isAsExpression(value) || ts.isSatisfiesExpression(value) || ts.isParenthesizedExpression(value)) value = value.expression;
  return value;
}

function literalValue(value: TypeScript.Expression, where: string): number | bigint {
  if (ts.isNumericLiteral(value)) return Number(value.text);
  if (ts.isBigIntLiteral(value)) return BigInt(value.text.slice(0, -1));
  if (ts.isPrefixUnaryExpression(value) && value.operator === ts.SyntaxKind.MinusToken) return -literalValue(value.operand, where);
  assert.fail(`${where} is ${value.getText()}, not a number literal`);
}

function tsNumber(file: string, name: string): number | bigint {
  return literalValue(tsConstant(file, name), `${name} in ${file}`);
}

/** An object literal of number literals ({ key: 1, ... }). */
function tsTable(file: string, name: string): Map<string, number> {
  const value = tsConstant(file, name);
  assert.ok(ts.isObjectLiteralExpression(value), `${name} in ${file} is not an object literal`);
  return new Map(value.properties.map((p) => {
    assert.ok(ts.isPropertyAssignment(p), `${name} in ${file}: ${p.getText()} is not key: value`);
    const key = ts.isStringLiteral(p.name) ? p.name.text : p.name.getText();
    return [key, Number(literalValue(p.initializer, `${name}.${key} in ${file}`))];
  }));
}

// ---- the C++ side ----

/** The file with comments and the text of string and character literals blanked, offsets kept. */
function blankComments(text: string): string {
  return text.replace(/\/\/[^\n]*|\/\*[\s\S]*?\*\/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'/g, (m) =>
    m.startsWith('/') ? ' '.repeat(m.length) : m[0] + ' '.repeat(m.length - 2) + m[0]);
}

interface Row { name: string; kinds: string[]; fn: string; file: string }

const cppFiles = (): string[] =>
  readdirSync(source, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.cc')).sort();

/** Every row of every Export table, and the values exports.Set adds directly. */
function cppExports(): { rows: Row[]; values: string[] } {
  const rows: Row[] = [];
  const values: string[] = [];
  for (const file of cppFiles()) {
    const text = read(file);
    for (const table of text.matchAll(/const Export (\w+)\[\] = \{([\s\S]*?)\n\};/g)) {
      const body = table[2]!.replace(/\/\/[^\n]*/g, '');
      let rest = body;
      for (const row of body.matchAll(/\{\s*"(\w+)",\s*"([^"]*)",\s*(?:entry|unordered|plain)<(\w+)(?:<[^<>]*>)?>\s*\}/g)) {
        rows.push({ name: row[1]!, kinds: row[2]!.split(',').map((k) => k.trim()).filter((k) => k !== ''), fn: row[3]!, file });
        rest = rest.replace(row[0], '');
      }
      assert.match(rest, /^[\s,]*$/, `${file}: ${table[1]} has rows that are not {"name", "kinds", entry<function>} (or unordered<function>, plain<function>): ${rest.trim()}`);
    }
    for (const set of blankComments(text).matchAll(/exports\.Set\(/g)) {
      const name = /^exports\.Set\("(\w+)",\s*Napi::(Number|String|Boolean)::New/.exec(text.slice(set.index!));
      assert.ok(name, `${file}: an exports.Set that is not a plain value; add functions through an Export table`);
      values.push(name[1]!);
    }
  }
  return { rows, values };
}

/** The body of `Napi::Value fn(const Napi::CallbackInfo& info)` in `file`, comments and strings blanked. */
function cppBody(file: string, fn: string): string {
  const text = blankComments(read(file));
  const head = new RegExp(`Napi::Value ${fn}\\(const Napi::CallbackInfo& info\\)\\s*\\{`).exec(text);
  assert.ok(head, `${file}: no definition Napi::Value ${fn}(const Napi::CallbackInfo& info)`);
  let depth = 1;
  let at = head.index + head[0].length;
  for (; depth > 0; at++) {
    assert.ok(at < text.length, `${file}: ${fn} has no closing brace`);
    if (text[at] === '{') depth++;
    else if (text[at] === '}') depth--;
  }
  return text.slice(head.index + head[0].length, at - 1);
}

const AS_KINDS: Record<string, string> = {
  Number: 'number', BigInt: 'bigint', Boolean: 'boolean', String: 'string', Function: 'function', Array: 'array',
  Uint8Array: 'Uint8Array', ArrayBuffer: 'ArrayBuffer', TypedArray: 'object',
};
const HELPER_KINDS: Record<string, string> = {
  unwrap_native: 'ref', borrow_native: 'ref', is_native: 'ref', release_native: 'ref', to_uint64: 'bigint', to_int64: 'bigint', to_size: 'number', read_layout: 'object', hold_memory: 'object',
};

/** What `fn` reads from each argument index: kinds, plus 'undefined?' where it tests for undefined. */
function cppReads(row: Row): Map<number, Set<string>> {
  const body = cppBody(row.file, row.fn);
  const reads = new Map<number, Set<string>>();
  const where = `${row.file}: ${row.fn} (${row.name})`;
  for (const use of body.matchAll(/\binfo\b(?!\.(?:Env|Data|This)\(\))/g)) {
    const at = use.index!;
    const index = /^info\[([^\]]+)\]/.exec(body.slice(at));
    assert.ok(index, `${where} uses info other than as info[N], info.Env(), info.Data(): ${body.slice(at, at + 40)}; read each argument in the function itself`);
    const literal = /^\d+$/.exec(index[1]!) ?? /^\w+ \? (\d+) : (\d+)$/.exec(index[1]!);
    assert.ok(literal, `${where} reads info[${index[1]}]; write the index as a literal (or flag ? a : b) so that it can be checked`);
    const indices = literal.length > 1 ? literal.slice(1).map(Number) : [Number(literal[0])];
    const after = body.slice(at + index[0].length);
    const before = body.slice(Math.max(0, at - 40), at);
    const as = /^\.As<Napi::(\w+)>\(\)(\.CheckTypeTag)?/.exec(after);
    const test = /^\.Is(Undefined|Number|BigInt)\(\)/.exec(after);
    const helper = /\b(\w+)(?:<\w+>)?\($/.exec(before);
    let kind: string | undefined;
    if (as) kind = as[2] ? 'ref' : AS_KINDS[as[1]!];
    else if (test) kind = test[1] === 'Undefined' ? 'undefined?' : test[1] === 'Number' ? 'number' : 'bigint';
    else if (helper) kind = HELPER_KINDS[helper[1]!];
    assert.ok(kind, `${where} reads info[${index[1]}] in a way this test does not know: ${(before.slice(-20) + body.slice(at, at + 50)).replace(/\s+/g, ' ')}`);
    for (const i of indices) reads.set(i, (reads.get(i) ?? new Set()).add(kind));
  }
  return reads;
}

// ---- exports and argument kinds ----

test('the addon exports exactly the members of NativeBinding, with the same argument kinds', sources, () => {
  const declared = tsExports();
  const { rows, values } = cppExports();
  assert.ok(rows.length > 80, `found only ${rows.length} Export rows`);
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const row of rows) {
    if (seen.has(row.name)) problems.push(`${row.name}: exported twice (${row.file})`);
    seen.add(row.name);
    const kinds = declared.get(row.name);
    if (kinds === undefined) problems.push(`${row.name}: exported by ${row.file} but missing from NativeBinding`);
    else if (kinds === null) problems.push(`${row.name}: a function in ${row.file} but a value in NativeBinding`);
    else if (kinds.join(', ') !== row.kinds.join(', '))
      problems.push(`${row.name}: NativeBinding passes (${kinds.join(', ')}), ${row.file} reads (${row.kinds.join(', ')})`);
  }
  for (const name of values) {
    if (seen.has(name)) problems.push(`${name}: exported twice`);
    seen.add(name);
    if (declared.get(name) !== null) problems.push(`${name}: a value in src/binding/binding.cc but ${declared.has(name) ? 'a function in' : 'missing from'} NativeBinding`);
  }
  for (const name of declared.keys()) if (!seen.has(name)) problems.push(`${name}: declared in NativeBinding but no C++ file exports it`);
  assert.deepEqual(problems, []);
});

test('each native function reads exactly the arguments its Export row declares, as their kinds', sources, () => {
  const problems: string[] = [];
  for (const row of cppExports().rows) {
    const reads = cppReads(row);
    const where = `${row.name} (${row.file}, ${row.fn})`;
    for (const [index, kinds] of reads) {
      const declared = row.kinds[index];
      if (declared === undefined) {
        problems.push(`${where}: reads info[${index}], but its row declares ${row.kinds.length} arguments`);
        continue;
      }
      const base = declared.replace(/\?$/, '');
      for (const kind of kinds) {
        if (kind === 'undefined?' ? base === declared : kind !== base) problems.push(`${where}: argument ${index} is declared ${declared} but read as ${kind}`);
      }
      if (base !== declared && !kinds.has('undefined?')) problems.push(`${where}: argument ${index} may be undefined (${declared}) but is never tested with IsUndefined()`);
    }
    row.kinds.forEach((kind, index) => {
      if (!reads.has(index)) problems.push(`${where}: argument ${index} (${kind}) is declared but never read`);
    });
  }
  assert.deepEqual(problems, []);
});

test('the loaded addon has exactly the exports of NativeBinding', { skip: addonFailure ?? sources.skip }, () => {
  assert.deepEqual(Object.keys(native).sort(), [...tsExports().keys()].sort());
});

// ---- constants and enum values ----

/** The enumerators of `enum name { ... }` in src/internal/cuda-driver.h. */
function driverEnum(name: string): Map<string, number> {
  const text = blankComments(read('internal/cuda-driver.h'));
  const body = new RegExp(`enum ${name}\\s*\\{([^}]*)\\}`).exec(text);
  assert.ok(body, `src/internal/cuda-driver.h declares no enum ${name}`);
  return new Map([...body[1]!.matchAll(/(\w+)\s*=\s*(0x[0-9a-fA-F]+|-?\d+)/g)].map((m) => [m[1]!, Number(m[2])]));
}

function driverValue(enumName: string, enumerator: string): number {
  const value = driverEnum(enumName).get(enumerator);
  assert.ok(value !== undefined, `src/internal/cuda-driver.h: enum ${enumName} has no ${enumerator}`);
  return value;
}

/** Compares a TS table with the enumerators `prefix + KEY` of a driver enum, KEY the table's key in upper snake case. */
function checkEnumTable(file: string, table: string, enumName: string, prefix: string): void {
  const values = tsTable(file, table);
  const enumerators = driverEnum(enumName);
  const problems: string[] = [];
  for (const [key, value] of values) {
    const enumerator = prefix + key.replace(/([a-z])([A-Z])/g, '$1_$2').replace(/-/g, '_').toUpperCase();
    const expected = enumerators.get(enumerator);
    if (expected === undefined) problems.push(`${table}.${key} (${file}): src/internal/cuda-driver.h has no ${enumerator} in enum ${enumName}`);
    else if (expected !== value) problems.push(`${table}.${key} (${file}) is ${value}, but ${enumerator} is ${expected}`);
  }
  assert.deepEqual(problems, []);
}

test('CUDA enum values in TypeScript equal those of src/internal/cuda-driver.h', sources, () => {
  checkEnumTable('memory/managed-buffer.ts', 'ADVICE', 'CUmem_advise', 'CU_MEM_ADVISE_');
  checkEnumTable('stream/capture.ts', 'CAPTURE_MODES', 'CUstreamCaptureMode', 'CU_STREAM_CAPTURE_MODE_');
  checkEnumTable('binding/binding.ts', 'CAPTURE_STATUS', 'CUstreamCaptureStatus', 'CU_STREAM_CAPTURE_STATUS_');
  assert.equal(tsNumber('binding/binding.ts', 'NOT_READY'), driverValue('CUresult', 'CUDA_ERROR_NOT_READY'), 'NOT_READY (src/binding/binding.ts) is not CUDA_ERROR_NOT_READY');
});

test('streamWait\'s negated capture status cannot be read as a CUresult: it negates capture_status, every CUresult is non-negative, every capturing status positive', sources, () => {
  // The declared return type is a plain number, so the convention is checked here rather than by the compiler.
  const body = cppBody('stream/completion.cc', 'stream_wait');
  const negated = /if \(const int (\w+) = capture_status\(\*\w+\)\) return Napi::Number::New\(env, -\1\);/.exec(body);
  assert.ok(negated, 'stream/completion.cc: stream_wait no longer returns the negated capture_status; update NativeBinding.streamWait and its callers');
  const negative = [...driverEnum('CUresult')].filter(([, value]) => value < 0).map(([name]) => name);
  assert.deepEqual(negative, [], 'a negative CUresult would read as a capture status in the result of streamWait');
  const statuses = tsTable('binding/binding.ts', 'CAPTURE_STATUS');
  assert.equal(statuses.get('none'), 0);
  for (const [name, value] of statuses) if (name !== 'none') assert.ok(value > 0, `CAPTURE_STATUS.${name} is ${value}; negated, it must be below 0`);
  assert.match(read('stream/completion.ts'), /native\.streamWait\(ref, token\)[^;]*;\s*if \(status < 0\)[^\n]*-status/, 'stream/completion.ts: waitFor no longer reads a negative status as the negated capture status');
});

test('CU_STREAM_PER_THREAD is defined once on each side, with one value', sources, () => {
  const header = /inline const CUstream CU_STREAM_PER_THREAD = reinterpret_cast<CUstream>\(std::uintptr_t\{(0x[0-9a-fA-F]+|\d+)\}\);/.exec(read('internal/cuda-driver.h'));
  assert.ok(header, 'src/internal/cuda-driver.h: no CU_STREAM_PER_THREAD of the expected form');
  assert.equal(tsNumber('binding/binding.ts', 'CU_STREAM_PER_THREAD'), BigInt(header[1]!), 'CU_STREAM_PER_THREAD differs between src/binding/binding.ts and src/internal/cuda-driver.h');
  const elsewhere = (dir: string, extension: RegExp, pattern: RegExp, owner: string): string[] =>
    readdirSync(path.join(source, dir === '' ? '.' : dir), { recursive: true, encoding: 'utf8' })
      .filter((f) => extension.test(f) && path.join(dir, f) !== owner && pattern.test(blankComments(read(path.join(dir, f)))))
      .map((f) => path.join(dir, f));
  // A second definition, or the bare number beside a per-thread stream, is what this test exists to stop.
  assert.deepEqual(elsewhere('', /\.ts$/, /(PER_THREAD\w*\s*=|=\s*2n\s*;)/, path.join('binding', 'binding.ts')), [], 'define CU_STREAM_PER_THREAD only in src/binding/binding.ts');
  assert.deepEqual(elsewhere('', /\.(cc|h)$/, /CU_STREAM_PER_THREAD\s*=/, path.join('internal', 'cuda-driver.h')), [], 'define CU_STREAM_PER_THREAD only in src/internal/cuda-driver.h');
});

test('the kernel argument slot has one size on both sides', sources, () => {
  const header = /constexpr unsigned kKernelArgSlotBytes = (\d+);/.exec(read('kernel/module.h'));
  assert.ok(header, 'src/kernel/module.h: no constexpr unsigned kKernelArgSlotBytes');
  assert.equal(tsNumber('binding/binding.ts', 'KERNEL_ARG_SLOT_BYTES'), Number(header[1]), 'KERNEL_ARG_SLOT_BYTES (src/binding/binding.ts) differs from kKernelArgSlotBytes (src/kernel/module.h)');
  // The slot code names the constant rather than repeating its number.
  for (const file of ['kernel/module.cc', 'graph/graph.cc']) {
    const text = blankComments(read(file));
    assert.doesNotMatch(text, /(ByteLength\(\)\s*\/\s*8\b|\+\s*8\s*\*\s*i\b)/, `${file} spells the slot size as 8; use kKernelArgSlotBytes`);
  }
  assert.doesNotMatch(blankComments(read('kernel/argument-packer.ts')), /\b8 \* (i|signature)\b/, 'src/kernel/argument-packer.ts spells the slot size as 8; use KERNEL_ARG_SLOT_BYTES');
});

test('the error kinds the addon raises are the ones makeNativeError builds, with their argument counts', sources, () => {
  const arity = tsTable('binding/errors.ts', 'NATIVE_ERROR_KINDS');
  const factory = findNode(parseTs('binding/errors.ts'), (n): n is TypeScript.FunctionDeclaration => ts.isFunctionDeclaration(n) && n.name?.text === 'makeNativeError');
  assert.ok(factory, 'src/binding/errors.ts has no makeNativeError');
  const cases: string[] = [];
  const visit = (node: TypeScript.Node): void => {
    if (ts.isCaseClause(node) && ts.isStringLiteral(node.expression)) cases.push(node.expression.text);
    ts.forEachChild(node, visit);
  };
  visit(factory);
  assert.deepEqual(cases.sort(), [...arity.keys()].sort(), 'makeNativeError handles other kinds than NATIVE_ERROR_KINDS lists');
  // Each factory call in C++: the kind first, then as many arguments as the kind takes.
  const calls = [...read('binding/errors.cc').matchAll(/factory\.Call\(\s*\{([\s\S]*?)\}\);/g)];
  assert.ok(calls.length >= arity.size, `src/binding/errors.cc: found ${calls.length} factory calls`);
  const problems: string[] = [];
  const raised = new Set<string>();
  for (const call of calls) {
    const kind = /^\s*Napi::String::New\(env, "(\w+)"\)/.exec(call[1]!);
    if (!kind) { problems.push(`a factory call whose first argument is not a kind string: ${call[1]!.slice(0, 60)}`); continue; }
    raised.add(kind[1]!);
    const count = [...call[1]!.matchAll(/Napi::\w+::New\(/g)].length - 1;
    if (!arity.has(kind[1]!)) problems.push(`src/binding/errors.cc raises the kind '${kind[1]}', which NATIVE_ERROR_KINDS does not list`);
    else if (arity.get(kind[1]!) !== count) problems.push(`'${kind[1]}': src/binding/errors.cc passes ${count} arguments, NATIVE_ERROR_KINDS says ${arity.get(kind[1]!)}`);
  }
  for (const kind of arity.keys()) if (!raised.has(kind)) problems.push(`'${kind}' is in NATIVE_ERROR_KINDS but src/binding/errors.cc never raises it`);
  assert.deepEqual(problems, []);
});
