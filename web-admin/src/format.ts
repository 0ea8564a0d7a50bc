// Numbers as people read them.

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '–';
  let v = Math.abs(n);
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  const digits = u === 0 || v >= 100 ? 0 : v >= 10 ? 1 : 2;
  return `${n < 0 ? '-' : ''}${v.toFixed(digits)} ${UNITS[u]}`;
}

export function count(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '–';
  const a = Math.abs(n);
  if (a < 1000) return String(Math.round(n * 100) / 100);
  const [d, s] = a < 1e6 ? [1e3, 'k'] : a < 1e9 ? [1e6, 'M'] : [1e9, 'G'];
  const v = n / d;
  return `${Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(1)}${s}`;
}

export function rate(perSecond: number | null | undefined, unit = '/s'): string {
  return `${count(perSecond)}${unit}`;
}

export function percent(part: number, whole: number): string {
  if (!whole) return '–';
  return `${((100 * part) / whole).toFixed(1)}%`;
}

/** Lookups a rate needs before it means anything (2 hits of 3 is not "67%"). */
export const MIN_LOOKUPS = 100;
/** User bytes written before write amplification means anything (a seeded, idle store's is
 * dominated by its first flush). */
export const MIN_USER_BYTES = 1 << 20;

/** `part` of `whole` lookups as a percentage, once there are `MIN_LOOKUPS` of them. */
export function lookupShare(part: number, whole: number): string {
  return whole < MIN_LOOKUPS ? '–' : percent(part, whole);
}

/** A write amplification, once `MIN_USER_BYTES` have been written. */
export function writeAmp(amp: number | null | undefined, userBytes: number | null | undefined) {
  return (userBytes ?? 0) < MIN_USER_BYTES ? '–' : ratio(amp);
}

export function ratio(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n) || n === 0) return '–';
  return `${n.toFixed(2)}×`;
}

export function duration(ms: number): string {
  if (ms < 1) return `${(ms * 1000).toFixed(0)} µs`;
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 1 : 0)} ms`;
  const s = ms / 1000;
  if (s < 120) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

/** A serde `Duration` (`{secs, nanos}`) in milliseconds. */
export function durationMs(d: { secs: number; nanos: number }): number {
  return d.secs * 1000 + d.nanos / 1e6;
}

/** Axis labels with every repeat blanked: rounding can print one value for two ticks
 * ("1 B, 1 B"), and a label must name one tick. */
export function distinctLabels(labels: string[]): string[] {
  const seen = new Set<string>();
  return labels.map((l) => {
    if (seen.has(l)) return '';
    seen.add(l);
    return l;
  });
}

export function time(unixMs: number): string {
  return new Date(unixMs).toLocaleTimeString(undefined, { hour12: false });
}

export function epochSeconds(s: number): string {
  return new Date(s * 1000)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, ' UTC');
}
