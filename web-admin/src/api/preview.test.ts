import { describe, expect, it } from 'vitest';
import { totalLength, wholeCharacters } from './preview';

describe('preview', () => {
  it('reads the whole length from Content-Range', () => {
    expect(totalLength('bytes 0-65535/3221225472', 65536)).toBe(3221225472);
    expect(totalLength('bytes */0', 0)).toBe(0);
    expect(totalLength(null, 12)).toBe(12);
  });
  it('drops a last character the cut split, and nothing else', () => {
    const text = new TextEncoder().encode('aé€😀');
    // a, é (2), € (3), 😀 (4): cut inside each multi-byte character.
    expect(wholeCharacters(text.subarray(0, 2))).toEqual(text.subarray(0, 1));
    expect(wholeCharacters(text.subarray(0, 5))).toEqual(text.subarray(0, 3));
    expect(wholeCharacters(text.subarray(0, 9))).toEqual(text.subarray(0, 6));
    expect(wholeCharacters(text)).toEqual(text);
    expect(wholeCharacters(text.subarray(0, 3))).toEqual(text.subarray(0, 3));
  });
});
