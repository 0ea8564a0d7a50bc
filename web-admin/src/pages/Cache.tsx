import { Paper, Progress, SimpleGrid, Stack, Table, Text, Title } from '@mantine/core';
import { useMemo } from 'react';
import { ratios, useLive } from '../api/live';
import { useCache } from '../api/queries';
import { ErrorNote } from '../components/ErrorNote';
import { StatCard } from '../components/StatCard';
import { TimeSeries } from '../components/TimeSeries';
import { bytes, count, lookupShare } from '../format';

export function CachePage() {
  const cache = useCache();
  const { samples } = useLive();
  const charts = useMemo(() => {
    const [t, data] = ratios(
      samples,
      (s) => s.block_cache_data_hit,
      (s) => s.block_cache_data_hit + s.block_cache_data_miss,
    );
    const [, index] = ratios(
      samples,
      (s) => s.block_cache_index_hit,
      (s) => s.block_cache_index_hit + s.block_cache_index_miss,
    );
    const [, filter] = ratios(
      samples,
      (s) => s.block_cache_filter_hit,
      (s) => s.block_cache_filter_hit + s.block_cache_filter_miss,
    );
    const pct = (xs: (number | null)[]) => xs.map((x) => (x === null ? null : 100 * x));
    return { t, data: pct(data), index: pct(index), filter: pct(filter) };
  }, [samples]);
  if (cache.error) return <ErrorNote error={cache.error} />;
  const c = cache.data;
  const bc = c?.block_cache;
  return (
    <Stack>
      <Title order={1} size="h2">
        Block cache
      </Title>
      {c && !bc && <Text>This store runs without a block cache.</Text>}
      <SimpleGrid cols={{ base: 2, md: 4 }}>
        <StatCard
          label="Capacity"
          value={bytes(bc?.capacity)}
          hint={bc ? `${bc.kind} eviction` : ''}
        />
        <StatCard label="Usage" value={bytes(bc?.usage)} hint={`${count(bc?.entries)} blocks`} />
        <StatCard label="Pinned" value={bytes(bc?.pinned_usage)} hint="held by readers" />
        <StatCard
          label="Hit rate"
          value={c ? lookupShare(c.total.hits, c.total.hits + c.total.misses) : '–'}
          hint="since open"
        />
      </SimpleGrid>
      {bc && (
        <Progress.Root size="xl" role="group" aria-label="Cache usage">
          <Progress.Section
            value={(100 * bc.pinned_usage) / Math.max(1, bc.capacity)}
            color="orange"
            aria-label="pinned"
          >
            <Progress.Label>pinned</Progress.Label>
          </Progress.Section>
          <Progress.Section
            value={(100 * Math.max(0, bc.usage - bc.pinned_usage)) / Math.max(1, bc.capacity)}
            color="blue"
            aria-label="cached"
          >
            <Progress.Label>cached</Progress.Label>
          </Progress.Section>
        </Progress.Root>
      )}
      <Paper withBorder p="sm">
        <Text fw={600}>Hit rate by block type (%)</Text>
        <TimeSeries
          ariaLabel="Cache hit rate over time by block type"
          times={charts.t}
          format={(v) => `${v.toFixed(0)}%`}
          series={[
            { label: 'data', color: '#1c7ed6', values: charts.data },
            { label: 'index', color: '#2f9e44', values: charts.index },
            { label: 'filter', color: '#e8590c', values: charts.filter },
          ]}
        />
      </Paper>
      <SimpleGrid cols={{ base: 1, md: 2 }}>
        <Table aria-label="Hits and misses by block type">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Block type</Table.Th>
              <Table.Th>Hits</Table.Th>
              <Table.Th>Misses</Table.Th>
              <Table.Th>Hit rate</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {c &&
              (['data', 'index', 'filter', 'total'] as const).map((k) => (
                <Table.Tr key={k}>
                  <Table.Td>{k}</Table.Td>
                  <Table.Td>{count(c[k].hits)}</Table.Td>
                  <Table.Td>{count(c[k].misses)}</Table.Td>
                  <Table.Td>{lookupShare(c[k].hits, c[k].hits + c[k].misses)}</Table.Td>
                </Table.Tr>
              ))}
          </Table.Tbody>
        </Table>
        <Paper withBorder p="sm">
          <Text fw={600}>Bloom filters</Text>
          <Text size="sm">
            {count(c?.bloom_checked)} checks; {count(c?.bloom_useful)} ruled a table out (
            {c ? lookupShare(c.bloom_useful, c.bloom_checked) : '–'}), each a table read saved.
          </Text>
        </Paper>
      </SimpleGrid>
    </Stack>
  );
}
