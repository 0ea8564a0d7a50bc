import { describe, expect, it } from 'vitest';
import { totalLength } from './preview';

describe('preview', () => {
  it('reads the whole length from Content-Range', () => {
    expect(totalLength('bytes 0-65535/3221225472', 65536)).toBe(3221225472);
    expect(totalLength('bytes */0', 0)).toBe(0);
    expect(totalLength(null, 12)).toBe(12);
  });
});
