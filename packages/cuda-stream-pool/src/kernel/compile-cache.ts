// The compile cache behind Program.compile: compiled images keyed by everything that decides the compiler's output,
// kept in memory per thread and, when a directory is named, on disk across processes. See Note [compile cache].
//
// Note [compile cache]: the key is a SHA-256 over the source, the program name, the NVRTC options as given, the
// device's compute capability, NVRTC's version and the driver's version, so a change to any of them compiles again.
// A compile whose options name include paths or files (-I, --include-path, -include, --pre-include) is not cached:
// the files it reads are not part of the key. On disk each entry is one file, <key>.cubin-cache, written to a
// temporary name and renamed, so readers never see half an entry; it starts with a magic, the image kind, the
// payload's length and its SHA-256, and an entry that does not check out (truncated, corrupt, another format) is
// ignored and rewritten by the compile that follows. Disk errors never fail a compile: a write that fails warns once.
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** A compiled image: a CUBIN, or PTX text for the driver to finish. @internal */
interface CompiledImage {
  cubin?: Uint8Array;
  ptx?: string;
}

/** What decides a compile's output. @internal */
export interface CompileKey {
  source: string;
  name: string;
  options: readonly string[];
  computeCapability: { major: number; minor: number };
  nvrtcVersion: string;
  driverVersion: number;
}

/** The environment variable that names the on-disk cache directory. */
export const CACHE_DIRECTORY_VARIABLE = 'CUDA_STREAM_POOL_CACHE_DIR';

/** Entries kept in memory per thread; the least recently used goes first. */
const MEMORY_ENTRIES = 256;
const memory = new Map<string, CompiledImage>();

const MAGIC = Buffer.from('CSPCUBN1', 'latin1');
const HEADER_BYTES = MAGIC.length + 4 + 4 + 32; // magic, kind (0 CUBIN, 1 PTX), payload length, payload SHA-256
const warned = new Set<string>();

/** True when NVRTC options name include paths or include files, whose contents the key cannot see. @internal */
export function namesIncludes(options: readonly string[]): boolean {
  return options.some((option) => /^(?:-I|--include-path|-include(?:=|$)|--pre-include)/.test(option));
}

/** The cache key of a compile, as hex. @internal */
export function compileKey(key: CompileKey): string {
  const { major, minor } = key.computeCapability;
  const parts = [key.source, key.name, [...key.options], `${major}.${minor}`, key.nvrtcVersion, key.driverVersion];
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex');
}

function remember(key: string, image: CompiledImage): void {
  memory.delete(key);
  memory.set(key, image);
  if (memory.size > MEMORY_ENTRIES) memory.delete(memory.keys().next().value!);
}

function entryPath(directory: string, key: string): string {
  return path.join(directory, `${key}.cubin-cache`);
}

/** Encodes an image as a cache file. @internal */
export function encodeEntry(image: CompiledImage): Buffer {
  const payload = image.cubin ? Buffer.from(image.cubin.buffer, image.cubin.byteOffset, image.cubin.byteLength) : Buffer.from(image.ptx ?? '', 'utf8');
  const header = Buffer.alloc(HEADER_BYTES);
  MAGIC.copy(header, 0);
  header.writeUInt32LE(image.cubin ? 0 : 1, MAGIC.length);
  header.writeUInt32LE(payload.byteLength, MAGIC.length + 4);
  createHash('sha256').update(payload).digest().copy(header, MAGIC.length + 8);
  return Buffer.concat([header, payload]);
}

/** Decodes a cache file; undefined for anything that does not check out. @internal */
export function decodeEntry(file: Uint8Array): CompiledImage | undefined {
  const bytes = Buffer.from(file.buffer, file.byteOffset, file.byteLength);
  if (bytes.byteLength < HEADER_BYTES || !bytes.subarray(0, MAGIC.length).equals(MAGIC)) return undefined;
  const kind = bytes.readUInt32LE(MAGIC.length);
  const length = bytes.readUInt32LE(MAGIC.length + 4);
  const payload = bytes.subarray(HEADER_BYTES);
  if ((kind !== 0 && kind !== 1) || payload.byteLength !== length || length === 0) return undefined;
  const digest = createHash('sha256').update(payload).digest();
  if (!digest.equals(bytes.subarray(MAGIC.length + 8, HEADER_BYTES))) return undefined;
  return kind === 0 ? { cubin: new Uint8Array(payload) } : { ptx: payload.toString('utf8') };
}

/** The cached image for `key`: from memory, else from `directory` when one is given. Never rejects. @internal */
export async function lookupCompiled(key: string, directory: string | undefined): Promise<CompiledImage | undefined> {
  const known = memory.get(key);
  if (known) {
    remember(key, known);
    return known;
  }
  if (directory === undefined) return undefined;
  let file: Uint8Array;
  try {
    file = await readFile(entryPath(directory, key));
  } catch {
    return undefined; // no entry (or unreadable): compile
  }
  const image = decodeEntry(file);
  if (image) remember(key, image);
  return image;
}

/** Keeps `image` under `key` in memory and, when `directory` is given, on disk. Never rejects. @internal */
export async function storeCompiled(key: string, image: CompiledImage, directory: string | undefined): Promise<void> {
  remember(key, image);
  if (directory === undefined) return;
  const target = entryPath(directory, key);
  const temporary = `${target}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await mkdir(directory, { recursive: true });
    await writeFile(temporary, encodeEntry(image));
    await rename(temporary, target);
  } catch (error) {
    await rm(temporary, { force: true }).catch(() => {});
    if (!warned.has(directory)) {
      warned.add(directory);
      process.emitWarning(`cuda-stream-pool: cannot write the compile cache in ${directory}: ${(error as Error).message}; compiles go on uncached on disk.`);
    }
  }
}

/** Forgets every in-memory entry of this thread (for tests and benchmarks). @internal */
export function clearMemoryCache(): void {
  memory.clear();
}
