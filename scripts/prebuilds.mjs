#!/usr/bin/env node
// Builds the prebuilt Node-API binaries that the packages ship, for linux-x64 and linux-arm64 (`npm run prebuilds`):
// each package of packages/ with a binding.gyp gets its one addon into its prebuilds/<platform>-<arch>/, as
// node.napi.glibc.node, where node-gyp-build looks at install time. The architecture that is not the machine's is
// cross-compiled with Debian's cross compiler (g++-aarch64-linux-gnu or g++-x86-64-linux-gnu), and the machine's own
// is built last, so each build/ is left with binaries this machine can load. Prints the highest glibc symbol version
// each binary needs.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repository = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// Node's arch name -> the GNU triplet of Debian's toolchain for it.
const TRIPLETS = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' };

/** Each package with an addon: its folder and its binding.gyp's one target. */
const packages = readdirSync(path.join(repository, 'packages'))
  .map((name) => path.join(repository, 'packages', name))
  .filter((root) => existsSync(path.join(root, 'binding.gyp')))
  .map((root) => {
    const targets = JSON.parse(readFileSync(path.join(root, 'binding.gyp'), 'utf8')).targets.map((t) => t.target_name);
    if (targets.length !== 1) throw new Error(`${root}/binding.gyp has ${targets.length} targets; a package ships one addon`);
    return { root, target: targets[0] };
  });
const arches = Object.keys(TRIPLETS).sort((a, b) => (a === process.arch) - (b === process.arch));
const nodeGyp = createRequire(import.meta.url).resolve('node-gyp/bin/node-gyp.js');
// Node's headers: npm's nodedir setting, else those installed beside this Node (Node-API headers are the same for
// every architecture), so that nothing is downloaded.
const installed = path.resolve(path.dirname(process.execPath), '..');
const nodedir =
  process.env.npm_config_nodedir ?? (existsSync(path.join(installed, 'include', 'node', 'node_api.h')) ? installed : undefined);

function run(file, args, cwd, env = process.env) {
  execFileSync(file, args, { cwd, stdio: ['ignore', 'inherit', 'inherit'], env });
}

/** The highest GLIBC_x.y symbol version that `file` needs, from its dynamic symbol table. */
function glibcFloor(objdump, file) {
  const table = execFileSync(objdump, ['-T', file], { encoding: 'utf8' });
  const versions = [...table.matchAll(/GLIBC_(\d+)\.(\d+)/g)].map((m) => [Number(m[1]), Number(m[2])]);
  versions.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const [major, minor] = versions.at(-1) ?? [0, 0];
  return `${major}.${minor}`;
}

for (const { root } of packages) rmSync(path.join(root, 'prebuilds'), { recursive: true, force: true });
for (const arch of arches) {
  const native = arch === process.arch;
  const tools = (tool) => (native ? tool : `${TRIPLETS[arch]}-${tool}`);
  const env = native
    ? process.env
    : { ...process.env, CC: tools('gcc'), CXX: tools('g++'), LINK: tools('g++'), AR: tools('ar') };
  for (const { root, target } of packages) {
    console.log(`prebuilds: building ${target} for linux-${arch}${native ? '' : ` with ${tools('g++')}`}`);
    run(process.execPath, [nodeGyp, 'rebuild', `--arch=${arch}`, '--jobs=max', ...(nodedir ? [`--nodedir=${nodedir}`] : [])], root, env);
    const built = path.join(root, 'build', 'Release', `${target}.node`);
    const folder = path.join(root, 'prebuilds', `linux-${arch}`);
    const shipped = path.join(folder, 'node.napi.glibc.node');
    mkdirSync(folder, { recursive: true });
    copyFileSync(built, shipped);
    run(tools('strip'), ['--strip-unneeded', shipped], root);
    console.log(`prebuilds: ${path.relative(repository, shipped)} needs glibc ${glibcFloor(tools('objdump'), shipped)}`);
  }
}
