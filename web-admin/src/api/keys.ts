// Keys travel as base64 in JSON bodies and as unpadded base64url in paths; the console shows them
// as text when they are UTF-8 and as escaped bytes otherwise.

const encoder = new TextEncoder();
const strict = new TextDecoder('utf-8', { fatal: true });

export function toBytes(text: string): Uint8Array {
  return encoder.encode(text);
}

export function bytesToBase64(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

export function base64ToBytes(b64: string): Uint8Array {
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

export function base64url(bytes: Uint8Array): string {
  return bytesToBase64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** The text of `bytes` when they are valid UTF-8, else null. */
export function utf8(bytes: Uint8Array): string | null {
  try {
    return strict.decode(bytes);
  } catch {
    return null;
  }
}

/** A key for display: its text, or its bytes with non-printable ones escaped as `\xNN`. */
export function displayKey(bytes: Uint8Array): string {
  const t = utf8(bytes);
  if (t !== null && !Array.from(t).some(isControl)) return t;
  let s = '';
  for (const b of bytes) {
    s += b >= 0x20 && b < 0x7f && b !== 0x5c ? String.fromCharCode(b) : `\\x${hexByte(b)}`;
  }
  return s;
}

function isControl(c: string): boolean {
  const code = c.charCodeAt(0);
  return code < 0x20 || code === 0x7f;
}

function hexByte(b: number): string {
  return b.toString(16).padStart(2, '0');
}

/** Hex dump rows of 16 bytes: offset, hex, ASCII. */
export function hexDump(bytes: Uint8Array, maxBytes = 64 * 1024): string {
  const rows: string[] = [];
  const n = Math.min(bytes.length, maxBytes);
  for (let off = 0; off < n; off += 16) {
    const chunk = bytes.subarray(off, Math.min(off + 16, n));
    const hex = Array.from(chunk, hexByte).join(' ').padEnd(47, ' ');
    const ascii = Array.from(chunk, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.'));
    rows.push(`${off.toString(16).padStart(8, '0')}  ${hex}  ${ascii.join('')}`);
  }
  if (bytes.length > n) rows.push(`… ${bytes.length - n} more bytes`);
  return rows.join('\n');
}

/** The smallest key greater than every key starting with `prefix` (null: no such key). */
export function prefixEnd(prefix: Uint8Array): Uint8Array | null {
  const end = Uint8Array.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]! += 1;
      return end.slice(0, i + 1);
    }
  }
  return null;
}

export type ValueView = 'text' | 'json' | 'hex' | 'base64';

/** The views a value supports, best first. */
export function valueViews(bytes: Uint8Array): ValueView[] {
  const t = utf8(bytes);
  if (t === null) return ['hex', 'base64'];
  try {
    JSON.parse(t);
    return ['json', 'text', 'hex', 'base64'];
  } catch {
    return ['text', 'hex', 'base64'];
  }
}

export function renderValue(bytes: Uint8Array, view: ValueView): string {
  switch (view) {
    case 'json':
      return JSON.stringify(JSON.parse(utf8(bytes) ?? 'null'), null, 2);
    case 'text':
      return utf8(bytes) ?? '';
    case 'hex':
      return hexDump(bytes);
    case 'base64':
      return bytesToBase64(bytes);
  }
}
