// One line of text per engine event, for the Events page and its filter.
import type { EngineEvent } from '../api/live';
import { bytes, duration, durationMs } from '../format';

type Dur = { secs: number; nanos: number };

export function describe(e: EngineEvent): string {
  const d = e.data as Record<string, unknown>;
  const cf = typeof d.column_family === 'string' ? d.column_family : '';
  const took = d.duration ? ` in ${duration(durationMs(d.duration as Dur))}` : '';
  const files = (xs: unknown) => (Array.isArray(xs) ? xs.join(', ') : '');
  switch (e.kind) {
    case 'flush_begin':
      return `${cf}: flush started`;
    case 'flush':
      return `${cf}: flushed ${bytes(Number(d.bytes))}, ${d.entries} entries${took}`;
    case 'compaction_begin':
      return `${cf}: compaction L${d.input_level}→L${d.output_level} started (${String(d.reason)})`;
    case 'compaction':
      return `${cf}: ${d.trivial_move ? 'moved' : 'compacted'} L${d.input_level}→L${d.output_level}, read ${bytes(Number(d.bytes_read))}, wrote ${bytes(Number(d.bytes_written))} [${files(d.input_files)} → ${files(d.output_files)}]${took}`;
    case 'stall_begin':
      return `writes stalled: ${String(d.cause)}`;
    case 'stall_end':
      return `stall ended: ${String(d.cause)} after ${duration(Number(d.waited_ms))}`;
    case 'background_error':
      return `background error: ${String(d.error)}`;
    case 'blob_gc':
      return `${cf}: blob GC relocated ${d.relocated_keys} keys (${bytes(Number(d.relocated_bytes))})`;
    case 'blob_files_deleted':
      return `${cf}: blob files ${files(d.files)} deleted (${String(d.reason)}), ${bytes(Number(d.bytes))}`;
    default:
      return JSON.stringify(d);
  }
}
