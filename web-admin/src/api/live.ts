// The live feed: one EventSource on `GET /api/v1/events` per page. Engine events land in a ring the
// Events page reads and invalidate the queries they change; the stats sample each second feeds the
// charts. While the feed is down the queries poll instead (see `pollWhenOffline`).
import { useSyncExternalStore } from 'react';
import type { QueryClient } from '@tanstack/react-query';
import type { Schemas } from './client';

export type Statistics = Schemas['Statistics'];
export type Sample = { at: number; stats: Statistics };
export type EngineEvent = { id: number; kind: string; at: number; data: Record<string, unknown> };
export type Connection = 'connecting' | 'open' | 'lost';

/** Minutes of samples kept for the charts. */
const SAMPLES_KEPT = 600;
const EVENTS_KEPT = 2000;

export const ENGINE_EVENT_KINDS = [
  'flush_begin',
  'flush',
  'compaction_begin',
  'compaction',
  'stall_begin',
  'stall_end',
  'background_error',
  'blob_gc',
  'blob_files_deleted',
] as const;

/** Which queries each event kind makes stale. */
const STALE_AFTER: Record<string, string[][]> = {
  flush: [['lsm'], ['stats'], ['tombstones'], ['blobs'], ['cf']],
  compaction: [['lsm'], ['stats'], ['tombstones'], ['blobs'], ['cf']],
  compaction_begin: [['lsm']],
  flush_begin: [['lsm']],
  blob_gc: [['blobs'], ['lsm']],
  blob_files_deleted: [['blobs'], ['stats']],
  stall_begin: [['stats']],
  stall_end: [['stats']],
  background_error: [['stats']],
};

type State = { connection: Connection; samples: Sample[]; events: EngineEvent[] };

let state: State = { connection: 'connecting', samples: [], events: [] };
const listeners = new Set<() => void>();

function set(next: Partial<State>) {
  state = { ...state, ...next };
  for (const l of listeners) l();
}

function subscribe(l: () => void) {
  listeners.add(l);
  return () => listeners.delete(l);
}

export function useLive(): State {
  return useSyncExternalStore(subscribe, () => state);
}

export function connection(): Connection {
  return state.connection;
}

/** A query option: poll every `ms` only while the live feed is down. */
export function pollWhenOffline(ms = 3000) {
  return () => (state.connection === 'open' ? false : ms);
}

let source: EventSource | null = null;
let lastId = 0;
let retry: ReturnType<typeof setTimeout> | undefined;

/** Opens the feed (once); `client` is told which queries each event makes stale. */
export function startLive(client: QueryClient): () => void {
  stopLive();
  const open = () => {
    // `after=0` replays the events the server kept, so the Events page has history at once.
    const es = new EventSource(`/api/v1/events?after=${lastId}`);
    source = es;
    es.onopen = () => set({ connection: 'open' });
    es.onerror = () => {
      set({ connection: 'lost' });
      // The browser retries by itself unless the answer was not a stream (a 401, a restart
      // that lost the session): then retry here, resuming after the last event seen.
      if (es.readyState === EventSource.CLOSED) {
        es.close();
        retry = setTimeout(open, 2000);
      }
    };
    es.addEventListener('stats', (m) => {
      const stats = JSON.parse((m as MessageEvent<string>).data) as Statistics;
      const samples = state.samples.concat({ at: Date.now(), stats });
      if (samples.length > SAMPLES_KEPT) samples.splice(0, samples.length - SAMPLES_KEPT);
      set({ samples, connection: 'open' });
      if (samples.length % 2 === 0) void client.invalidateQueries({ queryKey: ['stats'] });
      void client.invalidateQueries({ queryKey: ['cache'] });
    });
    for (const kind of ENGINE_EVENT_KINDS) {
      es.addEventListener(kind, (m) => {
        const msg = m as MessageEvent<string>;
        const id = Number(msg.lastEventId) || 0;
        if (id && id <= lastId) return;
        lastId = Math.max(lastId, id);
        const event: EngineEvent = {
          id,
          kind,
          at: Date.now(),
          data: JSON.parse(msg.data) as Record<string, unknown>,
        };
        const events = state.events.concat(event);
        if (events.length > EVENTS_KEPT) events.splice(0, events.length - EVENTS_KEPT);
        set({ events });
        for (const key of STALE_AFTER[kind] ?? []) void client.invalidateQueries({ queryKey: key });
      });
    }
  };
  open();
  return stopLive;
}

export function stopLive() {
  clearTimeout(retry);
  source?.close();
  source = null;
}

/** Per-second rates of a counter over the kept samples: [times in s, values]. */
export function rates(samples: Sample[], pick: (s: Statistics) => number): [number[], number[]] {
  const xs: number[] = [];
  const ys: number[] = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1]!;
    const b = samples[i]!;
    const dt = (b.at - a.at) / 1000;
    if (dt <= 0) continue;
    xs.push(b.at / 1000);
    ys.push(Math.max(0, (pick(b.stats) - pick(a.stats)) / dt));
  }
  return [xs, ys];
}

/** The ratio of two counters' growth per sample (e.g. hit rate): [times in s, values 0..1]. */
export function ratios(
  samples: Sample[],
  part: (s: Statistics) => number,
  whole: (s: Statistics) => number,
): [number[], (number | null)[]] {
  const xs: number[] = [];
  const ys: (number | null)[] = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1]!;
    const b = samples[i]!;
    const w = whole(b.stats) - whole(a.stats);
    xs.push(b.at / 1000);
    ys.push(w > 0 ? (part(b.stats) - part(a.stats)) / w : null);
  }
  return [xs, ys];
}
