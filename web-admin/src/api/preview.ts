// A value's preview: its first bytes, read by range (`raw=1` with `Range`), never the whole value,
// which may be gigabytes.
import { api, ApiError, unwrap } from './client';

/** Bytes a preview reads at most. */
export const PREVIEW_BYTES = 64 << 10;

export type Preview = { bytes: Uint8Array; total: number };

/** The value's whole length from a `Content-Range` (`bytes 0-99/1234`, or `bytes *\/0` on a
 * 416), or `received` when there is none (a 200 carries the whole value). */
export function totalLength(contentRange: string | null, received: number): number {
  const m = contentRange ? /\/(\d+)\s*$/.exec(contentRange) : null;
  return m?.[1] ? Number(m[1]) : received;
}

/** `bytes` (a value's first bytes, cut at a byte count) without a last UTF-8 character the cut
 * split, so a text value still reads as text. */
export function wholeCharacters(bytes: Uint8Array): Uint8Array {
  for (let back = 1; back <= Math.min(4, bytes.length); back++) {
    const b = bytes[bytes.length - back]!;
    if ((b & 0xc0) === 0x80) continue; // a continuation byte: look further back
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return need > back ? bytes.subarray(0, bytes.length - back) : bytes;
  }
  return bytes;
}

export async function readPreview(cf: string, path: string): Promise<Preview> {
  const call = api.GET('/api/v1/kv/{key}', {
    params: {
      path: { key: path },
      query: { cf, raw: '1' },
      header: { Range: `bytes=0-${PREVIEW_BYTES - 1}` },
    },
    parseAs: 'arrayBuffer',
  });
  const r = await call.catch((e: unknown) => {
    throw new ApiError(0, `the server did not answer: ${String(e)}`);
  });
  // An empty value has no byte 0: the range is refused, and Content-Range says the length is 0.
  if (r.response.status === 416) {
    const total = totalLength(r.response.headers.get('Content-Range'), 0);
    if (total === 0) return { bytes: new Uint8Array(), total };
  }
  const body = await unwrap(Promise.resolve(r));
  const bytes = new Uint8Array(body as ArrayBuffer);
  const total = totalLength(r.response.headers.get('Content-Range'), bytes.length);
  return { bytes: total > bytes.length ? wholeCharacters(bytes) : bytes, total };
}
