// The LSM drawn the way Pebble draws it: levels top to bottom, files along the key range.
import { useEffect, useMemo, useRef } from 'react';
import * as echarts from 'echarts/core';
import { CustomChart } from 'echarts/charts';
import { DataZoomComponent, GridComponent, TooltipComponent } from 'echarts/components';
import { CanvasRenderer } from 'echarts/renderers';
import type { Schemas } from '../api/client';
import { bytes } from '../format';
import { layoutFiles } from './lsmLayout';

echarts.use([CustomChart, GridComponent, TooltipComponent, DataZoomComponent, CanvasRenderer]);

const COLORS = ['#fa5252', '#fd7e14', '#fab005', '#40c057', '#15aabf', '#4c6ef5', '#be4bdb'];

type Props = {
  levels: Schemas['LevelProperties'][];
  selected?: number;
  onSelect: (fileNumber: number) => void;
};

export function LsmChart({ levels, selected, onSelect }: Props) {
  const box = useRef<HTMLDivElement>(null);
  const chart = useRef<echarts.ECharts | null>(null);
  const select = useRef(onSelect);
  select.current = onSelect;
  const layout = useMemo(() => layoutFiles(levels), [levels]);
  const depth = Math.max(1, levels.length);

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const c = echarts.init(el);
    chart.current = c;
    c.on('click', (p) => {
      const n = (p.data as number[] | undefined)?.[4];
      if (typeof n === 'number') select.current(n);
    });
    const ro = new ResizeObserver(() => c.resize());
    ro.observe(el);
    return () => {
      ro.disconnect();
      c.dispose();
      chart.current = null;
    };
  }, []);

  useEffect(() => {
    const data = layout.boxes.map((b) => [b.x0, b.x1, b.y0, b.y1, b.number, b.level, b.bytes]);
    chart.current?.setOption(
      {
        animation: false,
        grid: { left: 50, right: 20, top: 10, bottom: 40 },
        tooltip: {
          formatter: (p: { data: number[] }) => {
            const [, , , , n, level, size] = p.data;
            return `${String(n).padStart(6, '0')}.sst · L${level} · ${bytes(size)}`;
          },
        },
        dataZoom: [
          { type: 'inside', xAxisIndex: 0 },
          { type: 'slider', xAxisIndex: 0, height: 16, bottom: 8 },
        ],
        xAxis: { type: 'value', min: 0, max: layout.width, show: false },
        yAxis: {
          type: 'value',
          min: 0,
          max: depth,
          inverse: true,
          interval: 1,
          axisLabel: { formatter: (v: number) => (v < depth ? `L${v}` : '') },
          splitLine: { show: true },
        },
        series: [
          {
            type: 'custom',
            encode: { x: [0, 1], y: [2, 3] },
            data,
            renderItem: (
              _params: unknown,
              api: {
                value: (i: number) => number;
                coord: (p: number[]) => number[];
              },
            ) => {
              const [x0, y0] = api.coord([api.value(0), api.value(2)]) as [number, number];
              const [x1, y1] = api.coord([api.value(1), api.value(3)]) as [number, number];
              const level = api.value(5);
              const isSelected = api.value(4) === selected;
              return {
                type: 'rect',
                shape: { x: x0, y: y0, width: Math.max(2, x1 - x0), height: Math.max(2, y1 - y0) },
                style: {
                  fill: COLORS[level % COLORS.length],
                  opacity: isSelected ? 1 : 0.75,
                  stroke: isSelected ? '#000' : '#fff',
                  lineWidth: isSelected ? 2 : 0.5,
                },
              };
            },
          },
        ],
      },
      { notMerge: true },
    );
  }, [layout, depth, selected]);

  return (
    <div
      ref={box}
      role="img"
      aria-label={`LSM shape: ${layout.boxes.length} files in ${depth} levels`}
      data-testid="lsm-chart"
      style={{ width: '100%', height: Math.max(220, 60 * depth) }}
    />
  );
}
