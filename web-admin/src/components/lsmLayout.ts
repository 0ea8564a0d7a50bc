// Where each table file is drawn: along the key range by the rank of its boundary keys (so a
// level of a thousand files stays readable whatever the keys look like), one band per level,
// its height within the band scaled to its size. L0's files overlap, so each gets its own row.
import type { Schemas } from '../api/client';

export type FileBox = {
  number: number;
  level: number;
  x0: number;
  x1: number;
  y0: number;
  y1: number;
  bytes: number;
};

export function layoutFiles(levels: Schemas['LevelProperties'][]): {
  boxes: FileBox[];
  width: number;
  keys: string[];
} {
  const files = levels.flatMap((l) => l.file_list);
  const keys = Array.from(new Set(files.flatMap((f) => [f.smallest_key, f.largest_key]))).sort();
  const rank = new Map(keys.map((k, i) => [k, i]));
  const biggest = Math.max(1, ...files.map((f) => f.bytes));
  const boxes: FileBox[] = [];
  for (const l of levels) {
    const rows = l.level === 0 ? Math.max(1, l.file_list.length) : 1;
    l.file_list.forEach((f, i) => {
      const row = l.level === 0 ? i : 0;
      const band = 0.8 / rows;
      const h = band * (0.3 + 0.7 * Math.sqrt(f.bytes / biggest));
      const top = l.level + 0.1 + row * band;
      boxes.push({
        number: f.number,
        level: l.level,
        x0: rank.get(f.smallest_key) ?? 0,
        x1: (rank.get(f.largest_key) ?? 0) + 0.9,
        y0: top + (band - h) / 2,
        y1: top + (band + h) / 2,
        bytes: f.bytes,
      });
    });
  }
  return { boxes, width: Math.max(1, keys.length), keys };
}
