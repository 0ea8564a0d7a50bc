import { Chip, Group, Stack, Text, TextInput, Title } from '@mantine/core';
import { useMemo, useState } from 'react';
import { ENGINE_EVENT_KINDS, useLive } from '../api/live';
import { VirtualTable } from '../components/VirtualTable';
import { time } from '../format';
import { describe } from './events';

export function EventsPage() {
  const { events, connection } = useLive();
  const [kinds, setKinds] = useState<string[]>([...ENGINE_EVENT_KINDS]);
  const [text, setText] = useState('');
  const rows = useMemo(() => {
    const needle = text.trim().toLowerCase();
    return events
      .filter((e) => kinds.includes(e.kind))
      .map((e) => ({ e, line: describe(e) }))
      .filter((r) => !needle || r.line.toLowerCase().includes(needle))
      .reverse();
  }, [events, kinds, text]);
  return (
    <Stack>
      <Title order={1} size="h2">
        Events
      </Title>
      <Text size="sm" c="dimmed">
        Flushes, compactions, stalls, blob GC and evictions as the engine reports them (feed{' '}
        {connection}); the server keeps the last 1,024 for a page that opens later.
      </Text>
      <Chip.Group multiple value={kinds} onChange={setKinds}>
        <Group gap="xs" aria-label="Event kinds">
          {ENGINE_EVENT_KINDS.map((k) => (
            <Chip key={k} value={k} size="xs" variant="light">
              {k.replace(/_/g, ' ')}
            </Chip>
          ))}
        </Group>
      </Chip.Group>
      <TextInput
        label="Filter"
        placeholder="column family, file number, cause…"
        value={text}
        onChange={(e) => setText(e.currentTarget.value)}
        maw={400}
      />
      <VirtualTable
        label="Events"
        rows={rows}
        rowKey={(r) => r.e.id}
        height={560}
        columns={[
          { header: '#', width: '60px', render: (r) => r.e.id },
          { header: 'Seen', width: '90px', render: (r) => time(r.e.at) },
          { header: 'Kind', width: '150px', render: (r) => r.e.kind.replace(/_/g, ' ') },
          { header: 'What happened', render: (r) => <span title={r.line}>{r.line}</span> },
        ]}
        empty="No events yet: they arrive as the engine works."
      />
    </Stack>
  );
}
