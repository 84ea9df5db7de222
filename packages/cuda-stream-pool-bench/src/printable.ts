// Text this package writes to a terminal can carry bytes it did not make: a results file's device name, a path or an
// option value the user typed. Control characters among them could move the cursor, clear the screen or retitle the
// window, so they are written escaped.

/** `text` with every control character except line feed and tab (C0, DEL, C1) written as a `\uXXXX` escape, as
 * JSON.stringify writes them. Box-drawing and other printable characters are kept. */
export function printable(text: string): string {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
