// Recognising a binary module image (CUBIN or fatbin) and checking that its tables lie inside it, before the
// driver, which takes no length, reads it (Module.load).

const ELF_MAGIC = [0x7f, 0x45, 0x4c, 0x46]; // a CUBIN is an ELF file
const FATBIN_MAGIC = [0x50, 0xed, 0x55, 0xba]; // 0xBA55ED50, little-endian

function startsWith(bytes: Uint8Array, magic: readonly number[]): boolean {
  return bytes.byteLength >= magic.length && magic.every((b, i) => bytes[i] === b);
}

/** True when `bytes` starts as a CUBIN (ELF) or a fatbin does; anything else is read as PTX text. @internal */
export function isBinaryImage(bytes: Uint8Array): boolean {
  return startsWith(bytes, ELF_MAGIC) || startsWith(bytes, FATBIN_MAGIC);
}

/** Why a binary image cannot be handed to the driver, or undefined when its tables lie inside it.
 * Note [image bounds]: cuModuleLoadDataEx takes no length; it trusts the offsets inside a CUBIN (ELF) or fatbin
 * header, so a truncated file would make the driver read past the end of the copy. Checking that the ELF program
 * and section tables, and every section's bytes, lie inside the image (for a fatbin: header plus payload) keeps
 * a bad file an argument error instead of a read out of bounds. @internal */
export function binaryImageProblem(bytes: Uint8Array): string | undefined {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const size = BigInt(bytes.byteLength);
  if (startsWith(bytes, FATBIN_MAGIC)) {
    if (bytes.byteLength < 16) return `is a fatbin of ${bytes.byteLength} bytes, shorter than its 16-byte header.`;
    const end = BigInt(view.getUint16(6, true)) + view.getBigUint64(8, true);
    return end > size ? `is a truncated fatbin: its header says ${end} bytes, but the image has ${size}.` : undefined;
  }
  if (bytes.byteLength < 64 || bytes[4] !== 2 || bytes[5] !== 1)
    return `is not a 64-bit little-endian ELF image (a CUBIN) of at least 64 bytes (${bytes.byteLength} bytes).`;
  const table = (offsetAt: number, sizeAt: number, countAt: number) =>
    view.getBigUint64(offsetAt, true) + BigInt(view.getUint16(sizeAt, true)) * BigInt(view.getUint16(countAt, true));
  const programEnd = table(0x20, 0x36, 0x38);
  const sectionEnd = table(0x28, 0x3a, 0x3c);
  const tablesEnd = programEnd > sectionEnd ? programEnd : sectionEnd;
  if (tablesEnd > size) return `is a truncated CUBIN: its ELF tables end at byte ${tablesEnd}, but the image has ${size} bytes.`;
  const sections = Number(view.getBigUint64(0x28, true));
  const entrySize = view.getUint16(0x3a, true);
  if (entrySize < 0x28) return entrySize === 0 && view.getUint16(0x3c, true) === 0 ? undefined : `is a malformed CUBIN: ELF section entries of ${entrySize} bytes.`;
  for (let i = 0; i < view.getUint16(0x3c, true); i++) {
    const at = sections + i * entrySize;
    const NOBITS = 8; // a section with no bytes in the file (.bss)
    if (view.getUint32(at + 4, true) === NOBITS) continue;
    const end = view.getBigUint64(at + 0x18, true) + view.getBigUint64(at + 0x20, true);
    if (end > size) return `is a truncated CUBIN: ELF section ${i} ends at byte ${end}, but the image has ${size} bytes.`;
  }
  return undefined;
}
