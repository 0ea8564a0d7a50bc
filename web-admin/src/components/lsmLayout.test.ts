import { describe, expect, it } from 'vitest';
import type { Schemas } from '../api/client';
import { layoutFiles } from './lsmLayout';

const file = (number: number, level: number, lo: string, hi: string, bytes: number) =>
  ({
    number,
    level,
    bytes,
    entries: 1,
    deletions: 0,
    range_deletions: 0,
    smallest_key: lo,
    largest_key: hi,
    smallest_seq: 1,
    largest_seq: 2,
    blob_references: [],
  }) satisfies Schemas['FileProperties'];

const level = (n: number, files: Schemas['FileProperties'][]) =>
  ({
    level: n,
    files: files.length,
    bytes: 0,
    entries: 0,
    deletions: 0,
    range_deletions: 0,
    score: 0,
    target_bytes: 0,
    compactions: 0,
    compaction_bytes_read_upper: 0,
    compaction_bytes_read_lower: 0,
    bytes_written: 0,
    write_amplification: 0,
    file_list: files,
  }) satisfies Schemas['LevelProperties'];

describe('the LSM layout', () => {
  it('places files along the key range by rank and in their level band', () => {
    const { boxes, width } = layoutFiles([
      level(0, [file(9, 0, 'b', 'y', 100), file(8, 0, 'a', 'c', 100)]),
      level(1, [file(5, 1, 'a', 'm', 400), file(6, 1, 'n', 'z', 100)]),
    ]);
    expect(width).toBe(7); // a b c m n y z
    const [l0a, l0b, l1a, l1b] = boxes;
    // Overlapping L0 files get rows of their own.
    expect(l0a!.y1).toBeLessThanOrEqual(l0b!.y0);
    for (const b of [l0a!, l0b!]) expect(b.y0 >= 0 && b.y1 <= 1).toBe(true);
    for (const b of [l1a!, l1b!]) expect(b.y0 >= 1 && b.y1 <= 2).toBe(true);
    // Key order along x, size in height.
    expect(l1a!.x1).toBeLessThan(l1b!.x0);
    expect(l1a!.y1 - l1a!.y0).toBeGreaterThan(l1b!.y1 - l1b!.y0);
  });
  it('lays out a thousand files', () => {
    const files = Array.from({ length: 1000 }, (_, i) =>
      file(i, 2, `k${String(2 * i).padStart(5, '0')}`, `k${String(2 * i + 1).padStart(5, '0')}`, 1),
    );
    const { boxes, width } = layoutFiles([level(2, files)]);
    expect(boxes).toHaveLength(1000);
    expect(width).toBe(2000);
  });
});
