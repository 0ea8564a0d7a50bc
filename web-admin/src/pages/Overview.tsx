import { Alert, Paper, SimpleGrid, Stack, Text, Title } from '@mantine/core';
import { useMemo } from 'react';
import { rates, useLive } from '../api/live';
import { useStats } from '../api/queries';
import { ErrorNote } from '../components/ErrorNote';
import { ReplicaPanel } from '../components/ReplicaPanel';
import { StatCard } from '../components/StatCard';
import { TimeSeries } from '../components/TimeSeries';
import { bytes, count, duration, rate, writeAmp } from '../format';

export function OverviewPage() {
  const stats = useStats();
  const { samples, events } = useLive();
  const charts = useMemo(() => {
    const [t, writes] = rates(samples, (s) => s.keys_written + s.keys_deleted);
    const [, reads] = rates(samples, (s) => s.gets);
    const [, userBytes] = rates(samples, (s) => s.bytes_written);
    const [, diskBytes] = rates(
      samples,
      (s) => s.wal_bytes + s.flush_bytes + s.compaction_bytes_written + s.blob_bytes_written,
    );
    const [, stallMs] = rates(samples, (s) => s.write_stall_micros / 1000);
    return { t, writes, reads, userBytes, diskBytes, stallMs };
  }, [samples]);
  if (stats.error) return <ErrorNote error={stats.error} />;
  const p = stats.data?.properties;
  const st = stats.data?.statistics;
  const lastStall = [...events].reverse().find((e) => e.kind === 'stall_begin');
  const last = (xs: number[]) => xs[xs.length - 1];
  return (
    <Stack>
      <Title order={1} size="h2">
        Overview
      </Title>
      {stats.data?.replica && <ReplicaPanel />}
      {p?.background_error && (
        <Alert color="red" title="Background error: writes are stopped">
          {p.background_error}
        </Alert>
      )}
      {p && (p.stopping_column_families > 0 || p.slowing_column_families > 0) && (
        <Alert color="orange" title="Writes are held back for compaction debt">
          {p.stopping_column_families} column families stopping writes, {p.slowing_column_families}{' '}
          slowing them
          {lastStall ? ` (latest cause: ${String(lastStall.data.cause)})` : ''}.
        </Alert>
      )}
      <SimpleGrid cols={{ base: 2, sm: 3, lg: 6 }}>
        <StatCard label="Writes" value={rate(last(charts.writes))} hint="keys per second" />
        <StatCard label="Reads" value={rate(last(charts.reads))} hint="point lookups per second" />
        <StatCard
          label="Write amp."
          value={writeAmp(p?.write_amplification, st?.bytes_written)}
          hint="disk bytes per user byte"
        />
        <StatCard label="Store size" value={bytes(p?.live_bytes)} hint="live tables and blobs" />
        <StatCard
          label="Stalls"
          value={count(st?.write_stalls)}
          hint={`${duration((st?.write_stall_micros ?? 0) / 1000)} waited`}
        />
        <StatCard
          label="Pending compaction"
          value={bytes(p?.pending_compaction_bytes)}
          hint={`${p?.compactions_running ?? 0} running, ${p?.flushes_running ?? 0} flushes`}
        />
      </SimpleGrid>
      <SimpleGrid cols={{ base: 1, md: 2 }}>
        <Paper withBorder p="sm">
          <Text fw={600}>Operations per second</Text>
          <TimeSeries
            ariaLabel="Writes and reads per second"
            times={charts.t}
            format={(v) => count(v)}
            series={[
              { label: 'writes', color: '#e8590c', values: charts.writes },
              { label: 'reads', color: '#1c7ed6', values: charts.reads },
            ]}
          />
        </Paper>
        <Paper withBorder p="sm">
          <Text fw={600}>Bytes written per second</Text>
          <TimeSeries
            ariaLabel="User and disk bytes written per second"
            times={charts.t}
            format={(v) => bytes(v)}
            series={[
              { label: 'user', color: '#2f9e44', values: charts.userBytes },
              {
                label: 'disk (WAL, blobs, flush, compaction)',
                color: '#862e9c',
                values: charts.diskBytes,
              },
            ]}
          />
        </Paper>
        <Paper withBorder p="sm">
          <Text fw={600}>Write stall time (ms per second)</Text>
          <TimeSeries
            ariaLabel="Milliseconds writers stalled per second"
            times={charts.t}
            format={(v) => v.toFixed(0)}
            series={[{ label: 'stalled', color: '#c92a2a', values: charts.stallMs }]}
          />
        </Paper>
        <Paper withBorder p="sm">
          <Text fw={600}>Store</Text>
          <SimpleGrid cols={2} spacing="xs" mt="xs">
            <Text size="sm">Tables</Text>
            <Text size="sm">
              {count(p?.total_files)} files, {bytes(p?.total_sst_bytes)}
            </Text>
            <Text size="sm">Blob files</Text>
            <Text size="sm">
              {count(p?.live_blob_files)} files, {bytes(p?.blob_file_bytes)}
            </Text>
            <Text size="sm">WAL</Text>
            <Text size="sm">
              {count(p?.live_wal_files)} files, {bytes(p?.live_wal_bytes)}
            </Text>
            <Text size="sm">Column families</Text>
            <Text size="sm">{p?.column_families.length ?? '–'}</Text>
            <Text size="sm">Snapshots</Text>
            <Text size="sm">{p?.live_snapshots ?? '–'}</Text>
            <Text size="sm">Last sequence</Text>
            <Text size="sm">{count(p?.last_sequence)}</Text>
          </SimpleGrid>
        </Paper>
      </SimpleGrid>
    </Stack>
  );
}
