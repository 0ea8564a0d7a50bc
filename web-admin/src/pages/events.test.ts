import { describe, expect, it } from 'vitest';
import { describe as line } from './events';

describe('event lines', () => {
  it('say what a flush and a compaction did', () => {
    expect(
      line({
        id: 1,
        kind: 'flush',
        at: 0,
        data: {
          column_family: 'default',
          bytes: 2048,
          entries: 10,
          duration: { secs: 0, nanos: 3e6 },
        },
      }),
    ).toBe('default: flushed 2.00 KiB, 10 entries in 3.0 ms');
    expect(
      line({
        id: 2,
        kind: 'compaction',
        at: 0,
        data: {
          column_family: 'm',
          input_level: 0,
          output_level: 1,
          bytes_read: 1024,
          bytes_written: 512,
          input_files: [7, 8],
          output_files: [9],
          trivial_move: false,
          duration: { secs: 1, nanos: 0 },
        },
      }),
    ).toBe('m: compacted L0→L1, read 1.00 KiB, wrote 512 B [7, 8 → 9] in 1.00 s');
    expect(line({ id: 3, kind: 'stall_begin', at: 0, data: { cause: 'level0_stop' } })).toBe(
      'writes stalled: level0_stop',
    );
  });
});
