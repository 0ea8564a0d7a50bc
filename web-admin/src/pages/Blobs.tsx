import { Badge, Paper, Progress, SimpleGrid, Stack, Text, Title } from '@mantine/core';
import { useLive } from '../api/live';
import { useBlobs } from '../api/queries';
import { ErrorNote } from '../components/ErrorNote';
import { StatCard } from '../components/StatCard';
import { useCf } from '../components/useCf';
import { VirtualTable } from '../components/VirtualTable';
import { bytes, count, epochSeconds, percent, time } from '../format';

const STATE_COLOR: Record<string, string> = {
  open: 'blue',
  sealed: 'green',
  obsolete: 'gray',
  evicted: 'orange',
};

export function BlobsPage() {
  const [cf] = useCf();
  const blobs = useBlobs(cf);
  const { events } = useLive();
  if (blobs.error) return <ErrorNote error={blobs.error} />;
  const b = blobs.data;
  const history = events
    .filter((e) => e.kind === 'blob_gc' || e.kind === 'blob_files_deleted')
    .filter((e) => e.data.column_family === cf)
    .reverse();
  const limit = b?.fifo.max_db_size ?? 0;
  return (
    <Stack>
      <Title order={1} size="h2">
        Blob files: {cf}
      </Title>
      <SimpleGrid cols={{ base: 2, md: 4 }}>
        <StatCard
          label="Blob files"
          value={count(b?.totals.live_blob_files)}
          hint={bytes(b?.totals.blob_file_bytes)}
        />
        <StatCard
          label="Garbage"
          value={bytes(b?.totals.blob_garbage_bytes)}
          hint={
            b
              ? `${percent(b.totals.blob_garbage_bytes, b.totals.blob_file_bytes)} of blob bytes`
              : ''
          }
        />
        <StatCard
          label="GC relocated"
          value={bytes(b?.gc.relocated_bytes)}
          hint={`${count(b?.gc.relocated_keys)} keys; ${count(b?.gc.files_obsolete)} files freed`}
        />
        <StatCard
          label="FIFO evicted"
          value={count(b?.fifo.evicted_files)}
          hint={`${count(b?.fifo.evicted_keys)} keys, ${bytes(b?.fifo.evicted_bytes)}`}
        />
      </SimpleGrid>
      <Paper withBorder p="sm">
        <Text fw={600}>Size limit (max_db_size)</Text>
        {limit > 0 && b ? (
          <>
            <Text size="sm">
              {bytes(b.fifo.live_bytes)} of {bytes(limit)}: past the limit the oldest blob files are
              evicted.
            </Text>
            <Progress
              aria-label="Live bytes against the size limit"
              value={Math.min(100, (100 * b.fifo.live_bytes) / limit)}
              color={b.fifo.live_bytes > limit * 0.9 ? 'red' : 'blue'}
              size="lg"
            />
          </>
        ) : (
          <Text size="sm">
            No limit set: {bytes(b?.fifo.live_bytes)} live. FIFO eviction is off.
          </Text>
        )}
      </Paper>
      <VirtualTable
        label="Blob files"
        rows={b?.files ?? []}
        rowKey={(f) => f.number}
        columns={[
          { header: 'File', width: '90px', render: (f) => String(f.number).padStart(6, '0') },
          {
            header: 'State',
            width: '100px',
            render: (f) => <Badge color={STATE_COLOR[f.state] ?? 'gray'}>{f.state}</Badge>,
          },
          { header: 'Size', width: '90px', render: (f) => bytes(f.file_size) },
          { header: 'Live', width: '90px', render: (f) => bytes(f.live_bytes) },
          { header: 'Garbage', width: '90px', render: (f) => bytes(f.garbage_bytes) },
          { header: 'Records', width: '80px', render: (f) => count(f.records) },
          {
            header: 'TTL bucket',
            render: (f) =>
              f.expiration_range
                ? `${epochSeconds(f.expiration_range[0])} – ${epochSeconds(f.expiration_range[1])}`
                : f.has_ttl
                  ? 'TTL'
                  : 'no TTL',
          },
        ]}
        empty="No blob files: this column family keeps values inline, or holds none large enough."
      />
      <Paper withBorder p="sm">
        <Text fw={600} mb="xs">
          GC and eviction history (this session)
        </Text>
        <VirtualTable
          label="Blob history"
          rows={history}
          rowKey={(e) => e.id}
          height={240}
          columns={[
            { header: 'Time', width: '90px', render: (e) => time(e.at) },
            { header: 'What', width: '160px', render: (e) => e.kind.replace(/_/g, ' ') },
            { header: 'Detail', render: (e) => JSON.stringify(e.data) },
          ]}
          empty="No GC or eviction since the page opened."
        />
      </Paper>
    </Stack>
  );
}
