// The repository stands alone: no comment, test or document points to a document or an issue that is not in it,
// and every Note that is cited is defined. Plain file reading, no GPU.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';

import { repositoryRoot } from '../support/gpu.js';

const roots = ['packages', 'test', 'examples', 'scripts', 'docs', '.ci', 'README.md', 'CONTRIBUTING.md', 'CHANGELOG.md', 'package.json'];
const textFile = /\.(ts|cc|h|cu|md|sh|json|gyp|mjs|js)$|^run$/;
const self = path.join('test', 'cpu', 'repository.test.ts');

/** These checks read the repository's sources; a run against the installed package (CI's packed-package test) has
 * only the compiled tests, so they skip there and say why. */
const sources: { skip: string | false } = {
  skip: existsSync(path.join(repositoryRoot, 'scripts', 'simulated-driver.cc')) ? false : 'needs the repository\'s sources (this run tests an installed copy)',
};

/** Folders that builds and installs write: nothing in them is the repository's. */
const generated = new Set(['dist', 'build', 'prebuilds', 'node_modules', 'api']);

function files(): string[] {
  const out: string[] = [];
  const walk = (relative: string) => {
    const absolute = path.join(repositoryRoot, relative);
    let stat;
    try {
      stat = statSync(absolute);
    } catch {
      return; // a root this checkout does not have
    }
    if (stat.isDirectory()) {
      for (const name of readdirSync(absolute)) if (!generated.has(name)) walk(path.join(relative, name));
    }
    else if (textFile.test(path.basename(relative)) && relative !== self) out.push(relative);
  };
  for (const root of roots) walk(root);
  return out;
}

const outside: Array<[string, RegExp]> = [
  ['a design document outside the repository', /(?<!src\/internal\/)\bDESIGN\.md/],
  ['the style guide', /\bSTYLE\.md/],
  ['the team\'s shared folder', /\.\.\/shared\b/],
  ['an issue number', /\b[Ii]ssues? #?\d+/],
];

test('no file points to a document or an issue outside the repository', sources, () => {
  const all = files();
  assert.ok(all.length > 50, `found only ${all.length} files under ${repositoryRoot}`);
  const found: string[] = [];
  for (const file of all) {
    const lines = readFileSync(path.join(repositoryRoot, file), 'utf8').split('\n');
    lines.forEach((line, i) => {
      for (const [what, pattern] of outside) if (pattern.test(line)) found.push(`${file}:${i + 1}: ${what}: ${line.trim()}`);
    });
  }
  assert.deepEqual(found, []);
});

test('every Note that is cited is defined, in code ("Note [name]:") or in a document ("## Note [name]")', sources, () => {
  const cited = new Map<string, string>();
  const defined = new Set<string>();
  for (const file of files()) {
    const text = readFileSync(path.join(repositoryRoot, file), 'utf8');
    for (const match of text.matchAll(/Note \[([^\]]+)\](:?)/g)) {
      const name = match[1]!.replace(/\s*\n\s*(\/\/|\*)?\s*/g, ' '); // a name wrapped across comment lines
      const heading = text.lastIndexOf('\n', match.index) + 1;
      if (match[2] === ':' || text.startsWith('## ', heading)) defined.add(name);
      else if (!cited.has(name)) cited.set(name, file);
    }
  }
  const undefinedNotes = [...cited].filter(([name]) => !defined.has(name)).map(([name, file]) => `Note [${name}], cited in ${file}`);
  assert.deepEqual(undefinedNotes, []);
  assert.ok(defined.size >= 10, `only ${defined.size} Notes found`);
});

/** Copies the library's prepack makes of root files (gitignored); their originals are the ones checked. */
const packCopies = ['packages/cuda-stream-pool/README.md', 'packages/cuda-stream-pool/CHANGELOG.md', 'packages/cuda-stream-pool/docs/'];

test('every link in the Markdown files to a file of the repository names one that exists: relative links, and links to the repository\'s main branch on GitHub', sources, async () => {
  // The link parser is the one that checks packed tarballs in CI, so both read links alike.
  const links = (await import(pathToFileURL(path.join(repositoryRoot, 'scripts', 'packed-links.mjs')).href)) as {
    markdownLinks(markdown: string): string[];
    relativeLinkPath(target: string): string | null;
  };
  const repository = JSON.parse(readFileSync(path.join(repositoryRoot, 'packages', 'cuda-stream-pool', 'package.json'), 'utf8')).repository.url as string;
  const onGitHub = new RegExp(`^${repository.replace(/^git\+/, '').replace(/\.git$/, '').replace(/[.]/g, '\\.')}/(?:blob|tree)/main/([^#?]+)`);
  const markdown = files().filter((file) => file.endsWith('.md') && !packCopies.some((copy) => file.startsWith(copy)));
  assert.ok(markdown.length >= 10, `found only ${markdown.length} Markdown files`);
  const broken: string[] = [];
  let checked = 0;
  for (const file of markdown) {
    for (const target of links.markdownLinks(readFileSync(path.join(repositoryRoot, file), 'utf8'))) {
      const relative = links.relativeLinkPath(target);
      const onMain = onGitHub.exec(target)?.[1];
      const named = relative !== null ? path.join(path.dirname(file), relative) : onMain === undefined ? undefined : decodeURIComponent(onMain);
      if (named === undefined) continue;
      checked += 1;
      if (!existsSync(path.join(repositoryRoot, named))) broken.push(`${file}: ${target}`);
    }
  }
  assert.deepEqual(broken, []);
  assert.ok(checked >= 50, `checked only ${checked} links`);
});

// ---- no import cycles ----

/* The library's files can be read in one order, lowest first: no file imports, even for a type alone, a file that
 * imports it back. Type-only imports count: they are erased at run time, but a reader still needs the other file
 * first. A cycle is allowed only where a public signature forces it, and only as a type-only import; each such edge
 * is listed here with the signature that forces it, and the list must stay as short as the code allows. */
const allowedCycleEdges: Record<string, Record<string, string>> = {
  'packages/cuda-stream-pool/src': {
    'stream/stream.ts -> memory/device-buffer.ts': 'Stream.fill(dst: DeviceBuffer) and CopyOperand name DeviceBuffer, which queues its work on streams',
    'stream/stream.ts -> memory/managed-buffer.ts': 'CopyOperand (the operand of Stream.copy) names ManagedBuffer, which queues its work on streams',
    'stream/stream.ts -> graph/graph.ts': 'Stream.endCapture() returns a Graph, which launches on streams',
    'stream/event.ts -> stream/stream.ts': 'Event.record(stream: Stream), while Stream.waitEvent and recordEvent take and make Events',
    'memory/memory-pool.ts -> device/device.ts': 'MemoryPool.device is a Device, whose memoryPool getter returns the MemoryPool',
    'device/partition.ts -> device/device.ts': 'DevicePartition.device is a Device, whose partition() and partitions return DevicePartitions',
    'kernel/kernel.ts -> kernel/module.ts': 'Kernel.module is the Module, whose getFunction makes the Kernels',
  },
  'packages/cuda-stream-pool-bench/src': {},
};

interface Imports {
  /** Every import between the tree's files, "from -> to" relative to the tree, and whether any of them runs. */
  edges: Map<string, 'runtime' | 'type'>;
  next: Map<string, string[]>;
}

/** The imports between the .ts files under `tree`: import and export declarations (type-only ones included) and
 * `import('...')` types. */
function importsUnder(tree: string): Imports {
  const edges = new Map<string, 'runtime' | 'type'>();
  const add = (from: string, specifier: string, kind: 'runtime' | 'type') => {
    const to = path.posix.join(path.posix.dirname(from), specifier.replace(/\.js$/, '.ts'));
    const edge = `${from} -> ${to}`;
    if (edges.get(edge) !== 'runtime') edges.set(edge, kind);
  };
  for (const file of files().filter((f) => f.startsWith(`${tree}/`) && f.endsWith('.ts'))) {
    const from = file.slice(tree.length + 1);
    const text = readFileSync(path.join(repositoryRoot, file), 'utf8');
    for (const match of text.matchAll(/^(import|export)\s+(type\s+)?([^;]*?)\s*from\s+'(\.[^']+)';/gms)) {
      const names = /^\{([^}]*)\}$/s.exec(match[3]!.trim());
      const typeOnly = match[2] !== undefined || (names !== null && names[1]!.split(',').every((name) => name.trim() === '' || name.trim().startsWith('type ')));
      add(from, match[4]!, typeOnly ? 'type' : 'runtime');
    }
    for (const match of text.matchAll(/^import\s+'(\.[^']+)';/gm)) add(from, match[1]!, 'runtime');
    for (const match of text.matchAll(/\bimport\(\s*'(\.[^']+)'\s*\)/g)) add(from, match[1]!, 'type');
  }
  const next = new Map<string, string[]>();
  for (const edge of edges.keys()) {
    const [from, to] = edge.split(' -> ') as [string, string];
    next.set(from, [...(next.get(from) ?? []), to]);
  }
  return { edges, next };
}

/** The strongly connected sets of more than one file (or of a file that imports itself), by Tarjan's algorithm. */
function cycles(next: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (file: string) => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const to of next.get(file) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(file, Math.min(low.get(file)!, low.get(to)!));
      } else if (onStack.has(to)) {
        low.set(file, Math.min(low.get(file)!, index.get(to)!));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const set: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      set.push(member);
    } while (member !== file);
    if (set.length > 1 || (next.get(file) ?? []).includes(file)) found.push(set.sort());
  };
  for (const file of next.keys()) if (!index.has(file)) visit(file);
  return found;
}

/** True when `to` reaches `from` through `next`: the edge from -> to closes a cycle. */
function closesCycle(next: Map<string, string[]>, from: string, to: string): boolean {
  const seen = new Set([to]);
  const queue = [to];
  while (queue.length > 0) {
    const file = queue.shift()!;
    if (file === from) return true;
    for (const following of next.get(file) ?? []) {
      if (!seen.has(following)) {
        seen.add(following);
        queue.push(following);
      }
    }
  }
  return false;
}

/** What is wrong with the imports under `tree` given its allowed edges: cycles through other edges, allowed edges
 * that run (a runtime cycle is never allowed), and allowed edges that no longer close a cycle. */
function cycleProblems(tree: string, allowed: Record<string, string>, imports = importsUnder(tree)): string[] {
  const problems: string[] = [];
  const rest = new Map<string, string[]>();
  for (const [from, targets] of imports.next) rest.set(from, targets.filter((to) => !Object.hasOwn(allowed, `${from} -> ${to}`)));
  for (const set of cycles(rest)) {
    const inside = [...imports.edges.keys()].filter((edge) => {
      const [from, to] = edge.split(' -> ') as [string, string];
      return set.includes(from) && set.includes(to) && !Object.hasOwn(allowed, edge);
    });
    problems.push(`an import cycle in ${tree} among ${set.join(', ')}; its edges: ${inside.map((edge) => `${edge} (${imports.edges.get(edge)})`).join('; ')}`);
  }
  for (const edge of Object.keys(allowed)) {
    const [from, to] = edge.split(' -> ') as [string, string];
    const kind = imports.edges.get(edge);
    if (kind === undefined) problems.push(`allowed edge ${edge} is no longer imported: remove it from the list`);
    else if (kind === 'runtime') problems.push(`allowed edge ${edge} is a runtime import: only type-only imports may close a cycle`);
    else if (!closesCycle(imports.next, from, to)) problems.push(`allowed edge ${edge} no longer closes a cycle: remove it from the list`);
  }
  return problems;
}

test('the library\'s files import each other in one direction: no import cycle, type-only imports included, beyond the listed edges that public signatures force', sources, () => {
  const tree = 'packages/cuda-stream-pool/src';
  const imports = importsUnder(tree);
  assert.ok(imports.edges.size > 100, `found only ${imports.edges.size} imports`);
  assert.deepEqual(cycleProblems(tree, allowedCycleEdges[tree]!, imports), []);
});

test('the benchmark\'s files import each other in one direction: no import cycle, type-only imports included', sources, () => {
  const tree = 'packages/cuda-stream-pool-bench/src';
  const imports = importsUnder(tree);
  assert.ok(imports.edges.size > 20, `found only ${imports.edges.size} imports`);
  assert.deepEqual(cycleProblems(tree, allowedCycleEdges[tree]!, imports), []);
});

test('the cycle check finds a cycle, a type-only one included, and an allowed edge that is no longer needed', () => {
  const imports: Imports = {
    edges: new Map([['a.ts -> b.ts', 'runtime'], ['b.ts -> c.ts', 'runtime'], ['c.ts -> a.ts', 'type'], ['c.ts -> d.ts', 'type']]),
    next: new Map([['a.ts', ['b.ts']], ['b.ts', ['c.ts']], ['c.ts', ['a.ts', 'd.ts']]]),
  };
  const found = cycleProblems('tree', {}, imports);
  assert.equal(found.length, 1);
  assert.match(found[0]!, /among a\.ts, b\.ts, c\.ts; .*c\.ts -> a\.ts \(type\)/);
  assert.deepEqual(cycleProblems('tree', { 'c.ts -> a.ts': 'reason' }, imports), []);
  assert.match(cycleProblems('tree', { 'a.ts -> b.ts': 'reason' }, imports)[0]!, /is a runtime import/);
  assert.match(cycleProblems('tree', { 'c.ts -> a.ts': 'reason', 'c.ts -> d.ts': 'reason' }, imports)[0]!, /c\.ts -> d\.ts no longer closes a cycle/);
  assert.match(cycleProblems('tree', { 'c.ts -> a.ts': 'reason', 'd.ts -> a.ts': 'reason' }, imports)[0]!, /d\.ts -> a\.ts is no longer imported/);
});
