// A replica's lag as it goes: how far behind its writer it is, and whether its rounds fail.
import { Alert, Paper, SimpleGrid, Stack, Text } from '@mantine/core';
import { useEffect, useState } from 'react';
import { useReplica } from '../api/queries';
import { count } from '../format';
import { StatCard } from './StatCard';
import { TimeSeries } from './TimeSeries';

/** Samples of lag kept for the chart (five minutes at one a second). */
const KEPT = 300;

type Point = { at: number; lag: number };

export function ReplicaPanel() {
  const replica = useReplica();
  const [points, setPoints] = useState<Point[]>([]);
  const r = replica.data;
  useEffect(() => {
    if (!r) return;
    setPoints((ps) => [...ps.slice(-(KEPT - 1)), { at: Date.now() / 1000, lag: r.lag_seconds }]);
  }, [r]);
  if (!r) return null;
  return (
    <Stack gap="sm" data-testid="replica-panel">
      {r.last_error && (
        <Alert color="orange" title="The replica cannot catch up: it serves what it has">
          {r.last_error}
        </Alert>
      )}
      <SimpleGrid cols={{ base: 2, md: 4 }}>
        <StatCard
          label="Replica lag"
          value={`${r.lag_seconds.toFixed(1)} s`}
          hint={`every write older is visible; looks every ${r.poll_millis} ms`}
        />
        <StatCard label="Sequence" value={count(r.sequence)} hint="the newest write shown" />
        <StatCard label="Rounds" value={count(r.rounds)} hint="times it caught up" />
        <StatCard label="Failed rounds" value={count(r.failures)} hint="since open" />
      </SimpleGrid>
      <Paper withBorder p="sm">
        <Text fw={600}>Replica lag (seconds)</Text>
        <TimeSeries
          ariaLabel="Replica lag in seconds"
          times={points.map((p) => p.at)}
          format={(v) => `${v.toFixed(1)} s`}
          series={[{ label: 'lag', color: '#1c7ed6', values: points.map((p) => p.lag) }]}
        />
      </Paper>
    </Stack>
  );
}
