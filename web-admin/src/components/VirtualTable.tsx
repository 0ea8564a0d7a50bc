// A table that renders only the rows in view, so a thousand files or a page of keys stay fast.
import { useRef, type ReactNode } from 'react';
import { useVirtualizer } from '@tanstack/react-virtual';
import { Box, Text } from '@mantine/core';

export type Column<T> = { header: string; width?: string; render: (row: T) => ReactNode };

type Props<T> = {
  rows: T[];
  columns: Column<T>[];
  rowKey: (row: T) => string | number;
  onSelect?: (row: T) => void;
  selected?: string | number;
  height?: number;
  label: string;
  empty?: string;
};

const ROW = 32;

export function VirtualTable<T>(props: Props<T>) {
  const { rows, columns, rowKey, onSelect, selected, height = 360, label, empty } = props;
  const scroller = useRef<HTMLDivElement>(null);
  const v = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => ROW,
    overscan: 12,
  });
  const template = columns.map((c) => c.width ?? '1fr').join(' ');
  return (
    <Box role="table" aria-label={label} aria-rowcount={rows.length}>
      <Box
        role="row"
        style={{
          display: 'grid',
          gridTemplateColumns: template,
          fontWeight: 600,
          fontSize: 13,
          borderBottom: '1px solid var(--mantine-color-gray-3)',
          padding: '4px 8px',
        }}
      >
        {columns.map((c) => (
          <div role="columnheader" key={c.header}>
            {c.header}
          </div>
        ))}
      </Box>
      {rows.length === 0 ? (
        <Text c="dimmed" size="sm" p="sm">
          {empty ?? 'Nothing here.'}
        </Text>
      ) : (
        <div
          ref={scroller}
          style={{ height: Math.min(height, rows.length * ROW + 2), overflow: 'auto' }}
        >
          <div style={{ height: v.getTotalSize(), position: 'relative' }}>
            {v.getVirtualItems().map((item) => {
              const row = rows[item.index]!;
              const key = rowKey(row);
              const isSelected = selected !== undefined && key === selected;
              return (
                <div
                  role="row"
                  key={key}
                  tabIndex={onSelect ? 0 : undefined}
                  aria-selected={onSelect ? isSelected : undefined}
                  onClick={onSelect ? () => onSelect(row) : undefined}
                  onKeyDown={
                    onSelect
                      ? (e) => {
                          if (e.key === 'Enter' || e.key === ' ') {
                            e.preventDefault();
                            onSelect(row);
                          }
                        }
                      : undefined
                  }
                  style={{
                    position: 'absolute',
                    top: item.start,
                    left: 0,
                    right: 0,
                    height: ROW,
                    display: 'grid',
                    gridTemplateColumns: template,
                    alignItems: 'center',
                    padding: '0 8px',
                    fontSize: 13,
                    cursor: onSelect ? 'pointer' : undefined,
                    background: isSelected ? 'var(--mantine-color-blue-0)' : undefined,
                    borderBottom: '1px solid var(--mantine-color-gray-2)',
                  }}
                >
                  {columns.map((c) => (
                    <div
                      role="cell"
                      key={c.header}
                      style={{ overflow: 'hidden', textOverflow: 'ellipsis', whiteSpace: 'nowrap' }}
                    >
                      {c.render(row)}
                    </div>
                  ))}
                </div>
              );
            })}
          </div>
        </div>
      )}
    </Box>
  );
}
