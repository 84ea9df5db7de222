#!/usr/bin/env node
// Checks packed tarballs (`node scripts/packed-links.mjs <tarball>...`, run by .ci/run after `npm pack`): every
// relative link in every Markdown file of a tarball (its README, and the guides it ships) must name a file or folder
// inside that tarball, since a user reads them in node_modules, where the repository around the package is gone.
// Exits 1 listing each link that does not resolve. Its link extraction also serves test/cpu/repository.test.ts.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * The link targets of a Markdown text, in order: inline links and images `[text](target "title")`, reference
 * definitions `[name]: target`, and HTML `href`/`src` attributes. Fenced code blocks and inline code spans are left
 * out, since code such as `[Symbol.dispose]()` is no link.
 * @param {string} markdown
 * @returns {string[]}
 */
export function markdownLinks(markdown) {
  const targets = [];
  let fence = null;
  for (const line of markdown.split('\n')) {
    const opening = /^\s*(```|~~~)/.exec(line);
    if (opening !== null) {
      if (fence === null) fence = opening[1];
      else if (fence === opening[1]) fence = null;
      continue;
    }
    if (fence !== null) continue;
    const text = line.replace(/(`+)[^`]*?\1/g, '');
    for (const match of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) targets.push(match[1]);
    for (const match of text.matchAll(/^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?/g)) targets.push(match[1]);
    for (const match of text.matchAll(/\b(?:href|src)="([^"]+)"/g)) targets.push(match[1]);
  }
  return targets;
}

/**
 * The path a link target names, relative to the folder of the file that holds it, or null for a target that is not
 * a relative path: a URL with a scheme (`https:`, `mailto:`), a protocol-relative or absolute path, or an anchor in
 * the same file. The anchor and query are dropped and percent-escapes decoded.
 * @param {string} target
 * @returns {string | null}
 */
export function relativeLinkPath(target) {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('/') || target.startsWith('#')) return null;
  return decodeURIComponent(target.replace(/[?#].*$/s, ''));
}

/**
 * Every relative link of the Markdown files in `tarball` that names no file or folder inside it, as lines
 * `<file>: <target>`.
 * @param {string} tarball the path of a `.tgz` made by `npm pack`
 * @returns {{ files: number, links: number, broken: string[] }} Markdown files and relative links checked
 */
export function brokenLinks(tarball) {
  const entries = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8', maxBuffer: 64 << 20 })
    .split('\n')
    .filter((entry) => entry.startsWith('package/') && !entry.endsWith('/'))
    .map((entry) => entry.slice('package/'.length));
  const shipped = new Set(entries);
  const folders = new Set(entries.flatMap((entry) => entry.split('/').slice(0, -1).map((_, i, parts) => parts.slice(0, i + 1).join('/'))));
  const broken = [];
  let links = 0;
  const markdownFiles = entries.filter((entry) => entry.toLowerCase().endsWith('.md'));
  for (const file of markdownFiles) {
    const text = execFileSync('tar', ['-xzOf', tarball, `package/${file}`], { encoding: 'utf8', maxBuffer: 64 << 20 });
    for (const target of markdownLinks(text)) {
      const relative = relativeLinkPath(target);
      if (relative === null) continue;
      links += 1;
      const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(file), relative)).replace(/\/$/, '');
      const inside = resolved !== '..' && !resolved.startsWith('../');
      if (!inside || !(shipped.has(resolved) || folders.has(resolved) || resolved === '.')) broken.push(`${file}: ${target}`);
    }
  }
  return { files: markdownFiles.length, links, broken };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const tarballs = process.argv.slice(2);
  if (tarballs.length === 0) {
    console.error('usage: node scripts/packed-links.mjs <tarball>...');
    process.exit(64);
  }
  let failed = false;
  for (const tarball of tarballs) {
    const { files, links, broken } = brokenLinks(tarball);
    const name = path.basename(tarball);
    if (broken.length === 0) {
      console.log(`${name}: ${links} relative links in ${files} Markdown files, each to a file or folder in the tarball`);
      continue;
    }
    failed = true;
    console.error(`${name}: these relative links name nothing in the tarball (ship the file, or link to the repository instead):`);
    for (const line of broken) console.error(`  ${line}`);
  }
  process.exit(failed ? 1 : 0);
}
