// A streaming line chart on uPlot: cheap enough to redraw every second with minutes of samples.
import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { distinctLabels, time } from '../format';

/** Tick steps of the time axis, in seconds. */
const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];
/** Axis text: gray 7, readable (4.5:1) on white. */
const AXIS = '#495057';

export type Series = { label: string; color: string; values: (number | null)[] };

type Props = {
  times: number[];
  series: Series[];
  height?: number;
  format?: (v: number) => string;
  ariaLabel: string;
};

export function TimeSeries({ times, series, height = 180, format, ariaLabel }: Props) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const labels = series.map((s) => s.label).join('|');

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const opts: uPlot.Options = {
      width: el.clientWidth || 400,
      height,
      legend: { show: true },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
      axes: [
        {
          stroke: AXIS,
          grid: { stroke: '#e9ecef' },
          // Whole seconds at least, as wall-clock hh:mm:ss: never ":04.250".
          incrs: TIME_STEPS,
          space: 70,
          values: (_u, secs) => distinctLabels(secs.map((s) => time(s * 1000))),
        },
        {
          stroke: AXIS,
          grid: { stroke: '#e9ecef' },
          size: 70,
          values: (_u, vals) => distinctLabels(vals.map((v) => (format ? format(v) : String(v)))),
        },
      ],
      series: [
        {},
        ...series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 2,
          points: { show: false },
          value: (_u: uPlot, v: number | null) =>
            v === null ? '–' : format ? format(v) : String(v),
        })),
      ],
    };
    const u = new uPlot(opts, [[]], el);
    plot.current = u;
    const ro = new ResizeObserver(() => u.setSize({ width: el.clientWidth, height }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
    // The series' labels decide the chart's shape; their values stream in below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [labels, height]);

  useEffect(() => {
    plot.current?.setData([times, ...series.map((s) => s.values)] as uPlot.AlignedData);
  }, [times, series]);

  return <div ref={box} role="img" aria-label={ariaLabel} style={{ width: '100%' }} />;
}
