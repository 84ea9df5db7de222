// The repository stands alone: no comment, test or document points to a document or an issue that is not in it,
// and every Note that is cited is defined. Plain file reading, no GPU.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { repositoryRoot } from '../support/gpu.js';

const roots = ['packages', 'test', 'examples', 'scripts', 'docs', '.ci', 'README.md', 'CONTRIBUTING.md', 'CHANGELOG.md', 'package.json'];
const textFile = /\.(ts|cc|h|cu|md|sh|json|gyp|mjs|js)$|^run$/;
const self = path.join('test', 'cpu', 'repository.test.ts');

/** These checks read the repository's sources; a run against the installed package (CI's packed-package test) has
 * only the compiled tests, so they skip there and say why. */
const sources: { skip: string | false } = {
  skip: existsSync(path.join(repositoryRoot, 'packages', 'cuda-stream-pool', 'src')) ? false : 'needs the repository\'s sources (this run tests an installed copy)',
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

// ---- one-way imports ----

/** The runtime imports between the library's own files: "from -> to", type-only imports left out (they are erased). */
function runtimeImports(): Set<string> {
  const edges = new Set<string>();
  for (const file of files().filter((f) => /^packages\/[^/]+\/src\//.test(f) && f.endsWith('.ts'))) {
    const text = readFileSync(path.join(repositoryRoot, file), 'utf8');
    for (const match of text.matchAll(/^(import|export)\s+(type\s+)?([^;]*?)\s*from\s+'(\.[^']+)';/gms)) {
      if (match[2]) continue; // import type / export type
      const names = /^\{([^}]*)\}$/s.exec(match[3]!.trim());
      if (names && names[1]!.split(',').every((name) => name.trim() === '' || name.trim().startsWith('type '))) continue;
      const target = path.join(path.dirname(file), match[4]!.replace(/\.js$/, '.ts'));
      edges.add(`${file} -> ${target}`);
    }
  }
  return edges;
}

test('runtime imports between src files form no cycle: a lower file never imports a higher one', sources, () => {
  const edges = runtimeImports();
  assert.ok(edges.size > 50, `found only ${edges.size} imports`);
  const next = new Map<string, string[]>();
  for (const edge of edges) {
    const [from, to] = edge.split(' -> ') as [string, string];
    next.set(from, [...(next.get(from) ?? []), to]);
  }
  const state = new Map<string, 'open' | 'done'>();
  const cycles: string[] = [];
  const visit = (file: string, trail: string[]) => {
    if (state.get(file) === 'done') return;
    if (state.get(file) === 'open') {
      cycles.push([...trail.slice(trail.indexOf(file)), file].join(' -> '));
      return;
    }
    state.set(file, 'open');
    for (const to of next.get(file) ?? []) visit(to, [...trail, file]);
    state.set(file, 'done');
  };
  for (const file of next.keys()) visit(file, []);
  assert.deepEqual(cycles, []);
});
