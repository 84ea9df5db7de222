// An executor process of `cuda-stream-pool bench --processes`: the child process that runs one device's share of the
// tasks with a pool, threads and CUDA context of its own, as one executor of a cluster framework would. The parent
// (runners.ts, ProcessRunner) sends the setup, then one run at a time, then exit.
import { StreamPool } from 'cuda-stream-pool';
import { createRunner, ThreadFailure, type FromProcess, type Runner, type ToProcess } from './runners.js';

function failure(error: unknown): FromProcess {
  const e = error instanceof Error ? error : new Error(String(error));
  return { kind: 'failed', name: e.name, message: e.message, stack: e.stack, within: e instanceof ThreadFailure ? e.where : undefined };
}

const post = (message: FromProcess) => process.send!(message);
let pool: StreamPool | undefined;
let runner: Runner | undefined;

process.on('message', (message: ToProcess) => {
  if (message.kind === 'setup') {
    const { setup, workers, concurrency, poolSize } = message.setup;
    try {
      pool = poolSize > 0 ? new StreamPool({ device: setup.device, size: poolSize }) : undefined;
    } catch (error) {
      post(failure(error));
      return;
    }
    createRunner(setup, pool, workers, concurrency).then(
      (created) => {
        runner = created;
        post({ kind: 'ready' });
      },
      (error: unknown) => post(failure(error)),
    );
  } else if (message.kind === 'run') {
    const tick = message.timed ? (tasks: number) => post({ kind: 'tick', tasks }) : () => {};
    runner!.run(message.mode, message.first, message.count, message.timed, tick).then(
      (results) => post({ kind: 'done', results }),
      (error: unknown) => post(failure(error)),
    );
  } else {
    void (async () => {
      await runner?.dispose(false);
      pool?.destroy();
      process.disconnect();
    })();
  }
});
// The parent gone (killed, or it exited after a failure) ends this process too.
process.on('disconnect', () => process.exit(0));
