// Runs a snippet of ESM in a child Node.js process (lifecycle, fault and no-GPU tests), importing the package by name.
import { spawn, spawnSync } from 'node:child_process';

import { repositoryRoot } from './paths.js';

export interface ChildResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  durationMs: number;
}

/** Runs `source` as an ES module from the repository root, with `env` added to this process's environment;
 * `launcher`, when given, is a command that runs Node.js for it (for example `['taskset', '-c', '0']`). */
export function runChild(source: string, env: Record<string, string> = {}, timeoutMs = 60_000, launcher: string[] = []): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const [program, ...args] = [...launcher, process.execPath, '--input-type=module', '-e', source];
    const child = spawn(program!, args, {
      cwd: repositoryRoot,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      // Every thread's native stack, where gdb is installed and may attach, so that a timeout says where it was stuck.
      const dump = spawnSync('gdb', ['-p', String(child.pid), '-batch', '-ex', 'thread apply all bt'], { encoding: 'utf8', timeout: 30_000 });
      stderr += `\n[runChild: killed after ${timeoutMs} ms]\n${dump.stdout ?? ''}${dump.error ? `gdb: ${dump.error.message}\n` : ''}`;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, durationMs: performance.now() - started });
    });
  });
}
