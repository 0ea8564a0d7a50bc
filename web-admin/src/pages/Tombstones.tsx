import { Button, Group, Paper, SimpleGrid, Stack, Table, Text, Title } from '@mantine/core';
import { useState } from 'react';
import { base64ToBytes, displayKey } from '../api/keys';
import { useLsm, useStats, useTombstones } from '../api/queries';
import { ErrorNote } from '../components/ErrorNote';
import { StatCard } from '../components/StatCard';
import { useCf } from '../components/useCf';
import { VirtualTable } from '../components/VirtualTable';
import { count } from '../format';

export function TombstonesPage() {
  const [cf] = useCf();
  const [tokens, setTokens] = useState<(string | undefined)[]>([undefined]);
  const page = useTombstones(cf, tokens[tokens.length - 1]);
  const lsm = useLsm(cf);
  const stats = useStats();
  const st = stats.data?.statistics;
  const rows = page.data?.tombstones ?? [];
  return (
    <Stack>
      <Title order={1} size="h2">
        Tombstones: {cf}
      </Title>
      <SimpleGrid cols={{ base: 2, md: 4 }}>
        <StatCard
          label="Entries hidden"
          value={count(st?.range_del_hidden)}
          hint="reads stepped over, since open"
        />
        <StatCard
          label="Dropped by compaction"
          value={count(st?.compaction_keys_range_deleted)}
          hint={`${count(st?.compaction_keys_dropped)} keys dropped in all`}
        />
        <StatCard
          label="Tombstones dropped"
          value={count(st?.compaction_range_tombstones_dropped)}
          hint="range tombstones past every key"
        />
        <StatCard
          label="Tables dropped whole"
          value={count(st?.tables_dropped_by_range_deletion)}
          hint="covered by one range tombstone"
        />
      </SimpleGrid>
      <Table aria-label="Deletions per level">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Level</Table.Th>
            <Table.Th>Point deletions</Table.Th>
            <Table.Th>Range tombstones</Table.Th>
            <Table.Th>Entries</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          <Table.Tr>
            <Table.Td>memtables</Table.Td>
            <Table.Td>–</Table.Td>
            <Table.Td>{count(lsm.data?.memtable_range_deletions)}</Table.Td>
            <Table.Td>{count(lsm.data?.memtable_entries)}</Table.Td>
          </Table.Tr>
          {lsm.data?.levels.map((l) => (
            <Table.Tr key={l.level}>
              <Table.Td>L{l.level}</Table.Td>
              <Table.Td>{count(l.deletions)}</Table.Td>
              <Table.Td>{count(l.range_deletions)}</Table.Td>
              <Table.Td>{count(l.entries)}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
      <Paper withBorder p="sm">
        <Group justify="space-between" mb="xs">
          <Text fw={600}>Range tombstones, page {tokens.length}</Text>
          <Group gap="xs">
            <Button
              size="xs"
              variant="default"
              disabled={tokens.length === 1}
              onClick={() => setTokens(tokens.slice(0, -1))}
            >
              Previous
            </Button>
            <Button
              size="xs"
              variant="default"
              disabled={!page.data?.page_token}
              onClick={() => setTokens([...tokens, page.data?.page_token ?? undefined])}
            >
              Next
            </Button>
          </Group>
        </Group>
        <ErrorNote error={page.error} />
        <VirtualTable
          label="Range tombstones"
          rows={rows}
          rowKey={(t) => `${t.sequence}-${t.start}-${JSON.stringify(t.location)}`}
          columns={[
            { header: 'Start', render: (t) => displayKey(base64ToBytes(t.start)) },
            { header: 'End', render: (t) => displayKey(base64ToBytes(t.end)) },
            { header: 'Sequence', width: '100px', render: (t) => t.sequence },
            {
              header: 'Entries under it',
              width: '130px',
              render: (t) => (
                <span title="estimated from the tables' indexes">{count(t.entries_under)}</span>
              ),
            },
            {
              header: 'Where',
              width: '160px',
              render: (t) =>
                t.location.kind === 'table'
                  ? `L${t.location.level} ${String(t.location.number).padStart(6, '0')}.sst`
                  : 'memtable',
            },
          ]}
          empty="No range tombstones."
        />
      </Paper>
    </Stack>
  );
}
