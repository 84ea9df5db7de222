#!/usr/bin/env node
// Builds the prebuilt Node-API binaries that the package ships: every target of binding.gyp, for linux-x64 and
// linux-arm64, into prebuilds/<platform>-<arch>/ (`npm run prebuilds`). The library's binary goes where
// node-gyp-build looks (node.napi.glibc.node); each other target's goes into a folder named after the target, which
// node-gyp-build never picks for the library (src/native.ts addonPath finds both). The architecture that is not the
// machine's is cross-compiled with Debian's cross compiler (g++-aarch64-linux-gnu or g++-x86-64-linux-gnu), and the
// machine's own is built last, so build/ is left with binaries this machine can load. Prints the highest glibc symbol
// version each binary needs.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const LIBRARY_TARGET = 'cuda_stream_pool';
// Node's arch name -> the GNU triplet of Debian's toolchain for it.
const TRIPLETS = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' };

const targets = JSON.parse(readFileSync(path.join(root, 'binding.gyp'), 'utf8')).targets.map((t) => t.target_name);
if (!targets.includes(LIBRARY_TARGET)) throw new Error(`binding.gyp has no target ${LIBRARY_TARGET}`);
const arches = Object.keys(TRIPLETS).sort((a, b) => (a === process.arch) - (b === process.arch));
const nodeGyp = createRequire(import.meta.url).resolve('node-gyp/bin/node-gyp.js');
// Node's headers: npm's nodedir setting, else those installed beside this Node (Node-API headers are the same for
// every architecture), so that nothing is downloaded.
const installed = path.resolve(path.dirname(process.execPath), '..');
const nodedir =
  process.env.npm_config_nodedir ?? (existsSync(path.join(installed, 'include', 'node', 'node_api.h')) ? installed : undefined);

function run(file, args, env = process.env) {
  execFileSync(file, args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], env });
}

/** The highest GLIBC_x.y symbol version that `file` needs, from its dynamic symbol table. */
function glibcFloor(objdump, file) {
  const table = execFileSync(objdump, ['-T', file], { encoding: 'utf8' });
  const versions = [...table.matchAll(/GLIBC_(\d+)\.(\d+)/g)].map((m) => [Number(m[1]), Number(m[2])]);
  versions.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const [major, minor] = versions.at(-1) ?? [0, 0];
  return `${major}.${minor}`;
}

rmSync(path.join(root, 'prebuilds'), { recursive: true, force: true });
for (const arch of arches) {
  const native = arch === process.arch;
  const tools = (tool) => (native ? tool : `${TRIPLETS[arch]}-${tool}`);
  const env = native
    ? process.env
    : { ...process.env, CC: tools('gcc'), CXX: tools('g++'), LINK: tools('g++'), AR: tools('ar') };
  console.log(`prebuilds: building ${targets.join(', ')} for linux-${arch}${native ? '' : ` with ${tools('g++')}`}`);
  run(process.execPath, [nodeGyp, 'rebuild', `--arch=${arch}`, '--jobs=max', ...(nodedir ? [`--nodedir=${nodedir}`] : [])], env);
  for (const target of targets) {
    const built = path.join(root, 'build', 'Release', `${target}.node`);
    const folder = path.join(root, 'prebuilds', `linux-${arch}`, ...(target === LIBRARY_TARGET ? [] : [target]));
    const shipped = path.join(folder, 'node.napi.glibc.node');
    mkdirSync(folder, { recursive: true });
    copyFileSync(built, shipped);
    run(tools('strip'), ['--strip-unneeded', shipped]);
    console.log(`prebuilds: ${path.relative(root, shipped)} needs glibc ${glibcFloor(tools('objdump'), shipped)}`);
  }
}
