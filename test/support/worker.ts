// Starts a worker script and reads its messages in order, for tests that talk to workers step by step.
import { Worker } from 'node:worker_threads';

export interface StartedWorker {
  worker: Worker;
  /** Messages received and not yet taken by next(). */
  messages: unknown[];
  /** The next message, now or when it arrives. */
  next: () => Promise<unknown>;
  /** Resolves with the exit code; rejects with the worker's uncaught error. */
  exit: Promise<number>;
}

export function startWorker(url: URL, data: Record<string, unknown>): StartedWorker {
  const worker = new Worker(url, { workerData: data });
  const messages: unknown[] = [];
  const waiting: Array<(m: unknown) => void> = [];
  worker.on('message', (m) => (waiting.length > 0 ? waiting.shift()!(m) : messages.push(m)));
  const exit = new Promise<number>((resolve, reject) => {
    worker.on('error', reject);
    worker.on('exit', resolve);
  });
  const next = () => (messages.length > 0 ? Promise.resolve(messages.shift()) : new Promise<unknown>((resolve) => waiting.push(resolve)));
  return { worker, messages, next, exit };
}
