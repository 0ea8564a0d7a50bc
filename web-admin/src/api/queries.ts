// Every read the pages make, as TanStack queries keyed by what they show; the live feed
// invalidates them (api/live.ts) and they poll only while it is down.
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { api, unwrap } from './client';
import { pollWhenOffline } from './live';

export function useServer() {
  return useQuery({
    queryKey: ['server'],
    queryFn: () => unwrap(api.GET('/api/v1/server')),
    retry: false,
  });
}

export function useStats() {
  return useQuery({
    queryKey: ['stats'],
    queryFn: () => unwrap(api.GET('/api/v1/stats')),
    refetchInterval: pollWhenOffline(),
  });
}

export function useColumnFamilies() {
  return useQuery({
    queryKey: ['cf', 'list'],
    queryFn: () => unwrap(api.GET('/api/v1/cfs')),
  });
}

export function useColumnFamily(name: string) {
  return useQuery({
    queryKey: ['cf', 'detail', name],
    queryFn: () => unwrap(api.GET('/api/v1/cfs/{name}', { params: { path: { name } } })),
  });
}

export function useLsm(cf: string) {
  return useQuery({
    queryKey: ['lsm', cf],
    queryFn: () => unwrap(api.GET('/api/v1/lsm', { params: { query: { cf } } })),
    refetchInterval: pollWhenOffline(),
    placeholderData: keepPreviousData,
  });
}

export function useCache() {
  return useQuery({
    queryKey: ['cache'],
    queryFn: () => unwrap(api.GET('/api/v1/cache')),
    refetchInterval: pollWhenOffline(),
  });
}

export function useBlobs(cf: string) {
  return useQuery({
    queryKey: ['blobs', cf],
    queryFn: () => unwrap(api.GET('/api/v1/blobs', { params: { query: { cf } } })),
    refetchInterval: pollWhenOffline(),
  });
}

export function useTombstones(cf: string, pageToken: string | undefined) {
  return useQuery({
    queryKey: ['tombstones', cf, pageToken ?? ''],
    queryFn: () =>
      unwrap(
        api.GET('/api/v1/tombstones', {
          params: {
            query: { cf, limit: 200, page_token: pageToken, encoding: 'base64' },
          },
        }),
      ),
    placeholderData: keepPreviousData,
  });
}

/** A replica's progress (`serve --replica-of`), polled each second whatever the live feed does:
 * lag is a clock, not an event. `undefined` data on any other store. */
export function useReplica() {
  return useQuery({
    queryKey: ['stats', 'replica'],
    queryFn: async () => (await unwrap(api.GET('/api/v1/stats'))).replica ?? null,
    refetchInterval: 1000,
  });
}
