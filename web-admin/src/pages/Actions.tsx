import {
  Alert,
  Badge,
  Button,
  Group,
  Paper,
  SimpleGrid,
  Stack,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../api/client';
import { ErrorNote } from '../components/ErrorNote';
import { useCf } from '../components/useCf';
import { useWritable } from '../components/useWritable';
import { VirtualTable } from '../components/VirtualTable';
import { bytes, count } from '../format';

export function ActionsPage() {
  const [cf] = useCf();
  const writable = useWritable();
  const client = useQueryClient();
  const [start, setStart] = useState('');
  const [end, setEnd] = useState('');
  const stale = () => void client.invalidateQueries({ queryKey: ['lsm'] });
  const flush = useMutation({
    mutationFn: () => unwrap(api.POST('/api/v1/admin:flush', { body: { cf } })),
    onSuccess: stale,
  });
  const compact = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/api/v1/admin:compactRange', {
          body: { cf, start: start || undefined, end: end || undefined, encoding: 'utf8' },
        }),
      ),
    onSuccess: stale,
  });
  const verify = useMutation({ mutationFn: () => unwrap(api.GET('/api/v1/admin/verify')) });
  const report = verify.data;
  return (
    <Stack>
      <Title order={1} size="h2">
        Actions: {cf}
      </Title>
      <SimpleGrid cols={{ base: 1, md: 2 }}>
        {writable && (
          <Paper withBorder p="sm">
            <Stack gap="xs">
              <Text fw={600}>Flush</Text>
              <Text size="sm">Writes the memtable of {cf} to a table file now.</Text>
              <ErrorNote error={flush.error} />
              {flush.isSuccess && <Alert color="green">Flushed {flush.data.column_family}.</Alert>}
              <Button onClick={() => flush.mutate()} loading={flush.isPending}>
                Flush {cf}
              </Button>
            </Stack>
          </Paper>
        )}
        {writable && (
          <Paper withBorder p="sm">
            <Stack gap="xs">
              <Text fw={600}>Compact a range</Text>
              <Text size="sm">Empty bounds compact the whole key range.</Text>
              <Group grow>
                <TextInput
                  label="Start"
                  value={start}
                  onChange={(e) => setStart(e.currentTarget.value)}
                />
                <TextInput
                  label="End"
                  value={end}
                  onChange={(e) => setEnd(e.currentTarget.value)}
                />
              </Group>
              <ErrorNote error={compact.error} />
              {compact.isSuccess && (
                <Alert color="green">Compacted {compact.data.column_family}.</Alert>
              )}
              <Button onClick={() => compact.mutate()} loading={compact.isPending}>
                Compact
              </Button>
            </Stack>
          </Paper>
        )}
        <Paper withBorder p="sm">
          <Stack gap="xs">
            <Text fw={600}>Verify</Text>
            <Text size="sm">
              Checks every checksum of every live table and sealed blob file while the store serves.
            </Text>
            <ErrorNote error={verify.error} />
            <Button onClick={() => verify.mutate()} loading={verify.isPending}>
              Verify the store
            </Button>
          </Stack>
        </Paper>
      </SimpleGrid>
      {report && (
        <Paper withBorder p="sm" data-testid="verify-report">
          <Group mb="xs">
            <Text fw={600}>Verify report</Text>
            <Badge color={report.ok ? 'green' : 'red'}>
              {report.ok ? 'every file is sound' : 'damage found'}
            </Badge>
            <Text size="sm" c="dimmed">
              {report.files.length} files, {bytes(report.files.reduce((a, f) => a + f.bytes, 0))}
            </Text>
          </Group>
          {report.warnings.map((w) => (
            <Text key={w} size="sm" c="orange.9" data-testid="verify-warning">
              Warning: {w}
            </Text>
          ))}
          <VirtualTable
            label="Files checked"
            rows={report.files}
            rowKey={(f) => f.name}
            columns={[
              { header: 'File', width: '160px', render: (f) => f.name },
              { header: 'Size', width: '90px', render: (f) => bytes(f.bytes) },
              { header: 'Checked', width: '90px', render: (f) => count(f.entries) },
              { header: 'Result', render: (f) => f.problem ?? f.note ?? 'ok' },
            ]}
          />
        </Paper>
      )}
    </Stack>
  );
}
