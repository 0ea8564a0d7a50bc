// Backups the server makes of the store it serves (`serve --backup-to DEST`): each one's size
// over time, the list, and a live backup on demand. A server with no destination says how to
// give it one and asks nothing of the API.
import { Alert, Button, Checkbox, Group, Paper, Stack, Text, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../api/client';
import { useServer } from '../api/queries';
import { ErrorNote } from '../components/ErrorNote';
import { TimeSeries } from '../components/TimeSeries';
import { VirtualTable } from '../components/VirtualTable';
import { bytes, count, epochSeconds } from '../format';

export function BackupsPage() {
  const server = useServer();
  const destination = server.data?.backup_destination;
  return (
    <Stack>
      <Title order={1} size="h2">
        Backups
      </Title>
      <ErrorNote error={server.error} />
      {destination ? (
        <Destination destination={destination} readOnly={server.data?.read_only ?? false} />
      ) : (
        server.isSuccess && (
          <Alert color="gray" title="Backups are off">
            This server makes no backups. Start it with <code>--backup-to DEST</code> (
            <code>s3://BUCKET/PREFIX</code> or a directory) to back the store up from here while it
            serves.
          </Alert>
        )
      )}
    </Stack>
  );
}

// A read-only server (a replica of a bucket, or `--read-only`) backs up from the bucket and
// cannot flush, so it offers no flush.
function Destination({ destination, readOnly }: { destination: string; readOnly: boolean }) {
  const client = useQueryClient();
  const [flush, setFlush] = useState(false);
  const list = useQuery({
    queryKey: ['backups'],
    queryFn: () => unwrap(api.GET('/api/v1/backups')),
  });
  const create = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/api/v1/admin:backup', { body: { flush: flush && !readOnly } })),
    // Asked again either way: a backup the answer never reached may have been made.
    onSettled: () => void client.invalidateQueries({ queryKey: ['backups'] }),
  });
  const made = create.data;
  // In the order they were made: the chart's times must rise.
  const backups = [...(list.data ?? [])].sort(
    (a, b) => a.created_millis - b.created_millis || a.number - b.number,
  );
  return (
    <>
      <Paper withBorder p="sm">
        <Stack gap="xs">
          <Text fw={600}>Back up now</Text>
          <Text size="sm">
            To <code>{destination}</code>, while the store keeps serving: every write answered
            before the backup began is in it. Objects already in the destination are not copied
            again.
          </Text>
          {!readOnly && (
            <Checkbox
              label="Flush first (writes made without the WAL are included)"
              checked={flush}
              onChange={(e) => setFlush(e.currentTarget.checked)}
            />
          )}
          <ErrorNote error={create.error} />
          {made && (
            <Alert color="green" data-testid="backup-made">
              Backup {made.backup.number}: {count(made.copied)} objects copied (
              {bytes(made.bytes_copied)}), {count(made.already_there)} there already.
            </Alert>
          )}
          <Group>
            <Button onClick={() => create.mutate()} loading={create.isPending}>
              Back up now
            </Button>
          </Group>
        </Stack>
      </Paper>
      <ErrorNote error={list.error} />
      {backups.length > 1 && (
        <Paper withBorder p="sm">
          <Text fw={600} mb="xs">
            Size of each backup
          </Text>
          <TimeSeries
            ariaLabel="Size of each backup over time"
            times={backups.map((b) => b.created_millis / 1000)}
            format={bytes}
            series={[{ label: 'bytes', color: '#1c7ed6', values: backups.map((b) => b.bytes) }]}
          />
        </Paper>
      )}
      <VirtualTable
        label="Backups"
        empty="No backup yet."
        rows={[...backups].reverse()}
        rowKey={(b) => String(b.number)}
        columns={[
          { header: 'Backup', width: '80px', render: (b) => String(b.number) },
          {
            header: 'Made',
            width: '190px',
            render: (b) => epochSeconds(Math.floor(b.created_millis / 1000)),
          },
          { header: 'Files', width: '80px', render: (b) => count(b.files) },
          { header: 'Objects', width: '80px', render: (b) => count(b.objects) },
          { header: 'Size', width: '100px', render: (b) => bytes(b.bytes) },
          { header: 'Source', render: (b) => b.source },
        ]}
      />
    </>
  );
}
