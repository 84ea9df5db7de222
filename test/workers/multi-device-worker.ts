// Worker for test/multi-device.test.ts: runs test/support/interleave.ts with workerData.seed and workerData.rounds and
// posts { failures }.
import { parentPort, workerData } from 'node:worker_threads';

import { interleave } from '../support/interleave.js';

const { seed, rounds } = workerData as { seed: number; rounds: number };
parentPort!.postMessage({ failures: await interleave(seed, rounds) });
