import {
  Button,
  Group,
  Paper,
  SimpleGrid,
  Stack,
  Table,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../api/client';
import { useColumnFamilies, useColumnFamily } from '../api/queries';
import { Confirm } from '../components/Confirm';
import { ErrorNote } from '../components/ErrorNote';
import { useWritable } from '../components/useWritable';
import { bytes, count } from '../format';

function Detail({ name }: { name: string }) {
  const d = useColumnFamily(name);
  if (d.error) return <ErrorNote error={d.error} />;
  const c = d.data;
  if (!c) return null;
  const rows: [string, string][] = [
    ['Live bytes', bytes(c.live_bytes)],
    ['Tables', `${count(c.total_files)} files, ${bytes(c.total_sst_bytes)}`],
    ['Blob files', bytes(c.blob_file_bytes)],
    ['Memtable', bytes(c.memtable_bytes)],
    ['Keys (estimate)', count(c.estimate_num_keys)],
    ['Write buffer', `${bytes(c.write_buffer_size)} × ${c.max_write_buffer_number}`],
    ['Block size', bytes(c.block_size)],
    ['Compression', c.compression],
    ['Bloom bits per key', String(c.bloom_bits_per_key)],
    ['L1 target', bytes(c.max_bytes_for_level_base)],
    ['Level multiplier', String(c.max_bytes_for_level_multiplier)],
    ['Target file size', bytes(c.target_file_size_base)],
    ['Auto compactions', c.disable_auto_compactions ? 'off' : 'on'],
    [
      'Blob separation',
      c.enable_blob_files
        ? `values ≥ ${bytes(c.min_blob_size)}, files of ${bytes(c.blob_file_size)}`
        : 'off',
    ],
    ['Blob GC', c.enable_blob_garbage_collection ? 'on' : 'off'],
    ['TTL buckets', c.ttl_range_secs ? `${c.ttl_range_secs} s` : '–'],
    ['Size limit (FIFO)', c.max_db_size ? bytes(c.max_db_size) : 'none'],
  ];
  return (
    <Table aria-label={`Options of ${name}`}>
      <Table.Tbody>
        {rows.map(([k, v]) => (
          <Table.Tr key={k}>
            <Table.Th w={180}>{k}</Table.Th>
            <Table.Td>{v}</Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}

export function ColumnFamiliesPage() {
  const list = useColumnFamilies();
  const writable = useWritable();
  const client = useQueryClient();
  const [name, setName] = useState('');
  const [open, setOpen] = useState<string>('default');
  const [dropping, setDropping] = useState<string | null>(null);
  const done = () => void client.invalidateQueries({ queryKey: ['cf'] });
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/api/v1/cfs', { body: { name: name.trim() } })),
    onSuccess: () => {
      setOpen(name.trim());
      setName('');
      done();
    },
  });
  const drop = useMutation({
    mutationFn: (n: string) =>
      unwrap(api.DELETE('/api/v1/cfs/{name}', { params: { path: { name: n } } })),
    onSuccess: (_r, n) => {
      setDropping(null);
      setOpen('default');
      // Its detail is gone: asking again would only be refused.
      client.removeQueries({ queryKey: ['cf', 'detail', n] });
      void client.invalidateQueries({ queryKey: ['cf', 'list'] });
    },
  });
  return (
    <Stack>
      <Title order={1} size="h2">
        Column families
      </Title>
      <ErrorNote error={list.error ?? drop.error} />
      <SimpleGrid cols={{ base: 1, md: 2 }}>
        <Paper withBorder p="sm">
          <Table highlightOnHover aria-label="Column families">
            <Table.Tbody>
              {list.data?.column_families.map((n) => (
                <Table.Tr key={n} bg={n === open ? 'var(--mantine-color-blue-0)' : undefined}>
                  <Table.Td>
                    <Button variant="subtle" size="compact-sm" onClick={() => setOpen(n)}>
                      {n}
                    </Button>
                  </Table.Td>
                  <Table.Td align="right">
                    {writable && n !== 'default' && (
                      <Button
                        size="compact-xs"
                        color="red"
                        variant="light"
                        onClick={() => setDropping(n)}
                      >
                        Drop
                      </Button>
                    )}
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
          {writable && (
            <form
              onSubmit={(e) => {
                e.preventDefault();
                create.mutate();
              }}
            >
              <Group align="end" mt="sm">
                <TextInput
                  label="New column family"
                  value={name}
                  onChange={(e) => setName(e.currentTarget.value)}
                  required
                />
                <Button type="submit" loading={create.isPending}>
                  Create
                </Button>
              </Group>
              <ErrorNote error={create.error} />
            </form>
          )}
        </Paper>
        <Paper withBorder p="sm">
          <Text fw={600} mb="xs">
            {open}
          </Text>
          <Detail name={open} />
        </Paper>
      </SimpleGrid>
      <Confirm
        opened={dropping !== null}
        title={`Drop column family ${dropping ?? ''}?`}
        confirmLabel="Drop"
        busy={drop.isPending}
        onConfirm={() => dropping && drop.mutate(dropping)}
        onCancel={() => setDropping(null)}
      >
        Every key in it and its files are deleted. This cannot be undone.
      </Confirm>
    </Stack>
  );
}
