// The Backups page on a real `strata serve --backup-to DIR`: a live backup made from the
// console while the API writes, listed with its size, then another that copies only what is
// new; a server without a destination says how to give it one.
import { randomBytes } from 'node:crypto';
import { expect, test } from '@playwright/test';
import { failOnConsoleErrors, signIn } from './page';
import { removeStore, serve, tempStore, type Served } from './serve';

let served: Served;
let plain: Served;

test.beforeAll(async () => {
  const dir = tempStore();
  served = await serve(dir, ['--seed-demo', '--backup-to', `${dir}-backups`]);
  plain = await serve(tempStore());
});

test.afterAll(async () => {
  for (const s of [served, plain]) await s?.stop();
  if (served) {
    removeStore(served.dir);
    removeStore(`${served.dir}-backups`);
  }
  if (plain) removeStore(plain.dir);
});

failOnConsoleErrors();

test('a live backup made from the console is listed, and the next copies only what is new', async ({
  page,
  request,
}) => {
  await signIn(page, served);
  await page
    .getByRole('navigation', { name: 'Pages' })
    .getByText('Backups', { exact: true })
    .click();
  await expect(page.getByRole('heading', { name: 'Backups', level: 1 })).toBeVisible();
  await expect(page.getByText(`${served.dir}-backups`)).toBeVisible();

  // Values past what a backup record carries inline, flushed: the files backup 2 finds there.
  for (const n of [1, 2, 3]) {
    const key = Buffer.from(`big-${n}`).toString('base64url');
    const put = await request.put(`${served.url}/api/v1/kv/${key}`, {
      headers: { Authorization: `Bearer ${served.token}` },
      data: { value: randomBytes(100_000).toString('base64') },
    });
    expect(put.status()).toBe(204);
  }
  await page.getByLabel(/Flush first/).check();
  await page.getByRole('button', { name: 'Back up now' }).click();
  await expect(page.getByTestId('backup-made')).toContainText('Backup 1:');
  const table = page.getByRole('table', { name: 'Backups' });
  await expect(table.getByRole('row')).toHaveCount(2); // the header and backup 1

  // A write after it, through the API; a flushed backup holds it and lists beside the first.
  const key = Buffer.from('after-backup-1').toString('base64url');
  const put = await request.put(`${served.url}/api/v1/kv/${key}`, {
    headers: { Authorization: `Bearer ${served.token}` },
    data: { value: Buffer.from('new').toString('base64') },
  });
  expect(put.status()).toBe(204);
  await page.getByRole('button', { name: 'Back up now' }).click();
  await expect(page.getByTestId('backup-made')).toContainText('Backup 2:');
  // Only what is new is copied: the tables of backup 1 are there already.
  await expect(page.getByTestId('backup-made')).toContainText(/, [1-9][\d,]* there already/);
  await expect(table.getByRole('row')).toHaveCount(3);
  await expect(page.getByLabel('Size of each backup over time')).toBeVisible();
});

test('a server without a destination says how to give it one', async ({ page }) => {
  await signIn(page, plain);
  await page
    .getByRole('navigation', { name: 'Pages' })
    .getByText('Backups', { exact: true })
    .click();
  await expect(page.getByText('Backups are off')).toBeVisible();
  await expect(page.getByRole('button', { name: 'Back up now' })).toHaveCount(0);
});
