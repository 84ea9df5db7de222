// Every soak operation, by concept. To cover a new part of the API, add a table here (or entries to one).
import { onSimulatedDriver } from '../../support/gpu.js';
import type { Operation } from '../operation.js';
import { bufferViewOperations } from './buffer-views.js';
import { deviceOperations } from './devices.js';
import { eventOperations } from './events.js';
import { graphOperations } from './graphs.js';
import { kernelOperations } from './kernels.js';
import { managedOperations } from './managed.js';
import { memoryOperations } from './memory.js';
import { miscOperations } from './misc.js';
import { poolOperations } from './pools.js';
import { streamOperations } from './streams.js';

const every: readonly Operation[] = [
  ...streamOperations,
  ...eventOperations,
  ...memoryOperations,
  ...poolOperations,
  ...kernelOperations,
  ...miscOperations,
  ...bufferViewOperations,
  ...managedOperations,
  ...graphOperations,
  ...deviceOperations,
];

/** The operations each thread draws from. Under the simulated driver, those it cannot run are left out (each says why
 * with its `notSimulated` key), so a seed there replays the same steps as any other run there. */
export const operations: readonly Operation[] = every.filter((op) => !(onSimulatedDriver && op.notSimulated));

/** The operations left out of {@link operations} under the simulated driver; none elsewhere. */
export const leftOut: readonly Operation[] = every.filter((op) => !operations.includes(op));
