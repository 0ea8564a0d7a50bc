import { Badge, Group, Paper, SimpleGrid, Stack, Table, Text, Title } from '@mantine/core';
import { useState } from 'react';
import type { Schemas } from '../api/client';
import { useLsm } from '../api/queries';
import { ErrorNote } from '../components/ErrorNote';
import { LsmChart } from '../components/LsmChart';
import { useCf } from '../components/useCf';
import { VirtualTable } from '../components/VirtualTable';
import { bytes, count, ratio } from '../format';

type File = Schemas['FileProperties'];

function FileDetail({ file }: { file: File }) {
  const rows: [string, string][] = [
    ['File', `${String(file.number).padStart(6, '0')}.sst`],
    ['Level', `L${file.level}`],
    ['Size on disk', bytes(file.bytes)],
    ['Key range', `${file.smallest_key} … ${file.largest_key}`],
    ['Sequence range', `${file.smallest_seq} … ${file.largest_seq}`],
    ['Entries', count(file.entries)],
    ['Point deletions', count(file.deletions)],
    ['Range tombstones', count(file.range_deletions)],
    [
      'Blob references',
      file.blob_references.length
        ? file.blob_references.map((b) => `${b.blob_file} (${count(b.indexes)})`).join(', ')
        : 'none',
    ],
  ];
  return (
    <Paper withBorder p="sm" data-testid="file-detail">
      <Title order={4} mb="xs">
        File {String(file.number).padStart(6, '0')}.sst
      </Title>
      <Table>
        <Table.Tbody>
          {rows.map(([k, v]) => (
            <Table.Tr key={k}>
              <Table.Th w={160}>{k}</Table.Th>
              <Table.Td style={{ wordBreak: 'break-all' }}>{v}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Paper>
  );
}

export function LsmPage() {
  const [cf] = useCf();
  const lsm = useLsm(cf);
  const [selected, setSelected] = useState<number | undefined>();
  if (lsm.error) return <ErrorNote error={lsm.error} />;
  const p = lsm.data;
  const files = p?.levels.flatMap((l) => l.file_list) ?? [];
  const file = files.find((f) => f.number === selected);
  return (
    <Stack>
      <Group justify="space-between">
        <Title order={1} size="h2">
          LSM: {cf}
        </Title>
        <Group gap="xs">
          {p?.flush_running && <Badge color="blue">flush running</Badge>}
          {(p?.compactions_running ?? 0) > 0 && (
            <Badge color="violet">{p?.compactions_running} compactions running</Badge>
          )}
        </Group>
      </Group>
      <SimpleGrid cols={{ base: 2, md: 4 }}>
        <Text size="sm">
          Memtable: {bytes(p?.memtable_bytes)} ({count(p?.memtable_entries)} entries)
        </Text>
        <Text size="sm">
          Immutable: {p?.immutable_memtables ?? 0} ({bytes(p?.immutable_memtable_bytes)})
        </Text>
        <Text size="sm">Base level: L{p?.base_level ?? '–'}</Text>
        <Text size="sm">Pending compaction: {bytes(p?.pending_compaction_bytes)}</Text>
      </SimpleGrid>
      <Paper withBorder p="sm">
        {p && <LsmChart levels={p.levels} selected={selected} onSelect={setSelected} />}
      </Paper>
      <Table striped highlightOnHover aria-label="Levels">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Level</Table.Th>
            <Table.Th>Files</Table.Th>
            <Table.Th>Size</Table.Th>
            <Table.Th>Target</Table.Th>
            <Table.Th>Score</Table.Th>
            <Table.Th>Entries</Table.Th>
            <Table.Th>Deletions</Table.Th>
            <Table.Th>Range del.</Table.Th>
            <Table.Th>Compactions in</Table.Th>
            <Table.Th>W-Amp</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {p?.levels.map((l) => (
            <Table.Tr key={l.level}>
              <Table.Td>L{l.level}</Table.Td>
              <Table.Td>{l.files}</Table.Td>
              <Table.Td>{bytes(l.bytes)}</Table.Td>
              <Table.Td>{l.target_bytes ? bytes(l.target_bytes) : '–'}</Table.Td>
              <Table.Td c={l.score >= 1 ? 'red' : undefined}>{l.score.toFixed(2)}</Table.Td>
              <Table.Td>{count(l.entries)}</Table.Td>
              <Table.Td>{count(l.deletions)}</Table.Td>
              <Table.Td>{count(l.range_deletions)}</Table.Td>
              <Table.Td>{count(l.compactions)}</Table.Td>
              <Table.Td>{l.compactions > 0 ? ratio(l.write_amplification) : '–'}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
      <SimpleGrid cols={{ base: 1, lg: 2 }}>
        <Paper withBorder p="sm">
          <Text fw={600} mb="xs">
            Files ({files.length}): select one for its detail
          </Text>
          <VirtualTable
            label="Table files"
            rows={files}
            rowKey={(f) => f.number}
            selected={selected}
            onSelect={(f) => setSelected(f.number)}
            columns={[
              { header: 'File', width: '90px', render: (f) => String(f.number).padStart(6, '0') },
              { header: 'Level', width: '50px', render: (f) => `L${f.level}` },
              { header: 'Size', width: '80px', render: (f) => bytes(f.bytes) },
              { header: 'Keys', render: (f) => `${f.smallest_key} … ${f.largest_key}` },
            ]}
            empty="No table files yet: writes are still in the memtable."
          />
        </Paper>
        {file ? (
          <FileDetail file={file} />
        ) : (
          <Text c="dimmed">Select a file in the chart or the list.</Text>
        )}
      </SimpleGrid>
    </Stack>
  );
}
