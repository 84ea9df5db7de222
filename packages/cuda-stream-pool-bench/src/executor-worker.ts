// The worker-thread side of `bench --workers N`: a worker attaches to the main thread's pool, prepares its own inputs
// and slots, and runs the share of tasks the main thread sends it. See batch.ts for the work and executor.ts for the
// other side of the messages.
import { parentPort, workerData } from 'node:worker_threads';

import { BatchThread, type BatchSetup } from './batch.js';
import type { Mode } from './modes.js';
import type { BatchResult } from './task.js';

/** Main thread → worker. */
export type ToWorker = { kind: 'run'; mode: Mode; first: number; count: number; timed: boolean } | { kind: 'exit' };

/** Worker → main thread. */
export type FromWorker =
  | { kind: 'ready' }
  | { kind: 'tick'; tasks: number }
  | { kind: 'done'; result: BatchResult }
  | { kind: 'failed'; name: string; message: string; stack: string | undefined };

function failure(error: unknown): FromWorker {
  const e = error instanceof Error ? error : new Error(String(error));
  return { kind: 'failed', name: e.name, message: e.message, stack: e.stack };
}

async function main(): Promise<void> {
  const port = parentPort;
  if (!port) return; // loaded outside a worker: nothing to do
  const post = (message: FromWorker) => port.postMessage(message);
  let thread: BatchThread;
  try {
    thread = await BatchThread.create(workerData as BatchSetup);
  } catch (error) {
    post(failure(error));
    port.close();
    return;
  }
  post({ kind: 'ready' });
  // One message at a time: the main thread sends the next run only after this one answered.
  port.on('message', (message: ToWorker) => {
    if (message.kind === 'exit') {
      thread.dispose();
      port.close();
      return;
    }
    const tick = message.timed ? (tasks: number) => post({ kind: 'tick', tasks }) : undefined;
    thread.run(message.mode, message.first, message.count, message.timed, tick).then(
      (result) => post({ kind: 'done', result }),
      (error: unknown) => post(failure(error)),
    );
  });
}

await main();
