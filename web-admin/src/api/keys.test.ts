import { describe, expect, it } from 'vitest';
import {
  base64ToBytes,
  base64url,
  bytesToBase64,
  displayKey,
  hexDump,
  prefixEnd,
  renderValue,
  toBytes,
  valueViews,
} from './keys';

describe('keys', () => {
  it('round-trips bytes through base64 and writes base64url without padding', () => {
    const b = Uint8Array.from([0, 255, 62, 63, 10]);
    expect(Array.from(base64ToBytes(bytesToBase64(b)))).toEqual(Array.from(b));
    expect(base64url(toBytes('users/alice.json?'))).toBe('dXNlcnMvYWxpY2UuanNvbj8');
    expect(base64url(Uint8Array.from([0xfb, 0xff]))).toBe('-_8');
  });
  it('shows text keys as text and escapes the rest', () => {
    expect(displayKey(toBytes('users/alice.json'))).toBe('users/alice.json');
    expect(displayKey(Uint8Array.from([0x61, 0x00, 0xff]))).toBe('a\\x00\\xff');
    expect(displayKey(toBytes('tab\there'))).toBe('tab\\x09here');
  });
  it('ends a prefix at the next key past every key it starts', () => {
    // Compared as arrays: TextEncoder's bytes come from another realm than jsdom's.
    expect(Array.from(prefixEnd(toBytes('users/')) ?? [])).toEqual(Array.from(toBytes('users0')));
    expect(Array.from(prefixEnd(Uint8Array.from([0x61, 0xff])) ?? [])).toEqual([0x62]);
    expect(prefixEnd(Uint8Array.from([0xff, 0xff]))).toBeNull();
  });
  it('offers the views a value allows, best first', () => {
    expect(valueViews(toBytes('{"a": 1}'))).toEqual(['json', 'text', 'hex', 'base64']);
    expect(valueViews(toBytes('plain'))).toEqual(['text', 'hex', 'base64']);
    expect(valueViews(Uint8Array.from([0xc3, 0x28]))).toEqual(['hex', 'base64']);
    expect(renderValue(toBytes('{"a":1}'), 'json')).toBe('{\n  "a": 1\n}');
  });
  it('dumps hex with offsets and printable ASCII', () => {
    const dump = hexDump(toBytes('0123456789abcdefXY'));
    expect(dump.split('\n')).toEqual([
      '00000000  30 31 32 33 34 35 36 37 38 39 61 62 63 64 65 66  0123456789abcdef',
      '00000010  58 59                                            XY',
    ]);
    expect(hexDump(new Uint8Array(40), 16)).toContain('… 24 more bytes');
  });
});
