// The frame around every page: sign-in, navigation, the store's badges and the live feed.
import { useEffect, useState, type ReactNode } from 'react';
import {
  Alert,
  AppShell,
  Badge,
  Burger,
  Button,
  Center,
  Group,
  Loader,
  NavLink,
  Paper,
  PasswordInput,
  Stack,
  Text,
  Title,
} from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import type { QueryClient } from '@tanstack/react-query';
import { NavLink as RouterLink, useLocation } from 'react-router';
import { ApiError, signIn } from '../api/client';
import { startLive, useLive } from '../api/live';
import { useServer } from '../api/queries';
import { CfSelect } from './CfSelect';
import { ErrorNote } from './ErrorNote';

const PAGES = [
  { path: '/', label: 'Overview' },
  { path: '/lsm', label: 'LSM' },
  { path: '/cache', label: 'Cache' },
  { path: '/tombstones', label: 'Tombstones' },
  { path: '/blobs', label: 'Blobs' },
  { path: '/bucket', label: 'Bucket' },
  { path: '/events', label: 'Events' },
  { path: '/keys', label: 'Keys' },
  { path: '/column-families', label: 'Column families' },
  { path: '/actions', label: 'Actions' },
  { path: '/backups', label: 'Backups' },
] as const;

function SignIn({ onDone, problem }: { onDone: () => void; problem?: unknown }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<unknown>(problem);
  const [busy, setBusy] = useState(false);
  const submit = async (t: string) => {
    setBusy(true);
    try {
      await signIn(t);
      onDone();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <Center h="100vh" p="md">
      <Paper withBorder p="xl" radius="md" w={420} maw="100%">
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void submit(token);
          }}
        >
          <Stack>
            <Title order={2}>Strata console</Title>
            <Text size="sm" c="dimmed">
              Paste the token `strata serve` printed (or open the URL it printed, which signs in by
              itself).
            </Text>
            <PasswordInput
              label="Token"
              value={token}
              onChange={(e) => setToken(e.currentTarget.value)}
              autoFocus
              required
            />
            {error instanceof ApiError && error.status !== 401 ? <ErrorNote error={error} /> : null}
            {error instanceof ApiError && error.status === 401 && token ? (
              <Alert color="red">That token is not this server&apos;s.</Alert>
            ) : null}
            <Button type="submit" loading={busy}>
              Sign in
            </Button>
          </Stack>
        </form>
      </Paper>
    </Center>
  );
}

function ConnectionBadge() {
  const { connection } = useLive();
  const [color, text] =
    connection === 'open'
      ? ['green', 'live']
      : connection === 'lost'
        ? ['red', 'connection lost: reconnecting']
        : ['gray', 'connecting'];
  return (
    <Badge color={color} variant="light" data-testid="connection" aria-live="polite">
      {text}
    </Badge>
  );
}

/** Said at the top of every page while the feed is down: what is shown may be stale. */
function LostBanner() {
  const { connection } = useLive();
  if (connection !== 'lost') return null;
  return (
    <Alert color="red" mb="md" title="Connection to the server lost" role="status">
      Reconnecting… What this page shows may be out of date until it is back.
    </Alert>
  );
}

export function Shell({ client, children }: { client: QueryClient; children: ReactNode }) {
  const server = useServer();
  const [opened, { toggle, close }] = useDisclosure();
  const location = useLocation();
  const signedIn = server.isSuccess;

  useEffect(() => {
    if (signedIn) return startLive(client);
  }, [signedIn, client]);

  useEffect(close, [location.pathname, close]);

  if (server.isPending) {
    return (
      <Center h="100vh">
        <Loader />
      </Center>
    );
  }
  if (server.isError) {
    const e = server.error;
    if (e instanceof ApiError && e.status === 401) {
      return <SignIn onDone={() => void client.invalidateQueries()} />;
    }
    return (
      <Center h="100vh" p="md">
        <Stack>
          <ErrorNote error={e} />
          <Button onClick={() => void server.refetch()}>Try again</Button>
        </Stack>
      </Center>
    );
  }
  const info = server.data;
  const search = location.search;
  return (
    <AppShell
      header={{ height: 52 }}
      navbar={{ width: 210, breakpoint: 'sm', collapsed: { mobile: !opened } }}
      padding="md"
    >
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between" wrap="nowrap">
          <Group gap="sm" wrap="nowrap">
            <Burger opened={opened} onClick={toggle} hiddenFrom="sm" size="sm" aria-label="Menu" />
            <Title order={4}>Strata</Title>
            <Text size="xs" c="dimmed" visibleFrom="xs">
              v{info.version}
            </Text>
            {info.read_only && (
              <Badge color="orange" data-testid="read-only">
                read-only
              </Badge>
            )}
            {info.mounted_column_family && (
              <Badge variant="outline" visibleFrom="md">
                mounted: {info.mounted_column_family}
              </Badge>
            )}
          </Group>
          <Group gap="sm" wrap="nowrap">
            <ConnectionBadge />
            <CfSelect />
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs" aria-label="Pages">
        {PAGES.map((p) => (
          <NavLink
            key={p.path}
            component={RouterLink}
            to={{ pathname: p.path, search }}
            label={p.label}
            active={location.pathname === p.path}
          />
        ))}
      </AppShell.Navbar>
      <AppShell.Main>
        <LostBanner />
        {children}
      </AppShell.Main>
    </AppShell>
  );
}
