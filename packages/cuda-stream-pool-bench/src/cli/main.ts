#!/usr/bin/env node
// The command-line program `cuda-stream-pool`. Its main job is `bench`, the executor benchmark; `bench micro` runs the
// per-call micro-benchmarks. Exit codes: 0 done, 1 the run failed (a task did not verify, or CUDA failed), 2 no usable
// GPU (the reason is printed), 64 a usage error (every option is checked before the GPU is touched).
// `report` renders a saved `bench --json` output (tables, timeline page, trace file) without a GPU.
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { Command, type CommanderError } from 'commander';

import { cuda, CudaError, Device } from 'cuda-stream-pool';
import { MODES, MODE_DESCRIPTIONS } from '../modes.js';
import { packageVersion } from '../package.js';
import { printable } from '../printable.js';
import { ThreadFailure } from '../runners.js';
import type { BenchResult } from '../schema.js';
import {
  checkCombinations,
  devicesOption,
  EXIT_FAILED,
  EXIT_NO_GPU,
  EXIT_USAGE,
  integerOption,
  LIMITS,
  modeOption,
  timelineOption,
  traceOption,
  type BenchCliOptions,
} from './options.js';

/** Writes `message` and a line feed to stderr, its control characters escaped (it may quote a path, a value the user
 * typed or a results file). */
function printError(message: string): void {
  console.error(printable(message));
}

/** Writes `text` (control characters escaped) to stdout and exits with `code` once it is flushed (a pipe may take a while to drain a large JSON),
 * or with 1 naming the error when stdout cannot be written. Exiting explicitly, rather than when the event loop
 * empties, keeps a forgotten handle from hanging the CLI. */
function finish(code: number, text: string): void {
  text = printable(text);
  // A reader that closed the pipe early (`| head`) is not a failure; a full disk or another write error is.
  process.stdout.on('error', () => {});
  process.stdout.write(text, (error) => {
    if (error && (error as NodeJS.ErrnoException).code !== 'EPIPE') {
      printError(`cuda-stream-pool: cannot write the output to stdout: ${error.message}`);
      process.exit(EXIT_FAILED);
    }
    process.exit(code);
  });
}

/** Exits 2 with cuda.unavailableReason when there is no usable GPU; the README's quick start and CI rely on it. */
function requireGpu(command: string): void {
  if (cuda.available) return;
  printError(`cuda-stream-pool ${command} needs a CUDA GPU and cannot run here: ${cuda.unavailableReason}`);
  process.exit(EXIT_NO_GPU);
}

/** The ordinals of `count` visible devices, in words: "0 (the one visible device)", "from 0 to 3 (the visible devices)". */
function visibleOrdinals(count: number): string {
  return count === 1 ? '0 (the one visible device)' : `from 0 to ${count - 1} (the visible devices)`;
}

/** Checks `--device` against the visible devices, which only the driver knows (so after requireGpu). */
function requireDevice(command: Command, ordinal: number): void {
  const count = Device.count();
  if (ordinal < count) return;
  command.error(`error: option '--device <ordinal>' argument '${ordinal}' is invalid. Accepted: ${count === 1 ? '' : 'an integer '}${visibleOrdinals(count)}.`, {
    exitCode: EXIT_USAGE,
    code: 'cuda-stream-pool.usage',
  });
}

/** The devices of `bench`: `--devices` (every visible one for `all`) or `--device`, each checked against the visible
 * devices (so after requireGpu). */
function resolveDevices(command: Command, options: BenchCliOptions): number[] {
  if (options.devices === undefined) {
    requireDevice(command, options.device);
    return [options.device];
  }
  const count = Device.count();
  if (options.devices === 'all') return Array.from({ length: count }, (_, ordinal) => ordinal);
  const missing = options.devices.find((ordinal) => ordinal >= count);
  if (missing !== undefined)
    command.error(`error: option '--devices <list|all>' names device ${missing}, which is not visible. Accepted: ${count === 1 ? 'ordinal ' : 'ordinals '}${visibleOrdinals(count)}, or all.`, {
      exitCode: EXIT_USAGE,
      code: 'cuda-stream-pool.usage',
    });
  return options.devices;
}

/** Prints a failed run's error: a verification failure by its message alone, a failure the driver reported
 * (CudaError, whose message names the call, the device and the stream) by its name and message, anything else, a
 * bug, with its stack. A worker's or executor process's error (rebuilt as a ThreadFailure) is told the same way,
 * by its name, followed by where it happened. */
function reportFailure(command: string, error: unknown): never {
  const e = error instanceof Error ? error : new Error(String(error));
  const where = e instanceof ThreadFailure ? ` (in ${e.where})` : '';
  if (e.name === 'VerificationError') printError(`cuda-stream-pool ${command}: ${e.message}${where}`);
  else if (e instanceof CudaError || (e instanceof ThreadFailure && e.name === 'CudaError'))
    printError(`cuda-stream-pool ${command} failed: ${e.name}: ${e.message}${where}`);
  else printError(`cuda-stream-pool ${command} failed: ${e.stack ?? `${e.name}: ${e.message}`}`);
  process.exit(EXIT_FAILED);
}

const range = (limits: readonly [number, number]) => `${limits[0]} to ${limits[1]}`;

/** The command's name as typed, from the program down: `cuda-stream-pool bench micro`. */
function commandPath(command: Command): string {
  return command.parent ? `${commandPath(command.parent)} ${command.name()}` : command.name();
}

/** The subcommands of `command`, quoted, for an error: `'bench', 'report'`. */
function commandNames(command: Command): string {
  return command.commands.map((c) => `'${c.name()}'`).join(', ');
}

/** Adds to commander's unknown-option error the commands that do take the option, so that an option given to the
 * wrong subcommand (`bench micro --tasks 5`) says where it belongs, and to its unknown-command error the commands
 * there are. Other messages pass unchanged. */
function helpfulError(message: string): string {
  const flag = /unknown option '([^']+)'/.exec(message)?.[1];
  if (/unknown command '/.test(message)) return `${message.trimEnd()}\nCommands: ${commandNames(program)}.\n`;
  if (flag === undefined) return message;
  const taking: string[] = [];
  const visit = (command: Command) => {
    if (command.options.some((option) => option.long === flag || option.short === flag)) taking.push(`'${commandPath(command)}'`);
    command.commands.forEach(visit);
  };
  visit(program);
  if (taking.length === 0) return message;
  return `${message.trimEnd()}\n'${flag}' is an option of ${taking.join(' and ')} only.\n`;
}

const program = new Command('cuda-stream-pool')
  .description('The benchmark of cuda-stream-pool (CUDA streams, events, memory and kernels for Node.js, built around a shared stream pool): measure the pool against a native C++ baseline on a GPU, and render saved results without one')
  // Set before the commands are added: subcommands copy these settings when they are created.
  .exitOverride((error: CommanderError) => process.exit(error.exitCode === 0 ? 0 : EXIT_USAGE))
  .enablePositionalOptions()
  .version(packageVersion(), '-v, --version', 'print the version of cuda-stream-pool-bench (the benchmark and this command)')
  .configureOutput({ outputError: (message, write) => write(printable(helpfulError(message))) })
  .showHelpAfterError('(add --help to see the options and the values they accept)')
  .addHelpText('after', "\nExit codes: 0 done; 64 a bad option or an unknown command; each command's --help lists its own.");

const bench = program
  .command('bench')
  .description(
    'run the executor benchmark: many short tasks (copy a partition in, run a kernel, copy the result out, verify it) ' +
      'on one GPU or spread over several (--devices), in each mode, and print tasks/s, GB/s, latency, speedup over legacy ' +
      'and the fraction of the overlap bound',
  )
  .option('--tasks <count>', `tasks per run (${range(LIMITS.tasks)})`, integerOption(...LIMITS.tasks), 512)
  .option('--concurrency <count>', `tasks in flight in total (${range(LIMITS.concurrency)})`, integerOption(...LIMITS.concurrency), 32)
  .option(
    '--workers <count>',
    `worker threads sharing one pool; tasks and concurrency are split among them; 0: the main thread runs every task (${range(LIMITS.workers)})`,
    integerOption(...LIMITS.workers),
    0,
  )
  .option('--elements <count>', `float32 elements per partition (${range(LIMITS.elements)})`, integerOption(...LIMITS.elements), 1_048_576)
  .option(
    '--intensity <steps>',
    `fmaf steps per element in the kernel (${range(LIMITS.intensity)}; default: calibrated so the kernel takes about as long as one copy)`,
    integerOption(...LIMITS.intensity),
  )
  .option('--mode <modes>', `modes to run: ${MODES.join(', ')}; a comma list, and the option may repeat (default: all)`, modeOption)
  .option('--pool-size <streams>', `streams in the pool of the pool and lease modes (${range(LIMITS.poolSize)})`, integerOption(...LIMITS.poolSize), 32)
  .option('--runs <count>', `measured runs per mode, after a warm-up (${range(LIMITS.runs)})`, integerOption(...LIMITS.runs), 5)
  .option('--device <ordinal>', `the GPU (${range(LIMITS.device)}, at most the visible devices - 1)`, integerOption(...LIMITS.device), 0)
  .option(
    '--devices <list|all>',
    'spread the tasks over several GPUs: all, or a comma list of ordinals; each device gets its own slots (--concurrency each), pool, pinned inputs and threads (--workers each), and the report adds a row per device (instead of --device)',
    devicesOption,
  )
  .option(
    '--processes',
    'also run every mode with one executor process per device (a child process with its own CUDA context, pool, pinned inputs and --workers threads), and report those rows, per process and in total, beside the one-process rows',
    false,
  )
  .option('--json', 'print the results as JSON instead of tables (the schema: src/schema.ts, see the README)', false)
  .option(
    '--timeline <file.html>',
    'also write a self-contained HTML timeline: per mode, engine occupancy lanes and a row per stream, a bar per task phase',
    timelineOption,
  )
  .option('--trace <file.json>', 'also write the task phases as a Trace Event file, for Perfetto (ui.perfetto.dev) or chrome://tracing', traceOption)
  .option('--phases', "record every task's phase times (4 timing events each) and print the last run's in --json (implied by --timeline and --trace)", false)
  .option('-q, --quiet', 'no progress bar (there is none either when stderr is not a terminal)', false)
  .addHelpText(
    'after',
    `\nModes:\n${MODES.map((m) => `  ${m.padEnd(11)} ${MODE_DESCRIPTIONS[m]}`).join('\n')}\n\n` +
      'Exit codes: 0 done; 1 a task did not verify or CUDA failed; 2 no usable GPU (the reason is printed); 64 a bad option.',
  )
  .action(async (options: BenchCliOptions, command: Command) => {
    if (command.args.length > 0)
      command.error(`error: unknown benchmark '${command.args[0]}'. Accepted: no argument (the executor benchmark) or 'micro'.`, {
        exitCode: EXIT_USAGE,
        code: 'cuda-stream-pool.usage',
      });
    const checked = checkCombinations(options, process.env);
    if ('error' in checked) command.error(checked.error, { exitCode: EXIT_USAGE, code: 'cuda-stream-pool.usage' });
    const corrupt = 'corrupt' in checked ? checked.corrupt : undefined;
    if (options.devices !== undefined && command.getOptionValueSource('device') === 'cli')
      command.error("error: options '--device <ordinal>' and '--devices <list|all>' cannot be used together: give one GPU with --device, or several with --devices.", {
        exitCode: EXIT_USAGE,
        code: 'cuda-stream-pool.usage',
      });
    requireGpu('bench');
    const devices = resolveDevices(command, options);

    // Loaded only now: the benchmark's modules need the GPU-side API, and usage errors must not depend on them.
    const { runExecutorBenchmark } = await import('../executor.js');
    const { createProgress } = await import('../progress.js');
    const { formatReport } = await import('../report.js');
    const modes = options.mode ?? [...MODES];
    const progress = createProgress((options.processes ? 2 : 1) * modes.length * options.runs * options.tasks, options.quiet);
    let result: Awaited<ReturnType<typeof runExecutorBenchmark>>;
    try {
      result = await runExecutorBenchmark({
        tasks: options.tasks,
        concurrency: options.concurrency,
        workers: options.workers,
        elements: options.elements,
        intensity: options.intensity,
        modes,
        poolSize: options.poolSize,
        runs: options.runs,
        devices,
        corrupt,
        phaseTimes: options.phases || options.timeline !== undefined || options.trace !== undefined,
        processes: options.processes,
        progress,
      });
    } catch (error) {
      progress.stop();
      reportFailure('bench', error);
    }
    progress.stop();
    const written = await writeOutputs('bench', result, { html: options.timeline, trace: options.trace });
    if (options.json) {
      if (written && !options.quiet) process.stderr.write(printable(written));
      return finish(0, `${JSON.stringify(result, null, 2)}\n`);
    }
    return finish(0, formatReport(result) + written);
  });

/** Writes the timeline page and the trace file that were asked for; returns the lines saying where they went. Each is
 * built first, then written: a failed write exits 1 naming the file and the option (the paths were checked writable
 * before the run), and a failure to build one (a bug) exits 1 with its stack, never blaming the path. */
async function writeOutputs(command: string, result: BenchResult, files: { html?: string; trace?: string }): Promise<string> {
  const { timelineHtml } = await import('../timeline.js');
  const { traceText } = await import('../trace.js');
  const outputs = [
    { file: files.html, what: 'timeline', option: command === 'report' ? '--html' : '--timeline', render: timelineHtml },
    { file: files.trace, what: 'trace', option: '--trace', render: traceText },
  ];
  let written = '';
  for (const { file, what, option, render } of outputs) {
    if (file === undefined) continue;
    let text: string;
    try {
      text = render(result);
    } catch (error) {
      printError(`cuda-stream-pool ${command}: could not build the ${what}: ${(error as Error).stack ?? String(error)}`);
      process.exit(EXIT_FAILED);
    }
    try {
      writeFileSync(file, text);
    } catch (error) {
      printError(`cuda-stream-pool ${command}: cannot write the ${what} to ${file}: ${(error as Error).message}. Pass ${option} a writable path.`);
      process.exit(EXIT_FAILED);
    }
    written += `${what} written to ${file}\n`;
  }
  return written;
}

program
  .command('report')
  .description(
    'render a saved `bench --json` output without a GPU: the tables, and with --html or --trace the timeline page or ' +
      'the trace file (these need a run with --phases, --timeline or --trace)',
  )
  .argument('<results.json>', 'the output of `cuda-stream-pool bench --json`')
  .allowExcessArguments(false)
  .option('--html <file.html>', 'write the timeline page (as bench --timeline does)', timelineOption)
  .option('--trace <file.json>', 'write the Trace Event file (as bench --trace does)', traceOption)
  .addHelpText('after', '\nExit codes: 0 done; 1 writing an output failed; 64 a bad option, results file or output path (checked before anything is written).')
  .action(async (file: string, options: { html?: string; trace?: string }, command: Command) => {
    // What is wrong is the file, not an option: no pointer to --help.
    const badFile = (message: string): never => {
      printError(`cuda-stream-pool report: ${message}`);
      return process.exit(EXIT_USAGE);
    };
    for (const [option, output] of [['--html', options.html], ['--trace', options.trace]] as const)
      if (output !== undefined && samePath(output, file))
        command.error(`error: option '${option}' names ${output}, which is the results file ${file}; writing it would overwrite the input. Pass another path.`, {
          exitCode: EXIT_USAGE,
          code: 'cuda-stream-pool.usage',
        });
    const { parseBenchResults } = await import('../results.js');
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      return badFile(`cannot read the results file ${file}: ${(error as Error).message}.`);
    }
    let result: BenchResult;
    try {
      result = parseBenchResults(text, file);
    } catch (error) {
      return badFile((error as Error).message);
    }
    if ((options.html !== undefined || options.trace !== undefined) && !result.modes.some((m) => m.lastRunTasks?.length))
      command.error(`error: ${file} holds no phase times, which --html and --trace draw. Run the benchmark with --phases, --timeline or --trace.`, {
        exitCode: EXIT_USAGE,
        code: 'cuda-stream-pool.usage',
      });
    const written = await writeOutputs('report', result, options);
    const { formatReport } = await import('../report.js');
    return finish(0, formatReport(result) + written);
  });

/** True when `a` and `b` name one file: the same absolute path, or (both existing) the same file through a link. */
function samePath(a: string, b: string): boolean {
  if (path.resolve(a) === path.resolve(b)) return true;
  try {
    const [x, y] = [statSync(a), statSync(b)];
    return x.dev === y.dev && x.ino === y.ino;
  } catch {
    return false; // one of them does not exist yet
  }
}

/** `bench --json micro`: options written before `micro` are parsed by `bench`. The ones `micro` also has (`--device`,
 * `--json`, `--quiet`) count as if written after it; any other is a usage error naming it, rather than ignored. */
function inheritBenchOptions(command: Command, options: { device: number; json: boolean; quiet: boolean }): void {
  const parent = command.parent!;
  const given = parent.options.filter((option) => parent.getOptionValueSource(option.attributeName()) === 'cli');
  const foreign = given.find((option) => !command.options.some((own) => own.long === option.long));
  if (foreign)
    command.error(`error: option '${foreign.flags}' is an option of 'cuda-stream-pool bench' only; 'bench micro' does not take it.`, {
      exitCode: EXIT_USAGE,
      code: 'cuda-stream-pool.usage',
    });
  for (const option of given) {
    const key = option.attributeName() as keyof typeof options;
    if (command.getOptionValueSource(key) !== 'cli') (options as Record<string, unknown>)[key] = parent.getOptionValue(key);
  }
}

bench
  .command('micro')
  .description(
    'run the per-call micro-benchmarks (pool, stream, memory, kernel, graph, peer, partition) in one process, each beside its native baseline ' +
      'from the same run, as a ratio',
  )
  .option('--device <ordinal>', `the GPU (${range(LIMITS.device)}, at most the visible devices - 1)`, integerOption(...LIMITS.device), 0)
  .option('--json', 'print the results as JSON instead of a table', false)
  .option('-q, --quiet', 'no progress lines on stderr (there are none either when stderr is not a terminal)', false)
  .allowExcessArguments(false)
  .addHelpText(
    'after',
    '\nWith CUDA_STREAM_POOL_SUBMISSION=deferred, the rows of calls that queue work (event.record, kernel.launch, a small copy,\n' +
      'GraphExec.launch) time their recording alone, with a target of 150 ns; a kernel row adds the submission thread\'s issue rate.\n' +
      '\nExit codes: 0 done; 1 a group failed or CUDA failed; 2 no usable GPU (the reason is printed); 64 a bad option.',
  )
  .action(async (options: { device: number; json: boolean; quiet: boolean }, command: Command) => {
    inheritBenchOptions(command, options);
    requireGpu('bench micro');
    requireDevice(command, options.device);
    const { runMicroBenchmarks, formatMicroReport } = await import('../micro.js');
    const showProgress = !options.quiet && process.stderr.isTTY;
    let report: Awaited<ReturnType<typeof runMicroBenchmarks>>;
    try {
      report = await runMicroBenchmarks(options.device, (name) => {
        if (showProgress) process.stderr.write(`bench micro: ${name}...\n`);
      });
    } catch (error) {
      reportFailure('bench micro', error);
    }
    const failed = report.groups.some((g) => g.status === 'failed');
    return finish(failed ? EXIT_FAILED : 0, options.json ? `${JSON.stringify(report, null, 2)}\n` : formatMicroReport(report));
  });

/** `help [command...]`, resolved down to a subcommand (`help bench micro`; commander's own stops at the first level);
 * an unknown name is a usage error naming it and the commands there are, rather than the program's help. */
program.helpCommand('help [command...]', 'display help for a command (for example: help bench micro)');
function help(names: string[]): never {
  let command: Command = program;
  // `help help`, `help --help`: the program's help, which lists this command.
  for (const name of names.filter((n) => !['help', '--help', '-h'].includes(n))) {
    const next = command.commands.find((c) => c.name() === name);
    if (!next) {
      const known = commandNames(command);
      printError(
        known
          ? `error: unknown command '${name}' for '${commandPath(command)}'. Commands: ${known}.`
          : `error: '${commandPath(command)}' has no commands; '${name}' is not one.`,
      );
      process.exit(EXIT_USAGE);
    }
    command = next;
  }
  command.help();
}

// The library warns about a variable it ignores (CUDA_STREAM_POOL_SUBMISSION=bogus) on a later tick; a command that
// exits at once (no GPU, a usage error) would otherwise end the process before the warning is written.
await new Promise((resolve) => setImmediate(resolve));
if (process.argv[2] === 'help') help(process.argv.slice(3));
await program.parseAsync(process.argv);
