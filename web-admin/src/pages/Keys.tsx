import {
  Anchor,
  Breadcrumbs,
  Button,
  Checkbox,
  Group,
  NumberInput,
  Paper,
  SimpleGrid,
  Stack,
  Text,
  Textarea,
  TextInput,
  Title,
} from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { api, unwrap } from '../api/client';
import {
  base64ToBytes,
  base64url,
  bytesToBase64,
  displayKey,
  prefixEnd,
  toBytes,
  utf8,
} from '../api/keys';
import { Confirm } from '../components/Confirm';
import { ErrorNote } from '../components/ErrorNote';
import { FolderIcon } from '../components/FolderIcon';
import { useCf } from '../components/useCf';
import { useWritable } from '../components/useWritable';
import { ValueViewer } from '../components/ValueViewer';
import { readPreview } from '../api/preview';
import { VirtualTable } from '../components/VirtualTable';
import { count } from '../format';
import { crumbs, fold, type TreeEntry } from './keyTree';

const PAGE = 200;

/** Entries wanted before a listing stops asking for more. */
const WANTED = 50;

type Listing = { entries: TreeEntry[]; raw: Map<string, string>; next: Uint8Array | null };

/**
 * The next entries under `prefix` from `from` on, a page of keys at a time. A folder is skipped
 * whole once seen (the next page starts past its last possible key), so a listing of the root of
 * a large store asks for a few pages, not for every key in it.
 */
async function list(cf: string, prefix: string, from: Uint8Array | null, seen: Listing) {
  let at = from;
  let entries = seen.entries;
  const raw = new Map(seen.raw);
  const prefixBytes = toBytes(prefix);
  const end = prefix ? prefixEnd(prefixBytes) : null;
  for (let asks = 0; asks < 20; asks++) {
    const page = await unwrap(
      api.POST('/api/v1/kv:scan', {
        body: {
          cf,
          // The API takes a prefix, or bounds: past the first page, the bounds of the rest.
          prefix: prefix && !at ? bytesToBase64(prefixBytes) : undefined,
          start: at ? bytesToBase64(at) : undefined,
          end: at && end ? bytesToBase64(end) : undefined,
          limit: PAGE,
          keys_only: true,
        },
      }),
    );
    const texts = page.items.map((i) => displayKey(base64ToBytes(i.key)));
    page.items.forEach((i, n) => raw.set(texts[n]!, i.key));
    entries = fold(prefix, texts, entries);
    const last = page.items[page.items.length - 1];
    if (!page.more || !last) return { entries, raw, next: null };
    const tail = entries[entries.length - 1];
    at =
      tail?.kind === 'folder'
        ? prefixEnd(toBytes(tail.prefix))
        : Uint8Array.from([...base64ToBytes(last.key), 0]);
    if (!at) return { entries, raw, next: null };
    if (entries.length - seen.entries.length >= WANTED) break;
  }
  return { entries, raw, next: at };
}

function useKeyListing(cf: string, prefix: string) {
  const empty: Listing = { entries: [], raw: new Map(), next: null };
  const [listing, setListing] = useState<Listing>(empty);
  const first = useQuery({
    queryKey: ['keys', cf, prefix],
    queryFn: () => list(cf, prefix, null, empty),
  });
  useEffect(() => {
    if (first.data) setListing(first.data);
  }, [first.data]);
  const more = useMutation({
    mutationFn: () => list(cf, prefix, listing.next, listing),
    onSuccess: setListing,
  });
  return { ...listing, first, more };
}

type KeyViewProps = {
  cf: string;
  keyText: string;
  /** The key's bytes as base64 when it came from a scan (its text may be escaped). */
  raw?: string;
  onDeleted: () => void;
};

function KeyView({ cf, keyText, raw, onDeleted }: KeyViewProps) {
  const writable = useWritable();
  const [confirm, setConfirm] = useState(false);
  const path = base64url(raw ? base64ToBytes(raw) : toBytes(keyText));
  // The first bytes only, by range: a value may be gigabytes.
  const value = useQuery({
    queryKey: ['kv', cf, keyText],
    queryFn: () => readPreview(cf, path),
  });
  const del = useMutation({
    mutationFn: () =>
      unwrap(api.DELETE('/api/v1/kv/{key}', { params: { path: { key: path }, query: { cf } } })),
    onSuccess: () => {
      setConfirm(false);
      onDeleted();
    },
  });
  return (
    <Paper withBorder p="sm">
      <Group justify="space-between" mb="xs" wrap="nowrap">
        <Text fw={600} style={{ wordBreak: 'break-all' }} data-testid="selected-key">
          {keyText}
        </Text>
        {writable && (
          <Button size="xs" color="red" variant="light" onClick={() => setConfirm(true)}>
            Delete key
          </Button>
        )}
      </Group>
      <ErrorNote error={value.error ?? del.error} />
      {value.data && <ValueViewer value={value.data.bytes} total={value.data.total} />}
      <Confirm
        opened={confirm}
        title="Delete this key?"
        confirmLabel="Delete"
        busy={del.isPending}
        onConfirm={() => del.mutate()}
        onCancel={() => setConfirm(false)}
      >
        {keyText}
      </Confirm>
    </Paper>
  );
}

function PutForm({
  cf,
  prefix,
  onDone,
}: {
  cf: string;
  prefix: string;
  onDone: (k: string) => void;
}) {
  const [key, setKey] = useState(prefix);
  const [value, setValue] = useState('');
  const [ttl, setTtl] = useState<number | string>('');
  const [sync, setSync] = useState(true);
  useEffect(() => setKey(prefix), [prefix]);
  const put = useMutation({
    mutationFn: () =>
      unwrap(
        api.PUT('/api/v1/kv/{key}', {
          params: {
            path: { key: base64url(toBytes(key)) },
            query: {
              cf,
              sync: sync ? 'true' : 'false',
              ttl: typeof ttl === 'number' && ttl > 0 ? ttl : undefined,
            },
          },
          body: { value: bytesToBase64(toBytes(value)) },
        }),
      ),
    onSuccess: () => onDone(key),
  });
  return (
    <Paper withBorder p="sm">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          put.mutate();
        }}
      >
        <Stack gap="xs">
          <Text fw={600}>Put a key</Text>
          <TextInput
            label="Key"
            value={key}
            onChange={(e) => setKey(e.currentTarget.value)}
            required
          />
          <Textarea
            label="Value (UTF-8)"
            value={value}
            onChange={(e) => setValue(e.currentTarget.value)}
            autosize
            minRows={2}
            maxRows={8}
          />
          <Group align="end">
            <NumberInput
              label="TTL (seconds, empty: none)"
              value={ttl}
              onChange={setTtl}
              min={1}
              allowDecimal={false}
              w={200}
            />
            <Checkbox
              label="Sync (fsync the WAL)"
              checked={sync}
              onChange={(e) => setSync(e.currentTarget.checked)}
            />
          </Group>
          <ErrorNote error={put.error} />
          <Button type="submit" loading={put.isPending} disabled={!key}>
            Put
          </Button>
        </Stack>
      </form>
    </Paper>
  );
}

function DeleteRangeForm({
  cf,
  prefix,
  onDone,
}: {
  cf: string;
  prefix: string;
  onDone: () => void;
}) {
  const [start, setStart] = useState(prefix);
  const [end, setEnd] = useState('');
  const [estimate, setEstimate] = useState<{ keys: number; more: boolean } | null>(null);
  useEffect(() => {
    setStart(prefix);
    const e = prefixEnd(toBytes(prefix));
    setEnd(prefix && e ? (utf8(e) ?? '') : '');
    setEstimate(null);
  }, [prefix]);
  const body = (dry_run: boolean) => ({
    cf,
    start: bytesToBase64(toBytes(start)),
    end: bytesToBase64(toBytes(end)),
    dry_run,
    sync: true,
  });
  const dry = useMutation({
    mutationFn: () => unwrap(api.POST('/api/v1/kv:deleteRange', { body: body(true) })),
    onSuccess: (r) => setEstimate({ keys: r.keys ?? r.estimated_keys ?? 0, more: r.more ?? false }),
  });
  const real = useMutation({
    mutationFn: () => unwrap(api.POST('/api/v1/kv:deleteRange', { body: body(false) })),
    onSuccess: () => {
      setEstimate(null);
      onDone();
    },
  });
  return (
    <Paper withBorder p="sm">
      <Stack gap="xs">
        <Text fw={600}>Delete a range [start, end)</Text>
        <SimpleGrid cols={2}>
          <TextInput
            label="Start"
            value={start}
            onChange={(e) => setStart(e.currentTarget.value)}
          />
          <TextInput label="End" value={end} onChange={(e) => setEnd(e.currentTarget.value)} />
        </SimpleGrid>
        <ErrorNote error={dry.error ?? real.error} />
        <Button
          variant="light"
          color="red"
          onClick={() => dry.mutate()}
          loading={dry.isPending}
          disabled={!end}
        >
          Dry run: count what it deletes
        </Button>
      </Stack>
      <Confirm
        opened={estimate !== null}
        title="Delete this range?"
        confirmLabel="Delete range"
        busy={real.isPending}
        onConfirm={() => real.mutate()}
        onCancel={() => setEstimate(null)}
      >
        <span data-testid="dry-run-count">
          {estimate?.more ? 'More than ' : ''}
          {count(estimate?.keys ?? 0)} keys will be deleted
        </span>{' '}
        from “{start}” up to “{end}”. This cannot be undone.
      </Confirm>
    </Paper>
  );
}

export function KeysPage() {
  const [cf] = useCf();
  const writable = useWritable();
  const client = useQueryClient();
  const [prefix, setPrefix] = useState('');
  const [typed, setTyped] = useState('');
  const [selected, setSelected] = useState<string | null>(null);
  const pages = useKeyListing(cf, prefix);
  const go = (p: string) => {
    setPrefix(p);
    setTyped(p);
    setSelected(null);
  };
  const refresh = () => void client.invalidateQueries({ queryKey: ['keys', cf] });
  return (
    <Stack>
      <Title order={1} size="h2">
        Keys: {cf}
      </Title>
      <Group align="end">
        <form
          onSubmit={(e) => {
            e.preventDefault();
            go(typed);
          }}
        >
          <Group align="end" gap="xs">
            <TextInput
              label="Prefix"
              value={typed}
              onChange={(e) => setTyped(e.currentTarget.value)}
              w={320}
            />
            <Button type="submit" variant="default">
              Browse
            </Button>
          </Group>
        </form>
        <Breadcrumbs aria-label="Where">
          {crumbs(prefix).map((c) => (
            <Anchor key={c.prefix} component="button" type="button" onClick={() => go(c.prefix)}>
              {c.label}
            </Anchor>
          ))}
        </Breadcrumbs>
      </Group>
      <SimpleGrid cols={{ base: 1, lg: 2 }}>
        <Paper withBorder p="sm">
          <ErrorNote error={pages.first.error ?? pages.more.error} />
          <VirtualTable
            label="Keys"
            rows={pages.entries}
            rowKey={(e) => (e.kind === 'folder' ? `d:${e.prefix}` : `k:${e.key}`)}
            selected={selected ? `k:${selected}` : undefined}
            onSelect={(e) => (e.kind === 'folder' ? go(e.prefix) : setSelected(e.key))}
            height={480}
            columns={[
              {
                header: 'Name',
                render: (e) =>
                  e.kind === 'folder' ? (
                    <>
                      <FolderIcon />
                      {e.name}
                    </>
                  ) : (
                    e.name || '(the prefix itself)'
                  ),
              },
            ]}
            empty={pages.first.isPending ? 'Loading…' : 'No keys under this prefix.'}
          />
          {pages.next && (
            <Button
              mt="xs"
              variant="default"
              size="xs"
              onClick={() => pages.more.mutate()}
              loading={pages.more.isPending}
            >
              More
            </Button>
          )}
        </Paper>
        <Stack>
          {selected ? (
            <KeyView
              key={`${cf}:${selected}`}
              cf={cf}
              keyText={selected}
              raw={pages.raw.get(selected)}
              onDeleted={() => {
                setSelected(null);
                refresh();
              }}
            />
          ) : (
            <Text c="dimmed">Select a key to see its value.</Text>
          )}
          {writable && (
            <>
              <PutForm
                cf={cf}
                prefix={prefix}
                onDone={(k) => {
                  void client.invalidateQueries({ queryKey: ['kv', cf, k] });
                  refresh();
                  setSelected(k);
                }}
              />
              <DeleteRangeForm cf={cf} prefix={prefix} onDone={refresh} />
            </>
          )}
        </Stack>
      </SimpleGrid>
    </Stack>
  );
}
