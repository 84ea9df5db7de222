#!/usr/bin/env node
// Run by each package's prepack, in the package's folder: refuses to pack a package whose prebuilt binaries are
// missing, since its tarball would then compile the addon on every install and fail where there is no C++ compiler.
// CUDA_STREAM_POOL_PACK_WITHOUT_PREBUILDS=1 packs anyway (to look at a tarball's contents, say); see CONTRIBUTING.md.
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

// The platforms scripts/prebuilds.mjs builds, where node-gyp-build looks for them at install time.
const expected = ['linux-x64', 'linux-arm64'].map((platform) => path.join('prebuilds', platform, 'node.napi.glibc.node'));
const allow = 'CUDA_STREAM_POOL_PACK_WITHOUT_PREBUILDS';

const name = JSON.parse(readFileSync('package.json', 'utf8')).name;
const missing = expected.filter((file) => !existsSync(file) || statSync(file).size === 0);
if (missing.length > 0) {
  if (process.env[allow] === '1') {
    console.warn(`${name}: packing without ${missing.join(' and ')} (${allow}=1): installing this tarball compiles the addon`);
  } else {
    console.error(
      `${name}: refusing to pack: ${missing.join(' and ')} ${missing.length === 1 ? 'is' : 'are'} missing in ${process.cwd()}, ` +
        'so installing the tarball would compile the addon and fail without a C++ compiler. Build the binaries with ' +
        `\`npm run prebuilds\` at the repository's root, or set ${allow}=1 to pack without them.`,
    );
    process.exit(1);
  }
}
