// Prints the CUDA toolkit include directory for binding.gyp: CUDA_PATH, then CUDA_HOME, then /usr/local/cuda.
// Only cuda.h is needed at build time; the addon never links libcuda (it is opened at run time).
const fs = require('node:fs');
const path = require('node:path');
const places = [
  ['CUDA_PATH', process.env.CUDA_PATH],
  ['CUDA_HOME', process.env.CUDA_HOME],
  ['default', '/usr/local/cuda'],
];
for (const [, root] of places) {
  if (root && fs.existsSync(path.join(root, 'include', 'cuda.h'))) {
    process.stdout.write(path.join(root, 'include'));
    process.exit(0);
  }
}
const tried = places.map(([name, root]) => `${name}=${root ?? '(unset)'}`).join(', ');
process.stderr.write(
  `cuda-stream-pool: cannot find cuda.h of the CUDA toolkit; looked in <root>/include for ${tried}.\n` +
    'Install the CUDA toolkit (headers only are enough) or set CUDA_PATH to its root.\n',
);
process.exit(1);
