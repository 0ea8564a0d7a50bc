import { describe, expect, it } from 'vitest';
import {
  bytes,
  count,
  distinctLabels,
  duration,
  durationMs,
  lookupShare,
  percent,
  ratio,
  writeAmp,
} from './format';

describe('format', () => {
  it('writes bytes in binary units with sensible digits', () => {
    expect(bytes(0)).toBe('0 B');
    expect(bytes(1023)).toBe('1023 B');
    expect(bytes(1536)).toBe('1.50 KiB');
    expect(bytes(64 * 1024 * 1024)).toBe('64.0 MiB');
    expect(bytes(300 * 1024 ** 3)).toBe('300 GiB');
    expect(bytes(undefined)).toBe('–');
  });
  it('writes counts with k, M and G', () => {
    expect(count(999)).toBe('999');
    expect(count(1500)).toBe('1.5k');
    expect(count(2_500_000)).toBe('2.5M');
    expect(count(150_000)).toBe('150k');
    expect(count(null)).toBe('–');
  });
  it('writes ratios, shares and durations', () => {
    expect(ratio(3.9)).toBe('3.90×');
    expect(ratio(0)).toBe('–');
    expect(percent(1, 4)).toBe('25.0%');
    expect(percent(1, 0)).toBe('–');
    expect(duration(0.5)).toBe('500 µs');
    expect(duration(1500)).toBe('1.50 s');
    expect(duration(200_000)).toBe('3 min 20 s');
    expect(durationMs({ secs: 2, nanos: 500_000_000 })).toBe(2500);
  });
  it('shows derived figures only once there is enough data', () => {
    expect(lookupShare(2, 3)).toBe('–');
    expect(lookupShare(99, 99)).toBe('–');
    expect(lookupShare(75, 100)).toBe('75.0%');
    expect(writeAmp(0.11, 4096)).toBe('–');
    expect(writeAmp(2.5, undefined)).toBe('–');
    expect(writeAmp(2.5, 2 << 20)).toBe('2.50×');
  });
  it('never repeats an axis label', () => {
    expect(distinctLabels(['0 B', '1 B', '1 B', '2 B'])).toEqual(['0 B', '1 B', '', '2 B']);
    expect(distinctLabels(['12:00:01', '12:00:01', '12:00:02'])).toEqual([
      '12:00:01',
      '',
      '12:00:02',
    ]);
  });
});
