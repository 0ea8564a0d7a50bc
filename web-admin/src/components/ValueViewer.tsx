import { Code, Group, SegmentedControl, Text } from '@mantine/core';
import { useState } from 'react';
import { renderValue, valueViews, type ValueView } from '../api/keys';
import { bytes } from '../format';

/** A value as UTF-8 text, pretty JSON, a hex dump or base64, whichever the bytes allow: `value`
 * is its first bytes, of `total` (the whole value's length; its own length by default). */
export function ValueViewer({ value, total }: { value: Uint8Array; total?: number }) {
  const whole = total ?? value.length;
  const views = valueViews(value);
  const [chosen, setChosen] = useState<ValueView | null>(null);
  const view = chosen && views.includes(chosen) ? chosen : views[0]!;
  return (
    <div>
      <Group justify="space-between" mb="xs">
        <SegmentedControl
          size="xs"
          value={view}
          onChange={(v) => setChosen(v as ValueView)}
          data={views.map((v) => ({ value: v, label: v === 'json' ? 'JSON' : v }))}
          aria-label="Show the value as"
        />
        <Text size="xs" c="dimmed" data-testid="value-size">
          {whole > value.length ? `first ${bytes(value.length)} of ${bytes(whole)}` : bytes(whole)}
        </Text>
      </Group>
      <Code
        block
        data-testid="value"
        style={{ maxHeight: 420, overflow: 'auto', whiteSpace: 'pre-wrap', wordBreak: 'break-all' }}
      >
        {renderValue(value, view)}
      </Code>
    </div>
  );
}
