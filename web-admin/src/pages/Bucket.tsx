import { Paper, Progress, SimpleGrid, Stack, Text, Title } from '@mantine/core';
import { useStats } from '../api/queries';
import { ErrorNote } from '../components/ErrorNote';
import { StatCard } from '../components/StatCard';
import { bytes, count, lookupShare } from '../format';

const OPS = [
  { key: 'gets', label: 'GET', color: '#1c7ed6' },
  { key: 'puts', label: 'PUT', color: '#2f9e44' },
  { key: 'lists', label: 'LIST', color: '#7048e8' },
  { key: 'deletes', label: 'DELETE', color: '#e8590c' },
] as const;

/** A store in an S3-compatible bucket: where it is, its writer, what it asked of the bucket. */
export function BucketPage() {
  const stats = useStats();
  if (stats.error) return <ErrorNote error={stats.error} />;
  const st = stats.data?.storage;
  if (stats.data && !st) {
    return (
      <Stack>
        <Title order={1} size="h2">
          Bucket
        </Title>
        <Text>
          This store is on the local disk. A store in a bucket (
          <code>strata serve --db s3://BUCKET/PREFIX</code>) shows its requests, cache and writer
          here.
        </Text>
      </Stack>
    );
  }
  const requests = st ? st.gets + st.puts + st.lists + st.deletes : 0;
  return (
    <Stack>
      <Title order={1} size="h2">
        Bucket
      </Title>
      <Text data-testid="bucket-location">{st?.location ?? '–'}</Text>
      <SimpleGrid cols={{ base: 2, md: 4 }}>
        <StatCard
          label="Writer epoch"
          value={st ? (st.writer_epoch === 0 ? 'reader' : count(st.writer_epoch)) : '–'}
          hint="each open for writing fences the one before"
        />
        {st?.reader_lease ? (
          <StatCard
            label="Reader's lease"
            value={st.reader_lease_lapsed ? 'lapsed' : 'held'}
            hint={
              st.reader_lease_lapsed
                ? 'renewals failed: reopen, garbage collection may delete what this reads'
                : 'garbage collection keeps the version this server reads'
            }
          />
        ) : null}
        <StatCard
          label="Durability"
          value={st?.durability ?? '–'}
          hint={
            st?.durability === 'bucket'
              ? 'a synced write is in the bucket'
              : 'the WAL is on this disk'
          }
        />
        <StatCard
          label="Log records"
          value={count(st?.log_records)}
          hint="written by this writer"
        />
        <StatCard
          label="Upload queue"
          value={count(st?.upload_queue)}
          hint="changes for the next record"
        />
        <StatCard label="Uploaded" value={bytes(st?.bytes_up)} />
        <StatCard label="Downloaded" value={bytes(st?.bytes_down)} />
        <StatCard
          label="Cache hit rate"
          value={st ? lookupShare(st.cache_hits, st.cache_hits + st.cache_misses) : '–'}
          hint={st ? `${count(st.cache_misses)} files fetched` : ''}
        />
        <StatCard label="Cached" value={bytes(st?.cache_bytes)} hint="of the store's files" />
      </SimpleGrid>
      <Paper withBorder p="sm">
        <Text fw={600}>Requests since open: {count(requests)}</Text>
        <Progress.Root size="xl" role="group" aria-label="Requests by operation">
          {st &&
            OPS.map((op) => (
              <Progress.Section
                key={op.key}
                value={(100 * st[op.key]) / Math.max(1, requests)}
                color={op.color}
                aria-label={op.label}
              >
                <Progress.Label>
                  {op.label} {count(st[op.key])}
                </Progress.Label>
              </Progress.Section>
            ))}
        </Progress.Root>
      </Paper>
    </Stack>
  );
}
