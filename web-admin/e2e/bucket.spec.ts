// The console's Bucket page on a store in a real SeaweedFS bucket, served by `strata serve --db
// s3://…`: where the store is, its writer epoch and durability, and the requests a write made.
import { expect, test } from '@playwright/test';
import { failOnConsoleErrors, signIn } from './page';
import { startSeaweed, type Seaweed } from './seaweed';
import { removeStore, serve, tempStore, type Served } from './serve';

let seaweed: Seaweed | undefined;
let served: Served | undefined;
let replica: Served | undefined;
let url = '';

test.beforeAll(async () => {
  const started = await startSeaweed();
  if (typeof started === 'string') {
    if (process.env.CI) throw new Error(`CI is set: ${started}`);
    return;
  }
  seaweed = started;
  url = `s3://${seaweed.bucket}/console-${process.pid}-${Date.now()}`;
  served = await serve(tempStore(), ['--s3-endpoint', seaweed.endpoint], '127.0.0.1:0', {
    db: url,
    env: seaweed.env,
  });
  replica = await serve(
    tempStore(),
    ['--s3-endpoint', seaweed.endpoint, '--poll-ms', '200'],
    '127.0.0.1:0',
    { db: url, env: seaweed.env, replica: true },
  );
});

test.afterAll(async () => {
  await replica?.stop();
  if (replica) removeStore(replica.dir);
  await served?.stop();
  if (served) removeStore(served.dir);
  await seaweed?.stop();
});

failOnConsoleErrors();

test('the Bucket page shows where the store is and what it asked of the bucket', async ({
  page,
}) => {
  test.skip(!served, 'no SeaweedFS here (CI fails instead)');
  const s = served as Served;
  // A write synced to the bucket: a record, so at least one PUT beyond the open's.
  const key = Buffer.from('from-the-test').toString('base64url');
  const put = await page.request.put(`${s.url}/api/v1/kv/${key}?sync=bucket`, {
    headers: { Authorization: `Bearer ${s.token}` },
    data: { value: Buffer.from('1').toString('base64') },
  });
  expect(put.status()).toBeLessThan(300);
  await signIn(page, s);
  await page
    .getByRole('navigation', { name: 'Pages' })
    .getByText('Bucket', { exact: true })
    .click();
  await expect(page.getByRole('heading', { name: /^Bucket/ })).toBeVisible();
  await expect(page.getByTestId('bucket-location')).toHaveText(url);
  await expect(page.getByText('the WAL is on this disk')).toBeVisible();
  await expect(page.getByText(/^Requests since open: [1-9]/)).toBeVisible();
  await expect(page.getByRole('progressbar').filter({ hasText: /^PUT [1-9]/ })).toBeVisible();
});

test('a replica shows its lag, and a write on the writer once it caught up', async ({ page }) => {
  test.skip(!replica, 'no SeaweedFS here (CI fails instead)');
  const [w, r] = [served as Served, replica as Served];
  const key = Buffer.from('for-the-replica').toString('base64url');
  const put = await page.request.put(`${w.url}/api/v1/kv/${key}?sync=bucket`, {
    headers: { Authorization: `Bearer ${w.token}` },
    data: { value: Buffer.from('seen').toString('base64') },
  });
  expect(put.status()).toBeLessThan(300);
  const seq = put.headers()['strata-sequence'];
  expect(Number(seq)).toBeGreaterThan(0);
  // Read-your-writes: the replica answers once it shows the write's sequence.
  const got = await page.request.get(`${r.url}/api/v1/kv/${key}?raw=1&min_seq=${seq}`, {
    headers: { Authorization: `Bearer ${r.token}` },
  });
  expect(got.status()).toBe(200);
  expect(await got.text()).toBe('seen');
  await signIn(page, r);
  const panel = page.getByTestId('replica-panel');
  await expect(panel.getByTestId('stat-Replica lag')).toHaveText(/^\d+\.\d s$/);
  await expect(panel.getByTestId('stat-Failed rounds')).toHaveText('0');
  await expect(panel.getByRole('img', { name: 'Replica lag in seconds' })).toBeVisible();
});
