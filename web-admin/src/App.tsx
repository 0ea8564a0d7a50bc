import { MantineProvider } from '@mantine/core';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { BrowserRouter, Route, Routes } from 'react-router';
import { ApiError } from './api/client';
import { Shell } from './components/Shell';
import { readableColors, theme } from './theme';
import { ActionsPage } from './pages/Actions';
import { BackupsPage } from './pages/Backups';
import { BlobsPage } from './pages/Blobs';
import { BucketPage } from './pages/Bucket';
import { CachePage } from './pages/Cache';
import { ColumnFamiliesPage } from './pages/ColumnFamilies';
import { EventsPage } from './pages/Events';
import { KeysPage } from './pages/Keys';
import { LsmPage } from './pages/Lsm';
import { OverviewPage } from './pages/Overview';
import { TombstonesPage } from './pages/Tombstones';

const client = new QueryClient({
  defaultOptions: {
    queries: {
      staleTime: 1000,
      // A refused or missing resource will not appear by asking again.
      retry: (n, e) => !(e instanceof ApiError && e.status >= 400 && e.status < 500) && n < 2,
    },
  },
});

export function App() {
  return (
    <MantineProvider theme={theme} cssVariablesResolver={readableColors}>
      <QueryClientProvider client={client}>
        <BrowserRouter>
          <Shell client={client}>
            <Routes>
              <Route path="/" element={<OverviewPage />} />
              <Route path="/lsm" element={<LsmPage />} />
              <Route path="/cache" element={<CachePage />} />
              <Route path="/tombstones" element={<TombstonesPage />} />
              <Route path="/blobs" element={<BlobsPage />} />
              <Route path="/bucket" element={<BucketPage />} />
              <Route path="/events" element={<EventsPage />} />
              <Route path="/keys" element={<KeysPage />} />
              <Route path="/column-families" element={<ColumnFamiliesPage />} />
              <Route path="/actions" element={<ActionsPage />} />
              <Route path="/backups" element={<BackupsPage />} />
              <Route path="*" element={<OverviewPage />} />
            </Routes>
          </Shell>
        </BrowserRouter>
      </QueryClientProvider>
    </MantineProvider>
  );
}
