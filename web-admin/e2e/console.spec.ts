// The console against a real `strata serve` on a temp store with the demo keyspace, in Debian's
// chromium. Each page is photographed into $SCREENSHOTS (default web-admin/screenshots/).
import { expect, test, type Page } from '@playwright/test';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { failOnConsoleErrors, signIn } from './page';
import { removeStore, serve, tempStore, type Served } from './serve';

const SHOTS = process.env.SCREENSHOTS ?? fileURLToPath(new URL('../screenshots', import.meta.url));
mkdirSync(SHOTS, { recursive: true });

let served: Served;

test.beforeAll(async () => {
  served = await serve(tempStore(), ['--seed-demo']);
  console.log(`screenshots go to ${SHOTS}`);
});

test.afterAll(async () => {
  await served?.stop();
  if (served) removeStore(served.dir);
});

failOnConsoleErrors();

async function open(page: Page, label: string, heading: RegExp) {
  await page.getByRole('navigation', { name: 'Pages' }).getByText(label, { exact: true }).click();
  await expect(page.getByRole('heading', { name: heading })).toBeVisible();
}

async function shot(page: Page, name: string) {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

test('a wrong token is refused and the right one signs in', async ({ page }) => {
  await page.goto(served.url + '/');
  await page.getByLabel('Token').fill('not-the-token-at-all');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByText("That token is not this server's.")).toBeVisible();
  await signIn(page, served);
  await expect(page.getByTestId('connection')).toHaveText('live');
  // The stats samples arrive each second and feed the charts.
  await expect(page.getByTestId('stat-Store size')).not.toHaveText('–');
  await page.waitForTimeout(2500);
  await shot(page, 'overview');
});

test('the URL serve prints signs in by itself', async ({ page }) => {
  await page.goto(`${served.url}/#token=${served.token}`);
  await expect(page.getByRole('heading', { name: 'Overview' })).toBeVisible();
  expect(page.url()).not.toContain('token');
});

test('keys: browse, put and read back, dry-run then delete a range', async ({ page }) => {
  await signIn(page, served);
  await open(page, 'Keys', /^Keys/);
  const keys = page.getByRole('table', { name: 'Keys' });
  await keys.getByText('users/', { exact: true }).click();
  await keys.getByText('0007.json').click();
  await expect(page.getByTestId('value')).toContainText('"name": "user7"');
  await shot(page, 'keys');

  await page.getByRole('textbox', { name: 'Key', exact: true }).fill('notes/console.txt');
  await page.getByLabel('Value (UTF-8)').fill('written from the console');
  await page.getByRole('button', { name: 'Put', exact: true }).click();
  await expect(page.getByTestId('selected-key')).toHaveText('notes/console.txt');
  await expect(page.getByTestId('value')).toHaveText('written from the console');
  const back = await page.request.get(
    `${served.url}/api/v1/kv/${Buffer.from('notes/console.txt').toString('base64url')}?encoding=utf8`,
    { headers: { Authorization: `Bearer ${served.token}` } },
  );
  expect((await back.json()).value).toBe('written from the console');

  await page.getByRole('button', { name: '(all keys)' }).click();
  await page.getByLabel('Prefix').fill('users/00');
  await page.getByRole('button', { name: 'Browse' }).click();
  await expect(page.getByLabel('Start')).toHaveValue('users/00');
  await expect(page.getByLabel('End')).toHaveValue('users/01');
  await page.getByRole('button', { name: /Dry run/ }).click();
  const dialog = page.getByRole('dialog');
  await expect(dialog.getByTestId('dry-run-count')).toHaveText('100 keys will be deleted');
  await shot(page, 'keys-delete-range');
  await dialog.getByRole('button', { name: 'Delete range' }).click();
  await expect(dialog).toBeHidden();
  await expect(keys.getByText('No keys under this prefix.')).toBeVisible();
  const gone = await page.request.get(
    `${served.url}/api/v1/kv/${Buffer.from('users/0042.json').toString('base64url')}`,
    { headers: { Authorization: `Bearer ${served.token}` } },
  );
  expect(gone.status()).toBe(404);
});

test('a large value is previewed by its first bytes, read by range', async ({ page }) => {
  const key = Buffer.from('big/preview.bin').toString('base64url');
  // A Buffer goes as application/octet-stream: the body is the value.
  const put = await page.request.put(`${served.url}/api/v1/kv/${key}`, {
    headers: { Authorization: `Bearer ${served.token}` },
    data: Buffer.alloc(300 * 1024, 'x'),
  });
  expect(put.ok()).toBeTruthy();
  const ranged: string[] = [];
  page.on('request', (r) => {
    if (r.url().includes(`/api/v1/kv/${key}`)) ranged.push(r.headers()['range'] ?? 'whole');
  });
  await signIn(page, served);
  await open(page, 'Keys', /^Keys/);
  const keys = page.getByRole('table', { name: 'Keys' });
  await expect(keys.getByRole('img', { name: 'folder' }).first()).toBeVisible();
  await keys.getByText('big/', { exact: true }).click();
  await keys.getByText('preview.bin').click();
  await expect(page.getByTestId('value-size')).toHaveText('first 64.0 KiB of 300 KiB');
  expect(ranged).toEqual(['bytes=0-65535']);
});

test('column families: create, see its options, drop with a confirmation', async ({ page }) => {
  await signIn(page, served);
  await open(page, 'Column families', /^Column families/);
  await page.getByRole('textbox', { name: 'New column family' }).fill('console-made');
  await page.getByRole('button', { name: 'Create' }).click();
  const list = page.getByRole('table', { name: 'Column families' });
  await expect(list.getByRole('button', { name: 'console-made' })).toBeVisible();
  await expect(page.getByRole('table', { name: 'Options of console-made' })).toContainText(
    'Write buffer',
  );
  await shot(page, 'column-families');
  const row = list.getByRole('row').filter({ hasText: 'console-made' });
  await row.getByRole('button', { name: 'Drop' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Drop' }).click();
  await expect(list.getByRole('button', { name: 'console-made' })).toHaveCount(0);
});

test('a flush from Actions arrives as an event and its file opens on the LSM page', async ({
  page,
}) => {
  await signIn(page, served);
  const before = await page.request.get(`${served.url}/api/v1/lsm`, {
    headers: { Authorization: `Bearer ${served.token}` },
  });
  const filesBefore = (await before.json()).total_files as number;
  await page.request.put(
    `${served.url}/api/v1/kv/${Buffer.from('flush/me').toString('base64url')}`,
    { headers: { Authorization: `Bearer ${served.token}` }, data: { value: 'MQ==' } },
  );
  await open(page, 'Actions', /^Actions/);
  await page.getByRole('button', { name: 'Flush default' }).click();
  await expect(page.getByText('Flushed default.')).toBeVisible();
  await page.getByRole('button', { name: 'Verify the store' }).click();
  await expect(page.getByTestId('verify-report')).toContainText('every file is sound');
  await shot(page, 'actions');

  await open(page, 'Events', /^Events/);
  const events = page.getByRole('table', { name: 'Events' });
  await expect(events.getByText(/default: flushed/).first()).toBeVisible();
  await shot(page, 'events');

  await open(page, 'LSM', /^LSM/);
  await expect(page.getByTestId('lsm-chart')).toBeVisible();
  const files = page.getByRole('table', { name: 'Table files' });
  await expect(files.getByRole('row')).toHaveCount(filesBefore + 2); // header + each file
  await files.getByRole('row').nth(1).click();
  const detail = page.getByTestId('file-detail');
  await expect(detail).toContainText('Sequence range');
  await expect(detail).toContainText('Entries');
  await shot(page, 'lsm');
});

test('cache, tombstones and blobs show the store', async ({ page }) => {
  await signIn(page, served);
  await open(page, 'Cache', /^Block cache/);
  await expect(page.getByRole('table', { name: 'Hits and misses by block type' })).toContainText(
    'data',
  );
  await shot(page, 'cache');
  await open(page, 'Tombstones', /^Tombstones/);
  // The demo deletes logs of the first week with one range tombstone.
  await expect(page.getByRole('table', { name: 'Range tombstones' })).toContainText(
    'logs/2026-11-01/',
  );
  await shot(page, 'tombstones');
  await open(page, 'Blobs', /^Blob files/);
  await shot(page, 'blobs');
  // The demo store is on the local disk: the Bucket page says so instead of showing counters.
  await open(page, 'Bucket', /^Bucket/);
  await expect(page.getByText('This store is on the local disk.')).toBeVisible();
});

test('a narrow window reaches every page through the menu', async ({ page }) => {
  await page.setViewportSize({ width: 420, height: 800 });
  await signIn(page, served);
  await page.getByRole('button', { name: 'Menu' }).click();
  await page.getByRole('navigation', { name: 'Pages' }).getByText('Keys', { exact: true }).click();
  await expect(page.getByRole('heading', { name: /^Keys/ })).toBeVisible();
  await shot(page, 'narrow-keys');
});

test('the keyboard reaches the pages and the key list', async ({ page }) => {
  await signIn(page, served);
  await open(page, 'Keys', /^Keys/);
  const first = page.getByRole('table', { name: 'Keys' }).getByRole('row').nth(1);
  await first.focus();
  await page.keyboard.press('Enter');
  await expect(page.getByRole('button', { name: '(all keys)' })).toBeVisible();
});
