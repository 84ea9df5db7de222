// The fault sweep's workloads, by name. A new workload is a file in this folder exporting `workload`, and one line
// here.
import type { Workload } from '../workload.js';
import { workload as copies } from './copies.js';
import { workload as devices } from './devices.js';
import { workload as graphs } from './graphs.js';
import { workload as kernels } from './kernels.js';
import { workload as memory } from './memory.js';
import { workload as partitions } from './partitions.js';
import { workload as pool } from './pool.js';

/** Every workload of the sweep, in the order it runs them. */
export const workloads: readonly Workload[] = [copies, kernels, graphs, memory, pool, partitions, devices];
