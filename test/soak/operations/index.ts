// Every soak operation, by concept. To cover a new part of the API, add a table here (or entries to one).
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

export const operations: readonly Operation[] = [
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
