#!/usr/bin/env node
// The command-line program `cuda-stream-pool`. Its main job is `bench`.
import { Command } from 'commander';

import { cuda } from '../index.js';

const program = new Command('cuda-stream-pool')
  .description('CUDA streams, events, memory and kernels for Node.js, built around a shared stream pool')
  .showHelpAfterError();

program
  .command('bench')
  .description('run the executor benchmark: many short tasks (copy in, kernel, copy out) on one GPU')
  .action(() => {
    if (!cuda.available) {
      console.error(`cuda-stream-pool bench needs a CUDA GPU and cannot run here: ${cuda.unavailableReason}`);
      process.exit(2);
    }
    console.error('cuda-stream-pool bench: not built yet');
    process.exit(1);
  });

program.exitOverride((error) => process.exit(error.exitCode === 0 ? 0 : 64));
await program.parseAsync(process.argv);
